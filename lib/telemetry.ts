// OpenTelemetry: spans and metrics of MCP calls, made through the application's own `@opentelemetry/api`
// (an optional peer dependency) so they nest under its context and go wherever it exports. The engine
// makes none (src/telemetry/): it carries the trace context into `params._meta` and times each measured
// call on its own clock, reported with the outcome, so a span lasts the engine's wire time.
//
// With the package absent, or no tracer and no meter provider registered, nothing is made, the package is
// not loaded, and a call pays one lookup of the API's global registry. What is recorded follows the
// OpenTelemetry semantic conventions for MCP (gen-ai/mcp.md); nothing secret goes in: no header value,
// token, query string, session id, argument or result, and an error's text stays out (its stable code
// is `error.type`).

import type * as OtelApi from '@opentelemetry/api';
import { otelRegistered } from './otel-registry';
import type { McpServer } from './types';

export { otelRegistered };

type Api = typeof OtelApi;
type Attributes = OtelApi.Attributes;

const SCOPE = 'mcpferry';
// The package's version, read once (dist/ → package.json).
const VERSION: string | undefined = (() => {
  try {
    return (require('../package.json') as { version?: string }).version;
  } catch {
    return undefined;
  }
})();

/** The protocol revision whose handshake is `server/discover` (src/protocol/era.rs). */
const MODERN_PROTOCOL_VERSION = '2026-07-28';
/** `mcp.*.operation.duration` buckets the conventions advise, in seconds. */
const DURATION_BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300];

let api: Api | null | undefined;
/** The API's no-op providers, to tell "nothing registered" apart from a real SDK. */
let noopTracerProvider: unknown;

/** The API, when the application registered a tracer or meter provider; else `null`. */
function otel(): Api | null {
  if (!otelRegistered()) return null;
  return api === undefined ? loadApi() : api;
}

function loadApi(): Api | null {
  if (api !== undefined) return api;
  try {
    api = require('@opentelemetry/api') as Api;
    noopTracerProvider = new api.ProxyTracerProvider().getDelegate();
  } catch {
    api = null;
  }
  return api;
}

function isNoop(provider: unknown, className: string): boolean {
  return provider === noopTracerProvider || (provider as { constructor?: { name?: string } } | null)?.constructor?.name === className;
}

/** The registered tracer provider's tracer, or `undefined` when none is registered. */
let tracerCache: { provider: unknown; tracer: OtelApi.Tracer } | undefined;
function activeTracer(a: Api): OtelApi.Tracer | undefined {
  const proxy = a.trace.getTracerProvider() as OtelApi.TracerProvider & { getDelegate?(): OtelApi.TracerProvider };
  const provider = typeof proxy.getDelegate === 'function' ? proxy.getDelegate() : proxy;
  if (isNoop(provider, 'NoopTracerProvider')) return undefined;
  if (tracerCache?.provider !== provider) tracerCache = { provider, tracer: provider.getTracer(SCOPE, VERSION) };
  return tracerCache.tracer;
}

interface Instruments {
  provider: unknown;
  clientOperation: OtelApi.Histogram;
  clientSession: OtelApi.Histogram;
  serverOperation: OtelApi.Histogram;
}
let instrumentsCache: Instruments | undefined;
/** The registered meter provider's instruments, or `undefined` when none is registered. */
function activeInstruments(a: Api): Instruments | undefined {
  const provider = a.metrics.getMeterProvider();
  if (isNoop(provider, 'NoopMeterProvider')) return undefined;
  if (instrumentsCache?.provider !== provider) {
    const meter = provider.getMeter(SCOPE, VERSION);
    const histogram = (name: string, description: string) =>
      meter.createHistogram(name, { unit: 's', description, advice: { explicitBucketBoundaries: DURATION_BUCKETS } });
    instrumentsCache = {
      provider,
      clientOperation: histogram('mcp.client.operation.duration', 'The duration of the MCP request as observed on the sender from the time it was sent until the response is received.'),
      clientSession: histogram('mcp.client.session.duration', 'The duration of the MCP session as observed on the MCP client.'),
      serverOperation: histogram('mcp.server.operation.duration', 'MCP request duration as observed on the receiver from the time it was received until the result is sent.'),
    };
  }
  return instrumentsCache;
}

