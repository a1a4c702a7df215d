// Types of `mcpferry/mayura` (ESM): the same names as the CommonJS entry.
export * from './mayura.cjs';
