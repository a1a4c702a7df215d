// `mcpferry/ai` for ESM: the adapter bound to the `ai` this project installed, imported as ESM (ai 7
// ships only ESM). It does not load the native engine.
import { createRequire } from 'node:module';
import * as ai from 'ai';
import { bindAiSdkTools } from '../dist/adapters/ai.js';
import { bindCreateMcpHandle } from '../dist/handle.js';

export const aiSdkTools = bindAiSdkTools(ai, createRequire(import.meta.url)('ai/package.json').version);

// One server as a lazy handle whose tools() is this adapter's view (the engine loads on first use).
export const createMcpHandle = bindCreateMcpHandle(aiSdkTools);
