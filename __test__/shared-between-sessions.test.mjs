// What the toolsets of one process (a backend with one per user session) share, and what they don't: one
// HTTP client per engine, so users ride the process's connection pool (HTTP/2 multiplexed, with the held-open
// event streams kept off its stream slots) and nothing that identifies a session crosses from one to another
// on a shared connection; and one frozen copy of a shared catalogue's texts.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMemoryTokenStore, MCP_DESCRIBE_TOOL, mcpTools } from '../dist/index.js';
import { startStreamableFixture } from './fixtures/http-server.mjs';
import { startHostileHttp } from './fixtures/hostile/http-server.mjs';
import { startOAuthFixture } from './fixtures/oauth-server.mjs';
import { deepFreeze } from '../dist/frozen.js';
import { collectGarbage, fixture, here, until } from './helpers.mjs';

/** A toolset for one user: its own bearer (through `auth`) and, optionally, its own configured header. */
async function userToolset(url, user, headers) {
  return mcpTools([{ name: 'api', type: 'streamable-http', url, ...(headers ? { headers } : {}) }], {
    session: { user },
    auth: async () => ({ token: `token-${user}` }),
  });
}

test('two sessions with different tokens ride one pooled connection, each with its own credentials only', async (t) => {
  const server = await startStreamableFixture();
  t.after(server.close);
  // One after the other, so the second finds the first's connection idle in the pool.
  const alice = await userToolset(server.url, 'alice');
  t.after(alice.close);
  assert.match((await alice.tools.api__echo.execute({ text: 'from alice' })).content[0].text, /from alice/);
  const bob = await userToolset(server.url, 'bob', { 'x-tenant-key': 'bob-tenant-key' });
  t.after(bob.close);
  assert.match((await bob.tools.api__echo.execute({ text: 'from bob' })).content[0].text, /from bob/);
  assert.match((await alice.tools.api__echo.execute({ text: 'alice again' })).content[0].text, /alice again/);

  const posts = server.log.filter((r) => r.method === 'POST');
  const by = (token) => posts.filter((r) => r.headers.authorization === `Bearer ${token}`);
  const aliceRequests = by('token-alice');
  const bobRequests = by('token-bob');
  assert.equal(aliceRequests.length + bobRequests.length, posts.length, 'every request carried exactly one of the two bearers');
  assert.ok(aliceRequests.length >= 4 && bobRequests.length >= 3, 'initialize, initialized, tools/list and the calls');

  // Connection reuse across toolsets: some socket carried requests of both users.
  const aliceSockets = new Set(aliceRequests.map((r) => r.socket));
  const shared = bobRequests.filter((r) => aliceSockets.has(r.socket));
  assert.ok(shared.length > 0, `bob's requests rode alice's pooled connection (sockets: alice ${[...aliceSockets]}, bob ${bobRequests.map((r) => r.socket)})`);

  // Nothing of one session on the other's requests: session id, configured header.
  const sessionsOf = (requests) => new Set(requests.map((r) => r.headers['mcp-session-id']).filter(Boolean));
  const aliceSessions = sessionsOf(aliceRequests);
  const bobSessions = sessionsOf(bobRequests);
  assert.equal(aliceSessions.size, 1);
  assert.equal(bobSessions.size, 1);
  assert.notDeepEqual([...aliceSessions], [...bobSessions]);
  assert.ok(aliceRequests.every((r) => r.headers['x-tenant-key'] === undefined), "alice's requests never carry bob's header");
  assert.ok(bobRequests.every((r) => r.headers['x-tenant-key'] === 'bob-tenant-key'));
  assert.ok(posts.every((r) => r.headers.cookie === undefined), 'no cookie store');
});

