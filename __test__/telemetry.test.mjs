// OpenTelemetry with the real JS SDK: a parent span's trace context reaches each server's `params._meta`
// (stdio, Streamable HTTP in both eras, legacy SSE), the client span has the conventions' name, kind,
// attributes and parent, failures and aborts end their spans with `error.type`, `createMcpServer`'s span
// is a child of the client's across the wire, and nothing secret reaches the exporter.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { context, metrics, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { createMcpServer, createMemoryMcpJournal, mcpTools } from '../entry/index.mjs';
import { openToolset } from '../dist/toolset.js';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fixture, here, scratchFile, startHttpFixture, until } from './helpers.mjs';
import { startLegacySseFixture, startStreamableFixture } from './fixtures/http-server.mjs';
import { startTs2Http } from './eras-servers.mjs';
import { startOAuthFixture } from './fixtures/oauth-server.mjs';

const exporter = new InMemorySpanExporter();
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
class TestReader extends MetricReader {
  async onForceFlush() {}
  async onShutdown() {}
}
const reader = new TestReader();
const meterProvider = new MeterProvider({ readers: [reader] });
const contextManager = new AsyncLocalStorageContextManager().enable();

function register() {
  context.setGlobalContextManager(contextManager);
  trace.setGlobalTracerProvider(tracerProvider);
  metrics.setGlobalMeterProvider(meterProvider);
}
function unregister() {
  trace.disable();
  metrics.disable();
}

const parentTracer = () => trace.getTracer('telemetry-test');
/** Runs `work` under a fresh parent span; resolves to `{ parent, value }` (the parent's span context). */
async function underParent(work) {
  return parentTracer().startActiveSpan('agent step', async (span) => {
    try {
      return { parent: span.spanContext(), value: await work() };
    } finally {
      span.end();
    }
  });
}
const clientSpans = () => exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.CLIENT && s.name.startsWith('tools/call'));
const parentIdOf = (span) => span.parentSpanContext?.spanId ?? span.parentSpanId;
const traceparentOf = (span) => `00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`;

test('with no tracer or meter registered, nothing is sent or made', async () => {
  unregister();
  const server = fixture('otel-off');
  // The engine's own requests (handshake, listing) are told to JavaScript only for a toolset made with a provider.
  const events = [];
  const toolset = await openToolset([server.entry], { warnings: false }, (native) => native.connect(), false, { observe: (kind) => events.push(kind) });
  try {
    await toolset.tools['otel-off__echo'].execute({ text: 'hi' });
    const call = server.received().find((m) => m.method === 'tools/call');
    assert.deepEqual(Object.keys(call.params._meta), ['progressToken']);
    assert.equal(exporter.getFinishedSpans().length, 0);
    assert.deepEqual(events.filter((kind) => kind === 'operation'), []);
  } finally {
    await toolset.close();
  }
  // The same with a provider registered: the engine does tell them.
  register();
  const seen = [];
  const traced = await openToolset([fixture('otel-on').entry], { warnings: false }, (native) => native.connect(), false, { observe: (kind) => seen.push(kind) });
  try {
    await until(() => seen.includes('operation'));
  } finally {
    await traced.close();
    unregister();
    exporter.reset();
  }
});

test('stdio: the client span is the parent the server receives, with the conventions\' attributes', async () => {
  register();
  exporter.reset();
  const server = fixture('otel-stdio');
  const toolset = await mcpTools([server.entry], { warnings: false });
  try {
    const { parent } = await underParent(() => toolset.tools['otel-stdio__echo'].execute({ text: 'hi' }));
    const [span] = clientSpans();
    assert.equal(span.name, 'tools/call echo');
    assert.equal(span.spanContext().traceId, parent.traceId);
    assert.equal(parentIdOf(span), parent.spanId);
    const { 'jsonrpc.request.id': requestId, ...conventions } = span.attributes;
    assert.match(requestId, /^\d+$/);
    assert.deepEqual(conventions, {
      'mcp.method.name': 'tools/call',
      'gen_ai.tool.name': 'echo',
      'gen_ai.operation.name': 'execute_tool',
      'network.transport': 'pipe',
      'mcp.protocol.version': '2025-11-25',
    });
    assert.equal(span.status.code, SpanStatusCode.UNSET);
    const call = server.received().find((m) => m.method === 'tools/call');
    assert.equal(span.attributes['jsonrpc.request.id'], String(call.id), 'the id the request was sent with');
    assert.equal(call.params._meta.traceparent, traceparentOf(span));
    assert.equal(call.params._meta.baggage, undefined, 'baggage only when configured');

    // A JSON-RPC error: error.type and the status code are the server's code.
    exporter.reset();
    await assert.rejects(underParent(() => toolset.tools['otel-stdio__protocol_error'].execute({})), { code: 'mcp_protocol_error' });
    const [failed] = clientSpans();
    assert.equal(failed.attributes['error.type'], '-32602');
    assert.equal(failed.attributes['rpc.response.status_code'], '-32602');
    assert.equal(failed.status.code, SpanStatusCode.ERROR);
    assert.ok(!JSON.stringify([failed.attributes, failed.status, failed.events]).includes('bad params'), 'the server\'s error text stays out of the span');

    // An isError result: tool_error.
    exporter.reset();
    await assert.rejects(toolset.tools['otel-stdio__fail'].execute({}), { code: 'mcp_tool_error' });
    assert.equal(clientSpans()[0].attributes['error.type'], 'tool_error');

    // An aborted call ends its span, as aborted.
    exporter.reset();
    const controller = new AbortController();
    const slow = toolset.tools['otel-stdio__slow'].execute({ ms: 60_000 }, { signal: controller.signal });
    await until(() => server.received().some((m) => m.method === 'tools/call' && m.params.name === 'slow'));
    controller.abort();
    await assert.rejects(slow, { code: 'mcp_aborted' });
    const [aborted] = clientSpans();
    assert.equal(aborted.attributes['error.type'], 'mcp_aborted');
    assert.ok(aborted.ended);
  } finally {
    await toolset.close();
  }
});

