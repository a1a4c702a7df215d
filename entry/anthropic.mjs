// `mcpferry/anthropic` for ESM: the CommonJS entry's named exports.
export * from './anthropic.cjs';