test('a call of one session is answered on its own session while another session calls on the same pool', async (t) => {
  const server = await startStreamableFixture();
  t.after(server.close);
  const users = ['u1', 'u2', 'u3', 'u4'];
  const toolsets = [];
  for (const user of users) {
    const toolset = await userToolset(server.url, user);
    t.after(toolset.close);
    toolsets.push(toolset);
  }
  // Every session calls at once, several times: concurrent requests of different users on one pool.
  const results = await Promise.all(
    toolsets.flatMap((toolset, i) => [0, 1, 2].map((n) => toolset.tools.api__echo.execute({ text: `${users[i]}-${n}` }))),
  );
  results.forEach((r, k) => assert.match(r.content[0].text, new RegExp(`${users[Math.floor(k / 3)]}-${k % 3}`)));
  const calls = server.calls('echo');
  assert.equal(calls.length, 12);
  const sessionOwner = new Map();
  for (const call of calls) {
    const user = call.body.params.arguments.text.split('-')[0];
    assert.equal(call.headers.authorization, `Bearer token-${user}`, 'each call carries its own user’s bearer');
    const sid = call.headers['mcp-session-id'];
    assert.equal(sessionOwner.get(sid) ?? user, user, 'a session id is only ever sent by its own user');
    sessionOwner.set(sid, user);
  }
  assert.equal(sessionOwner.size, users.length);
});

/** A CA and a certificate for 127.0.0.1 signed by it, made with the openssl CLI; `undefined` without one. */
function makeCertificates(dir) {
  const openssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  try {
    openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=mcpferry test CA');
    openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'key.pem', '-out', 'leaf.csr', '-subj', '/CN=127.0.0.1');
    writeFileSync(join(dir, 'ext.cnf'), 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n');
    openssl('x509', '-req', '-in', 'leaf.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'cert.pem', '-days', '2', '-extfile', 'ext.cnf');
    openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'other.key', '-out', 'other.pem', '-days', '2', '-subj', '/CN=another CA');
  } catch (error) {
    if (error.code === 'ENOENT') return undefined;
    throw error;
  }
  return { ca: join(dir, 'ca.pem'), otherCa: join(dir, 'other.pem'), key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) };
}

test('over https the shared client verifies the server against the system roots and multiplexes users on one HTTP/2 connection', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'mcpferry-tls-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const certs = makeCertificates(dir);
  if (!certs) return t.skip('no openssl CLI to make a certificate with');
  const server = await startStreamableFixture({ tls: { key: certs.key, cert: certs.cert } });
  t.after(server.close);
  const run = (env) =>
    new Promise((resolve) => {
      execFile(process.execPath, [join(here, 'fixtures', 'pool-child.mjs'), server.url], { env: { ...process.env, ...env }, timeout: 30_000 }, (error, stdout, stderr) =>
        resolve({ error, stdout, stderr }));
    });

  // Roots that don't include the server's CA: refused, and nothing reached the server's MCP endpoint.
  const untrusted = await run({ SSL_CERT_FILE: certs.otherCa });
  assert.ok(untrusted.error, 'a server whose certificate no root vouches for is refused');
  assert.equal(server.log.length, 0);

  // Trusted through SSL_CERT_FILE (read by the platform verifier, once for the process).
  const trusted = await run({ SSL_CERT_FILE: certs.ca });
  assert.equal(trusted.error, null, trusted.stderr);
  const { texts } = JSON.parse(trusted.stdout.trim().split('\n').at(-1));
  assert.deepEqual(texts.map((text) => text.replace('echo: ', '')), ['alice-0', 'alice-1', 'alice-2', 'bob-0', 'bob-1', 'bob-2']);
  const posts = server.log.filter((r) => r.method === 'POST');
  assert.ok(posts.every((r) => r.httpVersion === '2.0'), `HTTP/2 where the server offers it: ${[...new Set(posts.map((r) => r.httpVersion))]}`);
  const usersOn = new Map();
  for (const post of posts) {
    const user = post.headers.authorization?.replace('Bearer token-', '');
    assert.ok(user === 'alice' || user === 'bob', 'every request carries one user\u2019s own bearer');
    if (post.body?.method === 'tools/call') assert.ok(post.body.params.arguments.text.startsWith(user), 'a call carries its own user\u2019s bearer');
    usersOn.set(post.socket, new Set([...(usersOn.get(post.socket) ?? []), user]));
  }
  assert.ok([...usersOn.values()].some((users) => users.size === 2), `both users rode one HTTP/2 connection: ${JSON.stringify([...usersOn].map(([k, v]) => [k, [...v]]))}`);
});

