// Streamable HTTP and legacy SSE against in-process fixture servers that record every request.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mcpTools } from '../dist/index.js';
import { startStreamableFixture, startLegacySseFixture } from './fixtures/http-server.mjs';
import { until } from './helpers.mjs';

async function open(url, opts = {}, type = 'streamable-http') {
  const diagnostics = [];
  const toolset = await mcpTools([{ name: 'web', type, url, headers: { 'X-Tenant': 'acme' } }], {
    onDiagnostic: (d) => diagnostics.push(d),
    ...opts,
  });
  return { ...toolset, diagnostics };
}

for (const responses of ['json', 'sse']) {
  test(`streamable HTTP (${responses} responses): handshake headers, session, calls, DELETE on close`, async (t) => {
    const server = await startStreamableFixture({ responses });
    t.after(server.close);
    const { tools, close, diagnostics } = await open(server.url);
    assert.deepEqual(diagnostics, []);
    assert.equal((await tools.web__echo.execute({ text: 'hi' })).content[0].text, 'echo: hi');
    await assert.rejects(tools.web__fail.execute({}), { code: 'mcp_tool_error', message: 'MCP tool error: HTTP tool failed on purpose.' });
    for (let i = 0; i < 20; i++) await tools.web__echo.execute({ text: String(i) });
    // Keep-alive: two dozen sequential requests reuse one connection. The GET stream attempt has a pool of its
    // own (held-open streams never share the requests' connection), so it adds one, and on a loaded machine a
    // request can start before the previous answer's connection is back in the pool: up to two more. Without
    // keep-alive it would be two dozen.
    assert.ok(server.connections() <= 4, `${server.connections()} connections`);
    await close();

    // The modern probe (2026-07-28 headers and _meta), refused by this session-based server, then initialize.
    const [probe, init, initialized] = server.log;
    assert.equal(probe.body.method, 'server/discover');
    assert.equal(probe.headers['mcp-method'], 'server/discover');
    assert.equal(probe.headers['mcp-protocol-version'], '2026-07-28');
    assert.equal(probe.body.params._meta['io.modelcontextprotocol/protocolVersion'], '2026-07-28');
    assert.equal(init.body.method, 'initialize');
    assert.equal(init.headers.accept, 'application/json, text/event-stream');
    assert.equal(init.headers['content-type'], 'application/json');
    assert.equal(init.headers['mcp-session-id'], undefined);
    assert.equal(init.headers['x-tenant'], 'acme');
    assert.equal(initialized.body.method, 'notifications/initialized');
    for (const request of server.log.slice(2)) {
      assert.equal(request.headers['mcp-session-id'], 'session-1', `${request.method} ${request.body?.method}`);
      assert.equal(request.headers['mcp-protocol-version'], '2025-11-25');
    }
    // The GET stream was offered a try (405 here is normal) and the session was ended.
    assert.ok(server.log.some((r) => r.method === 'GET'));
    assert.equal(server.log.at(-1).method, 'DELETE');
  });
}

test('an event-stream response interleaves progress, a log message and a server ping before the result', async (t) => {
  const server = await startStreamableFixture({ responses: 'sse' });
  t.after(server.close);
  const { tools, close } = await open(server.url, { timeoutMs: 2000 });
  assert.equal((await tools.web__progress.execute({})).content[0].text, 'progress done');
  const answer = JSON.parse((await tools.web__ping_client.execute({})).content[0].text);
  assert.deepEqual(answer, { jsonrpc: '2.0', id: 'srv-ping', result: {} });
  await close();
});

test('progress on the response stream resets the idle timer', async (t) => {
  const server = await startStreamableFixture({ responses: 'sse' });
  t.after(server.close);
  const { tools, close } = await open(server.url, { timeoutMs: 250 });
  // Three progress events 150 ms apart: 450 ms in all under a 250 ms idle timeout.
  assert.equal((await tools.web__progress.execute({ intervalMs: 150 })).content[0].text, 'progress done');
  await close();
});

