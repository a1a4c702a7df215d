// One HTTP client per engine: toolsets of different users share the process's connection pool, and
// nothing that identifies a session crosses from one to another on a shared connection.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMemoryTokenStore, mcpTools } from '../dist/index.js';
import { startStreamableFixture } from './fixtures/http-server.mjs';
import { startHostileHttp } from './fixtures/hostile/http-server.mjs';
import { startOAuthFixture } from './fixtures/oauth-server.mjs';
import { here, until } from './helpers.mjs';

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
