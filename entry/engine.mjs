// Loads the native engine for the ESM entries before they re-export their CommonJS entry. Through
// createRequire, a failed load rejects the importing `import()` as an ordinary ESM evaluation error, which a
// host can catch and fall back from. Node 20 also reports an error thrown while a CommonJS module runs for
// an ESM import as uncaught and exits, even after `await import()` caught it; by the time `export * from
// './index.cjs'` runs, the engine (binding.cjs) is already loaded and cached.
import { createRequire } from 'node:module';

createRequire(import.meta.url)('./binding.cjs');