/** What a span and a metric say about the server a call goes to: set once per server entry. */
type ServerFacts = Attributes;

/** What of a server entry its attributes are worked out from, copied when the toolset is made. */
interface ServerAddress {
  name: string;
  type: McpServer['type'];
  url?: string;
}

function serverFacts(server: ServerAddress): ServerFacts {
  if (server.type === 'stdio') return { 'network.transport': 'pipe' };
  const facts: ServerFacts = { 'network.transport': 'tcp', 'network.protocol.name': 'http' };
  try {
    // Host and port only: never the path, query or credentials of the URL.
    const url = new URL(String(server.url));
    facts['server.address'] = url.hostname.replace(/^\[|\]$/g, '');
    facts['server.port'] = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  } catch {
    // The engine refuses a bad URL; nothing to say about it here.
  }
  return facts;
}

/** The engine's report of a measured call (src/telemetry/mod.rs `CallReport`). */
export interface EngineReport {
  us: number;
  rpcCode?: number;
  /** The JSON-RPC id the call was sent with. */
  requestId?: number;
}

/**
 * What the engine did on its own, told when it ended (src/telemetry/operation.rs): an MCP request no
 * caller made (a handshake, a listing, a subscribe, a completion), or an OAuth token request.
 */
export type EngineOperation =
  | { kind: 'request'; server: string; method: string; uri?: string; requestId?: number; startedMs: number; us: number; errorCode?: string; rpcCode?: number }
  | { kind: 'token'; server: string; grant: string; host: string; port: number; status?: number; oauthError?: string; errorCode?: string; startedMs: number; us: number };

/** The handshake requests: a first connect's span stands for them (it carries their request id). */
const HANDSHAKES: ReadonlySet<string> = new Set(['initialize', 'server/discover']);
/** The most operations held per server while its first connect runs (a hostile server cannot grow it). */
const MAX_HELD_OPERATIONS = 64;

/** One call being recorded: its `_meta` trace members for the engine, and how it ends. */
export interface CallRecording {
  /** JSON object members (`"traceparent":…,"measured":true`) for a tool call's context. */
  readonly members: string;
  /** `{"traceparent",…}` for a read's or a prompt get's `_meta`; `undefined` when there is no span. */
  readonly trace: string | undefined;
  /** The call ended: `code` empty on success; `report` from the engine when it timed the call. */
  end(code: string, report?: EngineReport, isError?: boolean): void;
}

/** What one call is, for its span name and attributes. */
export type CallTarget =
  /** `target`: the tool's remote name, or the prompt's name (the span is `{method} {target}`). */
  | { method: 'tools/call' | 'prompts/get'; server: string; target: string }
  /** A read's span is named for its method alone; its URI is an attribute of the span (not of the metric). */
  | { method: 'resources/read'; server: string; uri: string };

/** A resource URI as a span may show it: no query, fragment or userinfo. */
function spanSafeUri(uri: string): string {
  const cut = uri.search(/[?#]/);
  const bare = cut === -1 ? uri : uri.slice(0, cut);
  // Greedy up to the authority's last `@`: a password may hold a raw `@` of its own.
  return bare.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/]*@/i, '$1');
}

export interface ClientTelemetryOptions {
  enabled?: boolean;
  baggage?: boolean;
}

/**
 * The client side of one toolset. `start` is the only thing a call pays for, and with nothing
 * registered it returns `undefined` after one lookup of the API's global registry.
 */
export class ClientTelemetry {
  /** Each server's attributes, worked out when a span or metric first needs them (a URL parse each). */
  private readonly facts = new Map<string, ServerFacts>();
  /** Each entry's name, type and URL as the toolset was made (the caller may change its array or entries later). */
  private readonly servers: readonly ServerAddress[];
  private readonly baggage: boolean;
  private readonly enabled: boolean;

  /** When the toolset was made, and the caller's context then: its servers' connect spans start and nest there. */
  private readonly openedAt = performance.now();
  private readonly openContext: OtelApi.Context | undefined;

