// mcpferry: every tool of every configured MCP server as an entry in an agent's tool map.
// This file wires options and callbacks to the native engine; all protocol work happens in Rust.

import { createMcpError, fromEngine, McpAbortedError, McpError, type McpErrorCode } from './errors';
import { isStore, nativeStoreId, storeDispatcher, storeFactories } from './stores';
import { Socket } from 'node:net';
import type { Diagnostic, McpOptions, McpServer, McpTool, McpToolCallContext, McpToolResult, McpToolset } from './types';

export * from './errors';
export type * from './types';
export { retrustMcpServer } from './stores';
export type { McpConnectionStore, StoredServer } from './stores';

interface NativeToolset {
  systemPrompt(): string;
  connect(): Promise<string>;
  rebuild(stdioAllowed: boolean): Promise<string>;
  reconciled(): Promise<void>;
  callTools(batch: string): void;
  drainCompletions(): string;
  feedStdout(readerId: number, chunk: Buffer): string;
  stdoutEnded(readerId: number, error: string | null): void;
  abort(abortId: number): void;
  close(): Promise<void>;
}

type StringHook = ((arg: string) => Promise<string>) | undefined;

interface NativeBinding {
  NativeToolset: new (
    configJson: string,
    onEvent: (kind: string, payloadJson: string) => void,
    onCompletions: () => void,
    auth: StringHook,
    allowedHosts: StringHook,
    decide: StringHook,
    ask: ((questionJson: string) => Promise<boolean>) | undefined,
    nativeStoreId: number | undefined,
    readStdioInJs: boolean,
    jsStore: ((op: string, argsJson: string) => Promise<string>) | undefined,
  ) => NativeToolset;
  NativeStore: Parameters<typeof storeFactories>[0];
  engineVersion(): string;
}

// eslint-disable-next-line @typescript-eslint/no-require-imports
const binding: NativeBinding = require('../index.js');

type ProjectedTool = Omit<McpTool, 'execute'>;
interface ToolsChange {
  server: string;
  added: ProjectedTool[];
  changed: ProjectedTool[];
  removed: string[];
}

const KNOWN_OPTIONS = new Set([
  'tools',
  'timeoutMs',
  'maxResultBytes',
  'onDiagnostic',
  'session',
  'auth',
  'allowedHosts',
  'proxy',
  'policy',
  'storage',
  'disclosure',
  'contextWindowTokens',
]);

/** The default disclosure budget: about 10 % of a 200k context window. */
export const DEFAULT_DISCLOSURE_BUDGET_TOKENS = 20_000;
/** The tool that returns the full schema of a tool whose schema is abbreviated. */
export const MCP_DESCRIBE_TOOL = 'mcp__describe_tool';
/** The tool that searches every tool by what it does, when catalogs are too big to list. */
export const MCP_SEARCH_TOOLS = 'mcp__search_tools';

/**
 * The disclosure budget's token estimate: four characters (UTF-16 code units) per token, rounded up.
 * A deliberate order-of-magnitude approximation, identical to the engine's.
 */
export function estimateTokens(text: string): number {
  return Math.ceil(String(text).length / 4);
}

const natives = new WeakMap<McpToolset, NativeToolset>();

/**
 * The MCP part of an agent's system prompt for `toolset`: which servers are connected, which are
 * deferred or unavailable, and how to use `mcp__describe_tool` and `mcp__search_tools`. It never
 * includes a server's `instructions`.
 */
export function composeMcpSystemPrompt(toolset: McpToolset): string {
  const native = natives.get(toolset);
  if (!native) throw configError('composeMcpSystemPrompt takes a toolset returned by mcpTools or rebuildMcpToolsFromStorage');
  return native.systemPrompt();
}

export const { createMemoryMcpConnectionStore, createSqliteMcpConnectionStore } = storeFactories(binding.NativeStore);

function configError(message: string): Error {
  return createMcpError('mcp_config_invalid', message);
}

