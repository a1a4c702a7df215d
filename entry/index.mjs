// The package's ESM entry: the CommonJS entry's named exports (Node finds them statically in index.cjs),
// so both module systems share one engine and one set of error classes, and instanceof holds across them.
import './engine.mjs'; // the engine first: a failed load rejects `import('mcpferry')` catchably (engine.mjs)
export * from './index.cjs';
