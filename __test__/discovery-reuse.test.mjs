// The 2026-07-28 revision needs no per-session handshake: once one connection in the process asked a
// modern Streamable HTTP server `server/discover`, later connections to it (other toolsets, other user
// sessions with other bearers) reuse that answer and go straight to `tools/list`. A server that is no
// longer what was remembered is probed again within the same connect; an authorization refusal is not
// taken for that, and an OAuth login on that first request runs as it does on the probe. Against the
// in-process 2026-07-28 fixture (fixtures/caching-server.mjs) and the OAuth fixture with a 2026-07-28
// server behind it, which record every request. (How long an answer stays fresh is tested in Rust, with a clock: src/protocol/era.rs.)

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createMemoryTokenStore, mcpTools } from '../dist/index.js';
import { startCachingServer } from './fixtures/caching-server.mjs';
import { startOAuthFixture } from './fixtures/oauth-server.mjs';
import { modernNotes } from './fixtures/modern-notes.mjs';
import { until } from './helpers.mjs';

const MODERN = '2026-07-28';

async function serve(t, state) {
  const server = await startCachingServer(state);
  t.after(server.close);
  return server;
}

/** The server's entry. The header makes this test's memory its own, even if a port comes round again. */
const entry = (server, run = randomUUID()) => ({ name: 'geo', type: 'streamable-http', url: server.url, headers: { 'X-Test-Run': run } });

async function open(t, entries, opts = {}) {
  const diagnostics = [];
  const toolset = await mcpTools(entries, { progress: true, onDiagnostic: (d) => diagnostics.push(d), ...opts });
  t.after(toolset.close);
  return { ...toolset, diagnostics };
}

const methods = (requests) => requests.map((r) => r.method);
const discovers = (server) => server.requests.filter((r) => r.method === 'server/discover').length;
const degraded = (toolset) => toolset.diagnostics.filter((d) => d.code === 'server-degraded');
const connected = (toolset) => toolset.diagnostics.find((d) => d.code === 'server-connected');

test('five toolsets against one modern server: one server/discover in all, each listed, listening and calling', async (t) => {
  const server = await serve(t, { listChanged: true });
  const theEntry = entry(server);
  const first = await open(t, [theEntry]);
  const rest = await Promise.all(Array.from({ length: 4 }, () => open(t, [theEntry])));
  const toolsets = [first, ...rest];
  assert.equal(discovers(server), 1, 'only the first connection asked');
  assert.equal(server.requests[0].method, 'server/discover');
  for (const toolset of toolsets) {
    assert.deepEqual(degraded(toolset), []);
    assert.equal((await toolset.tools.geo__echo.execute({ text: 'hi' })).content[0].text, 'echo: hi');
    // What the reused answer kept: the protocol, not what the server said of itself (per session).
    const info = connected(toolset);
    assert.equal(info.protocolVersion, MODERN);
    assert.deepEqual(info.serverInfo, toolset === first ? { name: 'caching-fixture', version: '1.0.0' } : { name: '', version: '' });
    assert.deepEqual(info.capabilities, ['tools']);
  }
  // Every request is of the modern revision, and the remembered listChanged capability opened each
  // toolset's subscription.
  assert.ok(server.requests.every((r) => r.version === MODERN), JSON.stringify(server.requests));
  assert.ok(server.requests.filter((r) => r.method === 'tools/list').length >= 5);
  await until(() => server.requests.filter((r) => r.method === 'subscriptions/listen').length >= 5, { timeoutMs: 10_000 });
});

test('sessions with different auth bearers share the discovery answer, and each request carries only its own bearer', async (t) => {
  const server = await serve(t, { acceptBearers: ['token-a', 'token-b'] });
  const theEntry = entry(server);
  const a = await open(t, [theEntry], { auth: () => ({ token: 'token-a' }), session: 'user-a' });
  const sentByA = server.requests.length;
  const b = await open(t, [theEntry], { auth: () => ({ token: 'token-b' }), session: 'user-b' });
  const sentByB = server.requests.length;
  assert.deepEqual(degraded(a), []);
  assert.deepEqual(degraded(b), []);
  assert.equal((await b.tools.geo__echo.execute({ text: 'b' })).content[0].text, 'echo: b');
  assert.equal((await a.tools.geo__echo.execute({ text: 'a' })).content[0].text, 'echo: a');
  assert.equal(discovers(server), 1);
  assert.deepEqual(server.requests[0], { method: 'server/discover', authorization: ['Bearer token-a'], version: MODERN });
  // B went straight to its listing, with its own token; nothing of A's crossed over, nor the reverse.
  assert.equal(server.requests[sentByA].method, 'tools/list');
  for (const request of server.requests) assert.equal(request.authorization.length, 1, JSON.stringify(request));
  const bearers = (from, to) => [...new Set(server.requests.slice(from, to).map((r) => r.authorization[0]))];
  assert.deepEqual(bearers(0, sentByA), ['Bearer token-a']);
  assert.deepEqual(bearers(sentByA, sentByB), ['Bearer token-b']);
  const calls = server.requests.filter((r) => r.method === 'tools/call').map((r) => r.authorization[0]);
  assert.deepEqual(calls, ['Bearer token-b', 'Bearer token-a']);
});

