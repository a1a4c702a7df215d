// `createMcpHandle`: one MCP server as a lazy handle. Creating it does nothing; the first `tools()` or
// `describeTools()` opens the server through `mcpTools` (the engine does the protocol), and every later
// call, concurrent or not, shares that one discovery. `tools()` is the AI SDK adapter's view of it, with
// the handle's names. This file only wires: it holds no protocol logic.

import type { JsonSchema, McpOptions, McpServer, McpServerStatus, McpTool, McpToolset } from './types';
import type { McpErrorCode } from './errors';

/** Where the handle's server is: a child process (`stdio`) or a Streamable HTTP endpoint (`http`). */
export type McpHandleTransport =
  | ({ kind: 'stdio' } & Omit<Extract<McpServer, { type: 'stdio' }>, 'name' | 'type'>)
  | ({ kind: 'http' } & Omit<Extract<McpServer, { type: 'streamable-http' | 'sse' }>, 'name' | 'type'>);

export interface McpHandleOptions extends McpOptions {
  transport: McpHandleTransport;
  /**
   * The server's name inside mcpferry: diagnostics, `policy.decide` requests, storage keys. Default `mcp`.
   */
  name?: string;
  /**
   * When given, each tool is named `${prefix}${tool}` (the tool part of mcpferry's `${server}__${tool}`,
   * so already provider-safe): `prefix: 'github_'` gives `github_list_issues`. Without it the names are
   * mcpferry's own, `${name}__${tool}`. Letters, digits, `_` and `-` only.
   */
  prefix?: string;
  /** Passed to the AI SDK adapter: calls carry the idempotency key `${runId}:${toolCallId}`. */
  runId?: string;
  /** Passed to the AI SDK adapter: each call's progress streams as preliminary tool results (`aiSdkTools`). */
  preliminaryProgress?: boolean;
}

/** A tool as the firewall (and anything else that vets definitions) needs it. */
export interface McpToolDescription {
  /** The handle's name for it, as `tools()` keys it. */
  name: string;
  description: string;
  inputSchema: JsonSchema;
  /** The server's name inside mcpferry and the tool's name on that server: what `policy.decide` is told. */
  server: string;
  remoteName: string;
}

export interface McpHandle<Tools> {
  /** The tools as the AI SDK's `ToolSet`, keyed by the handle's names. Connects on first use. */
  tools(): Promise<Tools>;
  /** Name, description and input schema of each tool. Connects on first use. */
  describeTools(): Promise<McpToolDescription[]>;
  /** Close the connection. Idempotent; a no-op if the handle never connected. */
  close(): Promise<void>;
  /** The server's state (see `McpServerStatus`); empty before the handle first connected. */
  servers(): McpServerStatus[];
}

/** What the handle takes from the package's main entry, loaded on first use (it loads the engine). */
export interface HandleRuntime {
  mcpTools(servers: readonly McpServer[], opts?: McpOptions): Promise<McpToolset>;
  error(code: McpErrorCode, message: string): Error;
  /** Between a server's name and its tool's in the tool map's keys (the engine's). */
  toolNameSeparator: string;
}

const DEFAULT_SERVER_NAME = 'mcp';
const PROVIDER_SAFE_PREFIX = /^[a-zA-Z0-9_-]*$/;

/** The package's main entry, loaded when a handle first needs it: creating a handle loads no engine. */
function mainEntry(): HandleRuntime {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const main = require('../entry/index.cjs') as { mcpTools: HandleRuntime['mcpTools'] };
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { createMcpError } = require('./errors') as typeof import('./errors');
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { engine } = require('./binding') as typeof import('./binding');
  return { mcpTools: main.mcpTools, error: createMcpError, toolNameSeparator: engine.toolNameSeparator };
}