// Each session holds its standalone GET stream open for its whole life, and hyper never opens a second HTTP/2
// connection when the server's SETTINGS_MAX_CONCURRENT_STREAMS is reached: requests wait for a free stream. So the
// held-open streams ride HTTP/1.1 connections of their own, or once the sessions outnumbered the server's limit,
// every further request (a new session's initialize, every user's calls) would wait until its deadline.
test('sessions beyond the server\u2019s HTTP/2 stream limit still connect and call', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'mcpferry-h2-limit-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const certs = makeCertificates(dir);
  if (!certs) return t.skip('no openssl CLI to make a certificate with');
  const server = await startStreamableFixture({ tls: { key: certs.key, cert: certs.cert }, getStream: 'sse', h2Settings: { maxConcurrentStreams: 3 } });
  t.after(server.close);
  const { stdout, stderr } = await new Promise((resolve) => {
    execFile(process.execPath, [join(here, 'fixtures', 'h2-streams-child.mjs'), server.url], { env: { ...process.env, SSL_CERT_FILE: certs.ca }, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ error, stdout, stderr }));
  });
  const { outcome, timings } = JSON.parse(stdout.trim().split('\n').at(-1) || '{}');
  const gets = server.log.filter((r) => r.method === 'GET');
  // The held-open GET streams each ride an HTTP/1.1 connection of their own; the requests stay on HTTP/2.
  assert.ok(gets.length >= 4 && gets.every((r) => r.httpVersion === '1.1'), `GET streams: ${gets.map((r) => r.httpVersion)}; connect times ${JSON.stringify(timings)}`);
  assert.ok(server.log.filter((r) => r.method === 'POST').every((r) => r.httpVersion === '2.0'), 'POSTs multiplexed on HTTP/2');
  assert.deepEqual(outcome, { u1: 'echo: u1', u2: 'echo: u2', u3: 'echo: u3', u4: 'echo: u4' }, `${JSON.stringify(outcome)}; GET streams opened: ${gets.length} on ${[...new Set(server.log.map((r) => r.socket))]}; ${stderr.slice(-500)}`);
});

test('a closed toolset that logged in with OAuth lets go of the shared client: no pooled connection outlives the last open toolset', async (t) => {
  const as = await startOAuthFixture();
  t.after(as.close);
  const visits = [];
  // Kept referenced after close(), as an application holding its toolsets would.
  const loggedIn = await mcpTools([{ name: 'notes', type: 'streamable-http', url: as.mcpUrl, oauth: true }], {
    tokenStore: createMemoryTokenStore(),
    onAuthorizationUrl: (url) => visits.push(fetch(url).then((r) => r.text())),
    authorizationTimeoutMs: 10_000,
  });
  await Promise.all(visits);
  assert.ok(loggedIn.tools.notes__read_notes, 'logged in and listed');
  await loggedIn.close();

  const server = await startHostileHttp({ mode: '' });
  t.after(server.close);
  const plain = await mcpTools([{ name: 'h', type: 'streamable-http', url: server.url }]);
  assert.ok(Object.keys(plain.tools).length > 0);
  await plain.close();
  await until(() => server.openSockets() === 0, { timeoutMs: 2000 }).catch(() =>
    assert.fail(`${server.openSockets()} pooled connections still open with every toolset closed (the OAuth one still referenced: ${Object.keys(loggedIn.tools).length} tools)`),
  );
});