function checkOptions(servers: unknown, opts: unknown): asserts opts is McpOptions {
  if (!Array.isArray(servers)) throw configError('servers must be an array of server entries');
  if (opts === null || typeof opts !== 'object') throw configError('options must be an object');
  for (const key of Object.keys(opts)) {
    if (!KNOWN_OPTIONS.has(key)) throw configError(`unknown option ${JSON.stringify(key)}`);
  }
  const { onDiagnostic, auth, allowedHosts, policy, session } = opts as McpOptions;
  if (onDiagnostic !== undefined && typeof onDiagnostic !== 'function') {
    throw configError('onDiagnostic must be a function');
  }
  if (auth !== undefined) {
    if (typeof auth !== 'function') throw configError('auth must be a function (server, { session }) => Promise<{ token }>');
    // A credential resolved at connect time belongs to one session; without one, every user of this
    // toolset would be authenticated as whoever connected first.
    if (session === undefined) throw configError('auth requires session: build one toolset per session');
  }
  if (typeof allowedHosts === 'function') {
    if (session === undefined) throw configError('an allowedHosts resolver requires session');
  } else if (allowedHosts !== undefined && (!Array.isArray(allowedHosts) || allowedHosts.some((h) => typeof h !== 'string'))) {
    throw configError('allowedHosts must be an array of host names or a function (server, { session }) => host names');
  }
  const { storage } = opts as McpOptions;
  if (storage !== undefined && !isStore(storage)) {
    throw configError('storage must be a connection store (get, list, save, remove, claimBaseline)');
  }
  if (policy !== undefined) {
    if (policy === null || typeof policy !== 'object' || typeof policy.decide !== 'function') {
      throw configError('policy must be an object with a decide(request) function');
    }
    if (policy.ask !== undefined && typeof policy.ask !== 'function') throw configError('policy.ask must be a function');
  }
}

/** Wrap the application's callbacks for the engine: always async, plain data in and out. */
function hooksFor(opts: McpOptions) {
  const { auth, allowedHosts, policy, session } = opts;
  return {
    auth: auth
      ? async (server: string) => {
          const credential = await auth(server, { session });
          if (!credential || typeof credential.token !== 'string') throw new Error('auth resolved without a token');
          return credential.token;
        }
      : undefined,
    allowedHosts:
      typeof allowedHosts === 'function'
        ? async (server: string) => {
            const hosts = await allowedHosts(server, { session });
            if (!Array.isArray(hosts)) throw new Error('the allowedHosts resolver returned no array');
            return JSON.stringify(hosts);
          }
        : undefined,
    decide: policy
      ? async (requestJson: string) => JSON.stringify((await policy.decide({ ...JSON.parse(requestJson), session })) ?? null)
      : undefined,
    ask: policy?.ask
      ? async (questionJson: string) => {
          const { request, reason } = JSON.parse(questionJson);
          return (await policy.ask!({ ...request, session }, reason ?? undefined)) === true;
        }
      : undefined,
  };
}

function deliver(onDiagnostic: McpOptions['onDiagnostic'], diagnostic: Diagnostic): void {
  try {
    onDiagnostic?.(diagnostic);
  } catch {
    // A throwing onDiagnostic must not break the toolset or the engine's event delivery.
  }
}

/**
 * The JavaScript half of the call path. Calls made in one synchronous run are handed to the engine
 * together on the next microtask (one crossing, one pipe write for a burst); outcomes come back the
 * same way, one wake-up and one JSON.parse for everything that finished meanwhile.
 */
class CallChannel {
  private nextCallId = 1;
  private readonly settle = new Map<number, { resolve(r: McpToolResult): void; reject(e: unknown): void }>();
  /** Calls made since the last flush, by id: `callId \t abortable \t name \t argumentsJson`. */
  private readonly unflushed = new Map<number, string>();
  // Calls in flight keep the process alive (the engine's wake-up callback is weak on purpose).
  private keepAlive: ReturnType<typeof setInterval> | undefined;

  constructor(private readonly native: () => NativeToolset) {}

