// Types of `mcpferry/anthropic` (ESM): the same names as the CommonJS entry.
export * from './anthropic.cjs';