/** Binds `createMcpHandle` to an AI SDK adapter (the runtime is the main entry's, loaded on first use). */
export function bindCreateMcpHandle<Tools>(
  toAiTools: (toolset: McpToolset, options: { runId?: string; preliminaryProgress?: boolean }) => Tools,
  runtime: () => HandleRuntime = mainEntry,
): (options: McpHandleOptions) => McpHandle<Tools> {
  return (options) => {
    const { transport, name = DEFAULT_SERVER_NAME, prefix, runId, preliminaryProgress, ...mcpOptions } = options ?? ({} as McpHandleOptions);
    if (prefix !== undefined && (typeof prefix !== 'string' || !PROVIDER_SAFE_PREFIX.test(prefix))) {
      throw runtime().error('mcp_config_invalid', `createMcpHandle: prefix must be letters, digits, _ and - only (got ${JSON.stringify(prefix)})`);
    }
    let opening: Promise<McpToolset> | undefined;
    let closing: Promise<void> | undefined;
    let named: { toolset: McpToolset; tools: Tools } | undefined;

    const open = (): Promise<McpToolset> => {
      if (closing) return Promise.reject(runtime().error('mcp_connection_closed', 'this MCP handle is closed'));
      if (!opening) {
        const { kind, ...rest } = (transport ?? {}) as { kind?: string };
        // `http` is Streamable HTTP; anything else is handed on as given for the engine to name.
        const server = { ...rest, name, type: kind === 'http' ? 'streamable-http' : kind } as McpServer;
        opening = Promise.resolve().then(() => runtime().mcpTools([server], mcpOptions));
      }
      return opening;
    };
    /** The toolset under the handle's names and its AI SDK view, made once. */
    const opened = async () => {
      const toolset = await open();
      if (!named) {
        const renamed = prefix === undefined ? toolset : prefixedToolset(toolset, `${name}${runtime().toolNameSeparator}`, prefix);
        named = { toolset: renamed, tools: toAiTools(renamed, { runId, preliminaryProgress }) };
      }
      return named;
    };

    return {
      async tools() {
        return (await opened()).tools;
      },
      async describeTools() {
        const { tools } = (await opened()).toolset;
        return Object.entries(tools).map(([key, tool]) => ({
          name: key,
          description: tool.description,
          inputSchema: tool.inputSchema,
          server: tool.server,
          remoteName: tool.remoteName,
        }));
      },
      close() {
        closing ??= opening ? opening.then((toolset) => toolset.close(), () => undefined) : Promise.resolve();
        return closing;
      },
      servers() {
        return named ? named.toolset.servers() : [];
      },
    };
  };
}

/**
 * The toolset under the handle's names, live: `${server}__${tool}` becomes `${prefix}${tool}`; a name
 * without the server part (`mcp__describe_tool`) just gains the prefix.
 */
function prefixedToolset(toolset: McpToolset, serverPart: string, prefix: string): McpToolset {
  const own = (key: string): McpTool | undefined => (Object.prototype.hasOwnProperty.call(toolset.tools, key) ? toolset.tools[key] : undefined);
  const lookup = (key: string | symbol): McpTool | undefined => {
    if (typeof key !== 'string' || !key.startsWith(prefix)) return undefined;
    const rest = key.slice(prefix.length);
    return own(`${serverPart}${rest}`) ?? (rest.startsWith(serverPart) ? undefined : own(rest));
  };
  const rename = (key: string) => `${prefix}${key.startsWith(serverPart) ? key.slice(serverPart.length) : key}`;
  const tools = new Proxy({} as Record<string, McpTool>, {
    get: (_target, key) => lookup(key),
    has: (_target, key) => lookup(key) !== undefined,
    ownKeys: () => Object.keys(toolset.tools).map(rename),
    getOwnPropertyDescriptor: (_target, key) => {
      const value = lookup(key);
      return value === undefined ? undefined : { value, enumerable: true, configurable: true, writable: false };
    },
  });
  // The session requests (resources, prompts, completions) name servers, not tools: kept as they are.
  return { ...toolset, tools, close: () => toolset.close(), reconciled: toolset.reconciled, servers: () => toolset.servers() };
}
