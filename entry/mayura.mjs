// `mcpferry/mayura` for ESM: the CommonJS entry's named exports, so the error classes are the same
// objects under both module systems (and the same as the main entry's).
import './engine.mjs';
export * from './mayura.cjs';