test('a broken response stream is resumed with Last-Event-ID after exactly the retry delay', async (t) => {
  const server = await startStreamableFixture({ responses: 'sse', getStream: 'sse' });
  t.after(server.close);
  const { tools, close } = await open(server.url);
  const result = await tools.web__resumable.execute({ retryMs: 400 });
  assert.equal(result.content[0].text, 'resumed result');
  const call = server.calls('resumable')[0];
  const resume = server.log.find((r) => r.method === 'GET' && r.headers['last-event-id']);
  assert.equal(resume.headers['last-event-id'], `ev-${call.body.id}`);
  assert.equal(resume.headers['mcp-session-id'], 'session-1');
  const waited = resume.at - call.at;
  assert.ok(waited >= 400 && waited < 900, `resumed after ${waited} ms`);
  assert.equal(server.calls('resumable').length, 1, 'the request itself was not sent again');
  await close();
});

test('a stream broken in the middle of an event resumes cleanly: the half event is dropped', async (t) => {
  const server = await startStreamableFixture({ responses: 'sse', getStream: 'sse' });
  t.after(server.close);
  const { tools, close } = await open(server.url);
  assert.equal((await tools.web__resumable.execute({ retryMs: 100, partial: true })).content[0].text, 'resumed result');
  await close();
});

test('an expired session (404) is re-initialized once and the request sent again', async (t) => {
  const server = await startStreamableFixture();
  t.after(server.close);
  const { tools, close } = await open(server.url);
  await tools.web__echo.execute({ text: 'one' });
  server.expireSessions();
  assert.equal((await tools.web__echo.execute({ text: 'two' })).content[0].text, 'echo: two');
  // Both concurrent 404s share one re-initialization.
  server.expireSessions();
  await Promise.all([tools.web__echo.execute({ text: 'a' }), tools.web__echo.execute({ text: 'b' })]);
  await close();
  const initializes = server.log.filter((r) => r.body?.method === 'initialize');
  assert.equal(initializes.length, 3);
  const resent = server.calls().filter((r) => r.body.params.arguments.text === 'two');
  assert.deepEqual(resent.map((r) => r.headers['mcp-session-id']), ['session-1', 'session-2']);
});

test('a renewed session (404) is asked again for what the old one had: logging/setLevel and resource subscriptions', async (t) => {
  const server = await startStreamableFixture({ sessionFeatures: true });
  t.after(server.close);
  const toolset = await mcpTools([{ name: 'web', type: 'streamable-http', url: server.url }], { serverLogLevel: 'warning', onDiagnostic: () => {}, timeoutMs: 10_000 });
  t.after(() => toolset.close());
  const asked = (method) => server.log.filter((r) => r.body?.method === method).map((r) => r.headers['mcp-session-id']);
  const stop = await toolset.subscribeResource('web', 'note://watched', () => {});
  assert.deepEqual([asked('logging/setLevel'), asked('resources/subscribe')], [['session-1'], ['session-1']]);
  server.expireSessions();
  assert.equal((await toolset.tools.web__echo.execute({ text: 'after' })).content[0].text, 'echo: after');
  await until(() => asked('resources/subscribe').length === 2, { timeoutMs: 5000 });
  assert.deepEqual([asked('logging/setLevel'), asked('resources/subscribe')], [['session-1', 'session-2'], ['session-1', 'session-2']]);
  // Renewed by a request that is not a call (here another subscription): the kept one follows at once, no call needed.
  server.expireSessions();
  const other = await toolset.subscribeResource('web', 'note://other', () => {});
  const subscribes = () => server.log.filter((r) => r.body?.method === 'resources/subscribe').map((r) => `${r.body.params.uri} ${r.headers['mcp-session-id']}`);
  await until(() => subscribes().includes('note://watched session-3'), { timeoutMs: 5000 });
  assert.deepEqual(asked('logging/setLevel'), ['session-1', 'session-2', 'session-3']);
  await other();
  await stop();
  await until(() => asked('resources/unsubscribe').length === 2, { timeoutMs: 5000 });
  assert.deepEqual(asked('resources/unsubscribe'), ['session-3', 'session-3'], 'the renewed session is the one told');
});

