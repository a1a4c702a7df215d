// Types of the ESM entry: the same names as the CommonJS entry.
export * from './index.cjs';
