// mcpferry: every tool of every configured MCP server as an entry in an agent's tool map.
// This file converts options and callbacks for the native engine and forwards them; the engine
// validates every option (src/config.rs) and does all protocol work.

import { binding, engine, type NativeToolset } from './binding';
import { createMcpError, fromEngine, McpError, type McpErrorCode } from './errors';
import { OpenQuestions } from './questions';
import { ClientTelemetry, type CallRecording, type EngineReport } from './telemetry';
import { ResourceSubscribers, sessionRequests } from './session';
import { isStore, nativeStoreId, storeDispatcher, storeFactories, type PostgresMcpConnectionStore, type PostgresMcpConnectionStoreOptions } from './stores';
import { isTokenStore, nativeTokenStoreId, tokenStoreDispatcher, type McpTokenStore as McpTokenStoreType } from './token-stores';
import { closeSync } from 'node:fs';
import { Socket } from 'node:net';
import type {
  Diagnostic,
  McpAuthorizationPrompt,
  McpDegradedServer,
  McpOptions,
  McpPolicy,
  McpServer,
  McpTool,
  McpProgress,
  McpToolCallContext,
  McpToolResult,
  McpToolset,
  PolicyRequest,
} from './types';

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

type ProjectedTool = Omit<McpTool, 'execute'>;
/**
 * A tool as the engine sends it: with its texts inline, or, when they are a catalogue's shared with other
 * toolsets, as `textsId` and `texts` (their JSON, parsed only for an id not held yet).
 */
