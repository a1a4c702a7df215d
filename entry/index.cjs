'use strict';
// The package's CommonJS entry. It loads the native engine through binding.cjs first, so a missing
// platform package fails with an error that names it, then exposes dist/index.js's API (the public one
// only; the install test checks they are the same). index.mjs lists the same names; index.d.cts re-exports
// dist/index's types.

require('./binding.cjs');
const api = require('../dist/index.js');

exports.mcpTools = api.mcpTools;
exports.rebuildMcpToolsFromStorage = api.rebuildMcpToolsFromStorage;
exports.createMemoryMcpConnectionStore = api.createMemoryMcpConnectionStore;
exports.createSqliteMcpConnectionStore = api.createSqliteMcpConnectionStore;
exports.createPostgresMcpConnectionStore = api.createPostgresMcpConnectionStore;
exports.retrustMcpServer = api.retrustMcpServer;
exports.mcpFirewall = api.mcpFirewall;
exports.composeGuards = api.composeGuards;
exports.createMemoryMcpJournal = api.createMemoryMcpJournal;
exports.createSqliteMcpJournal = api.createSqliteMcpJournal;
exports.createPostgresMcpJournal = api.createPostgresMcpJournal;
exports.createMcpServer = api.createMcpServer;
exports.createMemoryTokenStore = api.createMemoryTokenStore;
exports.createKeyringTokenStore = api.createKeyringTokenStore;
exports.createEncryptedFileTokenStore = api.createEncryptedFileTokenStore;
exports.printAuthorizationUrl = api.printAuthorizationUrl;
exports.logoutMcpServer = api.logoutMcpServer;
exports.connectMcpServer = api.connectMcpServer;
exports.loadMcpConfig = api.loadMcpConfig;
exports.composeMcpSystemPrompt = api.composeMcpSystemPrompt;
exports.estimateTokens = api.estimateTokens;
exports.DEFAULT_DISCLOSURE_BUDGET_TOKENS = api.DEFAULT_DISCLOSURE_BUDGET_TOKENS;
exports.MCP_DESCRIBE_TOOL = api.MCP_DESCRIBE_TOOL;
exports.MCP_SEARCH_TOOLS = api.MCP_SEARCH_TOOLS;
exports.engineVersion = api.engineVersion;
exports.McpError = api.McpError;
exports.McpToolError = api.McpToolError;
exports.McpProtocolError = api.McpProtocolError;
exports.McpTimeoutError = api.McpTimeoutError;
exports.McpAbortedError = api.McpAbortedError;
exports.McpTransportError = api.McpTransportError;
exports.McpConfigError = api.McpConfigError;
exports.McpResultTooLargeError = api.McpResultTooLargeError;
exports.McpInvalidArgumentsError = api.McpInvalidArgumentsError;
exports.McpToolUnavailableError = api.McpToolUnavailableError;
exports.McpConnectionClosedError = api.McpConnectionClosedError;
exports.McpHostNotAllowedError = api.McpHostNotAllowedError;
exports.McpPolicyDeniedError = api.McpPolicyDeniedError;
exports.McpApprovalRequiredError = api.McpApprovalRequiredError;
exports.McpAuthError = api.McpAuthError;
exports.McpContainmentError = api.McpContainmentError;
exports.McpToolQuarantinedError = api.McpToolQuarantinedError;
exports.McpStorageError = api.McpStorageError;
exports.McpResultTooDeepError = api.McpResultTooDeepError;
exports.McpSchemaInvalidError = api.McpSchemaInvalidError;
exports.McpResultInvalidError = api.McpResultInvalidError;
exports.McpInternalError = api.McpInternalError;
exports.McpServerUnavailableError = api.McpServerUnavailableError;
exports.McpResourceNotFoundError = api.McpResourceNotFoundError;
exports.McpNotSupportedError = api.McpNotSupportedError;
exports.McpSkillInvalidError = api.McpSkillInvalidError;
exports.McpSkillVerificationFailedError = api.McpSkillVerificationFailedError;