test('a request is never replayed after a transport failure', async (t) => {
  const server = await startStreamableFixture();
  t.after(server.close);
  const { tools, close } = await open(server.url);
  await assert.rejects(tools.web__reset.execute({}), { code: 'mcp_transport_error' });
  assert.equal(server.calls('reset').length, 1);
  assert.equal((await tools.web__echo.execute({ text: 'after' })).content[0].text, 'echo: after');
  // The broken exchange was followed by a reachability check: a HEAD that names no session (a framework
  // routing HEAD to its GET handler would otherwise open a stream for it).
  const heads = server.log.filter((r) => r.method === 'HEAD');
  assert.ok(heads.length >= 1, 'a HEAD was sent');
  assert.ok(heads.every((r) => r.headers['mcp-session-id'] === undefined && r.headers['mcp-protocol-version'] === undefined));
  await close();
});

for (const responses of ['json', 'sse']) {
  test(`bounds (${responses}): oversized and malformed responses fail their call with typed errors`, async (t) => {
    const server = await startStreamableFixture({ responses });
    t.after(server.close);
    const { tools, close } = await open(server.url, { maxResultBytes: 32 * 1024 });
    await assert.rejects(tools.web__big.execute({ bytes: 100_000 }), { code: 'mcp_result_too_large' });
    await assert.rejects(tools.web__malformed.execute({}), { code: 'mcp_protocol_error', message: /not JSON-RPC/ });
    assert.equal((await tools.web__big.execute({ bytes: 1000 })).content[0].text.length, 1000);
    await close();
  });
}

test('a slow-drip server is cut off by the idle timeout and the request cancelled', async (t) => {
  const server = await startStreamableFixture({ responses: 'sse' });
  t.after(server.close);
  const { tools, close } = await open(server.url, { timeoutMs: 300 });
  const started = Date.now();
  await assert.rejects(tools.web__drip.execute({}), { code: 'mcp_timeout' });
  assert.ok(Date.now() - started < 1500);
  const call = server.calls('drip')[0];
  const cancel = await until(() => server.log.find((r) => r.body?.method === 'notifications/cancelled'));
  assert.equal(cancel.body.params.requestId, call.body.id);
  // The client also dropped the stream instead of reading it forever.
  await until(() => server.streamsClosed.some((s) => s.name === 'drip'));
  await close();
});

test('an abort over HTTP rejects at once and cancels on the server', async (t) => {
  const server = await startStreamableFixture();
  t.after(server.close);
  const { tools, close } = await open(server.url);
  const controller = new AbortController();
  const pending = tools.web__slow.execute({ ms: 5000 }, { signal: controller.signal });
  await until(() => server.calls('slow').length === 1);
  controller.abort();
  await assert.rejects(pending, { code: 'mcp_aborted' });
  const cancel = await until(() => server.log.find((r) => r.body?.method === 'notifications/cancelled'));
  assert.equal(cancel.body.params.requestId, server.calls('slow')[0].body.id);
  await close();
});

