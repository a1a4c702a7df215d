// Types of the CommonJS entry: dist/index's, which is the documented API only (lib/index.ts holds nothing else;
// the install test checks index.cjs exports exactly its names).
export * from '../dist/index.js';
