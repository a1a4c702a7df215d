// mcpferry: every tool of every configured MCP server as an entry in an agent's tool map.
// The package's public API and nothing else: opening a toolset is lib/toolset.ts, its calls
// lib/call-channel.ts, its tool objects lib/tool-objects.ts; the engine validates every option
// (src/config.rs) and does all protocol work.

import { binding, engine } from './binding';
import { engineFailure, fromEngine } from './errors';
import { lazily } from './lazily';
import { storeFactories, type PostgresMcpConnectionStore, type PostgresMcpConnectionStoreOptions } from './stores';
import { isTokenStore, nativeTokenStoreId, tokenStoreDispatcher, type McpTokenStore as McpTokenStoreType } from './token-stores';
import { configError, configJson, nativeToolsetOf, openToolset } from './toolset';
import type { McpClientOptions, McpOptions, McpPolicy, McpServer, McpServerClient, McpToolset } from './types';
import type { McpServerHandle, McpServerOptions } from './server';
import type { McpGuard, McpFirewallOptions, McpJournal, PostgresMcpJournal } from './firewall';
import type { McpConfig, McpConfigOptions } from './config-file';

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
export type { McpConfig, McpConfigOptions } from './config-file';
export { createMemoryTokenStore, createKeyringTokenStore, createEncryptedFileTokenStore } from './token-stores';
export type { McpTokenStore, KeyringTokenStoreOptions, EncryptedFileTokenStoreOptions } from './token-stores';
export type { McpConnectionStore, StoredServer, PostgresMcpConnectionStore, PostgresMcpConnectionStoreOptions } from './stores';
export type { McpJournal, PostgresMcpJournal, McpFirewallOptions, McpFirewallTool, McpGuard, McpCallOutcome } from './firewall';
export type { McpServerHandle, McpServerOptions, McpServerTool, McpServerToolContext, McpServerListenOptions, McpServerHttpOptions, McpServerListening, McpServerCallResult, StandardSchemaV1 } from './server';
export { printAuthorizationUrl } from './toolset';

// What the first mcpTools() doesn't need loads on first use, not at import (issue 30): the server
// (createMcpServer), the firewall and its journals, the one-server client and the config-file reader, each
// with what it imports. Each function below is documented here and runs the module's own.
const server = lazily(() => require('./server') as typeof import('./server'));
const firewall = lazily(() => require('./firewall') as typeof import('./firewall'));
const client = lazily(() => require('./client') as typeof import('./client'));
const configFile = lazily(() => require('./config-file') as typeof import('./config-file'));

/** Publish `tools` over MCP (`listen`) and call them in process (`callTool`). */
export function createMcpServer(options: McpServerOptions): McpServerHandle {
  return server().createMcpServer(options);
}

/**
 * A guard for one MCP server's tools: allowlist (fail-closed once given), then denylist (deny wins),
 * then description pinning (a changed description or input schema asks), then the per-run ceiling.
 */
export function mcpFirewall(options: McpFirewallOptions): McpGuard {
  return firewall().mcpFirewall(options);
}

/** Guards in order: the first decision that is not `allow` wins; every guard's `record` hears every outcome. */
export function composeGuards(...guards: McpPolicy[]): McpGuard {
  return firewall().composeGuards(...guards);
}

/** A journal that lives as long as the process. */
export function createMemoryMcpJournal(): McpJournal {
  return firewall().createMemoryMcpJournal();
}

/**
 * A journal in a SQLite file (WAL), shared by every process that opens it: pins and per-run counters
 * agree across workers and restarts. Returns at once; the file opens on first use.
 */
export function createSqliteMcpJournal(path: string): McpJournal {
  return firewall().createSqliteMcpJournal(path);
}

/**
 * The journal for a fleet: one Postgres database whose pins and per-run counters every worker shares
 * (the tables of docs/fleet-journal.md, beside the connection store's if it is the same database).
 * Takes what `createPostgresMcpConnectionStore` takes; returns at once and connects on first use.
 */
export function createPostgresMcpJournal(connection: string | PostgresMcpConnectionStoreOptions): PostgresMcpJournal {
  return firewall().createPostgresMcpJournal(connection);
}

/**
 * Connect one MCP server (a `stdio`, `streamable-http` or `sse` entry, as for `mcpTools`) and return a
 * client for it. Rejects with the typed error that kept it from connecting: `mcp_config_invalid` for a
 * bad entry or option, `mcp_host_not_allowed`, `mcp_transport_error`, `mcp_timeout`, …
 */
