// Tenants of one process (a backend with one toolset per user session) and a hostile MCP server: what is
// shared between sessions (tool texts, compiled schemas, a 2026-07-28 server's discovery) carries nothing
// one tenant's server said or was refused to another, and one tenant's failure costs the others nothing.
// Real servers over real sockets/pipes: small in-test 2026-07-28 servers and fixtures/validation-server.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { createMemoryTokenStore, mcpTools } from '../dist/index.js';
import { startOAuthFixture } from './fixtures/oauth-server.mjs';
import { modernNotes } from './fixtures/modern-notes.mjs';
import { listen, readBody } from './fixtures/http-server.mjs';
import { here, until } from './helpers.mjs';

const MODERN = '2026-07-28';

/**
 * A stateless 2026-07-28 server (JSON answers). `nameFor(token)`: the serverInfo name its
 * `server/discover` answers the bearer `token` with (a server that says whom it serves). `bearers`: the
 * tokens it accepts; any other gets HTTP 401, with a JSON-RPC error body answering the request
 * (`refusal: 'jsonrpc'`, as many servers and SDKs answer) or plain text (`refusal: 'text'`), or HTTP 429
 * (`refusal: 'rate-limited'`: a tenant over its quota).
 */
async function modernServer(t, { nameFor = () => 'honest', bearers = null, refusal = 'jsonrpc', toolsJson = null } = {}) {
  const requests = [];
  const server = createServer(async (req, res) => {
    if (req.method !== 'POST') return void res.writeHead(405).end();
    const message = JSON.parse(await readBody(req));
    requests.push({ method: message.method, authorization: req.headers.authorization });
    const send = (status, body) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, ...body }));
    };
    const result = (value) => send(200, { result: { resultType: 'complete', ...value } });
    if (message.id === undefined) return void res.writeHead(202).end();
    const token = req.headers.authorization?.replace(/^Bearer /, '');
    if (bearers && !bearers.includes(token)) {
      if (refusal === 'jsonrpc') return send(401, { error: { code: -32001, message: 'Unauthorized: unknown token' } });
      if (refusal === 'rate-limited') return void res.writeHead(429, { 'content-type': 'text/plain' }).end('slow down');
      return void res.writeHead(401, { 'content-type': 'text/plain' }).end('unknown token');
    }
    switch (message.method) {
      case 'server/discover':
        return result({
          supportedVersions: [MODERN],
          capabilities: { tools: {} },
          _meta: { 'io.modelcontextprotocol/serverInfo': { name: nameFor(token, req), version: '1.0.0' } },
          ttlMs: 0,
          cacheScope: 'public',
        });
      case 'tools/list':
        if (toolsJson) {
          res.writeHead(200, { 'content-type': 'application/json' });
          return void res.end(`{"jsonrpc":"2.0","id":${JSON.stringify(message.id)},"result":{"resultType":"complete","tools":${toolsJson}}}`);
        }
        return result({ tools: [{ name: 'echo', description: 'Echo the text back.', inputSchema: { type: 'object' } }] });
      case 'tools/call':
        return result({ content: [{ type: 'text', text: 'ok' }] });
      default:
        return send(404, { error: { code: -32601, message: 'Method not found' } });
    }
  });
  const port = await listen(server);
  t.after(() => new Promise((resolve) => { server.closeAllConnections?.(); server.close(() => resolve()); }));
  return { url: `http://127.0.0.1:${port}/mcp`, port, requests };
}

/** The entry, with a header of its own so this test's discovery memory is its own. */
const entry = (url, run = randomUUID()) => ({ name: 'srv', type: 'streamable-http', url, headers: { 'X-Test-Run': run } });

async function open(t, entries, opts = {}) {
  const diagnostics = [];
  const toolset = await mcpTools(entries, { progress: true, onDiagnostic: (d) => diagnostics.push(d), ...opts });
  t.after(toolset.close);
  return { ...toolset, diagnostics };
}

const connected = (toolset) => toolset.diagnostics.find((d) => d.code === 'server-connected');
const degraded = (toolset) => toolset.diagnostics.filter((d) => d.code === 'server-degraded');
const methods = (requests) => requests.map((r) => r.method);

// ---------------------------------------------------------------------------------------------
// The discovery memory is shared whatever the bearer, so it keeps nothing the server wrote about itself:
// what it told one tenant is never shown to the next, past that tenant's redaction.

test('a tenant sees the serverInfo the server gave another tenant (and that tenant\'s token in it)', async (t) => {
  const server = await modernServer(t, { nameFor: (token) => `notes for ${token}`, bearers: ['sk-alice-0123456789abcdef', 'sk-bob-0123456789abcdef'] });
  const theEntry = entry(server.url);
  const alice = await open(t, [theEntry], { auth: () => ({ token: 'sk-alice-0123456789abcdef' }), session: 'alice' });
  assert.deepEqual(degraded(alice), []);
  const bob = await open(t, [theEntry], { auth: () => ({ token: 'sk-bob-0123456789abcdef' }), session: 'bob' });
  assert.deepEqual(degraded(bob), []);
  const everythingBobSaw = JSON.stringify(bob.diagnostics);
  assert.ok(!everythingBobSaw.includes('sk-alice'), `alice's token reached bob's session: ${everythingBobSaw}`);
  assert.notEqual(connected(bob).serverInfo.name, connected(alice).serverInfo.name, 'bob is told what the server told alice');
});

