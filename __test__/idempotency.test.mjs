// The idempotency key on the wire: a call made with `{ runId, toolCallId }` (or an explicit
// `idempotencyKey`) carries `params._meta.idempotencyKey`, as the server receives it, in both protocol
// eras: the legacy stdio fixture (fixtures/server.mjs records every message) and the 2026-07-28 HTTP
// fixture (fixtures/caching-server.mjs records each call's `_meta`). Without a key, `_meta` has no such
// member; a bad key fails the call with mcp_invalid_arguments before anything is sent.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mcpTools } from '../dist/index.js';
import { fixture } from './helpers.mjs';
import { startCachingServer } from './fixtures/caching-server.mjs';

const callMetas = (received) => received.filter((m) => m.method === 'tools/call').map((m) => m.params._meta);

test('legacy stdio: the key arrives in params._meta.idempotencyKey, and only when there is one', async (t) => {
  const server = fixture('legacy');
  const toolset = await mcpTools([server.entry]);
  t.after(() => toolset.close());
  const echo = toolset.tools.legacy__echo;
  await echo.execute({ text: 'plain' });
  await echo.execute({ text: 'ai sdk' }, { toolCallId: 'call-1' });
  await echo.execute({ text: 'durable' }, { runId: 'issue-42', toolCallId: 'call-7' });
  await echo.execute({ text: 'explicit' }, { idempotencyKey: 'order-123:call-7', runId: 'r', toolCallId: 'c' });
  const metas = callMetas(server.received());
  assert.equal(metas.length, 4);
  assert.deepEqual(metas.map((m) => m.idempotencyKey), [undefined, undefined, 'issue-42:call-7', 'order-123:call-7']);
  for (const meta of metas.slice(0, 2)) assert.deepEqual(Object.keys(meta), ['progressToken'], 'no key: _meta is as before');
});

test('2026-07-28 HTTP: the key sits next to the era _meta members, absent without a key', async (t) => {
  const server = await startCachingServer();
  t.after(server.close);
  const toolset = await mcpTools([{ name: 'modern', type: 'streamable-http', url: server.url }]);
  t.after(() => toolset.close());
  await toolset.tools.modern__echo.execute({ text: 'plain' }, { toolCallId: 'call-1' });
  await toolset.tools.modern__echo.execute({ text: 'durable' }, { runId: 'issue-42', toolCallId: 'call-8' });
  // A call sent again after -32020 HeaderMismatch carries the same key.
  server.state.regionHeader = 'Zone';
  await toolset.tools.modern__regional.execute({ region: 'eu' }, { runId: 'issue-42', toolCallId: 'call-9' }).catch(() => {});
  const [plain, durable, ...regional] = server.calls.map((c) => c.meta);
  assert.equal(plain.idempotencyKey, undefined);
  assert.ok(!('idempotencyKey' in plain));
  assert.equal(durable.idempotencyKey, 'issue-42:call-8');
  const otherMembers = (meta) => Object.keys(meta).filter((k) => k !== 'idempotencyKey' && k !== 'progressToken').sort();
  assert.deepEqual(otherMembers(durable), otherMembers(plain), 'the era members are untouched');
  assert.ok(regional.length >= 1);
  for (const meta of regional) assert.equal(meta.idempotencyKey, 'issue-42:call-9');
});

test('a bad key fails the call with mcp_invalid_arguments and nothing is sent', async (t) => {
  const server = fixture('badkey');
  const toolset = await mcpTools([server.entry]);
  t.after(() => toolset.close());
  const echo = toolset.tools.badkey__echo;
  const cases = [
    [{ idempotencyKey: 42 }, /idempotencyKey must be a string/],
    [{ runId: 'r' }, /needs ctx\.toolCallId/],
    [{ idempotencyKey: 'k'.repeat(513) }, /over the 512/],
    [{ idempotencyKey: '' }, /empty/],
    [{ runId: () => 'r', toolCallId: 'c' }, /runId must be a string/],
  ];
  for (const [ctx, message] of cases) {
    await assert.rejects(echo.execute({ text: 'x' }, ctx), (e) => e.code === 'mcp_invalid_arguments' && message.test(e.message));
  }
  assert.equal(callMetas(server.received()).length, 0);
  // A 512-byte key is fine.
  await echo.execute({ text: 'x' }, { idempotencyKey: 'k'.repeat(512) });
  assert.equal(callMetas(server.received())[0].idempotencyKey, 'k'.repeat(512));
});

test('the AI SDK adapter forms the key from its runId option and the SDK toolCallId, and none without it', async (t) => {
  const { aiSdkTools } = await import('../entry/ai.mjs');
  const server = fixture('viaai');
  const toolset = await mcpTools([server.entry]);
  t.after(() => toolset.close());
  const options = { toolCallId: 'call-3', messages: [] };
  await aiSdkTools(toolset).viaai__echo.execute({ text: 'a' }, options);
  await aiSdkTools(toolset, { runId: 'issue-42' }).viaai__echo.execute({ text: 'b' }, options);
  assert.deepEqual(callMetas(server.received()).map((m) => m.idempotencyKey), [undefined, 'issue-42:call-3']);
});

test('policy.decide is told the run, the tool call and the key', async (t) => {
  const server = fixture('decided');
  const seen = [];
  const toolset = await mcpTools([server.entry], { policy: { decide: (request) => (seen.push(request), { kind: 'allow' }) } });
  t.after(() => toolset.close());
  await toolset.tools.decided__echo.execute({ text: 'a' });
  await toolset.tools.decided__echo.execute({ text: 'b' }, { runId: 'issue-42', toolCallId: 'call-7' });
  assert.equal(seen[0].runId, undefined);
  assert.deepEqual([seen[1].runId, seen[1].toolCallId, seen[1].idempotencyKey], ['issue-42', 'call-7', 'issue-42:call-7']);
});