test('connecting: an initialize span per server under the context the toolset was made in, a failed one with error.type', async () => {
  register();
  exporter.reset();
  const good = fixture('otel-connect');
  let toolset;
  const { parent } = await underParent(async () => {
    toolset = await mcpTools([good.entry, { name: 'otel-missing', type: 'stdio', command: 'surely-not-a-command-otel' }], { warnings: false });
  });
  try {
    const connects = exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.CLIENT && s.name === 'initialize');
    assert.equal(connects.length, 2);
    for (const span of connects) {
      assert.equal(span.spanContext().traceId, parent.traceId);
      assert.equal(parentIdOf(span), parent.spanId);
      assert.equal(span.attributes['network.transport'], 'pipe');
    }
    const ok = connects.find((s) => s.attributes['error.type'] === undefined);
    assert.equal(ok.attributes['mcp.protocol.version'], '2025-11-25');
    const failed = connects.find((s) => s.attributes['error.type'] !== undefined);
    assert.equal(failed.attributes['error.type'], 'mcp_transport_error');
    assert.equal(failed.status.code, SpanStatusCode.ERROR);
  } finally {
    await toolset.close();
  }
});

test('the operation duration histogram: the conventions\' attributes, bounded, in seconds', async () => {
  register();
  const server = fixture('otel-metrics');
  const toolset = await mcpTools([server.entry], { warnings: false });
  try {
    await toolset.tools['otel-metrics__echo'].execute({ text: 'a' });
    await toolset.tools['otel-metrics__echo'].execute({ text: 'b' });
    const { resourceMetrics } = await reader.collect();
    const metric = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).find((m) => m.descriptor.name === 'mcp.client.operation.duration');
    assert.equal(metric.descriptor.unit, 's');
    const point = metric.dataPoints.find((p) => p.attributes['gen_ai.tool.name'] === 'echo' && p.attributes['network.transport'] === 'pipe');
    assert.ok(point.value.count >= 2);
    assert.ok(point.value.sum > 0 && point.value.sum < 60);
    assert.deepEqual(Object.keys(point.attributes).sort(), ['gen_ai.operation.name', 'gen_ai.tool.name', 'mcp.method.name', 'mcp.protocol.version', 'network.transport']);
  } finally {
    await toolset.close();
  }
});

test('a server answering with ever new error codes adds no metric series: codes outside JSON-RPC and MCP\'s own are _OTHER (the span keeps them)', async () => {
  register();
  exporter.reset();
  const server = fixture('otel-codes');
  const toolset = await mcpTools([server.entry], { warnings: false });
  try {
    for (let i = 1; i <= 20; i++) {
      await assert.rejects(toolset.tools['otel-codes__protocol_error'].execute({ code: 1_000_000 + i }), { code: 'mcp_protocol_error' });
    }
    await assert.rejects(toolset.tools['otel-codes__protocol_error'].execute({}), { code: 'mcp_protocol_error' });
    const { resourceMetrics } = await reader.collect();
    const metric = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).find((m) => m.descriptor.name === 'mcp.client.operation.duration');
    const points = metric.dataPoints.filter((p) => p.attributes['gen_ai.tool.name'] === 'protocol_error' && p.attributes['network.transport'] === 'pipe');
    assert.deepEqual(points.map((p) => [p.attributes['rpc.response.status_code'], p.attributes['error.type']]).sort(), [['-32602', '-32602'], ['_OTHER', '_OTHER']]);
    assert.equal(points.find((p) => p.attributes['error.type'] === '_OTHER').value.count, 20);
    // The span is not a metric: it shows the code as the server sent it.
    assert.ok(clientSpans().some((span) => span.attributes['rpc.response.status_code'] === '1000007'));
  } finally {
    await toolset.close();
  }
});