  constructor(servers: readonly McpServer[], options: ClientTelemetryOptions | undefined) {
    this.enabled = options?.enabled !== false;
    this.baggage = options?.baggage === true;
    // Copied, not parsed: a URL is parsed only once a span or metric needs the server's attributes.
    this.servers = servers.flatMap((s) => (s && typeof s === 'object' && typeof s.name === 'string' ? [{ name: s.name, type: s.type, url: (s as { url?: string }).url }] : []));
    // Nothing registered: the engine sends no operations (see engineOperations), and nothing is held for them.
    if (!this.enabled || !otelRegistered()) return;
    for (const server of servers) {
      if (server && typeof server === 'object' && typeof server.name === 'string' && server.enabled !== false) this.connecting.set(server.name, []);
    }
    this.openContext = otel()?.context.active();
  }

  /** A server's attributes (transport, host and port), worked out once it is first asked for. */
  private factsOf(name: string): ServerFacts | undefined {
    let facts = this.facts.get(name);
    if (facts === undefined) {
      const server = this.servers.find((s) => s.name === name);
      if (server === undefined) return undefined;
      facts = serverFacts(server);
      this.facts.set(name, facts);
    }
    return facts;
  }

  /** Each server's session since its handshake ended (`server-connected`), until it is lost or closed. */
  private readonly sessions = new Map<string, { startedAt: number; protocolVersion: string }>();
  /** The servers whose first connect runs, with the engine's operations held until its span is made. */
  private readonly connecting = new Map<string, EngineOperation[]>();
  /** When each lost server was lost (`server-lost`), until its recovery ends. */
  private readonly lostAt = new Map<string, number>();
  /** Each recovery under way (from its first attempt): its span, a parent for its attempts' requests. */
  private readonly recoveries = new Map<string, { span: OtelApi.Span; context: OtelApi.Context }>();

  /**
   * An operation the engine made on its own ended (an `operation` event): a CLIENT span, child of the
   * first connect's span (held until that is made) or of the recovery under way, else a root span; and,
   * for an MCP request, an operation duration.
   */
  operation(operation: EngineOperation): void {
    if (!this.enabled || typeof operation?.server !== 'string') return;
    const held = this.connecting.get(operation.server);
    if (held) {
      if (held.length < MAX_HELD_OPERATIONS) held.push(operation);
      return;
    }
    const a = otel();
    if (!a) return;
    const recovery = this.recoveries.get(operation.server);
    this.record(a, operation, recovery?.context ?? a.ROOT_CONTEXT);
  }

  private record(a: Api, operation: EngineOperation, parent: OtelApi.Context): void {
    try {
      const tracer = activeTracer(a);
      const instruments = activeInstruments(a);
      if (!tracer && !instruments) return;
      const startedAt = operation.startedMs;
      const endedAt = startedAt + operation.us / 1000;
      if (operation.kind === 'token') {
        // An HTTP request (the HTTP conventions): host and port only, never the path, query or form.
        const attributes: Attributes = {
          'http.request.method': 'POST',
          'server.address': operation.host,
          'server.port': operation.port,
          'mcpferry.oauth.grant_type': operation.grant,
        };
        if (operation.status !== undefined) attributes['http.response.status_code'] = operation.status;
        const errorType = operation.oauthError ?? operation.errorCode ?? (operation.status !== undefined && operation.status >= 400 ? String(operation.status) : undefined);
        if (errorType !== undefined) attributes['error.type'] = errorType;
        if (tracer) endSpan(a, tracer.startSpan('POST', { kind: a.SpanKind.CLIENT, attributes, startTime: startedAt }, parent), errorType, endedAt);
        return;
      }
      const common: Attributes = { 'mcp.method.name': operation.method, ...this.factsOf(operation.server) };
      const protocolVersion = this.sessions.get(operation.server)?.protocolVersion;
      if (protocolVersion) common['mcp.protocol.version'] = protocolVersion;
      const outcome: Attributes = {};
      const errorType = operation.rpcCode !== undefined ? String(operation.rpcCode) : operation.errorCode;
      if (errorType !== undefined) outcome['error.type'] = errorType;
      if (operation.rpcCode !== undefined) outcome['rpc.response.status_code'] = String(operation.rpcCode);
      if (tracer) {
        // Span only: a request id or a URI would make a metric series each.
        const attributes: Attributes = { ...common, ...outcome };
        if (operation.requestId !== undefined) attributes['jsonrpc.request.id'] = String(operation.requestId);
        if (operation.uri !== undefined) attributes['mcp.resource.uri'] = spanSafeUri(operation.uri);
        endSpan(a, tracer.startSpan(operation.method, { kind: a.SpanKind.CLIENT, attributes, startTime: startedAt }, parent), errorType, endedAt);
      }
      instruments?.clientOperation.record(operation.us / 1_000_000, { ...common, ...boundedOutcome(outcome, operation.rpcCode) });
    } catch {
      // A failing SDK must not disturb the toolset.
    }
  }

