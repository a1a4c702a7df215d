'use strict';
// `mcpferry/openai` for CommonJS. It does not load the native engine; `openaiAgentsTools` loads
// `@openai/agents` when called, so the Responses and Chat helpers work without it.

const api = require('../dist/adapters/openai.js');

exports.openaiAgentsTools = api.openaiAgentsTools;
exports.openaiToolDefinitions = api.openaiToolDefinitions;
exports.dispatchOpenAiToolCall = api.dispatchOpenAiToolCall;