test('the session duration histogram: a lost session with its error.type, a closed one without', async () => {
  register();
  await reader.collect(); // what earlier tests recorded is collected (cumulative): compare counts
  const sessionPoints = async () =>
    (await reader.collect()).resourceMetrics.scopeMetrics
      .flatMap((s) => s.metrics)
      .filter((m) => m.descriptor.name === 'mcp.client.session.duration')
      .flatMap((m) => m.dataPoints);
  const lost = fixture('otel-lost');
  const kept = fixture('otel-kept');
  const diagnostics = [];
  const toolset = await mcpTools([lost.entry, kept.entry], { onDiagnostic: (d) => diagnostics.push(d), reconnect: false });
  try {
    await assert.rejects(toolset.tools['otel-lost__crash'].execute({}));
    await until(() => diagnostics.some((d) => d.code === 'server-lost' && d.server === 'otel-lost'));
    const whileOpen = await sessionPoints();
    const lostPoint = whileOpen.find((p) => p.attributes['error.type'] !== undefined && p.attributes['network.transport'] === 'pipe');
    assert.ok(lostPoint, 'the lost session is recorded when it is lost');
    assert.equal(lostPoint.attributes['mcp.protocol.version'], '2025-11-25');
  } finally {
    await toolset.close();
  }
  const closed = (await sessionPoints()).find((p) => p.attributes['error.type'] === undefined);
  assert.ok(closed, 'the session open at close is recorded then');
  assert.deepEqual(Object.keys(closed.attributes).sort(), ['mcp.protocol.version', 'network.transport']);
  assert.ok(closed.value.sum > 0);
});

test('Streamable HTTP, 2025 era, and legacy SSE: traceparent in _meta; propagateTraceContext: false keeps it home', async () => {
  register();
  exporter.reset();
  const streamable = await startStreamableFixture();
  const sse = await startLegacySseFixture();
  const quiet = await startStreamableFixture();
  const toolset = await mcpTools(
    [
      { name: 'sh', type: 'streamable-http', url: streamable.url },
      { name: 'sse', type: 'sse', url: sse.url },
      { name: 'quiet', type: 'streamable-http', url: quiet.url, propagateTraceContext: false },
    ],
    { warnings: false },
  );
  try {
    const { parent } = await underParent(async () => {
      await toolset.tools.sh__echo.execute({ text: 'x' });
      await toolset.tools.sse__echo.execute({ text: 'x' });
      await toolset.tools.quiet__echo.execute({ text: 'x' });
    });
    const spans = clientSpans();
    assert.equal(spans.length, 3);
    for (const span of spans) {
      assert.equal(span.name, 'tools/call echo');
      assert.equal(parentIdOf(span), parent.spanId);
      assert.equal(span.attributes['network.transport'], 'tcp');
      assert.equal(span.attributes['server.address'], '127.0.0.1');
      assert.equal(typeof span.attributes['server.port'], 'number');
    }
    const byPort = (url) => spans.find((s) => s.attributes['server.port'] === Number(new URL(url).port));
    const sent = (log) => log.find((r) => r.body?.method === 'tools/call').body.params._meta;
    assert.equal(sent(streamable.log).traceparent, traceparentOf(byPort(streamable.url)));
    assert.equal(sent(sse.log).traceparent, traceparentOf(byPort(sse.url)));
    assert.equal(byPort(sse.url).attributes['mcp.protocol.version'], '2024-11-05');
    assert.equal(sent(quiet.log).traceparent, undefined, 'the server opted out learns nothing');
    assert.ok(byPort(quiet.url), 'its call is still recorded here');
  } finally {
    await toolset.close();
    await Promise.all([streamable.close(), sse.close(), quiet.close()]);
  }
});

test('Streamable HTTP, 2026-07-28 era (TypeScript SDK 2.x): traceparent and baggage (configured) in _meta', async () => {
  register();
  exporter.reset();
  const ts2 = await startTs2Http();
  const toolset = await mcpTools([{ name: 'ts2', type: 'streamable-http', url: ts2.url }], { warnings: false, telemetry: { baggage: true } });
  try {
    const withBaggage = propagation.setBaggage(context.active(), propagation.createBaggage({ tenant: { value: 'blue team' } }));
    await context.with(withBaggage, () => underParent(() => toolset.tools.ts2__echo.execute({ text: 'x' })));
    const [span] = clientSpans();
    assert.equal(span.attributes['mcp.protocol.version'], '2026-07-28');
    const call = (await ts2.seen()).find((r) => r.body?.method === 'tools/call');
    assert.equal(call.body.params._meta.traceparent, traceparentOf(span));
    assert.equal(call.body.params._meta.baggage, 'tenant=blue%20team');

    // Baggage past the W3C bound is left out; the call goes on.
    const huge = propagation.setBaggage(context.active(), propagation.createBaggage({ big: { value: 'x'.repeat(9000) } }));
    await context.with(huge, () => underParent(() => toolset.tools.ts2__echo.execute({ text: 'y' })));
    const calls = (await ts2.seen()).filter((r) => r.body?.method === 'tools/call');
    assert.equal(calls.length, 2);
    assert.equal(calls[1].body.params._meta.baggage, undefined);
    assert.match(calls[1].body.params._meta.traceparent, /^00-/);
  } finally {
    await toolset.close();
    ts2.stop();
  }
});