test('server-initiated messages arrive on the GET stream', async (t) => {
  const server = await startStreamableFixture({ getStream: 'sse' });
  t.after(server.close);
  const { tools, close, diagnostics } = await open(server.url);
  await until(() => server.log.some((r) => r.method === 'GET'));
  await new Promise((r) => setTimeout(r, 50));
  server.pushOnGetStream({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
  // The re-listing is the proof the notification was read: a second tools/list reaches the server.
  await until(() => server.log.filter((r) => r.body?.method === 'tools/list').length === 2);
  assert.ok(tools.web__echo);
  void diagnostics;
  await close();
});

test('the GET stream survives a session expiry: it renews the session and listens on the new one', async (t) => {
  const server = await startStreamableFixture({ getStream: 'sse' });
  t.after(server.close);
  const { tools, close } = await open(server.url);
  await until(() => server.log.some((r) => r.method === 'GET' && r.headers['mcp-session-id'] === 'session-1'));
  server.restart();
  // The stream reconnects (after its retry delay), finds its session gone, renews it and listens again.
  await until(() => server.log.some((r) => r.method === 'GET' && r.headers['mcp-session-id'] === 'session-2'), { timeoutMs: 8000 });
  await new Promise((r) => setTimeout(r, 50));
  server.pushOnGetStream({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
  const relist = await until(() => server.log.find((r) => r.body?.method === 'tools/list' && r.headers['mcp-session-id'] === 'session-2'));
  assert.ok(relist, 'server-initiated messages arrive on the renewed session');
  assert.equal((await tools.web__echo.execute({ text: 'after renewal' })).content[0].text, 'echo: after renewal');
  await close();
});

test('an unreachable or refusing HTTP server is degraded with a typed error', async () => {
  const { tools, close, diagnostics } = await open('http://127.0.0.1:9/mcp');
  await close();
  assert.deepEqual(Object.keys(tools), []);
  assert.equal(diagnostics[0].code, 'server-degraded');
  assert.equal(diagnostics[0].errorCode, 'mcp_transport_error');
});

test('legacy SSE: endpoint event, POSTs to it, answers on the stream', async (t) => {
  const server = await startLegacySseFixture();
  t.after(server.close);
  const { tools, close, diagnostics } = await open(server.url, {}, 'sse');
  assert.deepEqual(diagnostics, []);
  assert.equal((await tools.web__echo.execute({ text: 'old school' })).content[0].text, 'echo: old school');
  await assert.rejects(tools.web__fail.execute({}), { code: 'mcp_tool_error', message: 'MCP tool error: legacy failure' });
  await close();
  const posts = server.log.filter((r) => r.method === 'POST');
  assert.deepEqual(posts.map((r) => r.body.method).slice(0, 3), ['initialize', 'notifications/initialized', 'tools/list']);
  for (const post of posts) {
    assert.equal(post.url, '/messages?sessionId=s1');
    assert.equal(post.headers['x-tenant'], 'acme');
  }
});

test('legacy SSE: an endpoint on another origin is refused and nothing is posted', async (t) => {
  const server = await startLegacySseFixture({ endpoint: 'http://localhost:PORT/messages' });
  t.after(server.close);
  const { tools, close, diagnostics } = await open(server.url, { timeoutMs: 2000 }, 'sse');
  await close();
  assert.deepEqual(Object.keys(tools), []);
  assert.match(diagnostics[0].message, /another origin/);
  assert.equal(server.log.filter((r) => r.method === 'POST').length, 0);
});

test('HTTP headers are validated; protocol-owned ones refused without echoing the value', async () => {
  const url = 'http://127.0.0.1:9/mcp';
  await assert.rejects(mcpTools([{ name: 'h', type: 'streamable-http', url, headers: { 'Mcp-Session-Id': 'secret-123' } }]), (e) => {
    assert.equal(e.code, 'mcp_config_invalid');
    assert.match(e.message, /Mcp-Session-Id/);
    assert.doesNotMatch(e.message, /secret-123/);
    return true;
  });
  await assert.rejects(mcpTools([{ name: 'h', type: 'streamable-http', url, headers: { 'X-A': 'v'.repeat(17_000) } }]), {
    code: 'mcp_config_invalid',
  });
  await assert.rejects(mcpTools([{ name: 'h', type: 'sse', url: 'file:///etc/passwd' }]), { code: 'mcp_config_invalid' });
});
