// `mcpferry/purra` for ESM: the CommonJS entry's named exports.
export * from './purra.cjs';