test('resources/read and prompts/get: a span each, its traceparent in the request\'s _meta, the URI without its query', async () => {
  register();
  exporter.reset();
  const server = await startHttpFixture(join(here, 'fixtures', 'resources-server.mjs'));
  const toolset = await mcpTools(
    [
      { name: 'res', type: 'streamable-http', url: server.url },
      { name: 'quiet', type: 'streamable-http', url: server.url, propagateTraceContext: false },
    ],
    { warnings: false },
  );
  try {
    const { parent } = await underParent(async () => {
      await toolset.readResource('res', 'note://hello');
      await toolset.getPrompt('res', 'greet', { name: 'Ada' });
      await assert.rejects(toolset.readResource('res', 'note://nothing?token=QUERY-SECRET-5'));
    });
    // The prompt listing the engine asks on its own is a root span of its own (see the listings test).
    const spans = exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.CLIENT && /^(resources\/read|prompts\/get)/.test(s.name));
    assert.deepEqual(spans.map((s) => s.name), ['resources/read', 'prompts/get greet', 'resources/read']);
    for (const span of spans) assert.equal(parentIdOf(span), parent.spanId);
    const [read, prompt, missing] = spans;
    assert.equal(read.attributes['mcp.resource.uri'], 'note://hello');
    assert.equal(prompt.attributes['gen_ai.prompt.name'], 'greet');
    assert.equal(missing.attributes['mcp.resource.uri'], 'note://nothing');
    assert.equal(missing.attributes['error.type'], 'mcp_resource_not_found');
    const seen = await server.seen();
    const sent = (method, which) => seen.filter((m) => m?.method === method)[which].params._meta.traceparent;
    assert.equal(sent('resources/read', 0), traceparentOf(read));
    assert.equal(sent('prompts/get', 0), traceparentOf(prompt));
    assert.ok(!JSON.stringify(spans.map((s) => s.attributes)).includes('QUERY-SECRET-5'));

    // The entry that opted out: its read and prompt get carry no trace context.
    await underParent(async () => {
      await toolset.readResource('quiet', 'note://hello');
      await toolset.getPrompt('quiet', 'greet', { name: 'Bo' });
    });
    const after = await server.seen();
    const last = (method) => after.filter((m) => m?.method === method).at(-1).params;
    assert.equal(last('resources/read')._meta?.traceparent, undefined);
    assert.equal(last('prompts/get')._meta?.traceparent, undefined);
    assert.equal(last('prompts/get').arguments.name, 'Bo');
  } finally {
    await toolset.close();
    server.stop();
  }
});

test('createMcpServer: its span is a child of the client\'s across the wire, and execute runs inside it', async () => {
  register();
  exporter.reset();
  const server = createMcpServer({
    tools: {
      lookup: {
        inputSchema: { type: 'object' },
        async execute() {
          // The host's own instrumentation, nested under the server span.
          parentTracer().startSpan('db query').end();
          return { ok: true };
        },
      },
      broken: {
        inputSchema: { type: 'object' },
        async execute() {
          throw Object.assign(new Error('connect ECONNREFUSED 10.0.0.7:5432 password=hunter2'), { code: 'ECONNREFUSED' });
        },
      },
    },
  });
  const { http } = await server.listen({ http: {} });
  const toolset = await mcpTools([{ name: 'own', type: 'streamable-http', url: http.url }], { warnings: false });
  try {
    const { parent } = await underParent(() => toolset.tools.own__lookup.execute({}));
    const spans = exporter.getFinishedSpans();
    const client = spans.find((s) => s.kind === SpanKind.CLIENT && s.name === 'tools/call lookup');
    const served = spans.find((s) => s.kind === SpanKind.SERVER && s.name.startsWith('tools/call'));
    const inner = spans.find((s) => s.name === 'db query');
    assert.equal(client.spanContext().traceId, parent.traceId);
    assert.equal(served.name, 'tools/call lookup');
    assert.equal(served.spanContext().traceId, parent.traceId);
    assert.equal(parentIdOf(served), client.spanContext().spanId);
    assert.equal(parentIdOf(inner), served.spanContext().spanId);
    assert.equal(served.attributes['gen_ai.tool.name'], 'lookup');

    // A thrown error: its code is the server span's error.type, its text nowhere.
    exporter.reset();
    await assert.rejects(toolset.tools.own__broken.execute({}));
    const failed = exporter.getFinishedSpans().find((s) => s.kind === SpanKind.SERVER && s.name.startsWith('tools/call'));
    assert.equal(failed.attributes['error.type'], 'ECONNREFUSED');
    assert.equal(failed.status.code, SpanStatusCode.ERROR);
    assert.ok(!JSON.stringify(exporter.getFinishedSpans().map((s) => [s.attributes, s.status, s.events])).includes('hunter2'));
    const { resourceMetrics } = await reader.collect();
    const names = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).map((m) => m.descriptor.name);
    assert.ok(names.includes('mcp.server.operation.duration'));
  } finally {
    await toolset.close();
    await server.close();
  }
});