  call(name: string, argumentsJson: string, signal: AbortSignal | undefined): Promise<McpToolResult> {
    const callId = this.nextCallId;
    this.nextCallId = this.nextCallId >= 0xffff_fff0 ? 1 : this.nextCallId + 1;
    return new Promise<McpToolResult>((resolve, reject) => {
      if (this.settle.size === 0) this.hold();
      if (signal) {
        const onAbort = () => this.abort(callId);
        signal.addEventListener('abort', onAbort, { once: true });
        // One listener per call, removed when it settles: a shared signal never accumulates them.
        const done = () => signal.removeEventListener('abort', onAbort);
        this.settle.set(callId, { resolve: (r) => (done(), resolve(r)), reject: (e) => (done(), reject(e)) });
      } else {
        this.settle.set(callId, { resolve, reject });
      }
      if (this.unflushed.size === 0) queueMicrotask(() => this.flush());
      this.unflushed.set(callId, `${callId}\t${signal ? callId : 0}\t${name}\t${argumentsJson}\n`);
    });
  }

  /** An abort before the flush never reaches the engine; after it, the engine cancels the request. */
  private abort(callId: number): void {
    if (this.unflushed.delete(callId)) {
      this.complete(callId, 'mcp_aborted', 'MCP request aborted by the caller');
    } else {
      this.native().abort(callId);
    }
  }

  private flush(): void {
    if (this.unflushed.size === 0) return;
    const ids = [...this.unflushed.keys()];
    const batch = [...this.unflushed.values()].join('');
    this.unflushed.clear();
    try {
      this.native().callTools(batch);
    } catch (error) {
      const failure = fromEngine(error);
      const code = failure instanceof McpError ? failure.code : 'mcp_protocol_error';
      for (const id of ids) this.complete(id, code, failure instanceof Error ? failure.message : String(failure));
    }
  }

  /** The engine says outcomes are waiting. */
  drain = (): void => {
    this.accept(this.native().drainCompletions());
  };

  /** Outcomes in the engine's `[[callId, errorCode, payload], ...]` form. */
  accept(outcomesJson: string): void {
    if (outcomesJson === '[]') return;
    const outcomes: [number, string, unknown][] = JSON.parse(outcomesJson);
    for (const [callId, code, payload] of outcomes) this.complete(callId, code, payload);
  }

  private complete(callId: number, code: string, payload: unknown): void {
    const waiting = this.settle.get(callId);
    if (!waiting) return;
    this.settle.delete(callId);
    if (this.settle.size === 0) this.release();
    if (code === '') waiting.resolve(payload as McpToolResult);
    else waiting.reject(createMcpError(code as McpErrorCode, String(payload)));
  }

  private hold(): void {
    if (!this.keepAlive) this.keepAlive = setInterval(() => {}, 0x7fff_ffff);
    else this.keepAlive.ref?.();
  }

  private release(): void {
    this.keepAlive?.unref?.();
  }
}

// On Node, stdio servers' stdout is read on this event loop: a response then needs no thread
// wake-up (the engine parses it synchronously in feedStdout). Bun's net.Socket can't adopt a pipe
// descriptor, so there the engine reads it on its own threads.
const READ_STDIO_IN_JS = process.env.MCPFERRY_ENGINE_READER !== '1' && typeof (globalThis as { Bun?: unknown }).Bun === 'undefined';

function readStdout(native: NativeToolset, calls: CallChannel, readerId: number, fd: number): void {
  let ended = false;
  const end = (error: string | null) => {
    if (ended) return;
    ended = true;
    native.stdoutEnded(readerId, error);
  };
  let socket: Socket;
  try {
    socket = new Socket({ fd, readable: true, writable: false });
  } catch (error) {
    end(String(error));
    return;
  }
  // A server's pipe must not keep the process alive; calls in flight do that (see CallChannel).
  socket.unref();
  socket.on('data', (chunk: Buffer) => calls.accept(native.feedStdout(readerId, chunk)));
  socket.on('end', () => end(null));
  socket.on('error', (error) => end(error.message));
  socket.on('close', () => end(null));
}