for (const legacyRefusal of ['bad-request', 'unsupported-version']) {
  test(`a server that turned session-based (${legacyRefusal}) is probed again within the same connect, and remembered anew`, async (t) => {
    const server = await serve(t, { legacyRefusal });
    const theEntry = entry(server);
    await open(t, [theEntry]);
    const before = server.requests.length;
    await open(t, [theEntry]);
    assert.equal(server.requests[before].method, 'tools/list', 'the answer was reused');
    assert.equal(discovers(server), 1);

    // Redeployed as a 2025-11-25 server on the same URL.
    server.state.era = 'legacy';
    const sinceSwitch = server.requests.length;
    const third = await open(t, [theEntry]);
    assert.deepEqual(degraded(third), [], 'the user sees a normal connect');
    assert.equal(connected(third).protocolVersion, '2025-11-25');
    assert.equal((await third.tools.geo__echo.execute({ text: 'legacy' })).content[0].text, 'echo: legacy');
    assert.deepEqual(
      methods(server.requests.slice(sinceSwitch, sinceSwitch + 5)),
      ['tools/list', 'server/discover', 'initialize', 'notifications/initialized', 'tools/list'],
      'the reused answer refused, then the whole probe once',
    );

    // Remembered anew. A -32022 is an answer: the server is session-based, and the next connection opens a
    // session at once. An HTTP 400 without a JSON-RPC answer to the probe is no evidence: nothing is
    // remembered, and the next connection probes (as for any server that answers so).
    const sinceThird = server.requests.length;
    const fourth = await open(t, [theEntry]);
    assert.deepEqual(degraded(fourth), []);
    const expected = legacyRefusal === 'unsupported-version' ? ['initialize'] : ['server/discover', 'initialize'];
    assert.deepEqual(methods(server.requests.slice(sinceThird, sinceThird + expected.length)), expected);
  });
}

test('an authorization refusal of the first request is not taken for another server: no probe, the failure as before', async (t) => {
  const server = await serve(t, { acceptBearers: ['token-a'] });
  const theEntry = entry(server);
  await open(t, [theEntry], { auth: () => ({ token: 'token-a' }), session: 'user-a' });
  const before = server.requests.length;
  const refused = await open(t, [theEntry], { auth: () => ({ token: 'token-b' }), session: 'user-b' });
  assert.equal(refused.tools.geo__echo, undefined);
  assert.deepEqual(degraded(refused).map((d) => d.errorCode), ['mcp_transport_error']);
  assert.match(degraded(refused)[0].message, /HTTP 401/);
  assert.deepEqual(methods(server.requests.slice(before)), ['tools/list'], 'refused once, and nothing else asked');
  // The memory stands: the next session with a good token still goes straight to its listing.
  const again = await open(t, [theEntry], { auth: () => ({ token: 'token-a' }), session: 'user-a' });
  assert.deepEqual(degraded(again), []);
  assert.equal(discovers(server), 1);
});

test('OAuth: a session without a token is refused its first request, logs in, and that request is sent again (no probe)', async (t) => {
  const as = await startOAuthFixture({ mcp: modernNotes });
  t.after(as.close);
  const mcpRequests = () => as.requests.filter((r) => r.server === 'rs' && r.path === '/mcp');
  const login = async () => {
    const visits = [];
    const onAuthorizationUrl = (url) => visits.push(fetch(url).then((r) => r.text()));
    const toolset = await open(t, [{ name: 'notes', type: 'streamable-http', url: as.mcpUrl, oauth: true }], {
      tokenStore: createMemoryTokenStore(),
      onAuthorizationUrl,
      authorizationTimeoutMs: 10_000,
    });
    await Promise.all(visits);
    return { toolset, visits };
  };
  const first = await login();
  assert.deepEqual(degraded(first.toolset), []);
  assert.deepEqual(methods(mcpRequests().map((r) => r.json)), ['server/discover', 'server/discover', 'tools/list'], 'refused, logged in, asked again');

  // Another user (another token store): the reused answer's first request is the one refused for the login.
  const before = mcpRequests().length;
  const second = await login();
  assert.deepEqual(degraded(second.toolset), []);
  assert.equal(second.visits.length, 1, 'one login');
  const sent = mcpRequests().slice(before);
  assert.deepEqual(methods(sent.map((r) => r.json)), ['tools/list', 'tools/list']);
  assert.equal(sent[0].headers.authorization, undefined);
  const [firstToken, secondToken] = as.accessTokens();
  assert.equal(sent[1].headers.authorization, `Bearer ${secondToken}`);
  assert.notEqual(firstToken, secondToken);
  assert.equal((await second.toolset.tools.notes__read_notes.execute({})).content[0].text, '(no notes)');
});