test('the options are checked like every other: telemetry flags and propagateTraceContext must be booleans', async () => {
  await assert.rejects(mcpTools([], { telemetry: { baggage: 'yes' } }), { code: 'mcp_config_invalid', message: /options\.telemetry\.baggage must be a boolean/ });
  await assert.rejects(mcpTools([], { telemetry: { sampler: true } }), { code: 'mcp_config_invalid', message: /options\.telemetry has an unknown field "sampler"/ });
  const entry = { ...fixture('otel-config').entry, propagateTraceContext: 'no' };
  await assert.rejects(mcpTools([entry]), { code: 'mcp_config_invalid', message: /propagateTraceContext must be a boolean/ });
});

test('the exporter never sees a configured header value, token or query string', async () => {
  register();
  exporter.reset();
  const streamable = await startStreamableFixture();
  const toolset = await mcpTools(
    [{ name: 'sec', type: 'streamable-http', url: `${streamable.url}?api_key=QUERY-SECRET-1`, headers: { 'X-Api-Key': 'HEADER-SECRET-2' } }],
    { warnings: false, session: { user: 'u' }, auth: async () => ({ token: 'TOKEN-SECRET-3' }) },
  );
  try {
    await underParent(() => toolset.tools.sec__echo.execute({ text: 'ARGUMENT-SECRET-4' }));
    await assert.rejects(toolset.tools.sec__fail.execute({}));
    const { resourceMetrics } = await reader.collect();
    const exported = JSON.stringify(exporter.getFinishedSpans().map((s) => ({ name: s.name, attributes: s.attributes, status: s.status, events: s.events })));
    const measured = JSON.stringify(resourceMetrics.scopeMetrics.flatMap((s) => s.metrics.map((m) => m.dataPoints.map((p) => p.attributes))));
    assert.ok(exported.includes('tools/call echo'));
    for (const secret of ['QUERY-SECRET-1', 'HEADER-SECRET-2', 'TOKEN-SECRET-3', 'ARGUMENT-SECRET-4', 'api_key']) {
      assert.ok(!exported.includes(secret), `${secret} in a span`);
      assert.ok(!measured.includes(secret), `${secret} in a metric`);
    }
    const sessionId = streamable.log.find((r) => r.headers['mcp-session-id'])?.headers['mcp-session-id'];
    if (sessionId) assert.ok(!exported.includes(`"${sessionId}"`) && !measured.includes(`"${sessionId}"`), 'no session id');
  } finally {
    await toolset.close();
    await streamable.close();
  }
});

test('the CLI prints the trace id of its call with --json when a tracer is registered', async () => {
  register();
  exporter.reset();
  const { main } = await import('../dist/cli.js');
  const streamable = await startStreamableFixture();
  const dir = scratchFile('otel-cli');
  mkdirSync(dir);
  writeFileSync(join(dir, 'mcp.json'), JSON.stringify({ mcpServers: { web: { url: streamable.url } } }));
  let stdout = '';
  const io = { stdout: (text) => (stdout += text), stderr: () => {}, cwd: dir, env: { ...process.env, MCPFERRY_TRUST_FILE: scratchFile('trust.json') } };
  try {
    assert.equal(await main(['--json', 'call', 'web__echo', '{"text":"x"}'], io), 0);
    const { traceId } = JSON.parse(stdout);
    assert.match(traceId, /^[0-9a-f]{32}$/);
    const client = clientSpans()[0];
    assert.equal(client.spanContext().traceId, traceId);
    assert.equal(streamable.log.find((r) => r.body?.method === 'tools/call').body.params._meta.traceparent.split('-')[1], traceId);
  } finally {
    await streamable.close();
  }
});

const spansNamed = (name, kind = SpanKind.CLIENT) => exporter.getFinishedSpans().filter((s) => s.kind === kind && s.name === name);

test('listings: the first one a child of its connect span, a re-listing after list_changed a root span with its request id', async () => {
  register();
  exporter.reset();
  const server = fixture('otel-listing');
  const diagnostics = [];
  const toolset = await mcpTools([server.entry], { warnings: false, onDiagnostic: (d) => diagnostics.push(d) });
  try {
    const [connect] = spansNamed('initialize');
    const [first] = spansNamed('tools/list');
    assert.equal(parentIdOf(first), connect.spanContext().spanId, 'the first listing is part of the connect');
    assert.equal(first.spanContext().traceId, connect.spanContext().traceId);
    const initialize = server.received().find((m) => m.method === 'initialize');
    assert.equal(connect.attributes['jsonrpc.request.id'], String(initialize.id), 'the handshake request is the connect span');
    assert.equal(spansNamed('initialize').length, 1, 'no second span for the handshake request');

    exporter.reset();
    await underParent(() => toolset.tools['otel-listing__mutate'].execute({}));
    await until(() => diagnostics.some((d) => d.code === 'tools-changed'));
    await until(() => spansNamed('tools/list').length === 1);
    const [relisted] = spansNamed('tools/list');
    assert.equal(parentIdOf(relisted), undefined, 'no caller asked for it: a root span');
    assert.equal(relisted.attributes['mcp.method.name'], 'tools/list');
    assert.equal(relisted.attributes['network.transport'], 'pipe');
    assert.equal(relisted.attributes['mcp.protocol.version'], '2025-11-25');
    const listings = server.received().filter((m) => m.method === 'tools/list');
    assert.equal(relisted.attributes['jsonrpc.request.id'], String(listings.at(-1).id));
    const { resourceMetrics } = await reader.collect();
    const metric = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).find((m) => m.descriptor.name === 'mcp.client.operation.duration');
    const point = metric.dataPoints.find((p) => p.attributes['mcp.method.name'] === 'tools/list');
    assert.ok(point.value.count >= 2);
    assert.equal(point.attributes['jsonrpc.request.id'], undefined, 'no request id on a metric');
  } finally {
    await toolset.close();
  }
});

