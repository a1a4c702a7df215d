// Types of `mcpferry/ai` (ESM): the same names as the CommonJS entry.
export * from './ai.cjs';