function makeTool(calls: CallChannel, projected: ProjectedTool): McpTool {
  const name = projected.name;
  return {
    ...projected,
    execute(args: unknown, ctx?: McpToolCallContext): Promise<McpToolResult> {
      const signal = ctx?.signal;
      if (signal?.aborted) return Promise.reject(new McpAbortedError('mcp_aborted', 'MCP request aborted by the caller'));
      let argumentsJson: string;
      try {
        argumentsJson = args === undefined || args === null ? '{}' : JSON.stringify(args);
      } catch (error) {
        // BigInt, cycles: not JSON, so not arguments a server could receive.
        return Promise.reject(createMcpError('mcp_invalid_arguments', `tool arguments are not JSON: ${(error as Error).message}`));
      }
      return calls.call(name, argumentsJson, signal);
    },
  };
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
  if (!opts || !opts.storage) return Promise.reject(configError('rebuildMcpToolsFromStorage needs opts.storage'));
  return openToolset(servers, opts, (native) => native.rebuild(capabilities.stdio !== false), true);
}

async function openToolset(
  servers: readonly McpServer[],
  opts: McpOptions,
  start: (native: NativeToolset) => Promise<string>,
  reconciles: boolean,
): Promise<McpToolset> {
  checkOptions(servers, opts);
  const { onDiagnostic } = opts;
  const tools: Record<string, McpTool> = {};
  const calls = new CallChannel(() => native);

  const onEvent = (kind: string, payloadJson: string) => {
    try {
      const payload = JSON.parse(payloadJson);
      if (kind === 'diagnostic') {
        deliver(onDiagnostic, payload);
      } else if (kind === 'stdio-reader') {
        readStdout(native, calls, payload.readerId, payload.fd);
      } else if (kind === 'tools') {
        const change = payload as ToolsChange;
        for (const removed of change.removed) delete tools[removed];
        for (const tool of [...change.added, ...change.changed]) tools[tool.name] = makeTool(calls, tool);
      }
    } catch {
      // A malformed event is the engine's bug; it must not take the caller's process down.
    }
  };

  const config = JSON.stringify({
    servers,
    tools: opts.tools,
    timeoutMs: opts.timeoutMs,
    maxResultBytes: opts.maxResultBytes,
    allowedHosts: Array.isArray(opts.allowedHosts) ? opts.allowedHosts : undefined,
    proxy: opts.proxy,
    auth: opts.auth !== undefined,
    disclosure: opts.disclosure,
    contextWindowTokens: opts.contextWindowTokens,
  });
  const hooks = hooksFor(opts);
  let native: NativeToolset;
  try {
    const storeId = opts.storage ? nativeStoreId(opts.storage) : undefined;
    const jsStore = opts.storage && storeId === undefined ? storeDispatcher(opts.storage) : undefined;
    native = new binding.NativeToolset(
      config,
      onEvent,
      calls.drain,
      hooks.auth,
      hooks.allowedHosts,
      hooks.decide,
      hooks.ask,
      storeId,
      READ_STDIO_IN_JS,
      jsStore,
    );
  } catch (error) {
    throw fromEngine(error);
  }
  let connected: { tools: ProjectedTool[]; diagnostics: Diagnostic[] };
  try {
    connected = JSON.parse(await start(native));
  } catch (error) {
    await native.close();
    throw fromEngine(error);
  }
  for (const tool of connected.tools) tools[tool.name] = makeTool(calls, tool);
  for (const diagnostic of connected.diagnostics) deliver(onDiagnostic, diagnostic);

  const toolset: McpToolset = {
    tools,
    close: () => native.close(),
    reconciled: reconciles ? native.reconciled() : Promise.resolve(),
  };
  natives.set(toolset, native);
  return toolset;
}

/** The version of the loaded native engine. */
export function engineVersion(): string {
  return binding.engineVersion();
}