test('a recovery: one span from the loss to the server\'s return, its attempts as events, the reconnect\'s requests its children', async () => {
  register();
  exporter.reset();
  const server = fixture('otel-recover');
  const diagnostics = [];
  const toolset = await mcpTools([server.entry], { warnings: false, onDiagnostic: (d) => diagnostics.push(d), reconnect: { initialDelayMs: 50, maxDelayMs: 200 } });
  try {
    await assert.rejects(toolset.tools['otel-recover__crash'].execute({}));
    await until(() => diagnostics.some((d) => d.code === 'server-reconnected'), { timeoutMs: 15_000 });
    await until(() => spansNamed('mcpferry recover', SpanKind.INTERNAL).length === 1);
    const [recovery] = spansNamed('mcpferry recover', SpanKind.INTERNAL);
    assert.equal(parentIdOf(recovery), undefined, 'a root span');
    assert.equal(recovery.attributes['mcpferry.server.name'], 'otel-recover');
    assert.equal(recovery.attributes['mcpferry.recovery.attempts'], 1);
    assert.equal(recovery.attributes['error.type'], undefined);
    assert.equal(recovery.status.code, SpanStatusCode.UNSET);
    assert.deepEqual(recovery.events.map((e) => [e.name, e.attributes['mcpferry.recovery.attempt']]), [['reconnect attempt', 1]]);
    const children = exporter.getFinishedSpans().filter((s) => parentIdOf(s) === recovery.spanContext().spanId);
    assert.deepEqual(children.map((s) => s.name).sort(), ['initialize', 'tools/list']);
    for (const child of children) {
      assert.equal(child.kind, SpanKind.CLIENT);
      assert.match(child.attributes['jsonrpc.request.id'], /^\d+$/);
    }
    assert.equal(spansNamed('initialize').filter((s) => parentIdOf(s) !== recovery.spanContext().spanId).length, 1, 'only the first connect has a connect span');
    // The server is back and its call is recorded as before.
    await toolset.tools['otel-recover__echo'].execute({ text: 'back' });
    assert.equal(clientSpans().at(-1).attributes['gen_ai.tool.name'], 'echo');
  } finally {
    await toolset.close();
  }
});

test('an OAuth login: its token request is a CLIENT span of the connect, host and port only, no token, code, verifier or secret anywhere', async (t) => {
  register();
  exporter.reset();
  const as = await startOAuthFixture();
  t.after(as.close);
  const person = (url) => {
    fetch(url).catch(() => {});
  };
  const toolset = await mcpTools([{ name: 'notes', type: 'streamable-http', url: as.mcpUrl, oauth: true }], {
    warnings: false,
    authorizationTimeoutMs: 10_000,
    onAuthorizationUrl: person,
  });
  t.after(toolset.close);
  await toolset.tools.notes__read_notes.execute({});
  const connect = exporter.getFinishedSpans().find((s) => s.kind === SpanKind.CLIENT && ['initialize', 'server/discover'].includes(s.name));
  const tokens = spansNamed('POST');
  assert.equal(tokens.length, 1, 'one token request: the code exchange');
  const [exchange] = tokens;
  assert.equal(parentIdOf(exchange), connect.spanContext().spanId);
  const issuer = new URL(as.issuer);
  assert.deepEqual(exchange.attributes, {
    'http.request.method': 'POST',
    'server.address': issuer.hostname,
    'server.port': Number(issuer.port),
    'mcpferry.oauth.grant_type': 'authorization_code',
    'http.response.status_code': 200,
  });
  const { resourceMetrics } = await reader.collect();
  const exported = JSON.stringify([
    exporter.getFinishedSpans().map((s) => ({ name: s.name, attributes: s.attributes, status: s.status, events: s.events })),
    resourceMetrics.scopeMetrics.flatMap((s) => s.metrics.map((m) => m.dataPoints.map((p) => p.attributes))),
  ]);
  const secrets = as.secrets();
  assert.ok(secrets.length >= 3, 'the fixture names its secrets');
  for (const secret of secrets) assert.ok(!exported.includes(secret), 'a secret reached the exporter');
  assert.ok(!exported.includes('/token'), 'no endpoint path');
});

