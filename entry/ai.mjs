// `mcpferry/ai` for ESM: the adapter bound to the `ai` this project installed, imported as ESM (ai 7
// ships only ESM). It does not load the native engine.
import { createRequire } from 'node:module';
import { bindAiSdkTools } from '../dist/adapters/ai.js';
import { peerLoadError } from '../dist/adapters/peer.js';
import { bindCreateMcpHandle } from '../dist/handle.js';

// `ai` is an optional peer: imported here rather than statically, so that without it the error names the package to install.
const ai = await import('ai').catch((cause) => {
  throw peerLoadError('mcpferry/ai', 'ai', cause);
});

export const aiSdkTools = bindAiSdkTools(ai, createRequire(import.meta.url)('ai/package.json').version);

// One server as a lazy handle whose tools() is this adapter's view (the engine loads on first use).
export const createMcpHandle = bindCreateMcpHandle(aiSdkTools);