  /** A recovery's first attempt: its span starts when the server was lost (or now, after a failed start). */
  private recovering(server: string, attempt: number | undefined, delayMs: number | undefined): void {
    const a = otel();
    const tracer = a ? activeTracer(a) : undefined;
    if (!a || !tracer) return;
    try {
      let recovery = this.recoveries.get(server);
      if (!recovery) {
        const attributes: Attributes = { 'mcpferry.server.name': server, ...this.factsOf(server) };
        const span = tracer.startSpan('mcpferry recover', { kind: a.SpanKind.INTERNAL, attributes, startTime: this.lostAt.get(server) ?? performance.now() }, a.ROOT_CONTEXT);
        recovery = { span, context: a.trace.setSpan(a.ROOT_CONTEXT, span) };
        this.recoveries.set(server, recovery);
      }
      const event: Attributes = {};
      if (typeof attempt === 'number') event['mcpferry.recovery.attempt'] = attempt;
      if (typeof delayMs === 'number') event['mcpferry.recovery.delay_ms'] = delayMs;
      recovery.span.addEvent('reconnect attempt', event);
    } catch {
      // A failing SDK must not disturb the toolset.
    }
  }

  /** The recovery under way ended: the server is back (`attempts` it took), it was given up on, or closed. */
  private recovered(server: string, attempts: number | undefined, errorType?: string): void {
    this.lostAt.delete(server);
    const recovery = this.recoveries.get(server);
    if (!recovery) return;
    this.recoveries.delete(server);
    const a = otel();
    try {
      if (typeof attempts === 'number') recovery.span.setAttribute('mcpferry.recovery.attempts', attempts);
      if (a) endSpan(a, recovery.span, errorType, performance.now());
      else recovery.span.end();
    } catch {
      // A failing SDK must not disturb the toolset.
    }
  }

  /**
   * Follows the engine's diagnostics for `mcp.client.session.duration`: a session starts when a server is
   * connected (or reconnected) and ends when it is lost (`error.type`: the loss's code) or the toolset closes.
   */
  observe(diagnostic: { code: string; server?: string; elapsedMs?: number; protocolVersion?: string; errorCode?: string; attempt?: number; delayMs?: number }): void {
    if (!this.enabled || typeof diagnostic?.server !== 'string') return;
    const { code, server } = diagnostic;
    // A reconnect's handshake is its recovery's child span (an operation), not a connect of its own.
    if (code === 'server-connected' && !this.recoveries.has(server)) this.connected(server, performance.now() - (diagnostic.elapsedMs ?? 0), diagnostic.protocolVersion);
    else if (code === 'server-degraded') this.connected(server, this.openedAt, undefined, diagnostic.errorCode ?? '_OTHER');
    else if (code === 'server-reconnecting') this.recovering(server, diagnostic.attempt, diagnostic.delayMs);
    else if (code === 'server-reconnected') this.recovered(server, diagnostic.attempt);
    else if (code === 'server-failed') this.recovered(server, undefined, diagnostic.errorCode ?? '_OTHER');
    if (code === 'server-connected' || code === 'server-reconnected') {
      // `elapsedMs` of a first connect covers the handshake; of a reconnect, the time it was lost.
      const handshake = code === 'server-connected' ? (diagnostic.elapsedMs ?? 0) : 0;
      if (!this.sessions.has(server)) this.sessions.set(server, { startedAt: performance.now() - handshake, protocolVersion: String(diagnostic.protocolVersion ?? '') });
    } else if (code === 'server-lost') {
      this.endSession(server, diagnostic.errorCode ?? '_OTHER');
      if (!this.lostAt.has(server)) this.lostAt.set(server, performance.now());
    }
  }