type WireTool = Omit<ProjectedTool, 'description' | 'inputSchema'> & Partial<SharedTexts> & { textsId?: number; texts?: string };
type SharedTexts = Pick<McpTool, 'description' | 'inputSchema' | 'outputSchema' | 'annotations'>;
interface ToolsChange {
  server: string;
  added: WireTool[];
  changed: WireTool[];
  removed: string[];
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

const natives = new WeakMap<McpToolset, NativeToolset>();

/** Internal: the native toolset behind a toolset this module opened. */
export function nativeToolsetOf(toolset: McpToolset): NativeToolset | undefined {
  return natives.get(toolset);
}

/**
 * The MCP part of an agent's system prompt for `toolset`: which servers are connected, which are
 * deferred or unavailable, and how to use `mcp__describe_tool` and `mcp__search_tools`. It never
 * includes a server's `instructions`.
 */
export function composeMcpSystemPrompt(toolset: McpToolset): string {
  const native = natives.get(toolset);
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

function configError(message: string): Error {
  return createMcpError('mcp_config_invalid', message);
}

/** Stands, in the JSON the engine validates, for a value JSON cannot carry (see src/config.rs). */
const marker = (kind: string) => ({ [engine.configMarkerKey]: kind });

function markUnserializable(_key: string, value: unknown): unknown {
  switch (typeof value) {
    case 'function':
      return marker('function');
    case 'bigint':
      return marker('bigint');
    case 'symbol':
      return marker('symbol');
    case 'number':
      // JSON would turn NaN and ±Infinity into null, which reads as "not given".
      return Number.isFinite(value) ? value : marker('non-finite number');
    default:
      return value;
  }
}

/**
 * The servers and options as the engine validates them: as given, with the session, the store and
 * every callback replaced by a marker (they cross beside the JSON). No checking here: a wrong option
 * is the engine's to name.
 */
function configJson(servers: unknown, opts: unknown): string {
  try {
    return configJsonUnchecked(servers, opts);
  } catch (error) {
    if (error instanceof McpError) throw error;
    // A getter that throws, a proxy that refuses: the options are not plain data.
    throw configError(`options and server entries must be plain data: ${(error as Error)?.message ?? String(error)}`);
  }
}

function configJsonUnchecked(servers: unknown, opts: unknown): string {
  let options = opts;
  if (opts !== null && typeof opts === 'object' && !Array.isArray(opts)) {
    const given = opts as Record<string, unknown>;
    const forwarded: Record<string, unknown> = { ...given };
    // The session is opaque: only whether there is one matters to the engine.
    if (given.session !== undefined) forwarded.session = marker('value');
    if (isStore(given.storage)) forwarded.storage = marker('store');
    if (isTokenStore(given.tokenStore)) forwarded.tokenStore = marker('tokenStore');
    if (given.signal instanceof AbortSignal) forwarded.signal = marker('signal');
    // Methods may live on a prototype, which JSON would not see.
    const policy = given.policy as Partial<McpPolicy> | null | undefined;
    if (policy !== null && typeof policy === 'object' && !Array.isArray(policy)) {
      forwarded.policy = { ...policy, decide: policy.decide, ask: policy.ask };
    }
    options = forwarded;
  }
  try {
    return JSON.stringify({ servers, options }, markUnserializable);
  } catch (error) {
    throw configError(`options and server entries must be plain data, without circular references: ${(error as Error).message}`);
  }
}

/**
 * The CLI default of `onAuthorizationUrl`: prints the login URL (and a device code) to stderr and opens
 * nothing. Pass it explicitly where stdin or stderr is not a terminal.
 */
export function printAuthorizationUrl(url: string, prompt: McpAuthorizationPrompt): void {
  const code = prompt.userCode ? ` and enter the code ${printable(prompt.userCode)}` : '';
  process.stderr.write(`mcpferry: to log in to ${JSON.stringify(prompt.server)}, open ${printable(url)}${code}\n`);
}

/** Text from a server or an authorization server, made safe for a terminal: no control characters (escape sequences). */
function printable(text: string): string {
  return String(text).replace(/[\u0000-\u001f\u007f-\u009f]/g, '');
}

/** Diagnostics that report progress (delivered only with `progress: true`) or engine logs (with `logs`). */
const PROGRESS_CODES: ReadonlySet<string> = new Set(['server-connecting', 'server-connected']);
/** What is printed to stderr when no `onDiagnostic` is given: something a person must know is wrong. */
const WARNING_CODES: ReadonlySet<string> = new Set([
  'server-degraded',
  'server-lost',
  'server-failed',
  'server-name-collision',
  'tool-rejected',
  'tool-schema-invalid',
  'tool-quarantined',
  'tool-withheld',
  'disclosure-budget-exceeded',
  'internal-error',
]);

/**
 * Where diagnostics go: `onDiagnostic` when given (progress ones only with `progress: true`); without
 * it, warnings are printed to stderr, each once (unless `warnings: false`).
 */
function diagnosticSink(options: McpOptions): (diagnostic: Diagnostic) => void {
  const onDiagnostic = typeof options.onDiagnostic === 'function' ? options.onDiagnostic : undefined;
  if (onDiagnostic) {
    return (diagnostic) => {
      if (PROGRESS_CODES.has(diagnostic.code) && options.progress !== true) return;
      deliver(onDiagnostic, diagnostic);
    };
  }
  if (options.warnings === false) return () => {};
  const printed = new Set<string>();
  return (diagnostic) => {
    if (!WARNING_CODES.has(diagnostic.code)) return;
    const line = `mcpferry: warning: ${printable(diagnostic.message)}\n`;
    if (printed.has(line)) return;
    printed.add(line);
    try {
      process.stderr.write(line);
    } catch {
      // A closed stderr must not break the toolset.
    }
  };
}

type DegradedDiagnostic = Extract<Diagnostic, { code: 'server-degraded' }>;

/** `onDegraded: 'throw'`: the servers that could not connect, as one error with the first one's code. */
function degradedError(degraded: DegradedDiagnostic[]): McpError {
  const message =
    degraded.length === 1
      ? degraded[0].message
      : `${degraded.length} MCP servers are unavailable: ${degraded.map((d) => d.message).join('; ')}`;
  const error = createMcpError(degraded[0].errorCode as McpErrorCode, message);
  const servers: McpDegradedServer[] = degraded.map(({ server, errorCode, message, stderrTail }) => ({ server, errorCode, message, stderrTail }));
  return Object.assign(error, { servers });
}

/** The options with their defaults filled in where a default is a callback: `printAuthorizationUrl` on a terminal. */
function withDefaults(opts: McpOptions): McpOptions {
  if (opts === null || typeof opts !== 'object' || 'onAuthorizationUrl' in opts) return opts;
  const interactive = process.stdin?.isTTY === true && process.stderr?.isTTY === true;
  return interactive ? { ...opts, onAuthorizationUrl: printAuthorizationUrl } : opts;
}

/** Wrap the application's callbacks for the engine: always async, plain data in and out. */
function hooksFor(opts: McpOptions, questions: OpenQuestions) {
  const { auth, allowedHosts, policy, session, onAuthorizationUrl, onElicitation } = opts;
  const decide = typeof policy?.decide === 'function' ? policy.decide.bind(policy) : undefined;
  const ask = typeof policy?.ask === 'function' ? policy.ask.bind(policy) : undefined;
  return {
    auth:
      typeof auth === 'function'
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
    decide: decide
      ? async (requestJson: string) => JSON.stringify((await decide({ ...JSON.parse(requestJson), session })) ?? null)
      : undefined,
    ask: ask
      ? async (questionJson: string) => {
          const { request, reason } = JSON.parse(questionJson);
          return (await ask({ ...request, session }, reason ?? undefined)) === true;
        }
      : undefined,
    authorizationUrl:
      typeof onAuthorizationUrl === 'function'
        ? async (promptJson: string) => {
            const { url, ...prompt } = JSON.parse(promptJson);
            await onAuthorizationUrl(url, prompt);
            return '';
          }
        : undefined,
    // The engine checks the answer against the request; a throw here is a decline.
    elicit:
      typeof onElicitation === 'function'
        ? async (requestJson: string) => {
            const { server, request, askId } = JSON.parse(requestJson);
            const { signal, done } = questions.ask(askId);
            try {
              return JSON.stringify((await onElicitation(request, { server, session, signal })) ?? null);
            } finally {
              done();
            }
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

/** A failure of the engine itself, as the error every affected call rejects with. */
function engineFailure(error: unknown): McpError {
  const typed = fromEngine(error);
  if (typed instanceof McpError) return typed;
  return createMcpError('mcp_internal_error', `mcpferry engine failure: ${typed instanceof Error ? typed.message : String(typed)}`);
}

const CLOSED_MESSAGE = 'MCP connection closed';

/**
 * The JavaScript half of the call path. Calls made in one synchronous run are handed to the engine
 * together on the next microtask (one crossing, one pipe write for a burst); outcomes come back the
 * same way, one wake-up and one JSON.parse for everything that finished meanwhile.
 */
class CallChannel {
  private nextCallId = 1;
  private readonly settle = new Map<number, { resolve(r: McpToolResult): void; reject(e: unknown): void }>();
  /** The `onProgress` of the calls that have one, removed when they settle: a late update finds none. */
  private readonly progress = new Map<number, (progress: McpProgress) => void | Promise<void>>();
  /** The calls being recorded (lib/telemetry.ts), ended when they settle. Empty with no tracer or meter. */
  private readonly recordings = new Map<number, CallRecording>();
  /** Calls made since the last flush, by id: `callId \t abortId[p] \t name \t contextJson \t argumentsJson`. */
  private readonly unflushed = new Map<number, string>();
  // Calls in flight keep the process alive (the engine's wake-up callback is weak on purpose).
  private keepAlive: ReturnType<typeof setInterval> | undefined;
  private closed = false;
  /** A drain failed: outcomes may sit in the engine, which wakes us only when its batch was empty. */
  private undrained = false;

  constructor(
    private readonly native: () => NativeToolset,
    /** Starts a call's span and metric when a tracer or meter provider is registered. */
    readonly telemetry?: ClientTelemetry,
  ) {}

  call(
    name: string,
    argumentsJson: string,
    signal: AbortSignal | undefined,
    contextJson = '',
    onProgress?: (progress: McpProgress) => void | Promise<void>,
    recording?: CallRecording,
  ): Promise<McpToolResult> {
    if (this.closed) {
      recording?.end('mcp_connection_closed');
      return Promise.reject(createMcpError('mcp_connection_closed', CLOSED_MESSAGE));
    }
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
      if (onProgress) this.progress.set(callId, onProgress);
      if (recording) {
        this.recordings.set(callId, recording);
        // The trace context and "report this call's time" go to the engine with the call's context.
        contextJson = contextJson === '' ? `{${recording.members}}` : `${contextJson.slice(0, -1)},${recording.members}}`;
      }
      if (this.unflushed.size === 0) queueMicrotask(() => this.flush());
      // `p` after the abort id: the engine delivers this call's progress (src/napi/wire.rs).
      const abortId = `${signal ? callId : 0}${onProgress ? 'p' : ''}`;
      this.unflushed.set(callId, `${callId}\t${abortId}\t${name}\t${contextJson}\t${argumentsJson}\n`);
    });
  }

  /** An abort before the flush never reaches the engine; after it, the engine cancels the request. */
  private abort(callId: number): void {
    // The caller gave up: no progress after this, even one the engine delivers ahead of the aborted outcome.
    if (this.progress.size) this.progress.delete(callId);
    if (this.unflushed.delete(callId)) {
      this.complete(callId, 'mcp_aborted', 'MCP request aborted by the caller');
      return;
    }
    try {
      this.native().abort(callId);
    } catch (error) {
      this.fail(callId, engineFailure(error));
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
      const failure = engineFailure(error);
      for (const id of ids) this.fail(id, failure);
    }
    if (this.undrained) this.drain();
  }

  /** The engine says outcomes are waiting. */
  drain = (): void => {
    let outcomes: string;
    try {
      outcomes = this.native().drainCompletions();
    } catch (error) {
      // Outcomes that cannot be collected would leave their calls pending forever. Whatever the
      // engine still holds is collected (and ignored) on the next flush, so wake-ups resume.
      this.undrained = true;
      const failure = engineFailure(error);
      for (const id of [...this.settle.keys()]) this.fail(id, failure);
      return;
    }
    this.undrained = false;
    this.accept(outcomes);
  };

  /** Outcomes in the engine's `[[callId, errorCode, payload, properties?, report?], ...]` form. */
  accept(outcomesJson: string): void {
    if (outcomesJson === '[]') return;
    const outcomes: [number, string, unknown, (Record<string, unknown> | null)?, EngineReport?][] = JSON.parse(outcomesJson);
    for (const [callId, code, payload, properties, report] of outcomes) {
      if (code === 'progress') this.progressed(callId, payload as McpProgress);
      else this.complete(callId, code, payload, properties ?? undefined, report);
    }
  }

  /** A progress update of a call still waiting (validated and bounded by the engine: src/progress.rs). */
  private progressed(callId: number, update: McpProgress): void {
    const onProgress = this.progress.get(callId);
    if (!onProgress) return;
    try {
      const returned = onProgress(update);
      // A rejecting onProgress is ignored like a throwing one, not left an unhandled rejection.
      if (returned && typeof (returned as Promise<void>).then === 'function') (returned as Promise<void>).then(undefined, () => {});
    } catch {
      // The caller's callback failed: the call and the other calls' updates go on.
    }
  }

  private complete(callId: number, code: string, payload: unknown, properties?: Record<string, unknown>, report?: EngineReport): void {
    if (this.recordings.size) this.endRecording(callId, code, report, code === '' && (payload as { isError?: unknown })?.isError === true);
    if (code === '') this.settleCall(callId, (waiting) => waiting.resolve(payload as McpToolResult));
    else this.fail(callId, Object.assign(createMcpError(code as McpErrorCode, String(payload)), properties));
  }

  private fail(callId: number, error: McpError): void {
    if (this.recordings.size) this.endRecording(callId, error.code);
    this.settleCall(callId, (waiting) => waiting.reject(error));
  }

  private endRecording(callId: number, code: string, report?: EngineReport, isError?: boolean): void {
    const recording = this.recordings.get(callId);
    if (!recording) return;
    this.recordings.delete(callId);
    try {
      recording.end(code, report, isError);
    } catch {
      // A failing exporter or SDK must not change the call's outcome.
    }
  }

  private settleCall(callId: number, how: (waiting: { resolve(r: McpToolResult): void; reject(e: unknown): void }) => void): void {
    const waiting = this.settle.get(callId);
    if (!waiting) return;
    this.settle.delete(callId);
    if (this.progress.size) this.progress.delete(callId);
    if (this.settle.size === 0) this.release();
    how(waiting);
  }

  /**
   * After the engine closed: collect what it completed, then settle whatever it did not with
   * mcp_connection_closed, and drop the keep-alive timer. Later calls reject at once.
   */
  shutdown(): void {
    this.closed = true;
    this.drain();
    this.unflushed.clear();
    const closed = createMcpError('mcp_connection_closed', CLOSED_MESSAGE);
    for (const id of [...this.settle.keys()]) this.fail(id, closed);
    clearInterval(this.keepAlive);
    this.keepAlive = undefined;
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

/**
 * Read one stdio server's stdout on the event loop. Returns the function that ends the reading (destroys
 * the socket, closing the descriptor, and tells the engine); `readers` holds it until the stream ends,
 * so close() can end streams a server's stray descendants keep open.
 */
function readStdout(native: NativeToolset, calls: CallChannel, readerId: number, fd: number, readers: Set<() => void>): void {
  let ended = false;
  let socket: Socket | undefined;
  const end = (error: string | null) => {
    if (ended) return;
    ended = true;
    readers.delete(stop);
    socket?.destroy();
    try {
      native.stdoutEnded(readerId, error);
    } catch {
      // The engine failed to take the end (a contained bug); the server's calls time out as usual.
    }
  };
  const stop = () => end(null);
  readers.add(stop);
  try {
    socket = new Socket({ fd, readable: true, writable: false });
  } catch (error) {
    // The descriptor is ours to close: no socket took it.
    try {
      closeSync(fd);
    } catch {
      // Already closed: nothing to release.
    }
    end(String(error));
    return;
  }
  // A server's pipe must not keep the process alive; calls in flight do that (see CallChannel).
  socket.unref();
  socket.on('data', (chunk: Buffer) => {
    let outcomes: string;
    try {
      outcomes = native.feedStdout(readerId, chunk);
    } catch (error) {
      // The engine could not take these bytes: this server's stream is lost, not the process.
      end(`the engine failed reading this server: ${(error as Error).message}`);
      calls.drain();
      return;
    }
    calls.accept(outcomes);
  });
  socket.on('end', () => end(null));
  socket.on('error', (error) => end(error.message));
  socket.on('close', () => end(null));
}

/**
 * Tool arguments as JSON. A value JSON cannot carry at the top (a function, a symbol, a Map or Set,
 * which would turn into nothing or `{}`) is refused; BigInt and cycles throw in JSON.stringify.
 * Inside the object, JSON's own rules apply (a function-valued property is left out, as by every
 * JSON-based client): checking every nested value costs ~3x the stringify on the hot path.
 */
function argumentsJson(args: unknown): string {
  if (args === undefined || args === null) return '{}';
  const type = typeof args;
  if (type === 'function' || type === 'symbol' || args instanceof Map || args instanceof Set) {
    throw new TypeError(`a ${args instanceof Map ? 'Map' : args instanceof Set ? 'Set' : type} is not a JSON object`);
  }
  return JSON.stringify(args) ?? '';
}

/** Anything that behaves as an AbortSignal: checked by shape, so signals of other realms (and Bun's) pass. */
function isAbortSignal(value: unknown): value is AbortSignal {
  const candidate = value as Partial<AbortSignal> | null;
  return (
    typeof candidate === 'object' &&
    candidate !== null &&
    typeof candidate.aborted === 'boolean' &&
    typeof candidate.addEventListener === 'function' &&
    typeof candidate.removeEventListener === 'function'
  );
}

/**
 * The members of the call context the engine reads (it forms and checks the idempotency key), as JSON;
 * empty when there are none, the common case. Passed as given: the engine names a wrong type.
 */
function callContextJson(ctx: McpToolCallContext | undefined): string {
  if (!ctx || (ctx.runId === undefined && ctx.toolCallId === undefined && ctx.idempotencyKey === undefined)) return '';
  const { runId, toolCallId, idempotencyKey } = ctx;
  // A value JSON cannot carry (a function, a BigInt) becomes a type the engine refuses, by name.
  const wire = (value: unknown) => (typeof value === 'function' || typeof value === 'bigint' || typeof value === 'symbol' ? [] : value);
  return JSON.stringify({ runId: wire(runId), toolCallId: wire(toolCallId), idempotencyKey: wire(idempotencyKey) });
}

/** Tells the policy how a call ended (`policy.record`, which guards such as mcpFirewall have). */
type RecordOutcome = (tool: ProjectedTool, args: unknown, ctx: McpToolCallContext | undefined, outcome: { ok: boolean; error?: unknown }) => Promise<void>;

function outcomeRecorder(options: McpOptions): RecordOutcome | undefined {
  const policy = options.policy;
  if (typeof policy?.record !== 'function') return undefined;
  const { session } = options;
  return async (tool, args, ctx, outcome) => {
    const request: PolicyRequest = { kind: 'tool', toolName: tool.name, server: tool.server, remoteName: tool.remoteName, args, session };
    if (ctx?.runId !== undefined) request.runId = ctx.runId;
    if (ctx?.toolCallId !== undefined) request.toolCallId = ctx.toolCallId;
    if (ctx?.idempotencyKey !== undefined) request.idempotencyKey = ctx.idempotencyKey;
    try {
      await policy.record?.(request, outcome);
    } catch {
      // The call's own outcome stands: a guard that cannot record must not turn a result into a failure.
    }
  };
}

/**
 * The texts (description, schemas, annotations) of shared catalogues, by the engine's id: every toolset
 * listing the same catalogue from the same server points at one frozen copy, held while a tool uses it.
 * A tool holds the texts' members, not the object they came in, so they are held through their
 * `inputSchema` (an object every such tool points at): a weak reference to the container alone was
 * cleared by any collection, and the next toolset on the same catalogue then got a copy of its own.
 */
const sharedSchemas = new Map<number, WeakRef<object>>();
const textsOfSchema = new WeakMap<object, SharedTexts>();
const sharedTextsCollected = new FinalizationRegistry<number>((id) => {
  if (sharedSchemas.get(id)?.deref() === undefined) sharedSchemas.delete(id);
});

/** Frozen all the way down: what one toolset's tool holds may be another's. */
function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const member of Object.values(value)) deepFreeze(member);
  }
  return value;
}

function textsOf(wire: WireTool): SharedTexts {
  const id = wire.textsId;
  if (id === undefined) return deepFreeze({ description: wire.description!, inputSchema: wire.inputSchema!, outputSchema: wire.outputSchema, annotations: wire.annotations });
  const held = sharedSchemas.get(id)?.deref();
  let texts = held && textsOfSchema.get(held);
  if (texts === undefined) {
    texts = deepFreeze(JSON.parse(wire.texts!) as SharedTexts);
    // The engine sends an object schema only (src/catalog.rs).
    const anchor: object = texts.inputSchema;
    textsOfSchema.set(anchor, texts);
    sharedSchemas.set(id, new WeakRef(anchor));
    sharedTextsCollected.register(anchor, id);
  }
  return texts;
}

/** The tool's fields, in the order the map has always shown them; the texts are shared and frozen. */
function projectedTool(wire: WireTool): ProjectedTool {
  const texts = textsOf(wire);
  const tool: ProjectedTool = { name: wire.name, description: texts.description, inputSchema: texts.inputSchema, server: wire.server, remoteName: wire.remoteName };
  if (wire.title !== undefined) tool.title = wire.title;
  if (wire.ui !== undefined) tool.ui = deepFreeze(wire.ui);
  if (texts.outputSchema !== undefined) tool.outputSchema = texts.outputSchema;
  if (texts.annotations !== undefined) tool.annotations = texts.annotations;
  return tool;
}

/** The server name of mcpferry's own tools (src/toolset/local.rs `LOCAL_SERVER`). */
const LOCAL_SERVER = 'mcpferry';

function makeTool(calls: CallChannel, wire: WireTool, record?: RecordOutcome): McpTool {
  const projected = projectedTool(wire);
  const name = projected.name;
  // mcpferry's own tools (mcp__describe_tool, …) are no MCP request: no span.
  const remote = projected.server !== LOCAL_SERVER;
  // One object per tool: `execute` is added to the projection (the closure keeps it alive either way).
  return Object.assign(projected, {
    execute(args: unknown, ctx?: McpToolCallContext): Promise<McpToolResult> {
      if (ctx !== undefined && ctx !== null && typeof ctx !== 'object') {
        return Promise.reject(createMcpError('mcp_invalid_arguments', 'the call context must be an object ({ signal?, abortSignal?, toolCallId?, runId?, idempotencyKey?, onProgress? })'));
      }
      // `abortSignal` is the AI SDK's name for it: a context passed through as is cancels all the same.
      const given = ctx?.signal ?? undefined;
      const alias = ctx?.abortSignal ?? undefined;
      if (given !== undefined && alias !== undefined && given !== alias) {
        return Promise.reject(createMcpError('mcp_invalid_arguments', 'ctx.signal and ctx.abortSignal are two different signals: give one'));
      }
      const signal = given ?? alias;
      if (signal !== undefined && !isAbortSignal(signal)) {
        return Promise.reject(createMcpError('mcp_invalid_arguments', `ctx.${given !== undefined ? 'signal' : 'abortSignal'} must be an AbortSignal`));
      }
      const onProgress = ctx?.onProgress ?? undefined;
      if (onProgress !== undefined && typeof onProgress !== 'function') {
        return Promise.reject(createMcpError('mcp_invalid_arguments', 'ctx.onProgress must be a function'));
      }
      if (signal?.aborted) return Promise.reject(createMcpError('mcp_aborted', 'MCP request aborted by the caller'));
      let json: string;
      try {
        json = argumentsJson(args);
      } catch (error) {
        // BigInt, cycles, functions: not JSON, so not arguments a server could receive.
        return Promise.reject(createMcpError('mcp_invalid_arguments', `tool arguments are not JSON: ${(error as Error).message}`));
      }
      const recording = remote ? calls.telemetry?.start({ method: 'tools/call', server: projected.server, target: projected.remoteName }) : undefined;
      const pending = calls.call(name, json, signal, callContextJson(ctx), onProgress, recording);
      if (!record) return pending;
      // Settled only after the policy has heard: a next call's decide sees this one counted.
      return pending.then(
        async (result) => (await record(projected, args, ctx, { ok: true }), result),
        async (error) => {
          await record(projected, args, ctx, { ok: false, error });
          throw error;
        },
      );
    },
  });
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
 * Internal (lib/client.ts builds connectMcpServer on it): open a toolset; `internal.observe` sees every
 * engine event after the toolset handled it, and `internal.prepare` the native toolset before it connects.
 */
export async function openToolset(
  servers: readonly McpServer[],
  given: McpOptions,
  start: (native: NativeToolset) => Promise<string>,
  reconciles: boolean,
  internal?: { observe?(kind: string, payload: unknown): void; prepare?(native: NativeToolset): void },
): Promise<McpToolset> {
  const opts = withDefaults(given);
  const config = configJson(servers, opts);
  // Past the engine's validation below, `opts` is an object of the documented shape.
  const options: McpOptions = opts !== null && typeof opts === 'object' ? opts : {};
  const report = diagnosticSink(options);
  const tools: Record<string, McpTool> = {};
  const calls = new CallChannel(() => native, new ClientTelemetry(Array.isArray(servers) ? servers : [], options.telemetry));
  const record = outcomeRecorder(options);
  // The stdout streams read here; ended by close() if a server's stray descendants keep them open.
  const readers = new Set<() => void>();

  const questions = new OpenQuestions();
  const subscribers = new ResourceSubscribers();
  const onEvent = (kind: string, payloadJson: string) => {
    try {
      const payload = JSON.parse(payloadJson);
      if (kind === 'diagnostic') {
        calls.telemetry?.observe(payload);
        report(payload);
      } else if (kind === 'stdio-reader') {
        readStdout(native, calls, payload.readerId, payload.fd, readers);
        // A stream handed over while closing is ended at once.
        if (closing) for (const stop of [...readers]) stop();
      } else if (kind === 'elicitation-withdrawn') {
        questions.withdraw(payload.askId);
      } else if (kind === 'resource-updated') {
        subscribers.deliver(native, payload);
      } else if (kind === 'tools') {
        const change = payload as ToolsChange;
        for (const removed of change.removed) delete tools[removed];
        for (const tool of [...change.added, ...change.changed]) tools[tool.name] = makeTool(calls, tool, record);
      }
      internal?.observe?.(kind, payload);
    } catch {
      // A malformed event is the engine's bug; it must not take the caller's process down.
    }
  };

  const hooks = hooksFor(options, questions);
  const storage = options.storage;
  let native: NativeToolset;
  try {
    const storeId = isStore(storage) ? nativeStoreId(storage) : undefined;
    const jsStore = isStore(storage) && storeId === undefined ? storeDispatcher(storage) : undefined;
    const tokenStore = isTokenStore(options.tokenStore) ? options.tokenStore : undefined;
    const tokenStoreId = tokenStore ? nativeTokenStoreId(tokenStore) : undefined;
    const jsTokenStore = tokenStore && tokenStoreId === undefined ? tokenStoreDispatcher(tokenStore) : undefined;
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
      hooks.authorizationUrl,
      tokenStoreId,
      jsTokenStore,
      hooks.elicit,
    );
  } catch (error) {
    throw engineFailure(error);
  }
  // `signal` ends every login in progress (and any later one); the listener goes with the toolset.
  let stopListening = () => {};
  const signal = options.signal;
  if (signal instanceof AbortSignal) {
    const abortLogins = () => {
      try {
        native.abortLogins();
      } catch {
        // The engine reports its own failures as diagnostics; an abort must not throw into the signal.
      }
    };
    if (signal.aborted) abortLogins();
    else {
      signal.addEventListener('abort', abortLogins, { once: true });
      stopListening = () => signal.removeEventListener('abort', abortLogins);
    }
  }
  internal?.prepare?.(native);
  let closing: Promise<void> | undefined;
  // Resolves once the engine let go of every server and every call has settled; the keep-alive timer
  // is gone even if the engine failed to close.
  const endStreams = () => {
    for (const stop of [...readers]) stop();
  };
  const close = (): Promise<void> =>
    (closing ??= (stopListening(), subscribers.clear(), native.close()).then(
      () => {
        endStreams();
        calls.shutdown();
        calls.telemetry?.closed();
      },
      (error) => {
        endStreams();
        calls.shutdown();
        calls.telemetry?.closed();
        throw engineFailure(error);
      },
    ));

  let connected: { tools: WireTool[]; diagnostics: Diagnostic[] };
  try {
    connected = JSON.parse(await start(native));
  } catch (error) {
    await close().catch(() => {});
    throw engineFailure(error);
  }
  const degraded = connected.diagnostics.filter((d): d is DegradedDiagnostic => d.code === 'server-degraded');
  const throwing = options.onDegraded === 'throw' && degraded.length > 0;
  for (const diagnostic of connected.diagnostics) {
    calls.telemetry?.observe(diagnostic);
    // When they are thrown, degraded servers are not also printed.
    if (!(throwing && diagnostic.code === 'server-degraded' && typeof options.onDiagnostic !== 'function')) report(diagnostic);
  }
  if (throwing) {
    await close().catch(() => {});
    throw degradedError(degraded);
  }
  for (const tool of connected.tools) tools[tool.name] = makeTool(calls, tool, record);

  const toolset: McpToolset = {
    tools,
    ...sessionRequests(() => native, subscribers, () => closing !== undefined, calls.telemetry),
    close,
    reconciled: reconciles ? native.reconciled().catch((error) => Promise.reject(engineFailure(error))) : Promise.resolve(),
    servers: () => {
      try {
        return JSON.parse(native.servers());
      } catch (error) {
        throw engineFailure(error);
      }
    },
  };
  natives.set(toolset, native);
  return toolset;
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
