// The package's ESM entry: the CommonJS entry's exports, so both module systems share one engine and one set
// of error classes, and instanceof holds across them. The names are listed (the install test checks they are
// index.cjs's) and loaded through createRequire rather than `export * from './index.cjs'`: Node then doesn't
// scan index.cjs for its names at every start (issue 30), and a failed engine load rejects
// `import('mcpferry')` as an ordinary evaluation error, which a host can catch (see engine.mjs).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
require('./binding.cjs'); // the engine first, so a missing platform package is the error that names it
export const {
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
  connectMcpServer,
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
  McpSchemaInvalidError,
  McpResultInvalidError,
  McpInternalError,
  McpServerUnavailableError,
  McpResourceNotFoundError,
  McpNotSupportedError,
  McpSkillInvalidError,
  McpSkillVerificationFailedError
} = require('./index.cjs');
