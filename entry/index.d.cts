// Types of the CommonJS entry: the documented API only (see index.cjs).
export {
  mcpTools,
  rebuildMcpToolsFromStorage,
  createMemoryMcpConnectionStore,
  createSqliteMcpConnectionStore,
  createPostgresMcpConnectionStore,
  retrustMcpServer,
  mcpFirewall,
  composeGuards,
  createMemoryMcpJournal,
  createSqliteMcpJournal,
  createPostgresMcpJournal,
  createMcpServer,
  createMemoryTokenStore,
  createKeyringTokenStore,
  createEncryptedFileTokenStore,
  printAuthorizationUrl,
  logoutMcpServer,
  loadMcpConfig,
  composeMcpSystemPrompt,
  estimateTokens,
  DEFAULT_DISCLOSURE_BUDGET_TOKENS,
  MCP_DESCRIBE_TOOL,
  MCP_SEARCH_TOOLS,
  engineVersion,
  McpError,
  McpToolError,
  McpProtocolError,
  McpTimeoutError,
  McpAbortedError,
  McpTransportError,
  McpConfigError,
  McpResultTooLargeError,
  McpInvalidArgumentsError,
  McpToolUnavailableError,
  McpConnectionClosedError,
  McpHostNotAllowedError,
  McpPolicyDeniedError,
  McpApprovalRequiredError,
  McpAuthError,
  McpContainmentError,
  McpToolQuarantinedError,
  McpStorageError,
  McpResultTooDeepError,
  McpInternalError,
} from '../dist/index.js';
export type { McpErrorCode } from '../dist/errors.js';
export type { McpConnectionStore, StoredServer, PostgresMcpConnectionStore, PostgresMcpConnectionStoreOptions } from '../dist/stores.js';
export type { McpConfig } from '../dist/config-file.js';
export type { McpJournal, PostgresMcpJournal, McpFirewallOptions, McpFirewallTool, McpGuard, McpCallOutcome } from '../dist/firewall.js';
export type { McpServerHandle, McpServerOptions, McpServerTool, McpServerToolContext, McpServerListenOptions, McpServerHttpOptions, McpServerListening, McpServerCallResult, StandardSchemaV1 } from '../dist/server.js';
export type { McpTokenStore, KeyringTokenStoreOptions, EncryptedFileTokenStoreOptions } from '../dist/token-stores.js';
export type * from '../dist/types.js';