  /**
   * A first connect ended (`server-connected`, or `server-degraded` when it failed): a CLIENT span named for
   * its handshake (`initialize`, or `server/discover` in the 2026-07-28 era) from `startedAt` to now, a
   * child of the context the toolset was made in, and an operation duration. Made after the fact: the
   * engine connects on its own, so these requests carry no trace context (docs/observability.md).
   */
  private connected(server: string, startedAt: number, protocolVersion?: string, errorType?: string): void {
    // The operations of this connect become its span's children (or, with nothing registered, nothing).
    const held = this.connecting.get(server) ?? [];
    this.connecting.delete(server);
    const a = otel();
    if (!a) return;
    try {
      const tracer = activeTracer(a);
      const instruments = activeInstruments(a);
      const method = protocolVersion === MODERN_PROTOCOL_VERSION ? 'server/discover' : 'initialize';
      const attributes: Attributes = { 'mcp.method.name': method, ...this.factsOf(server) };
      if (protocolVersion) attributes['mcp.protocol.version'] = protocolVersion;
      if (errorType) attributes['error.type'] = errorType;
      const endedAt = performance.now();
      let parent: OtelApi.Context = a.ROOT_CONTEXT;
      if (tracer) {
        const span = tracer.startSpan(method, { kind: a.SpanKind.CLIENT, attributes, startTime: startedAt }, this.openContext ?? a.context.active());
        // The handshake request itself is this span: its id is this span's.
        const handshakes = held.filter((op) => op.kind === 'request' && HANDSHAKES.has(op.method));
        const handshake = handshakes.filter((op) => op.errorCode === undefined).at(-1) ?? handshakes.at(-1);
        if (handshake?.kind === 'request' && handshake.requestId !== undefined) span.setAttribute('jsonrpc.request.id', String(handshake.requestId));
        if (errorType) span.setStatus({ code: a.SpanStatusCode.ERROR, message: errorType });
        span.end(endedAt);
        parent = a.trace.setSpan(a.ROOT_CONTEXT, span);
      }
      instruments?.clientOperation.record((endedAt - startedAt) / 1000, attributes);
      for (const op of held) {
        if (!(op.kind === 'request' && HANDSHAKES.has(op.method))) this.record(a, op, parent);
      }
    } catch {
      // A failing SDK must not disturb the toolset.
    }
  }

  /** The toolset closed: every session still open ends, without error, and so does every recovery under way. */
  closed(): void {
    for (const server of [...this.sessions.keys()]) this.endSession(server);
    for (const server of [...this.recoveries.keys()]) this.recovered(server, undefined);
    this.connecting.clear();
  }

  private endSession(server: string, errorType?: string): void {
    const session = this.sessions.get(server);
    if (!session) return;
    this.sessions.delete(server);
    const a = otel();
    try {
      const instruments = a ? activeInstruments(a) : undefined;
      if (!instruments) return;
      const attributes: Attributes = { ...this.factsOf(server) };
      if (session.protocolVersion) attributes['mcp.protocol.version'] = session.protocolVersion;
      if (errorType) attributes['error.type'] = errorType;
      instruments.clientSession.record((performance.now() - session.startedAt) / 1000, attributes);
    } catch {
      // A failing meter must not disturb the toolset: the diagnostic is still reported, close() still resolves.
    }
  }

  start(call: CallTarget): CallRecording | undefined {
    if (!this.enabled) return undefined;
    const a = otel();
    if (a === null) return undefined;
    const tracer = activeTracer(a);
    const instruments = activeInstruments(a);
    if (!tracer && !instruments) return undefined;
    try {
      // The version the server's session negotiated, as its `server-connected` said (see `observe`).
      const protocolVersion = this.sessions.get(call.server)?.protocolVersion;
      return startCall(a, tracer, instruments, call, this.factsOf(call.server), protocolVersion, this.baggage);
    } catch {
      // A failing SDK must not fail the call: it goes unrecorded.
      return undefined;
    }
  }
}

