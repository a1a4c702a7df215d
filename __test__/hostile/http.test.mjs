// Hostile Streamable HTTP servers (issue 10, "Hostile servers"). Each test asserts a typed error or the
// correct result within a stated bound, bounded memory where the server controls a size, and that no
// connection of ours to the server outlives close().

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startMcpServer } from '../fixtures/egress-servers.mjs';
import { startHostileHttp } from '../fixtures/hostile/http-server.mjs';
import { open, assertFails, assertAnswers, closeWithin, rss, assertRssBounded, timed, testConfinedToOneCall, stillServes, MIB, exitWhenDone } from '../fixtures/hostile/harness.mjs';
import { until } from '../helpers.mjs';

exitWhenDone(after);

/** timeoutMs for calls that must fail sooner than it. */
const LONG_TIMEOUT_MS = 5000;
/** How soon a failure the client can see in the bytes must reach the caller. */
const PROMPT_MS = 1500;
/** A short timeoutMs, for cases where the timeout is the right answer. */
const SHORT_TIMEOUT_MS = 1000;
/** How far past timeoutMs such a timeout may land. */
const TIMEOUT_SLACK_MS = 1500;
/** close() with requests still open (a bounded grace period, whatever the server does). */
const CLOSE_MS = 3000;

/** Start a hostile server in `mode`, run `body` with it, stop it; no socket of ours may stay open after `body`. */
async function onServer(mode, body) {
  const server = await startHostileHttp({ mode });
  try {
    await body(server);
    await until(() => server.openSockets() === 0, { timeoutMs: 1000 }).catch(() =>
      assert.fail(`${server.openSockets()} connections to the server still open after close()`),
    );
  } finally {
    await server.close();
  }
}

/** Connect to a hostile server in `mode`, run `body` with the toolset, close within the bound. */
async function withServer(mode, opts, body) {
  await onServer(mode, async (server) => {
    const toolset = await open([{ name: 'h', type: 'streamable-http', url: server.url }], opts);
    try {
      await body(toolset, server);
    } finally {
      await closeWithin(toolset, CLOSE_MS);
    }
  });
}

/** Connect to a hostile server in `mode` as far as it lets us: the toolset (mcpTools must resolve) and how long that took. */
async function timedOpen(server, opts) {
  const { value: toolset, error, ms } = await timed(() => open([{ name: 'h', type: 'streamable-http', url: server.url }], opts));
  assert.ifError(error);
  return { toolset, ms };
}

test('a garbage body with invalid UTF-8 fails the call as a protocol error at once', async () => {
  await withServer('', { timeoutMs: LONG_TIMEOUT_MS }, async ({ tools }) => {
    await assertFails(() => tools.h__garbage_body.execute({}), ['mcp_protocol_error'], PROMPT_MS);
    await stillServes(tools);
  });
});

test('a 64 MiB body fails the call once the limit passes, in bounded memory', async () => {
  const before = rss();
  await withServer('', { timeoutMs: LONG_TIMEOUT_MS }, async ({ tools }) => {
    await assertFails(() => tools.h__huge_body.execute({}), ['mcp_result_too_large'], PROMPT_MS);
    assertRssBounded(before, 48 * MIB, '64 MiB body');
    await stillServes(tools);
  });
});

test('a never-ending chunked JSON body fails the call once the limit passes', async () => {
  await withServer('', { timeoutMs: LONG_TIMEOUT_MS }, async ({ tools }) => {
    await assertFails(() => tools.h__endless_json_fast.execute({}), ['mcp_result_too_large'], PROMPT_MS);
    await stillServes(tools);
  });
});

test('a never-ending JSON body trickled a byte at a time ends at the timeout, not never', async () => {
  await withServer('', { timeoutMs: SHORT_TIMEOUT_MS }, async ({ tools }) => {
    await assertFails(() => tools.h__endless_json_slow.execute({}), ['mcp_timeout'], SHORT_TIMEOUT_MS + TIMEOUT_SLACK_MS);
    await stillServes(tools);
  });
});

test('a never-ending SSE event fails the call once the limit passes', async () => {
  await withServer('', { timeoutMs: LONG_TIMEOUT_MS }, async ({ tools }) => {
    await assertFails(() => tools.h__endless_sse_event.execute({}), ['mcp_result_too_large'], PROMPT_MS);
    await stillServes(tools);
  });
});

