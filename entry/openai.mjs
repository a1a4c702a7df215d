// `mcpferry/openai` for ESM: the CommonJS entry's named exports.
export * from './openai.cjs';
