'use strict';
// `mcpferry/mayura` for CommonJS: `defineMcpTool`, one remote MCP tool declared by the application
// (mayura-adapter-mcp). It loads the native engine through binding.cjs: JSON Schema validators and the
// quoting of error text run there.

require('./binding.cjs');
const api = require('../dist/mayura.js');

exports.defineMcpTool = api.defineMcpTool;
exports.DEFAULT_MCP_TOOL_TIMEOUT_MS = api.DEFAULT_MCP_TOOL_TIMEOUT_MS;
exports.MAX_MCP_TOOL_RESULT_BYTES = api.MAX_MCP_TOOL_RESULT_BYTES;
exports.McpOutcomeUnknownError = api.McpOutcomeUnknownError;
exports.McpResultInvalidError = api.McpResultInvalidError;
