// mcpferry: every tool of every configured MCP server as an entry in an agent's tool map.
// This file is the package's public surface: it re-exports what the other files define (opening a
// toolset is lib/toolset.ts), and adds logoutMcpServer and engineVersion.

import { binding } from './binding';
import { fromEngine } from './errors';
import { isTokenStore, nativeTokenStoreId, tokenStoreDispatcher, type McpTokenStore as McpTokenStoreType } from './token-stores';
import { configError, configJson } from './toolset';
import type { McpServer } from './types';

// The error classes are the API; createMcpError, fromEngine and UNMAPPED_ENGINE_CODES stay internal.
export {
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
  McpResourceNotFoundError,
  McpNotSupportedError,
  McpSkillInvalidError,
  McpSkillVerificationFailedError,
  McpServerUnavailableError,
} from './errors';
export type { McpErrorCode } from './errors';
export type * from './types';
export { retrustMcpServer } from './stores';
export { loadMcpConfig } from './config-file';
export { connectMcpServer } from './client';
export type { McpConfig, McpConfigOptions } from './config-file';
export { createMemoryTokenStore, createKeyringTokenStore, createEncryptedFileTokenStore } from './token-stores';
export type { McpTokenStore, KeyringTokenStoreOptions, EncryptedFileTokenStoreOptions } from './token-stores';
export type { McpConnectionStore, StoredServer, PostgresMcpConnectionStore, PostgresMcpConnectionStoreOptions } from './stores';
export { mcpFirewall, composeGuards, createMemoryMcpJournal, createSqliteMcpJournal, createPostgresMcpJournal } from './firewall';
export type { McpJournal, PostgresMcpJournal, McpFirewallOptions, McpFirewallTool, McpGuard, McpCallOutcome } from './firewall';
export { createMcpServer } from './server';
export type { McpServerHandle, McpServerOptions, McpServerTool, McpServerToolContext, McpServerListenOptions, McpServerHttpOptions, McpServerListening, McpServerCallResult, StandardSchemaV1 } from './server';
export {
  DEFAULT_DISCLOSURE_BUDGET_TOKENS,
  MCP_DESCRIBE_TOOL,
  MCP_SEARCH_TOOLS,
  estimateTokens,
  composeMcpSystemPrompt,
  createMemoryMcpConnectionStore,
  createSqliteMcpConnectionStore,
  createPostgresMcpConnectionStore,
  printAuthorizationUrl,
  mcpTools,
  rebuildMcpToolsFromStorage,
} from './toolset';

/**
 * Log out of an `oauth` server: its tokens in `tokenStore` are revoked where the authorization server
 * offers revocation (RFC 7009), then forgotten. The next toolset needs a new login.
 */
export async function logoutMcpServer(
  server: McpServer,
  opts: { tokenStore: McpTokenStoreType; allowedHosts?: readonly string[]; proxy?: string },
): Promise<void> {
  const tokenStore = opts?.tokenStore;
  if (!isTokenStore(tokenStore)) throw configError('logoutMcpServer needs { tokenStore }, the store the tokens are kept in');
  const config = configJson([server], { tokenStore, allowedHosts: opts.allowedHosts, proxy: opts.proxy });
  const tokenStoreId = nativeTokenStoreId(tokenStore);
  try {
    await binding.logoutServer(config, tokenStoreId, tokenStoreId === undefined ? tokenStoreDispatcher(tokenStore) : undefined);
  } catch (error) {
    throw fromEngine(error);
  }
}

/** The version of the loaded native engine. */
export function engineVersion(): string {
  return binding.engineVersion();
}
