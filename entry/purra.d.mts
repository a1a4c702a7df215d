// Types of `mcpferry/purra` (ESM): the same names as the CommonJS entry.
export * from './purra.cjs';