test('createMcpServer: what the engine answers itself (initialize, tools/list, a refused call) is a SERVER span under the caller\'s context', async () => {
  register();
  exporter.reset();
  const server = createMcpServer({ tools: { lookup: { inputSchema: { type: 'object' }, execute: async () => ({ ok: true }) } } });
  const { http } = await server.listen({ http: {} });
  const toolset = await mcpTools([{ name: 'own', type: 'streamable-http', url: http.url }], { warnings: false });
  try {
    await until(() => spansNamed('tools/list', SpanKind.SERVER).length >= 1);
    const served = exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.SERVER);
    const handshake = served.find((s) => s.name === 'initialize' || s.name === 'server/discover');
    assert.ok(handshake, `a handshake span among ${served.map((s) => s.name)}`);
    assert.match(handshake.attributes['jsonrpc.request.id'], /^\d+$/);
    const [listed] = spansNamed('tools/list', SpanKind.SERVER);
    assert.equal(listed.attributes['mcp.method.name'], 'tools/list');

    // A request with the caller's trace context: the served span is its child.
    exporter.reset();
    const { parent } = await underParent(async () => {
      const response = await fetch(http.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 'req-9', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' }, _meta: { traceparent: traceparentOf(trace.getActiveSpan()) } } }),
      });
      await response.text();
    });
    await until(() => spansNamed('initialize', SpanKind.SERVER).length === 1);
    const [initialize] = spansNamed('initialize', SpanKind.SERVER);
    assert.equal(initialize.spanContext().traceId, parent.traceId);
    assert.equal(parentIdOf(initialize), parent.spanId);
    assert.equal(initialize.attributes['jsonrpc.request.id'], 'req-9');

    // A call to an unknown tool, refused before any execute: error.type, no made-up tool name as an attribute.
    exporter.reset();
    await assert.rejects(refusedCall(http.url));
    await until(() => spansNamed('tools/call', SpanKind.SERVER).length === 1);
    const [refused] = spansNamed('tools/call', SpanKind.SERVER);
    assert.equal(refused.attributes['error.type'], '-32602');
    assert.equal(refused.attributes['gen_ai.tool.name'], undefined);
    const { resourceMetrics } = await reader.collect();
    const metric = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).find((m) => m.descriptor.name === 'mcp.server.operation.duration');
    assert.ok(metric.dataPoints.some((p) => p.attributes['mcp.method.name'] === 'tools/list'));
  } finally {
    await toolset.close();
    await server.close();
  }
});

/** A `tools/call` of a tool the server does not have, over a session of its own. */
async function refusedCall(url) {
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  const init = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } } }) });
  await init.text();
  const session = init.headers.get('mcp-session-id');
  const called = await fetch(url, { method: 'POST', headers: { ...headers, 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' }, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'nope', arguments: {} } }) });
  const body = await called.text();
  if (body.includes('"error"')) throw new Error(body);
  return body;
}

/** A 2025-11-25 session of its own with `url`: `send(body)` posts a request on it and resolves to the reply's text. */
async function rawSession(url) {
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  const init = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } } }) });
  await init.text();
  const session = { ...headers, 'mcp-session-id': init.headers.get('mcp-session-id'), 'mcp-protocol-version': '2025-11-25' };
  return { send: async (body) => (await fetch(url, { method: 'POST', headers: session, body: JSON.stringify({ jsonrpc: '2.0', ...body }) })).text() };
}

const serverOperationPoints = async () =>
  (await reader.collect()).resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).filter((m) => m.descriptor.name === 'mcp.server.operation.duration').flatMap((m) => m.dataPoints);

test('createMcpServer: a client\'s made-up methods add no metric series and name no span: they are _OTHER', async () => {
  register();
  exporter.reset();
  const server = createMcpServer({ tools: { lookup: { execute: async () => ({ ok: true }) } } });
  const { http } = await server.listen({ http: {} });
  try {
    const session = await rawSession(http.url);
    const before = (await serverOperationPoints()).find((p) => p.attributes['mcp.method.name'] === '_OTHER')?.value.count ?? 0;
    for (let i = 0; i < 20; i++) assert.match(await session.send({ id: i + 1, method: `made/up-${i}` }), /-32601/);
    await until(() => spansNamed('_OTHER', SpanKind.SERVER).length === 20);
    const spans = exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.SERVER);
    assert.ok(!spans.some((s) => s.name.includes('made/up') || JSON.stringify(s.attributes).includes('made/up')), 'a made-up method named a span');
    const points = await serverOperationPoints();
    assert.ok(!points.some((p) => String(p.attributes['mcp.method.name']).includes('made/up')), 'a made-up method became a series');
    const other = points.filter((p) => p.attributes['mcp.method.name'] === '_OTHER');
    assert.equal(other.length, 1);
    assert.equal(other[0].value.count - before, 20);
  } finally {
    await server.close();
  }
});