function startCall(
  a: Api,
  tracer: OtelApi.Tracer | undefined,
  instruments: Instruments | undefined,
  call: CallTarget,
  facts: ServerFacts | undefined,
  protocolVersion: string | undefined,
  withBaggage: boolean,
): CallRecording {
  const startedAt = performance.now();
  const common: Attributes = { 'mcp.method.name': call.method, ...facts };
  if (protocolVersion) common['mcp.protocol.version'] = protocolVersion;
  if (call.method === 'tools/call') {
    common['gen_ai.tool.name'] = call.target;
    common['gen_ai.operation.name'] = 'execute_tool';
  } else if (call.method === 'prompts/get') {
    common['gen_ai.prompt.name'] = call.target;
  }
  let trace = '';
  let span: OtelApi.Span | undefined;
  if (tracer) {
    const parent = a.context.active();
    const name = call.method === 'resources/read' ? call.method : `${call.method} ${call.target}`;
    const attributes = call.method === 'resources/read' ? { ...common, 'mcp.resource.uri': spanSafeUri(call.uri) } : common;
    span = tracer.startSpan(name, { kind: a.SpanKind.CLIENT, attributes, startTime: startedAt }, parent);
    const ids = span.spanContext();
    if (a.isSpanContextValid(ids)) {
      const flags = (ids.traceFlags & 0xff).toString(16).padStart(2, '0');
      trace = `"traceparent":"00-${ids.traceId}-${ids.spanId}-${flags}"`;
      // Within what the engine accepts (W3C bounds, printable ASCII): over them they are left out, never a failed call.
      const state = ids.traceState?.serialize();
      if (state && fits(state, MAX_TRACESTATE_LENGTH)) trace += `,"tracestate":${JSON.stringify(state)}`;
      if (withBaggage) {
        const baggage = a.propagation.getBaggage(parent);
        const text = baggage ? serializeBaggage(baggage) : '';
        if (text && fits(text, MAX_BAGGAGE_LENGTH)) trace += `,"baggage":${JSON.stringify(text)}`;
      }
    }
  }
  let ended = false;
  return {
    members: trace === '' ? '"measured":true' : `"measured":true,${trace}`,
    trace: trace === '' ? undefined : `{${trace}}`,
    end(code, report, isError) {
      if (ended) return;
      ended = true;
      const elapsedMs = report ? report.us / 1000 : performance.now() - startedAt;
      const outcome: Attributes = {};
      const errorType = errorTypeOf(code, report, isError);
      if (errorType !== undefined) outcome['error.type'] = errorType;
      if (report?.rpcCode !== undefined) outcome['rpc.response.status_code'] = String(report.rpcCode);
      if (span) {
        // Span only: an id per request would make a metric series each.
        if (report?.requestId !== undefined) span.setAttribute('jsonrpc.request.id', String(report.requestId));
        span.setAttributes(outcome);
        if (errorType !== undefined) span.setStatus({ code: a.SpanStatusCode.ERROR, message: errorType });
        span.end(startedAt + elapsedMs);
      }
      instruments?.clientOperation.record(elapsedMs / 1000, { ...common, ...boundedOutcome(outcome, report?.rpcCode) });
    },
  };
}

/** A span's outcome attributes as a metric may carry them: the span keeps the server's code as sent, a
 * metric's attributes must stay few, whatever a server answers. */
function boundedOutcome(outcome: Attributes, rpcCode: number | undefined): Attributes {
  const bounded: Attributes = { ...outcome };
  if (rpcCode !== undefined) {
    const shown = metricRpcCode(rpcCode);
    bounded['rpc.response.status_code'] = shown;
    if (bounded['error.type'] === String(rpcCode)) bounded['error.type'] = shown;
  }
  return bounded;
}

