// Types of `mcpferry/openai` (ESM): the same names as the CommonJS entry.
export * from './openai.cjs';
