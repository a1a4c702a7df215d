// One HTTP client per engine: toolsets of different users share the process's connection pool, and
// nothing that identifies a session crosses from one to another on a shared connection.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mcpTools } from '../dist/index.js';
import { startStreamableFixture } from './fixtures/http-server.mjs';

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