/** Ends `span` at `endedAt`, as failed when there is an `errorType`. */
function endSpan(a: Api, span: OtelApi.Span, errorType: string | undefined, endedAt: number): void {
  if (errorType !== undefined) {
    span.setAttribute('error.type', errorType);
    span.setStatus({ code: a.SpanStatusCode.ERROR, message: errorType });
  }
  span.end(endedAt);
}

/** The JSON-RPC error codes a metric shows as themselves; any other code a server sends is `_OTHER`. */
const STANDARD_RPC_CODES: ReadonlySet<number> = new Set([-32700, -32600, -32601, -32602, -32603, -32002, -32042]);

function metricRpcCode(code: number): string {
  return STANDARD_RPC_CODES.has(code) ? String(code) : '_OTHER';
}

/**
 * `error.type`: the JSON-RPC error code when the server answered with one, `tool_error` for an
 * `isError` result (the conventions' value), else mcpferry's stable error code (`mcp_timeout`, …).
 */
function errorTypeOf(code: string, report: EngineReport | undefined, isError: boolean | undefined): string | undefined {
  if (report?.rpcCode !== undefined) return String(report.rpcCode);
  if (code === 'mcp_tool_error' || (code === '' && isError)) return 'tool_error';
  return code === '' ? undefined : code;
}

/** The engine's bounds on `tracestate` and `baggage` (src/limits.rs `MAX_TRACESTATE_BYTES`, `MAX_BAGGAGE_BYTES`). */
const MAX_TRACESTATE_LENGTH = 512;
const MAX_BAGGAGE_LENGTH = 8192;

function fits(text: string, max: number): boolean {
  return text.length <= max && /^[\x20-\x7e]*$/.test(text);
}

/** W3C Baggage header text of `baggage`, entries percent-encoded. */
function serializeBaggage(baggage: OtelApi.Baggage): string {
  return baggage
    .getAllEntries()
    .map(([key, entry]) => {
      const metadata = entry.metadata?.toString();
      return `${encodeURIComponent(key)}=${encodeURIComponent(entry.value)}${metadata ? `;${metadata}` : ''}`;
    })
    .join(',');
}

/** The trace context the engine read from a served request's `_meta` (src/telemetry/incoming.rs). */
export interface IncomingTrace {
  traceparent?: string;
  tracestate?: string;
  baggage?: string;
}

/**
 * `createMcpServer`'s side of one `tools/call`: a SERVER span, child of the caller's span when the request
 * carried its trace context, active while `run` (the tool's `execute`) runs, so the host's own spans nest
 * under it; and `mcp.server.operation.duration`. With nothing registered, `run` is called as is.
 */