export async function connectMcpServer(entry: McpServer, opts: McpClientOptions = {}): Promise<McpServerClient> {
  return client().connectMcpServer(entry, opts);
}

/**
 * Read an MCP configuration: a path (or file URL) to a JSON file in the `mcpServers` shape (Claude
 * Desktop, Claude Code's `.mcp.json`, Cursor; VS Code's `servers` too) or a TOML file with
 * `[mcp_servers.<name>]` tables (`.toml`, Codex's `config.toml`), or such an object. `${env:VAR}`,
 * `${workspaceFolder}` and `envFile` in a JSON file, and Codex's `env_vars`, are read now; TOML
 * `header_env` / `bearer_token_env_var` headers only when a server is connected, and never appear in the
 * returned object. Rejects with `McpConfigError` (`mcp_config_invalid`).
 */
export async function loadMcpConfig(pathOrObject: string | URL | Record<string, unknown>, options: McpConfigOptions = {}): Promise<McpConfig> {
  return configFile().loadMcpConfig(pathOrObject, options);
}

/** The default disclosure budget: about 10 % of a 200k context window. */
export const DEFAULT_DISCLOSURE_BUDGET_TOKENS: number = engine.defaultDisclosureBudgetTokens;
/** The tool that returns the full schema of a tool whose schema is abbreviated. */
export const MCP_DESCRIBE_TOOL: string = engine.describeTool;
/** The tool that searches every tool by what it does, when catalogs are too big to list. */
export const MCP_SEARCH_TOOLS: string = engine.searchTools;

/**
 * The disclosure budget's token estimate: four characters (UTF-16 code units) per token, rounded up.
 * A deliberate order-of-magnitude approximation, identical to the engine's.
 */
export function estimateTokens(text: string): number {
  return Math.ceil(String(text).length / engine.charsPerToken);
}

/**
 * The MCP part of an agent's system prompt for `toolset`: which servers are connected, which are
 * deferred or unavailable, and how to use `mcp__describe_tool` and `mcp__search_tools`. It never
 * includes a server's `instructions`.
 */
export function composeMcpSystemPrompt(toolset: McpToolset): string {
  const native = nativeToolsetOf(toolset);
  if (!native) throw configError('composeMcpSystemPrompt takes a toolset returned by mcpTools or rebuildMcpToolsFromStorage');
  try {
    return native.systemPrompt();
  } catch (error) {
    throw engineFailure(error);
  }
}

const stores = storeFactories(binding.NativeStore);
export const { createMemoryMcpConnectionStore, createSqliteMcpConnectionStore } = stores;

/**
 * A connection store in one PostgreSQL database, shared by every worker of a fleet: one drift
 * baseline per server for all of them (the first worker to record one wins, in one statement) and one
 * catalogue to rebuild from, on any machine. Takes a connection string or
 * {@link PostgresMcpConnectionStoreOptions}.
 *
 * Returns at once: the pool connects, and creates or migrates its tables, on first use, so a wrong
 * address or password rejects that operation with `McpStorageError` (`await store.list()` at startup
 * to fail fast). Invalid options throw `McpConfigError`. No error, diagnostic or `String(store)`
 * carries the password or the connection string: the store is named `user@host:port/db`.
 */
export function createPostgresMcpConnectionStore(connection: string | PostgresMcpConnectionStoreOptions): PostgresMcpConnectionStore {
  return stores.createPostgresMcpConnectionStore(connection);
}

/**
 * Connect the given MCP servers and return their tools as one map keyed by `${server}__${tool}`.
 * Servers connect concurrently; one that fails is reported through `onDiagnostic` (`server-degraded`)
 * and the others' tools are returned all the same.
 */
export function mcpTools(servers: readonly McpServer[], opts: McpOptions = {}): Promise<McpToolset> {
  return openToolset(servers, opts, (native) => native.connect(), false);
}

/**
 * Rebuild a toolset from `opts.storage` without asking any server first: the map is projected from the
 * stored catalogue, then each server is reconnected and reconciled in the background (`reconciled`
 * settles when that is done; the map is corrected in place). An empty store is an error.
 * `capabilities.stdio: false` leaves stdio servers out.
 */
export function rebuildMcpToolsFromStorage(
  servers: readonly McpServer[],
  opts: McpOptions,
  capabilities: { stdio?: boolean } = {},
): Promise<McpToolset> {
  return openToolset(servers, opts, (native) => native.rebuild(capabilities?.stdio !== false), true);
}

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