test('a never-ending SSE event trickled a byte at a time ends at the timeout', async () => {
  await withServer('', { timeoutMs: SHORT_TIMEOUT_MS }, async ({ tools }) => {
    await assertFails(() => tools.h__endless_sse_event_slow.execute({}), ['mcp_timeout'], SHORT_TIMEOUT_MS + TIMEOUT_SLACK_MS);
    await stillServes(tools);
  });
});

testConfinedToOneCall(test, (body) => withServer('', { timeoutMs: LONG_TIMEOUT_MS }, body), PROMPT_MS);

test('a flood of 50 000 notifications on a call\'s stream: the call completes in bounded memory', async () => {
  const before = rss();
  await withServer('', { timeoutMs: LONG_TIMEOUT_MS }, async ({ tools }) => {
    assert.equal(await assertAnswers(() => tools.h__notification_flood.execute({ count: 50_000 }), 20_000), 'flooded 50000');
    assertRssBounded(before, 64 * MIB, '50 000 notifications');
  });
});

test('a flood of 1 000 pings: every one answered', async () => {
  // What is asserted is that all are answered, not how fast: the call's idle timeout counts the flood as silence (a
  // ping is no progress), and 1 000 reply POSTs took over 5 s on a 2-core machine at load 10, so it is not the bound.
  await withServer('', { timeoutMs: 30_000 }, async ({ tools }) => {
    assert.equal(await assertAnswers(() => tools.h__ping_flood.execute({ count: 1000, waitMs: 25_000 }), 30_000), '1000');
  });
});

test('a flood of 500 pings whose replies the server never acknowledges: bounded concurrent replies, all cut at close()', async () => {
  let held = 0;
  // withServer checks first that close() cut every held reply; then the bound on how many were open.
  await withServer('', { timeoutMs: LONG_TIMEOUT_MS }, async ({ tools }, server) => {
    await assertAnswers(() => tools.h__ping_flood.execute({ count: 500, hold: true, waitMs: 1500 }), 5000);
    held = server.maxHeldReplies();
  });
  assert.ok(held <= 64, `${held} reply POSTs open at once`);
});

test('a flood of 1 000 list_changed notifications is coalesced into a couple of re-lists', async () => {
  await withServer('', { timeoutMs: LONG_TIMEOUT_MS }, async ({ tools }, server) => {
    const before = server.lists();
    assert.equal(await assertAnswers(() => tools.h__list_changed_flood.execute({ count: 1000 }), 5000), 'announced 1000 changes');
    await new Promise((r) => setTimeout(r, 1000));
    const relists = server.lists() - before;
    assert.ok(relists >= 1 && relists <= 3, `${relists} tools/list requests for one burst of 1 000 notifications`);
  });
});

test('a call the server never answers times out; close() then completes within its bound', async () => {
  await withServer('', { timeoutMs: SHORT_TIMEOUT_MS }, async ({ tools }) => {
    await assertFails(() => tools.h__stall.execute({}), ['mcp_timeout'], SHORT_TIMEOUT_MS + TIMEOUT_SLACK_MS);
  });
});

test('close() while calls are stalled settles them as closed, within the close bound', async () => {
  await onServer('', async (server) => {
    const { toolset } = await timedOpen(server, { timeoutMs: 30_000 });
    const pending = Promise.all([1, 2, 3].map(() => timed(() => toolset.tools.h__stall.execute({}))));
    await until(() => server.log.filter((r) => r.rpc === 'tools/call').length === 3);
    await closeWithin(toolset, CLOSE_MS);
    for (const { error, ms } of await pending) {
      assert.equal(error?.code, 'mcp_connection_closed');
      assert.ok(ms < CLOSE_MS + 500, `settled after ${ms} ms`);
    }
  });
});

test('an initialize that is never answered ends in a timeout diagnostic within the bound', async () => {
  await onServer('never-init', async (server) => {
    const { toolset, ms } = await timedOpen(server, { timeoutMs: SHORT_TIMEOUT_MS });
    assert.ok(ms < SHORT_TIMEOUT_MS + TIMEOUT_SLACK_MS, `mcpTools took ${ms} ms`);
    assert.equal(toolset.diagnostics.find((d) => d.code === 'server-degraded')?.errorCode, 'mcp_timeout');
    await closeWithin(toolset, CLOSE_MS);
  });
});

