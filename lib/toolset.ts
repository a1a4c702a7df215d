// Opening a toolset: the options and callbacks converted for the native engine (which validates every
// option, src/config.rs, and does all protocol work), engine events routed to the tool map, diagnostics
// and resource updates, and close().

import { binding, engine, type NativeToolset } from './binding';
import { CallChannel } from './call-channel';
import { createMcpError, engineFailure, McpError, type McpErrorCode } from './errors';
import { OpenQuestions } from './questions';
import { ResourceSubscribers, sessionRequests } from './session';
import { lazily } from './lazily';
import { otelRegistered } from './otel-registry';
import { readStdout } from './stdout-reader';
import { isStore, nativeStoreId, storeDispatcher } from './stores';
import { isTokenStore, nativeTokenStoreId, tokenStoreDispatcher } from './token-stores';
import { makeTool, outcomeRecorder, type ToolsChange, type WireTool } from './tool-objects';
import type { Diagnostic, McpAuthorizationPrompt, McpDegradedServer, McpOptions, McpPolicy, McpServer, McpTool, McpToolset } from './types';

const natives = new WeakMap<McpToolset, NativeToolset>();

// On Node, stdio servers' stdout is read on this event loop (lib/stdout-reader.ts): a response then needs no
// thread wake-up. Bun's net.Socket can't adopt a pipe descriptor, so there the engine reads it on its own threads.
const READ_STDIO_IN_JS = process.env.MCPFERRY_ENGINE_READER !== '1' && typeof (globalThis as { Bun?: unknown }).Bun === 'undefined';

// Loaded with the first toolset, not at import (issue 30): the tracer and meter code. (The stdout reader's
// node:net loads with the first stdio server, in readStdout.)
const clientTelemetry = lazily(() => (require('./telemetry') as typeof import('./telemetry')).ClientTelemetry);

/** Internal: the native toolset behind a toolset this module opened. */
export function nativeToolsetOf(toolset: McpToolset): NativeToolset | undefined {
  return natives.get(toolset);
}

export function configError(message: string): Error {
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
/**
 * The configuration as the engine reads it. `telemetryOff`: no tracer or meter provider was registered when the toolset
 * was made, so the engine is told telemetry is off and sends no `operation` event (a JavaScript callback per request
 * it makes on its own, for nothing); options the engine will refuse are left as given, for it to say why.
 */
export function configJson(servers: unknown, opts: unknown, { telemetryOff = false } = {}): string {
  try {
    return configJsonUnchecked(servers, opts, telemetryOff);
  } catch (error) {
    if (error instanceof McpError) throw error;
    // A getter that throws, a proxy that refuses: the options are not plain data.
    throw configError(`options and server entries must be plain data: ${(error as Error)?.message ?? String(error)}`);
  }
}

function configJsonUnchecked(servers: unknown, opts: unknown, telemetryOff: boolean): string {
  let options = opts;
  if (opts !== null && typeof opts === 'object' && !Array.isArray(opts)) {
    const given = opts as Record<string, unknown>;
    const forwarded: Record<string, unknown> = { ...given };
    // The session is opaque: only whether there is one matters to the engine.
    if (given.session !== undefined) forwarded.session = marker('value');
    if (isStore(given.storage)) forwarded.storage = marker('store');
    if (isTokenStore(given.tokenStore)) forwarded.tokenStore = marker('tokenStore');
    if (given.signal instanceof AbortSignal) forwarded.signal = marker('signal');
    if (telemetryOff) forwarded.telemetry = telemetryTurnedOff(given.telemetry);
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

/** `options.telemetry` with `enabled: false`, unless it is not the documented shape (the engine then says why). */
function telemetryTurnedOff(telemetry: unknown): unknown {
  if (telemetry === undefined || telemetry === null) return { enabled: false };
  if (typeof telemetry !== 'object' || Array.isArray(telemetry)) return telemetry;
  const enabled = (telemetry as { enabled?: unknown }).enabled;
  return enabled === undefined || enabled === true ? { ...telemetry, enabled: false } : telemetry;
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

/**
 * The servers' `oauth.assertion` callbacks (grant `workload_identity`) as one engine hook: server name →
 * the workload's assertion. Undefined when no server has one.
 */
function workloadAssertionHook(servers: unknown) {
  const callbacks = new Map<string, () => string | Promise<string>>();
  for (const server of Array.isArray(servers) ? servers : []) {
    const assertion = (server as { oauth?: { assertion?: unknown } } | null)?.oauth?.assertion;
    if (typeof assertion === 'function') callbacks.set(String((server as { name?: unknown }).name), assertion as () => string | Promise<string>);
  }
  if (callbacks.size === 0) return undefined;
  return async (server: string) => {
    const assertion = await callbacks.get(server)?.();
    if (typeof assertion !== 'string' || assertion.length === 0) throw new Error('oauth.assertion resolved without a string');
    return assertion;
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
  const config = configJson(servers, opts, { telemetryOff: !otelRegistered() });
  // Past the engine's validation below, `opts` is an object of the documented shape.
  const options: McpOptions = opts !== null && typeof opts === 'object' ? opts : {};
  const report = diagnosticSink(options);
  const tools: Record<string, McpTool> = {};
  const calls = new CallChannel(() => native, new (clientTelemetry())(Array.isArray(servers) ? servers : [], options.telemetry));
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
      } else if (kind === 'operation') {
        calls.telemetry?.operation(payload);
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
    native = new binding.NativeToolset({
      configJson: config,
      onEvent,
      onCompletions: calls.drain,
      auth: hooks.auth,
      allowedHosts: hooks.allowedHosts,
      decide: hooks.decide,
      ask: hooks.ask,
      onAuthorizationUrl: hooks.authorizationUrl,
      workloadAssertion: workloadAssertionHook(servers),
      onElicitation: hooks.elicit,
      nativeStoreId: storeId,
      jsStore,
      nativeTokenStoreId: tokenStoreId,
      jsTokenStore,
      readStdioInJs: READ_STDIO_IN_JS,
    });
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
