// connectMcpServer: one MCP server as a client. A toolset of that one entry (the engine's transports,
// guards, bounds, diagnostics and call router), whose calls answer with the server's result as sent
// (src/toolset/client.rs). This file converts and forwards; the engine does the protocol work.

import { binding } from './binding';
import { createMcpError, fromEngine, McpError } from './errors';
import { nativeToolsetOf, openToolset } from './toolset';
import { clientSessionRequests, nextAbortId } from './session';
import type {
  McpCallToolRequest,
  McpCallToolResult,
  McpClientOptions,
  McpListToolsOptions,
  McpOptions,
  McpRemoteTool,
  McpServer,
  McpServerClient,
  McpTool,
  McpToolset,
} from './types';

/** The engine's client entry points (src/napi/client.rs). */
const native = binding;

/** A listing with the caller's lower bounds: what stopped it early, if anything did. */
export interface BoundedListing {
  tools: McpRemoteTool[];
  pages: number;
  bytes: number;
  stopped?: 'pages' | 'tools' | 'bytes' | 'cursor';
}

/** What mcpferry/purra reaches of a client beyond its public surface. */
export interface ClientInternals {
  client: McpServerClient;
  /** The capabilities the server declared, by name (`tools`, `resources`, …). */
  capabilities: readonly string[];
  list(bounds: Record<string, number>, signal?: AbortSignal): Promise<BoundedListing>;
  /** Calls `listener` on every change signal; returns the unsubscribe. */
  watch(listener: () => void): () => void;
  closed(): boolean;
  /** Untrusted text about this server, quoted by the engine with the server's secrets and `secrets` redacted. */
  quote(text: string, secrets: readonly string[]): string;
}

const internals = new WeakMap<object, ClientInternals>();

/** Internal: the engine side of a client made by connectMcpServer, or undefined for anything else. */
export function clientInternals(client: unknown): ClientInternals | undefined {
  return typeof client === 'object' && client !== null ? internals.get(client) : undefined;
}

const CLOSED_MESSAGE = 'the MCP client was closed';

function configError(message: string): McpError {
  return createMcpError('mcp_config_invalid', message);
}

function engineError(error: unknown): unknown {
  const typed = fromEngine(error);
  return typed instanceof McpError ? typed : createMcpError('mcp_internal_error', `mcpferry engine failure: ${String((typed as Error)?.message ?? typed)}`);
}

/** Ids for listings a signal may stop: shared with the session's reads, which use the same registry. */
const nextListingId = nextAbortId;

/**
 * Starts `start` unless `signal` already fired; settles with its work, or rejects with `mcp_aborted` as
 * soon as `signal` fires (its outcome ignored; the caller stops the work itself).
 */
