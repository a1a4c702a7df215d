'use strict';
// `mcpferry/anthropic` for CommonJS. It loads neither the native engine nor @anthropic-ai/sdk (types only).

const api = require('../dist/adapters/anthropic.js');

exports.anthropicTools = api.anthropicTools;
exports.dispatchAnthropicToolUses = api.dispatchAnthropicToolUses;