export async function serveCall<T>(toolName: string, incoming: IncomingTrace, run: () => Promise<T>, failed: (value: T) => string | undefined): Promise<T> {
  const a = otel();
  if (!a) return run();
  const tracer = activeTracer(a);
  const instruments = activeInstruments(a);
  if (!tracer && !instruments) return run();
  const startedAt = performance.now();
  const attributes: Attributes = { 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': toolName, 'gen_ai.operation.name': 'execute_tool' };
  let parent = a.context.active();
  let span: OtelApi.Span | undefined;
  try {
    if (incoming.traceparent) {
      // Read as W3C trace context (the engine checked its form), not with the configured propagator: SEP-414 names these keys.
      const remote = parseTraceparent(incoming.traceparent, incoming.tracestate, a);
      if (remote) parent = a.trace.setSpanContext(parent, remote);
    }
    span = tracer?.startSpan(`tools/call ${toolName}`, { kind: a.SpanKind.SERVER, attributes, startTime: startedAt }, parent);
  } catch {
    // A failing SDK must not fail the call: it runs unrecorded.
  }
  const active = span ? a.trace.setSpan(parent, span) : parent;
  let errorType: string | undefined;
  try {
    const value = await a.context.with(active, run);
    errorType = failed(value);
    return value;
  } catch (error) {
    // The thrown error's `code` when it is a short identifier (`mcp_timeout`, `ECONNREFUSED`): bounded, and no text.
    const code = (error as { code?: unknown } | null)?.code;
    errorType = typeof code === 'string' && /^[A-Za-z0-9_.-]{1,64}$/.test(code) ? code : '_OTHER';
    throw error;
  } finally {
    try {
      const outcome: Attributes = errorType === undefined ? {} : { 'error.type': errorType };
      if (span) {
        span.setAttributes(outcome);
        if (errorType !== undefined) span.setStatus({ code: a.SpanStatusCode.ERROR, message: errorType });
        span.end();
      }
      instruments?.serverOperation.record((performance.now() - startedAt) / 1000, { ...attributes, ...outcome });
    } catch {
      // A failing exporter or SDK must not change the call's outcome.
    }
  }
}

/** A request `createMcpServer`'s engine answered itself (src/server/dispatch.rs `Served`). */
export interface ServedReport extends IncomingTrace {
  method: string;
  /** A refused `tools/call`'s tool, when it is one of the server's. */
  tool?: string;
  /** Absent when the client's id is over 128 characters or not printable ASCII. */
  requestId?: string;
  startedMs: number;
  us: number;
  rpcCode?: number;
  /** A `tools/call` answered without `execute` with an error result (arguments the schema refused). */
  isError?: boolean;
}

/**
 * A request the engine answered without `execute` (`initialize`, `tools/list`, `ping`, a `tools/call` refused
 * or answered from the journal): a SERVER span after the fact, child of the caller's span when the request carried its
 * trace context, and `mcp.server.operation.duration`. With nothing registered, nothing.
 */
export function servedRequest(reportJson: string): void {
  const a = otel();
  if (!a) return;
  try {
    const report = JSON.parse(reportJson) as ServedReport;
    if (typeof report?.method !== 'string') return;
    const tracer = activeTracer(a);
    const instruments = activeInstruments(a);
    if (!tracer && !instruments) return;
    const attributes: Attributes = { 'mcp.method.name': report.method };
    if (report.tool !== undefined) {
      attributes['gen_ai.tool.name'] = report.tool;
      attributes['gen_ai.operation.name'] = 'execute_tool';
    }
    const outcome: Attributes = {};
    if (report.rpcCode !== undefined) {
      outcome['error.type'] = String(report.rpcCode);
      outcome['rpc.response.status_code'] = String(report.rpcCode);
    } else if (report.isError === true) {
      outcome['error.type'] = 'tool_error';
    }
    if (tracer) {
      let parent = a.ROOT_CONTEXT;
      const remote = report.traceparent ? parseTraceparent(report.traceparent, report.tracestate, a) : undefined;
      if (remote) parent = a.trace.setSpanContext(parent, remote);
      const name = report.tool === undefined ? report.method : `${report.method} ${report.tool}`;
      const spanAttributes: Attributes = { ...attributes, ...outcome };
      if (typeof report.requestId === 'string') spanAttributes['jsonrpc.request.id'] = report.requestId;
      const span = tracer.startSpan(name, { kind: a.SpanKind.SERVER, attributes: spanAttributes, startTime: report.startedMs }, parent);
      endSpan(a, span, outcome['error.type'] as string | undefined, report.startedMs + report.us / 1000);
    }
    instruments?.serverOperation.record(report.us / 1_000_000, { ...attributes, ...boundedOutcome(outcome, report.rpcCode) });
  } catch {
    // A failing SDK must not disturb the server.
  }
}

function parseTraceparent(traceparent: string, tracestate: string | undefined, a: Api): OtelApi.SpanContext | undefined {
  const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(traceparent);
  if (!match) return undefined;
  const context: OtelApi.SpanContext = { traceId: match[1], spanId: match[2], traceFlags: parseInt(match[3], 16), isRemote: true };
  if (tracestate) context.traceState = a.createTraceState(tracestate);
  return a.isSpanContextValid(context) ? context : undefined;
}

/** Runs `work` inside a span named `name` when a tracer is registered (the CLI's one command). */
export async function withSpan<T>(name: string, work: (traceId: string | undefined) => Promise<T>): Promise<T> {
  const a = otel();
  const tracer = a ? activeTracer(a) : undefined;
  if (!a || !tracer) return work(undefined);
  return tracer.startActiveSpan(name, async (span) => {
    try {
      return await work(span.spanContext().traceId);
    } finally {
      span.end();
    }
  });
}