// Headers read from the environment (`headersFromEnv`) are part of the memory's key: entries whose
// environment headers differ (another organisation, another key) each ask.
// Bun's process.env assignments do not reach the C environment the engine reads (getenv): Node only.
const BUN_ENV = typeof Bun !== 'undefined' && "Bun's process.env assignments do not reach the process environment the engine reads";

test('entries whose headersFromEnv differ are not told each other\'s discovery answer', { skip: BUN_ENV }, async (t) => {
  process.env.REVIEW_ATTACK_ORG_A = 'acme';
  process.env.REVIEW_ATTACK_ORG_B = 'globex';
  // Named by a code for the org, not the org itself: a header value from the environment is a secret, redacted.
  const server = await modernServer(t, { nameFor: (_token, req) => `notes of org ${{ acme: 1, globex: 2 }[req.headers['x-org']]}` });
  const run = randomUUID();
  const withOrg = (variable) => ({ ...entry(server.url, run), headersFromEnv: { 'X-Org': variable } });
  const acme = await open(t, [withOrg('REVIEW_ATTACK_ORG_A')]);
  const globex = await open(t, [withOrg('REVIEW_ATTACK_ORG_B')]);
  assert.equal(connected(acme).serverInfo.name, 'notes of org 1');
  assert.equal(connected(globex).serverInfo.name, 'notes of org 2');
});

// ---------------------------------------------------------------------------------------------
// An authorization refusal (with a text or a JSON-RPC error body) or a rate limit is no evidence of another
// era: one tenant with a bad or expired token neither probes again nor wipes the memory of the others.

for (const refusal of ['text', 'jsonrpc', 'rate-limited']) {
  test(`a tenant refused for its token (${refusal === 'rate-limited' ? '429' : `401, ${refusal} body`}) does not wipe the discovery memory of the others`, async (t) => {
    const server = await modernServer(t, { bearers: ['good'], refusal });
    const theEntry = entry(server.url);
    await open(t, [theEntry], { auth: () => ({ token: 'good' }), session: 'a' });
    const before = server.requests.length;
    const refused = await open(t, [theEntry], { auth: () => ({ token: 'expired' }), session: 'b' });
    assert.equal(refused.tools.srv__echo, undefined);
    assert.deepEqual(methods(server.requests.slice(before)), ['tools/list'], 'refused once, and nothing else asked');
    const later = server.requests.length;
    const again = await open(t, [theEntry], { auth: () => ({ token: 'good' }), session: 'c' });
    assert.deepEqual(degraded(again), []);
    assert.equal(server.requests[later].method, 'tools/list', 'the memory stands for the next tenant');
    assert.equal(methods(server.requests).filter((m) => m === 'server/discover').length, 1);
  });
}

// ---------------------------------------------------------------------------------------------
// The toolset's `proxy` is part of the memory's key: what a proxy answered for a plain-http server is
// never reused by a toolset reaching the server directly.

test('a discovery answer read through one toolset\'s proxy is not reused by a toolset going direct', async (t) => {
  const honest = await modernServer(t);
  const hostile = createServer(async (req, res) => {
    if (req.method !== 'POST') return void res.writeHead(405).end();
    const message = JSON.parse(await readBody(req));
    if (message.id === undefined) return void res.writeHead(202).end();
    res.writeHead(200, { 'content-type': 'application/json' });
    const result =
      message.method === 'server/discover'
        ? {
            supportedVersions: [MODERN],
            capabilities: { tools: { listChanged: true }, 'x-hostile': {} },
            _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'HOSTILE', version: '6.6.6' } },
            ttlMs: 0,
            cacheScope: 'public',
          }
        : message.method === 'tools/list'
          ? { tools: [{ name: 'echo', description: 'Echo.', inputSchema: { type: 'object' } }] }
          : {};
    res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result: { resultType: 'complete', ...result } }));
  });
  const proxyPort = await listen(hostile);
  t.after(() => new Promise((resolve) => { hostile.closeAllConnections?.(); hostile.close(() => resolve()); }));
  const theEntry = entry(honest.url);
  const proxied = await open(t, [theEntry], { proxy: `http://127.0.0.1:${proxyPort}` });
  assert.equal(connected(proxied).serverInfo.name, 'HOSTILE', 'the proxy answered the proxied toolset');
  assert.equal(honest.requests.length, 0, 'nothing reached the real server through the proxy');
  const direct = await open(t, [theEntry]);
  assert.deepEqual(degraded(direct), []);
  assert.equal(connected(direct).serverInfo.name, 'honest', 'the direct toolset is told what the proxy said');
  assert.deepEqual(connected(direct).capabilities, ['tools']);
});

// ---------------------------------------------------------------------------------------------
// Compiled schemas are shared by catalogue; an unusable one is still reported once per server of a toolset,
// also when two entries (same command or URL, other env or headers) show the same catalogue.

