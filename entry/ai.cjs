'use strict';
// `mcpferry/ai` for CommonJS: the adapter bound to the `ai` this project installed (ai 7 ships only ESM:
// requiring it takes Node ≥ 20.19 or Bun). It does not load the native engine.

const { bindAiSdkTools } = require('../dist/adapters/ai.js');
const { requirePeer } = require('../dist/adapters/peer.js');

// `ai` is an optional peer: without it, this names the package to install.
const ai = requirePeer('mcpferry/ai', 'ai', () => require('ai'));
exports.aiSdkTools = bindAiSdkTools(ai, require('ai/package.json').version);

// One server as a lazy handle whose tools() is this adapter's view (the engine loads on first use).
exports.createMcpHandle = require('../dist/handle.js').bindCreateMcpHandle(exports.aiSdkTools);