// Tool texts: sessions that list the same catalogue from the same server point at one frozen copy of every
// description and schema, and nothing one session does to it reaches another.
function isDeeplyFrozen(value) {
  if (value === null || typeof value !== 'object') return true;
  return Object.isFrozen(value) && Object.values(value).every(isDeeplyFrozen);
}

test('two sessions on the same catalogue share one frozen copy of each schema and description', async (t) => {
  const server = fixture('shared');
  const alice = await mcpTools([server.entry]);
  t.after(alice.close);
  const bob = await mcpTools([server.entry]);
  t.after(bob.close);

  const a = alice.tools.shared__echo;
  const b = bob.tools.shared__echo;
  assert.notEqual(a, b, 'each session has its own tool object');
  assert.equal(a.inputSchema, b.inputSchema, 'one schema object for both sessions');
  assert.equal(a.description, 'Echo the text back.');
  assert.deepEqual(a.inputSchema, { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] });
  assert.ok(isDeeplyFrozen(a.inputSchema), 'frozen all the way down');

  // A change by one session fails loudly instead of reaching the other's model.
  assert.throws(() => {
    a.inputSchema.properties.text.type = 'number';
  }, TypeError);
  assert.throws(() => {
    a.inputSchema.required.push('other');
  }, TypeError);
  assert.equal(b.inputSchema.properties.text.type, 'string');
  // The tool object itself stays the caller's: replacing a schema is that session's own business.
  a.inputSchema = { type: 'object' };
  assert.deepEqual(b.inputSchema.required, ['text']);

  assert.match((await b.execute({ text: 'from bob' })).content[0].text, /echo: from bob/);
});

test('a collection between two sessions starting on one catalogue does not cost them the sharing', async (t) => {
  // A tool holds its texts' members, not the object they were parsed into: the sessions' cache held that
  // object weakly, so a collection in between (any, under load or with other suites in the process) gave
  // the second session copies of its own while the first still used the originals.
  const server = fixture('shared');
  const first = await mcpTools([server.entry]);
  t.after(first.close);
  await collectGarbage();
  const second = await mcpTools([server.entry]);
  t.after(second.close);
  for (const name of ['shared__echo', 'shared__big']) {
    assert.equal(first.tools[name].inputSchema, second.tools[name].inputSchema, `${name}: one schema object for both sessions`);
  }
});

test('a session whose server lists a different catalogue gets texts of its own', async (t) => {
  const plain = fixture('shared');
  const other = fixture('shared', { FIXTURE_ECHO_DESCRIPTION: 'Echo, for this user only.' });
  const first = await mcpTools([plain.entry]);
  t.after(first.close);
  const second = await mcpTools([other.entry]);
  t.after(second.close);
  assert.equal(first.tools.shared__echo.description, 'Echo the text back.');
  assert.equal(second.tools.shared__echo.description, 'Echo, for this user only.');
  assert.notEqual(first.tools.shared__echo.inputSchema, second.tools.shared__echo.inputSchema);
  assert.deepEqual(first.tools.shared__echo.inputSchema, second.tools.shared__echo.inputSchema);
});

test('texts outlive a closed session for the sessions still using them, and come back after all are gone', async (t) => {
  const server = fixture('shared');
  const first = await mcpTools([server.entry]);
  const second = await mcpTools([server.entry]);
  t.after(second.close);
  const schema = second.tools.shared__echo.inputSchema;
  await first.close();
  await collectGarbage();
  assert.deepEqual(second.tools.shared__echo.inputSchema, schema);
  assert.match((await second.tools.shared__echo.execute({ text: 'still here' })).content[0].text, /still here/);

  await second.close();
  await collectGarbage();
  const third = await mcpTools([server.entry]);
  t.after(third.close);
  assert.deepEqual(third.tools.shared__echo.inputSchema, { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] });
  assert.ok(isDeeplyFrozen(third.tools.shared__echo.inputSchema));
});