test('two servers of one toolset with the same catalogue each report their unusable schema', async (t) => {
  const server = join(here, 'fixtures', 'validation-server.mjs');
  const toolset = await open(
    t,
    [
      { name: 'v', type: 'stdio', command: process.execPath, args: [server], env: { TENANT: 'one' } },
      { name: 'w', type: 'stdio', command: process.execPath, args: [server], env: { TENANT: 'two' } },
    ],
    { timeoutMs: 10_000 },
  );
  assert.equal(toolset.tools.v__bomb.inputSchema, toolset.tools.w__bomb.inputSchema, 'one catalogue for both entries');
  for (const name of ['v__bomb', 'w__bomb']) assert.equal((await toolset.tools[name].execute({ x: 1 })).content[0].text, 'ran bomb');
  const reports = () => toolset.diagnostics.filter((d) => d.code === 'tool-schema-invalid' && d.tool === 'bomb').map((d) => d.server);
  await until(() => reports().length >= 1);
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.deepEqual(reports().sort(), ['v', 'w'], JSON.stringify(toolset.diagnostics));
});

// ---------------------------------------------------------------------------------------------
// No session waits on another's probe: one tenant left at a login prompt while a server is not yet
// remembered holds up nobody else's connect.

test('a tenant left at an OAuth login prompt does not stall other tenants\' sessions to that server', async (t) => {
  const as = await startOAuthFixture({ mcp: modernNotes });
  t.after(as.close);
  // A token for the victim, from a login of its own (under another memory key).
  const visits = [];
  await open(t, [{ name: 'notes', type: 'streamable-http', url: as.mcpUrl, oauth: true, headers: { 'X-Test-Run': randomUUID() } }], {
    tokenStore: createMemoryTokenStore(),
    onAuthorizationUrl: (url) => visits.push(fetch(url).then((r) => r.text())),
    authorizationTimeoutMs: 10_000,
  });
  await Promise.all(visits);
  const [victimToken] = as.accessTokens();
  assert.ok(victimToken);

  const run = randomUUID();
  // The idle tenant: its login is never finished (until its authorization times out).
  let prompted;
  const shown = new Promise((resolve) => (prompted = resolve));
  const idle = mcpTools([{ name: 'notes', type: 'streamable-http', url: as.mcpUrl, oauth: true, headers: { 'X-Test-Run': run } }], {
    tokenStore: createMemoryTokenStore(),
    onAuthorizationUrl: () => prompted(),
    onDiagnostic: () => {},
    authorizationTimeoutMs: 4_000, // under the 5 s a first-probe wait would hold the victim
  });
  let idleSettled = false;
  idle.then(() => (idleSettled = true), () => (idleSettled = true));
  await shown;
  const victim = await open(t, [{ name: 'notes', type: 'streamable-http', url: as.mcpUrl, headers: { 'X-Test-Run': run } }], { auth: () => ({ token: victimToken }), session: 'victim' });
  assert.deepEqual(degraded(victim), []);
  // Open while the idle tenant still sits at its login: nothing of the victim's connect waited for it.
  assert.equal(idleSettled, false, "the victim's session waited for the other tenant's login to end");
  await (await idle).close();
});

// ---------------------------------------------------------------------------------------------
// shared texts cannot be used to pollute prototypes or be changed by one
// session under another. `__proto__` keys arrive as own data properties (JSON.parse), are frozen with the
// rest, and a spread copy stays a plain object.

test('shared texts with __proto__ keys pollute nothing and cannot be changed by a session', async (t) => {
  const toolsJson =
    '[{"name":"echo","description":"Echo.","inputSchema":{"type":"object","__proto__":{"polluted":"yes"},' +
    '"properties":{"__proto__":{"type":"string","__proto__":{"polluted":"deep"}}}},"annotations":{"__proto__":{"readOnlyHint":true}}}]';
  const server = await modernServer(t, { toolsJson });
  const theEntry = entry(server.url);
  const [one, two] = [await open(t, [theEntry]), await open(t, [theEntry])];
  const [a, b] = [one.tools.srv__echo, two.tools.srv__echo];
  assert.equal(a.inputSchema, b.inputSchema, 'one shared copy');
  assert.equal({}.polluted, undefined);
  assert.equal(Object.getPrototypeOf(a.inputSchema), Object.prototype);
  assert.ok(Object.hasOwn(a.inputSchema, '__proto__') && Object.isFrozen(a.inputSchema.__proto__));
  assert.equal(a.annotations.readOnlyHint, undefined, 'a __proto__ key grants no annotation');
  const spread = { ...a.inputSchema, type: 'object' };
  assert.equal(Object.getPrototypeOf(spread), Object.prototype);
  assert.throws(() => { a.inputSchema.properties.extra = {}; }, TypeError);
  assert.throws(() => { a.inputSchema.properties.__proto__.type = 'number'; }, TypeError);
  a.description = 'changed by one session';
  assert.equal(b.description, 'Echo.', 'the tool object is each session\'s own');
});
