// `mcpferry/purra` for ESM: the CommonJS entry's named exports.
import './engine.mjs';
export * from './purra.cjs';