test('createMcpServer made with no provider registered reports nothing of what its engine answers itself', async () => {
  unregister();
  exporter.reset();
  const server = createMcpServer({ tools: { lookup: { execute: async () => ({ ok: true }) } } });
  const { http } = await server.listen({ http: {} });
  // Registered after the server was made: the engine was told telemetry is off, so its own answers cross no more.
  register();
  try {
    const session = await rawSession(http.url);
    assert.match(await session.send({ id: 1, method: 'tools/list' }), /lookup/);
    assert.match(await session.send({ id: 2, method: 'made/up' }), /-32601/);
    // A call that reaches execute is recorded (JavaScript makes its span); the reports above would have
    // crossed before it, on the same queue.
    assert.match(await session.send({ id: 3, method: 'tools/call', params: { name: 'lookup', arguments: {} } }), /"ok":true/);
    await until(() => spansNamed('tools/call lookup', SpanKind.SERVER).length === 1);
    assert.deepEqual(exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.SERVER).map((s) => s.name), ['tools/call lookup']);
  } finally {
    await server.close();
  }
});

test('createMcpServer: a keyed call answered from the journal is a SERVER span too (its execute did not run)', async () => {
  register();
  exporter.reset();
  let executions = 0;
  const server = createMcpServer({ journal: createMemoryMcpJournal(), tools: { charge: { execute: async () => ({ executions: ++executions }) } } });
  const { http } = await server.listen({ http: {} });
  try {
    const session = await rawSession(http.url);
    const call = (id) => session.send({ id, method: 'tools/call', params: { name: 'charge', arguments: {}, _meta: { idempotencyKey: 'order-1' } } });
    assert.match(await call('first'), /"executions":1/);
    assert.match(await call('replay'), /"executions":1/);
    assert.equal(executions, 1);
    await until(() => spansNamed('tools/call charge', SpanKind.SERVER).length === 2);
    const replay = spansNamed('tools/call charge', SpanKind.SERVER).find((s) => s.attributes['jsonrpc.request.id'] === 'replay');
    assert.ok(replay, 'the replay has a span of its own');
    assert.equal(replay.attributes['gen_ai.tool.name'], 'charge');
    assert.equal(replay.attributes['error.type'], undefined);
  } finally {
    await server.close();
  }
});

test('a server entry changed after the toolset was made changes none of its spans\' attributes', async () => {
  register();
  exporter.reset();
  const server = createMcpServer({ tools: { lookup: { execute: async () => ({ ok: true }) } } });
  const { http } = await server.listen({ http: {} });
  const servers = [{ name: 'own', type: 'streamable-http', url: http.url }];
  const opening = mcpTools(servers, { warnings: false });
  // The caller reuses its objects at once: the spans still describe the server as it was given.
  servers[0].url = 'https://changed.example:9443/mcp';
  servers[0].type = 'stdio';
  const toolset = await opening;
  try {
    await toolset.tools.own__lookup.execute({});
    await until(() => clientSpans().length === 1);
    for (const span of [...clientSpans(), ...spansNamed('initialize'), ...spansNamed('server/discover')]) {
      assert.equal(span.attributes['server.address'], '127.0.0.1', span.name);
      assert.equal(span.attributes['server.port'], http.port, span.name);
      assert.equal(span.attributes['network.transport'], 'tcp', span.name);
    }
  } finally {
    await toolset.close();
    await server.close();
  }
});

test('completions and subscriptions (2025-11-25): a span each for what the engine sends, the URI without its query', async () => {
  register();
  exporter.reset();
  const entry = { name: 'res', type: 'stdio', command: process.execPath, args: [join(here, 'fixtures', 'resources-server.mjs'), 'stdio-legacy'] };
  const toolset = await mcpTools([entry], { warnings: false });
  try {
    const completed = await toolset.complete('res', { type: 'ref/resource', uri: 'note://items/{id}' }, { name: 'id', value: '1' });
    assert.ok(completed.completion.values.length > 0);
    const unsubscribe = await toolset.subscribeResource('res', 'note://hello?token=QUERY-SECRET-6', () => {});
    await unsubscribe();
    await until(() => spansNamed('resources/unsubscribe').length === 1);
    const [completion] = spansNamed('completion/complete');
    assert.equal(completion.attributes['mcp.method.name'], 'completion/complete');
    assert.equal(completion.attributes['mcp.protocol.version'], '2025-11-25');
    assert.match(completion.attributes['jsonrpc.request.id'], /^\d+$/);
    const [subscribe] = spansNamed('resources/subscribe');
    const [unsubscribed] = spansNamed('resources/unsubscribe');
    for (const span of [subscribe, unsubscribed]) {
      assert.equal(span.attributes['mcp.resource.uri'], 'note://hello');
      assert.match(span.attributes['jsonrpc.request.id'], /^\d+$/);
      assert.equal(parentIdOf(span), undefined, 'the engine keeps a subscription in its own time: a root span');
    }
    assert.ok(!JSON.stringify(exporter.getFinishedSpans().map((s) => s.attributes)).includes('QUERY-SECRET-6'));
  } finally {
    await toolset.close();
  }
});