test('a tool changed by its server gets the new texts; the unchanged keep theirs', async (t) => {
  const server = fixture('shared');
  const watcher = await mcpTools([server.entry]);
  t.after(watcher.close);
  const before = watcher.tools.shared__big.inputSchema;
  await watcher.tools.shared__mutate.execute({});
  await until(() => watcher.tools.shared__added_tool);
  assert.equal(watcher.tools.shared__echo.description, 'Echo, now with a changed description.');
  assert.ok(isDeeplyFrozen(watcher.tools.shared__echo.inputSchema));
  assert.deepEqual(watcher.tools.shared__big.inputSchema, before);
});

test('schemas cut down by the disclosure budget and local tools are frozen too', async (t) => {
  const server = fixture('shared', { FIXTURE_TOOLS: '10' });
  const small = await mcpTools([server.entry], { disclosure: { budget: 50 }, onDiagnostic: () => {} });
  t.after(small.close);
  const tools = Object.values(small.tools);
  assert.ok(small.tools[MCP_DESCRIBE_TOOL], 'the schemas are abbreviated: the describe tool is shown');
  for (const tool of tools) assert.ok(isDeeplyFrozen(tool.inputSchema), `${tool.name}'s schema is frozen`);
  // A session with room for full schemas next to it: each sees its own tier, not the other's.
  const roomy = await mcpTools([server.entry]);
  t.after(roomy.close);
  assert.deepEqual(small.tools.shared__echo.inputSchema, { type: 'object' });
  assert.deepEqual(roomy.tools.shared__echo.inputSchema.required, ['text']);
  assert.equal(small.tools.shared__echo.description, roomy.tools.shared__echo.description);
});

test('deepFreeze freezes every object reached through own enumerable properties, and nothing an Object.prototype addition holds', () => {
  const schema = JSON.parse('{"type":"object","properties":{"a":{"type":"array","items":[{"enum":[1,2]}]}},"required":["a"]}');
  const texts = deepFreeze({ description: 'd', inputSchema: schema, annotations: undefined });
  const reached = [texts, schema, schema.properties, schema.properties.a, schema.properties.a.items, schema.properties.a.items[0], schema.properties.a.items[0].enum, schema.required];
  assert.ok(reached.every((o) => Object.isFrozen(o)));
  // A null-prototype object and a class instance walk their own keys.
  const bare = Object.assign(Object.create(null), { inner: { x: 1 } });
  class Holder {
    constructor() {
      this.inner = { y: 2 };
    }
  }
  const holder = new Holder();
  deepFreeze([bare, holder]);
  assert.ok(Object.isFrozen(bare.inner) && Object.isFrozen(holder.inner));
  // An array's extra property is its own; a hole is not (an inherited index must not be reached through it).
  const list = [{}, , {}]; // eslint-disable-line no-sparse-arrays
  list.extra = { z: 1 };
  deepFreeze(list);
  assert.ok(Object.isFrozen(list[0]) && Object.isFrozen(list[2]) && Object.isFrozen(list.extra));
  // Something added an enumerable object to a prototype: a for...in would reach it; deepFreeze must not.
  for (const prototype of [Object.prototype, Array.prototype]) {
    const added = { shared: true };
    Object.defineProperty(prototype, 1, { value: added, enumerable: true, configurable: true, writable: true });
    prototype.polluted = added;
    try {
      const fresh = deepFreeze(JSON.parse('{"nested":{"deeper":{}},"items":[{},null,{}]}'));
      const holed = deepFreeze([{}, , {}]); // eslint-disable-line no-sparse-arrays
      assert.ok(Object.isFrozen(fresh.nested.deeper) && Object.isFrozen(fresh.items[2]) && Object.isFrozen(holed[2]));
      assert.ok(!Object.isFrozen(added), 'an object on a prototype was frozen');
    } finally {
      delete prototype.polluted;
      delete prototype[1];
    }
  }
});