for (const mode of ['redirect-loop', 'redirect-ping-pong']) {
  test(`a ${mode} degrades the server with a typed error after a bounded number of hops`, async () => {
    await onServer(mode, async (server) => {
      const { toolset, ms } = await timedOpen(server, { timeoutMs: LONG_TIMEOUT_MS });
      assert.ok(ms < PROMPT_MS, `mcpTools took ${ms} ms`);
      const degraded = toolset.diagnostics.find((d) => d.code === 'server-degraded');
      assert.ok(['mcp_transport_error', 'mcp_protocol_error', 'mcp_host_not_allowed'].includes(degraded?.errorCode), JSON.stringify(toolset.diagnostics));
      assert.ok(server.log.length <= 25, `${server.log.length} requests followed`);
      await closeWithin(toolset, CLOSE_MS);
    });
  });
}

test('10 000 tools, one with a 1 MiB description: the rest projected, that one left out, the server usable', async () => {
  await withServer('tools-10000', { timeoutMs: 20_000, maxResultBytes: 8 * MIB }, async ({ tools, diagnostics }) => {
    assert.equal(Object.keys(tools).filter((n) => n.startsWith('h__')).length, 9_999);
    assert.equal(tools.h__t9999, undefined);
    assert.ok(diagnostics.some((d) => d.code === 'tool-rejected' && d.tool === 't9999' && /description/.test(d.message)));
    assert.equal(await assertAnswers(() => tools.h__t9998.execute({}), PROMPT_MS), 'called t9998');
  });
});

for (const mode of ['deep-schema', 'null-name']) {
  test(`a malformed tool (${mode}) is rejected alone; the good tools stay`, async () => {
    await withServer(mode, { timeoutMs: LONG_TIMEOUT_MS }, async ({ tools, diagnostics }) => {
      assert.deepEqual(diagnostics.filter((d) => d.code === 'server-degraded'), []);
      assert.ok(diagnostics.some((d) => d.code === 'tool-rejected'), JSON.stringify(diagnostics).slice(0, 400));
      await stillServes(tools);
    });
  });
}

test('hostile bodies end in typed errors: endless chunked body, endless SSE event, redirect loop', async (t) => {
  const server = await startMcpServer({
    route(req, res, body) {
      if (req.url.startsWith('/loop')) return void res.writeHead(307, { location: '/loop' }).end(), true;
      if (body?.method !== 'tools/call') return false;
      const mode = body.params.arguments?.mode;
      const timers = [];
      res.on('close', () => timers.forEach(clearInterval));
      if (mode === 'flood-json') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write(`{"jsonrpc":"2.0","id":${body.id},"result":{"content":[{"type":"text","text":"`);
        timers.push(setInterval(() => res.write('x'.repeat(16 * 1024)), 5));
      } else if (mode === 'drip-json') {
        res.writeHead(200, { 'content-type': 'application/json' });
        timers.push(setInterval(() => res.write(' '), 50));
      } else if (mode === 'endless-event') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('event: message\ndata: ');
        timers.push(setInterval(() => res.write('y'.repeat(16 * 1024)), 5));
      }
      return true;
    },
  });
  t.after(server.close);
  const { tools, close } = await open([{ name: 'web', type: 'streamable-http', url: server.url }], { timeoutMs: 1500, maxResultBytes: 256 * 1024 });
  for (const [mode, code, boundMs] of [
    ['flood-json', 'mcp_result_too_large', 1000],
    ['endless-event', 'mcp_result_too_large', 1000],
    ['drip-json', 'mcp_timeout', 3000],
  ]) {
    const started = Date.now();
    await assert.rejects(tools.web__echo.execute({ mode }), { code }, mode);
    assert.ok(Date.now() - started < boundMs, `${mode} took ${Date.now() - started} ms`);
  }
  await close();

  const loop = await open([{ name: 'loop', type: 'streamable-http', url: server.url.replace('/mcp', '/loop') }]);
  await loop.close();
  assert.equal(loop.diagnostics[0].errorCode, 'mcp_transport_error');
  assert.match(loop.diagnostics[0].message, /redirect/);
});