function abortable<T>(start: () => Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return start();
  if (signal.aborted) return Promise.reject(createMcpError('mcp_aborted', 'MCP request aborted by the caller'));
  const work = start();
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(createMcpError('mcp_aborted', 'MCP request aborted by the caller'));
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** `connectMcpServer`, the public API's (documented where lib/index.ts exports it, which loads this module on first use). */
export async function connectMcpServer(entry: McpServer, opts: McpClientOptions = {}): Promise<McpServerClient> {
  if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) {
    throw configError('connectMcpServer takes one server entry (an object with name and type)');
  }
  if (opts === null || typeof opts !== 'object' || Array.isArray(opts)) throw configError('connectMcpServer options must be an object');
  for (const option of ['disclosure', 'contextWindowTokens', 'onDegraded'] as const) {
    if ((opts as McpOptions)[option] !== undefined) {
      throw configError(`connectMcpServer does not take options.${option}: it connects one server, and rejects when that server cannot connect`);
    }
  }
  // A client returns the server's result as sent, isError included: it neither checks results nor withholds
  // an isError result's text, so these options would be silently half-applied.
  for (const option of ['validateResults', 'exposeServerErrors'] as const) {
    if ((opts as McpOptions)[option] !== undefined) {
      throw configError(`connectMcpServer does not take options.${option}: a client returns the server's result as sent, isError included; judge it yourself`);
    }
  }
  if ((entry as { enabled?: unknown }).enabled === false) throw configError(`server ${JSON.stringify(entry.name)} is disabled (enabled: false)`);

  const listeners = new Set<() => void>();
  const changed = () => {
    for (const listener of [...listeners]) {
      try {
        listener();
      } catch {
        // One listener's failure must not keep the others from hearing of the change.
      }
    }
  };
  /** The tool map by remote name, rebuilt after the map changes. */
  let byRemoteName: Map<string, McpTool> | undefined;
  const options: McpOptions = { ...opts, onDegraded: 'throw', disclosure: { alwaysLoad: [entry.name] } };
  let toolset: McpToolset;
  try {
    toolset = await openToolset([entry], options, (toolset) => toolset.connect(), false, {
      prepare: (toolset) => native.clientMode(toolset),
      observe: (kind, payload) => {
        if (kind === 'tools') byRemoteName = undefined;
        // A server that came back is a new process or session: what was discovered before (a purra
        // catalogue) is stale even when its tools look the same, since nothing is rediscovered implicitly.
        const reconnected = kind === 'diagnostic' && (payload as { code?: unknown } | null)?.code === 'server-reconnected';
        if (kind === 'tools-announced' || kind === 'tools' || reconnected) changed();
      },
    });
  } catch (error) {
    throw engineError(error);
  }
  const engine = nativeToolsetOf(toolset)!;
  let session: { protocolVersion: string; serverInfo: { name: string; version: string }; capabilities: string[] };
  try {
    session = JSON.parse(native.clientSession(engine) ?? 'null');
  } catch (error) {
    await toolset.close().catch(() => {});
    throw engineError(error);
  }
  if (!session) {
    await toolset.close().catch(() => {});
    throw createMcpError('mcp_transport_error', `MCP server ${JSON.stringify(entry.name)} is unavailable`);
  }

  let closing: Promise<void> | undefined;
  const closedError = () => createMcpError('mcp_connection_closed', CLOSED_MESSAGE);
  const list = async (bounds: Record<string, number>, signal?: AbortSignal): Promise<BoundedListing> => {
    if (closing) throw closedError();
    try {
      // The engine's listing stops too when the signal fires (it sends no further page request).
      const abortId = signal ? nextListingId() : 0;
      const stop = () => {
        try {
          native.clientAbortListing(engine, abortId);
        } catch {
          // A closed toolset has no listing left to stop.
        }
      };
      signal?.addEventListener('abort', stop, { once: true });
      try {
        return JSON.parse(await abortable(() => native.clientListTools(engine, Object.keys(bounds).length ? JSON.stringify(bounds) : '', abortId), signal));
      } finally {
        signal?.removeEventListener('abort', stop);
      }
    } catch (error) {
      throw engineError(error);
    }
  };
  /** The tool routed under a remote name (the toolset's map is keyed by projected name). */
  const routed = (remoteName: string) => {
    byRemoteName ??= new Map(Object.values(toolset.tools).filter((tool) => tool.server === entry.name).map((tool) => [tool.remoteName, tool]));
    return byRemoteName.get(remoteName);
  };

  const client: McpServerClient = {
    name: entry.name,
    protocolVersion: session.protocolVersion,
    serverInfo: Object.freeze({ ...session.serverInfo }),
    ...clientSessionRequests(toolset, entry.name),
    async listTools(options: McpListToolsOptions = {}) {
      if (options === null || typeof options !== 'object') throw configError('listTools options must be an object');
      const { timeoutMs, signal } = options;
      if (timeoutMs !== undefined && (!Number.isSafeInteger(timeoutMs) || timeoutMs <= 0)) throw configError('listTools timeoutMs must be a positive integer');
      return (await list(timeoutMs === undefined ? {} : { timeoutMs }, signal)).tools;
    },
    callTool(request: McpCallToolRequest): Promise<McpCallToolResult> {
      if (closing) return Promise.reject(closedError());
      if (request === null || typeof request !== 'object' || typeof request.name !== 'string') {
        return Promise.reject(createMcpError('mcp_invalid_arguments', 'callTool takes { name, arguments?, signal?, onProgress? } with the tool name a string'));
      }
      const { name, arguments: args, signal, idempotencyKey, runId, toolCallId, onProgress } = request;
      const tool = routed(name);
      if (!tool) {
        return Promise.reject(
          createMcpError('mcp_tool_unavailable', `tool ${JSON.stringify(name)} is not available: server ${JSON.stringify(entry.name)} does not (or no longer) publish it`),
        );
      }
      if (args !== undefined && (args === null || typeof args !== 'object' || Array.isArray(args))) {
        return Promise.reject(createMcpError('mcp_invalid_arguments', 'tool arguments must be a JSON object'));
      }
      return tool.execute(args ?? {}, { signal, idempotencyKey, runId, toolCallId, onProgress }) as Promise<McpCallToolResult>;
    },
    onToolsChanged(listener: () => void) {
      if (typeof listener !== 'function') throw configError('onToolsChanged takes a function');
      const own = () => listener();
      listeners.add(own);
      return () => void listeners.delete(own);
    },
    close() {
      return (closing ??= (listeners.clear(), toolset.close()));
    },
    servers: () => toolset.servers(),
  };
  internals.set(client, {
    client,
    capabilities: Object.freeze([...session.capabilities]),
    list,
    watch(listener) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
    closed: () => closing !== undefined,
    quote: (text, secrets) => native.clientQuoteText(engine, text, [...secrets]),
  });
  return Object.freeze(client);
}
