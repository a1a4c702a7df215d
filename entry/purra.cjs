'use strict';
// `mcpferry/purra` for CommonJS: explicitly bound, read-only tools of one server (after purra-mcp).
// It loads the native engine through binding.cjs first, as the main entry does.

require('./binding.cjs');
const api = require('../dist/purra.js');

exports.discoverMcpTools = api.discoverMcpTools;
exports.McpAdapterError = api.McpAdapterError;
