// OAuth 2.1 end to end against a real (local, RFC-following) authorization server and a protected MCP
// server: first login through the loopback redirect, the token store, refresh with rotation, step-up,
// logout, the device and client-credentials grants, refusals — and no secret in anything the host sees.
// The test plays the person at the browser: it follows the authorization URL, which the fixture's
// authorization server answers at once with a redirect onto mcpferry's loopback listener.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { inspect } from 'node:util';
import { createMemoryMcpConnectionStore, createMemoryTokenStore, createSqliteMcpConnectionStore, logoutMcpServer, mcpTools, McpAuthError } from '../dist/index.js';
import { DEVICE_GRANT, NOTES_READ, NOTES_WRITE, startOAuthFixture } from './fixtures/oauth-server.mjs';
import { fixture, scratchFile } from './helpers.mjs';

/** Fail fast instead of waiting the default five minutes for a person who is not coming. */
const AUTHORIZATION_TIMEOUT_MS = 10_000;

const entryFor = (as, oauth = true) => ({ name: 'notes', type: 'streamable-http', url: as.mcpUrl, oauth });

/** A token store written in JavaScript against the documented interface, so a test can look inside. */
function createInspectableTokenStore() {
  const values = new Map();
  return {
    values,
    async get(key) {
      return values.get(key) ?? null;
    },
    async set(key, value) {
      values.set(key, value);
    },
    async delete(key) {
      values.delete(key);
    },
  };
}

/** The person at the browser: follows each authorization URL (redirects included) and keeps where it landed. */
function createPerson() {
  const visits = [];
  return {
    visits,
    onAuthorizationUrl(url, info) {
      const landing = fetch(url).then(
        async (response) => ({ status: response.status, url: response.url, body: await response.text() }),
        (error) => ({ error }),
      );
      visits.push({ url, info, landing });
    },
  };
}

async function open(t, servers, opts = {}) {
  const diagnostics = [];
  const toolset = await mcpTools(servers, {
    authorizationTimeoutMs: AUTHORIZATION_TIMEOUT_MS,
    onDiagnostic: (d) => diagnostics.push(d),
    ...opts,
  });
  t.after(toolset.close);
  return { ...toolset, diagnostics };
}

async function startFixture(t, opts) {
  const as = await startOAuthFixture(opts);
  t.after(as.close);
  return as;
}

const rejection = (pending) => pending.then(
  () => assert.fail('expected the call to reject'),
  (error) => error,
);

const text = (result) => result.content[0].text;
const refreshes = (as) => as.events.filter((e) => e.type === 'refresh');
const tokenRequests = (as, grant) => as.to('/token').filter((r) => r.form?.grant_type === grant);

test('first login: discovery, dynamic registration, PKCE through the loopback redirect, token exchange; the tools work', async (t) => {
  const as = await startFixture(t);
  const person = createPerson();
  const tokenStore = createInspectableTokenStore();
  const { tools, diagnostics } = await open(t, [entryFor(as)], { tokenStore, onAuthorizationUrl: person.onAuthorizationUrl });
  assert.deepEqual(diagnostics, []);
  assert.equal(text(await tools.notes__read_notes.execute({})), '(no notes)');

  // Discovery began with the MCP server's challenge, then the resource and server metadata.
  const mcp = as.requests.filter((r) => r.server === 'rs' && r.path === '/mcp');
  assert.equal(mcp[0].headers.authorization, undefined, 'the first request carries no token');
  assert.ok(as.requests.some((r) => r.path === '/.well-known/oauth-protected-resource/mcp'));
  assert.ok(as.to('/.well-known/oauth-authorization-server').length >= 1);

  // RFC 7591 registration as a native app with a loopback redirect and the refresh grant.
  assert.equal(as.registrations.length, 1);
  const registered = as.registrations[0].request;
  assert.equal(registered.application_type, 'native');
  assert.ok(registered.grant_types.includes('authorization_code'));
  assert.ok(registered.grant_types.includes('refresh_token'));
  for (const uri of registered.redirect_uris) assert.equal(new URL(uri).hostname, '127.0.0.1');
  const clientId = as.registrations[0].client.client_id;

  // One person, one visit: the URL is the authorization endpoint with PKCE S256, state and the resource.
  assert.equal(person.visits.length, 1);
  const [visit] = person.visits;
  assert.equal(visit.info.server, 'notes');
  assert.equal(visit.info.grant, 'authorization_code');
  assert.equal(visit.info.userCode, undefined);
  const url = new URL(visit.url);
  assert.equal(`${url.origin}${url.pathname}`, as.metadata.authorization_endpoint);
  const params = url.searchParams;
  assert.equal(params.get('response_type'), 'code');
  assert.equal(params.get('client_id'), clientId);
  assert.equal(params.get('code_challenge_method'), 'S256');
  assert.match(params.get('code_challenge'), /^[A-Za-z0-9_-]{43}$/);
  assert.ok(params.get('state')?.length >= 16, 'an unguessable state');
  assert.deepEqual(params.getAll('resource'), [as.mcpUrl]);
  assert.ok(params.get('scope').split(' ').includes(NOTES_READ), 'the scope the challenge asked for');
  assert.ok(!params.get('scope').split(' ').includes(NOTES_WRITE), 'not more than the challenge asked for');
  const redirectUri = new URL(params.get('redirect_uri'));
  assert.equal(redirectUri.protocol, 'http:');
  assert.equal(redirectUri.hostname, '127.0.0.1');

  // The person landed on mcpferry's loopback listener, which answered.
  const landing = await visit.landing;
  assert.equal(landing.error, undefined, String(landing.error));
  assert.equal(landing.status, 200);
  assert.ok(landing.url.startsWith(redirectUri.href), `landed on ${landing.url}`);

  // The code was exchanged once, with the verifier of that challenge, the same redirect URI and the resource.
  const [exchange, ...more] = tokenRequests(as, 'authorization_code');
  assert.equal(more.length, 0);
  assert.equal(exchange.form.redirect_uri, params.get('redirect_uri'));
  assert.equal(createHash('sha256').update(exchange.form.code_verifier).digest('base64url'), params.get('code_challenge'));
  assert.deepEqual(exchange.form.resource, [as.mcpUrl]);

  // Every MCP request after the login carries the issued access token in the header, never the URL.
  const [accessToken] = as.accessTokens();
  const authorized = mcp.slice(1);
  assert.ok(authorized.length >= 2);
  for (const request of authorized) assert.equal(request.headers.authorization, `Bearer ${accessToken}`);
  assert.ok(as.requests.every((r) => !Object.values(r.query).includes(accessToken)));
  // The first request (the 2026-07-28 probe) was refused for the login and re-sent once after it.
  assert.equal(mcp.filter((r) => r.json?.method === 'server/discover').length, 2, 'the refused request re-sent once after the login');

  // The store holds the tokens (values are the secrets; keys are not).
  const stored = [...tokenStore.values.values()].join('\n');
  assert.ok(stored.includes(accessToken), 'the access token is stored');
  assert.ok(stored.includes(as.refreshTokens()[0]), 'the refresh token is stored');
  for (const key of tokenStore.values.keys()) for (const secret of as.secrets()) assert.ok(!key.includes(secret), 'a store key holds a secret');
});

test('an issuer with a path is found at its path-inserted metadata URL (RFC 8414 §3.1), and the login works', async (t) => {
  const as = await startFixture(t, { issuerPath: '/realms/notes' });
  const person = createPerson();
  const { tools, diagnostics } = await open(t, [entryFor(as)], { onAuthorizationUrl: person.onAuthorizationUrl });
  assert.deepEqual(diagnostics, []);
  assert.equal(text(await tools.notes__read_notes.execute({})), '(no notes)');
  const metadataRequests = as.requests.filter((r) => r.server === 'as' && r.path.startsWith('/.well-known/'));
  assert.equal(metadataRequests[0].path, '/.well-known/oauth-authorization-server/realms/notes');
  assert.equal(new URL(person.visits[0].url).pathname, '/realms/notes/authorize');
  assert.equal(tokenRequests(as, 'authorization_code').length, 1);
});

test('the token store carries the login: a second toolset with the same store connects with no authorization', async (t) => {
  const as = await startFixture(t);
  const tokenStore = createMemoryTokenStore();
  const person = createPerson();
  const first = await open(t, [entryFor(as)], { tokenStore, onAuthorizationUrl: person.onAuthorizationUrl });
  assert.equal(text(await first.tools.notes__read_notes.execute({})), '(no notes)');
  await first.close();
  assert.equal(person.visits.length, 1);
  const before = as.requests.length;

  const again = createPerson();
  const second = await open(t, [entryFor(as)], { tokenStore, onAuthorizationUrl: again.onAuthorizationUrl });
  assert.deepEqual(second.diagnostics, []);
  assert.equal(text(await second.tools.notes__read_notes.execute({})), '(no notes)');
  assert.equal(again.visits.length, 0, 'no person was asked');
  const since = as.requests.slice(before);
  assert.equal(since.filter((r) => r.endpoint === '/authorize').length, 0, 'no authorization request');
  assert.equal(since.filter((r) => r.endpoint === '/register').length, 0, 'the registration was kept too');
  assert.equal(since.filter((r) => r.server === 'rs' && r.headers.authorization === undefined).length, 0, 'the stored token went with the first request');
});

test('an expiring access token is refreshed before it expires, with rotation; no tool call is sent twice', async (t) => {
  const as = await startFixture(t, { knobs: { accessTokenTtl: 2 } });
  const person = createPerson();
  const { tools } = await open(t, [entryFor(as)], { onAuthorizationUrl: person.onAuthorizationUrl });
  const firstRefreshToken = as.refreshTokens()[0];
  for (let i = 0; i < 3; i++) {
    if (i > 0) await new Promise((resolve) => setTimeout(resolve, 2200));
    assert.equal(text(await tools.notes__read_notes.execute({})), '(no notes)');
  }
  // Each refresh presented the newest refresh token: a chain, never a rotated-out token.
  const chain = refreshes(as);
  assert.ok(chain.length >= 2, `${chain.length} refreshes`);
  assert.equal(chain[0].presented, firstRefreshToken);
  for (let i = 1; i < chain.length; i++) assert.equal(chain[i].presented, chain[i - 1].issued, `refresh ${i} reused an old token`);
  assert.deepEqual(as.events.filter((e) => e.type === 'refresh-reuse'), []);
  assert.equal(as.revoked.size, 0, 'the token family is alive');
  // Three calls, each seen once, each with a live token; one login only.
  assert.equal(as.mcpCalls('read_notes').length, 3);
  assert.equal(as.toolCalls.length, 3);
  assert.equal(person.visits.length, 1);
});

test('a token the server stops accepting: the call is not re-sent, it rejects with mcp_auth_error after a refresh, and the next call works', async (t) => {
  const as = await startFixture(t);
  const person = createPerson();
  const { tools } = await open(t, [entryFor(as)], { onAuthorizationUrl: person.onAuthorizationUrl });
  const [firstRefreshToken] = as.refreshTokens();
  as.expireAccessTokens();

  const error = await rejection(tools.notes__read_notes.execute({}));
  assert.ok(error instanceof McpAuthError, String(error));
  assert.equal(error.code, 'mcp_auth_error');
  assert.equal(error.reauthorized, true);
  assert.equal(as.mcpCalls('read_notes').length, 1, 'the rejected call was sent once');
  assert.deepEqual(as.toolCalls, [], 'and never reached the tool');
  assert.deepEqual(refreshes(as).map((e) => e.presented), [firstRefreshToken]);
  assert.equal(person.visits.length, 1, 'a refresh, not a new login');

  assert.equal(text(await tools.notes__read_notes.execute({})), '(no notes)');
  assert.equal(as.mcpCalls('read_notes').length, 2, "the agent's second call, sent once");
  assert.equal(as.toolCalls.length, 1);
});

test('an ambiguous refresh (rotated at the server, its answer lost) is never replayed', async (t) => {
  const as = await startFixture(t);
  const person = createPerson();
  const { tools } = await open(t, [entryFor(as)], { onAuthorizationUrl: person.onAuthorizationUrl });
  as.expireAccessTokens();
  as.knobs.dropRefreshResponses = 1;
  const error = await rejection(tools.notes__read_notes.execute({}));
  assert.equal(error.code, 'mcp_auth_error', String(error));
  assert.equal(as.events.filter((e) => e.type === 'refresh-answer-dropped').length, 1);
  assert.equal(as.mcpCalls('read_notes').length, 1, 'the call was not re-sent');
  assert.deepEqual(as.toolCalls, []);
  // Whatever comes next (a new login, or a refusal), the spent refresh token is not presented again:
  // that would look like theft to the server and revoke the whole grant.
  await tools.notes__read_notes.execute({}).catch(() => {});
  assert.deepEqual(as.events.filter((e) => e.type === 'refresh-reuse'), []);
  assert.equal(refreshes(as).length, 1);
});

test('credentials are kept per authorization server: a store shared with another server of the same name never sends it a foreign token', async (t) => {
  const first = await startFixture(t);
  const second = await startFixture(t);
  const tokenStore = createInspectableTokenStore();
  const person = createPerson();
  const one = await open(t, [entryFor(first)], { tokenStore, onAuthorizationUrl: person.onAuthorizationUrl });
  await one.tools.notes__read_notes.execute({});
  await one.close();

  // The same entry name, now pointing at another MCP server with its own authorization server.
  const two = await open(t, [entryFor(second)], { tokenStore, onAuthorizationUrl: person.onAuthorizationUrl });
  assert.deepEqual(two.diagnostics, []);
  assert.equal(text(await two.tools.notes__read_notes.execute({})), '(no notes)');
  assert.equal(person.visits.length, 2, 'a login at the second authorization server');
  assert.equal(new URL(person.visits[1].url).origin, new URL(second.issuer).origin);
  const foreign = [...first.accessTokens(), ...first.refreshTokens(), ...first.secrets()];
  for (const request of second.requests) {
    const sent = JSON.stringify([request.headers, request.body, request.query]);
    for (const secret of foreign) assert.ok(!sent.includes(secret), `${request.path} received a credential of the first server`);
  }
  for (const request of second.to('/token')) assert.notEqual(request.form.client_id, first.registrations[0].client.client_id);
});

test('step-up: insufficient_scope on write_note brings a second authorization with notes:write; the call is not re-sent; calling again succeeds', async (t) => {
  const as = await startFixture(t);
  const person = createPerson();
  const { tools } = await open(t, [entryFor(as)], { onAuthorizationUrl: person.onAuthorizationUrl });
  assert.equal(text(await tools.notes__read_notes.execute({})), '(no notes)');

  const error = await rejection(tools.notes__write_note.execute({ text: 'hello' }));
  assert.equal(error.code, 'mcp_auth_error');
  assert.equal(error.reauthorized, true);
  assert.equal(person.visits.length, 2, 'the person was asked again');
  const scope = new URL(person.visits[1].url).searchParams.get('scope').split(' ');
  assert.ok(scope.includes(NOTES_WRITE) && scope.includes(NOTES_READ), `step-up scope ${scope}`);
  assert.equal((await person.visits[1].landing).status, 200);
  assert.equal(as.mcpCalls('write_note').length, 1, 'the refused call was not re-sent');
  assert.deepEqual(as.notes, []);

  assert.equal(text(await tools.notes__write_note.execute({ text: 'hello' })), 'saved note 1');
  assert.deepEqual(as.notes, ['hello']);
  assert.equal(as.mcpCalls('write_note').length, 2);
  // The new token carries both scopes: reading still works.
  assert.equal(text(await tools.notes__read_notes.execute({})), 'hello');
});

test('logout revokes at the authorization server and removes the tokens; then the server is degraded with how to log in, and a plain server still works', async (t) => {
  const as = await startFixture(t);
  const tokenStore = createInspectableTokenStore();
  const person = createPerson();
  const entry = entryFor(as);
  const first = await open(t, [entry], { tokenStore, onAuthorizationUrl: person.onAuthorizationUrl });
  await first.tools.notes__read_notes.execute({});
  await first.close();
  const [accessToken] = as.accessTokens();
  const [refreshToken] = as.refreshTokens();

  await logoutMcpServer(entry, { tokenStore });
  const revocations = as.to('/revoke');
  assert.ok(revocations.length >= 1);
  assert.ok(revocations.some((r) => r.form.token === refreshToken), 'the refresh token was revoked');
  assert.ok(as.revoked.has(refreshToken) && as.revoked.has(accessToken));
  const stored = [...tokenStore.values.values()].join('\n');
  for (const token of [...as.accessTokens(), ...as.refreshTokens()]) assert.ok(!stored.includes(token), 'a token is still stored');
  const replay = await fetch(as.mcpUrl, { method: 'POST', headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json' }, body: '{}' });
  assert.equal(replay.status, 401, 'the old access token is dead at the server');

  const plain = fixture('plain');
  const before = as.requests.length;
  const after = await open(t, [entry, plain.entry], { tokenStore });
  const degraded = after.diagnostics.filter((d) => d.code === 'server-degraded');
  assert.equal(degraded.length, 1, JSON.stringify(after.diagnostics));
  assert.equal(degraded[0].server, 'notes');
  assert.equal(degraded[0].errorCode, 'mcp_auth_error');
  assert.match(degraded[0].message, /onAuthorizationUrl|log ?in/i);
  assert.equal(after.tools.notes__read_notes, undefined);
  assert.equal(text(await after.tools.plain__echo.execute({ text: 'still here' })), 'echo: still here');
  assert.equal(as.requests.slice(before).filter((r) => r.endpoint === '/authorize').length, 0);
});

test('device flow: the person gets the verification URL and user code, approves, and the tools work', async (t) => {
  const as = await startFixture(t);
  const prompts = [];
  const { tools, diagnostics } = await open(t, [entryFor(as, { grant: 'device_code' })], {
    onAuthorizationUrl(url, info) {
      prompts.push({ url, info });
      setTimeout(() => as.approve(info.userCode), 300);
    },
  });
  assert.deepEqual(diagnostics, []);
  assert.equal(prompts.length, 1);
  const [{ url, info }] = prompts;
  assert.equal(info.server, 'notes');
  assert.equal(info.grant, 'device_code');
  assert.match(info.userCode, /^[0-9A-F]{4}-[0-9A-F]{4}$/);
  assert.ok(info.expiresAt > Date.now() && info.expiresAt <= Date.now() + 300_000, `expiresAt ${info.expiresAt}`);
  assert.ok([`${as.issuer}/device`, `${as.issuer}/device?user_code=${info.userCode}`].includes(url), url);

  const [request, ...more] = as.to('/device_authorization');
  assert.equal(more.length, 0);
  assert.deepEqual(request.form.resource, [as.mcpUrl]);
  assert.ok(request.form.scope.split(' ').includes(NOTES_READ));
  assert.ok(as.devicePolls.length >= 1);
  assert.deepEqual(as.devicePolls.filter((p) => p.early), [], 'never polled faster than the interval');
  assert.equal(as.to('/authorize').length, 0);
  assert.equal(as.registrations.length, 1);
  assert.ok(as.registrations[0].request.grant_types.includes(DEVICE_GRANT), 'registered for the device grant');
  assert.equal(tokenRequests(as, DEVICE_GRANT).length, as.devicePolls.length);
  assert.equal(text(await tools.notes__read_notes.execute({})), '(no notes)');
});

test('device flow honours slow_down: every poll after it waits five seconds more', async (t) => {
  // A 2 s interval, not 1: node:http closes an idle keep-alive connection 5 + 1 s after its last
  // response, and a poll due at exactly 1 + 5 s would race that close on the pooled connection.
  const interval = 2;
  const as = await startFixture(t, { knobs: { slowDownPolls: 1, deviceInterval: interval } });
  const { tools, diagnostics } = await open(t, [entryFor(as, { grant: 'device_code' })], {
    onAuthorizationUrl: (url, info) => as.approve(info.userCode),
  });
  assert.deepEqual(diagnostics, []);
  const [slowed, next] = as.devicePolls;
  assert.ok(next, 'polled again after slow_down');
  const waited = next.at - slowed.at;
  assert.ok(waited >= (interval + 5) * 1000 - 150, `waited ${waited} ms after slow_down`);
  assert.equal(text(await tools.notes__read_notes.execute({})), '(no notes)');
});

for (const method of ['client_secret_basic', 'client_secret_post']) {
  test(`client credentials with a pre-registered confidential client (${method}); step-up without a person`, async (t) => {
    const client = { client_id: `svc-${method}`, client_secret: `svc-secret-${method}-7f3a9c`, grant_types: ['client_credentials'], token_endpoint_auth_method: method, scope: `${NOTES_READ} ${NOTES_WRITE}` };
    const as = await startFixture(t, { clients: [client] });
    const oauth = { grant: 'client_credentials', clientId: client.client_id, clientSecret: client.client_secret, tokenEndpointAuthMethod: method };
    const { tools, diagnostics } = await open(t, [entryFor(as, oauth)]);
    assert.deepEqual(diagnostics, []);
    assert.equal(text(await tools.notes__read_notes.execute({})), '(no notes)');
    assert.equal(as.to('/register').length, 0);
    assert.equal(as.to('/authorize').length, 0);

    const [request] = tokenRequests(as, 'client_credentials');
    assert.deepEqual(request.form.resource, [as.mcpUrl]);
    if (method === 'client_secret_basic') {
      const basic = Buffer.from(`${client.client_id}:${client.client_secret}`).toString('base64');
      assert.equal(request.headers.authorization, `Basic ${basic}`);
      assert.equal(request.form.client_secret, undefined);
    } else {
      assert.equal(request.headers.authorization, undefined);
      assert.equal(request.form.client_id, client.client_id);
      assert.equal(request.form.client_secret, client.client_secret);
    }

    // Writing needs notes:write: whether the first token had it or a new one is fetched, nobody is asked.
    let written;
    try {
      written = await tools.notes__write_note.execute({ text: 'from a service' });
    } catch (error) {
      assert.equal(error.code, 'mcp_auth_error');
      assert.equal(error.reauthorized, true);
      written = await tools.notes__write_note.execute({ text: 'from a service' });
    }
    assert.equal(text(written), 'saved note 1');
    assert.deepEqual(as.notes, ['from a service']);
  });
}

test('the authorization server refuses the login: the server is degraded with mcp_auth_error and nothing is exchanged', async (t) => {
  const as = await startFixture(t, { knobs: { denyAuthorization: true } });
  const person = createPerson();
  const plain = fixture('plain');
  const { tools, diagnostics } = await open(t, [entryFor(as), plain.entry], { onAuthorizationUrl: person.onAuthorizationUrl });
  const degraded = diagnostics.find((d) => d.code === 'server-degraded' && d.server === 'notes');
  assert.ok(degraded, JSON.stringify(diagnostics));
  assert.equal(degraded.errorCode, 'mcp_auth_error');
  assert.match(degraded.message, /access_denied|denied|refused/i);
  assert.equal(person.visits.length, 1, 'asked once, not in a loop');
  assert.equal(as.to('/token').length, 0);
  assert.equal(tools.notes__read_notes, undefined);
  assert.ok(tools.plain__echo);
});

/** A login's requests have `connectTimeoutMs` in all (the person's own time aside): small here, so a hang shows. */
const DRIP_CONNECT_TIMEOUT_MS = 3_000;
/** Well over the bound, well under a drip's end (hours): what "settles in time" means on a loaded machine. */
const DRIP_SETTLE_MS = 10_000;

for (const [drip, step] of [
  ['resource-metadata', /is unavailable: fetching the protected-resource metadata timed out: http:\/\/127\.0\.0\.1:\d+\/\.well-known\/oauth-protected-resource\/mcp sent no complete answer within \d+ ms/],
  ['server-metadata', /is unavailable: fetching the authorization-server metadata timed out: http:\/\/127\.0\.0\.1:\d+\/\.well-known\/oauth-authorization-server sent no complete answer within \d+ ms/],
  ['registration', /is unavailable: dynamic client registration timed out: http:\/\/127\.0\.0\.1:\d+\/register sent no complete answer within \d+ ms/],
]) {
  test(`a ${drip} answer that drips a byte every 400 ms ends the login within connectTimeoutMs: mcp_auth_error naming the step`, async (t) => {
    // The challenge's resource_metadata URL carries a query, which no message may show.
    const as = await startFixture(t, { knobs: { drip }, resourceMetadataQuery: 'tenant=sekrit-tenant-key' });
    const person = createPerson();
    const started = Date.now();
    const opening = open(t, [entryFor(as)], { onAuthorizationUrl: person.onAuthorizationUrl, connectTimeoutMs: DRIP_CONNECT_TIMEOUT_MS });
    const settled = await Promise.race([opening, new Promise((resolve) => setTimeout(resolve, 3 * DRIP_SETTLE_MS).unref())]);
    const elapsed = Date.now() - started;
    assert.ok(settled, `mcpTools had not settled after ${elapsed} ms`);
    assert.ok(elapsed < DRIP_SETTLE_MS, `settled after ${elapsed} ms`);
    assert.ok(as.requests.some((r) => r.dripped === drip), 'the dripping endpoint was reached');
    const degraded = settled.diagnostics.find((d) => d.code === 'server-degraded' && d.server === 'notes');
    assert.ok(degraded, JSON.stringify(settled.diagnostics));
    assert.equal(degraded.errorCode, 'mcp_auth_error');
    assert.match(degraded.message, step);
    assert.doesNotMatch(JSON.stringify(settled.diagnostics), /sekrit|\?tenant/);
    assert.equal(person.visits.length, 0, 'nobody was sent to a login page');
    assert.equal(as.to('/token').length, 0);
    assert.equal(settled.tools.notes__read_notes, undefined);
  });
}

test('the person refuses a step-up: the call rejects with a typed mcp_auth_error, not reauthorized, and is not re-sent', async (t) => {
  const as = await startFixture(t);
  const person = createPerson();
  const { tools } = await open(t, [entryFor(as)], { onAuthorizationUrl: person.onAuthorizationUrl });
  as.knobs.denyAuthorization = true;
  const error = await rejection(tools.notes__write_note.execute({ text: 'refused' }));
  assert.ok(error instanceof McpAuthError, String(error));
  assert.equal(error.code, 'mcp_auth_error');
  assert.notEqual(error.reauthorized, true);
  assert.equal(person.visits.length, 2);
  assert.equal(as.mcpCalls('write_note').length, 1);
  assert.deepEqual(as.notes, []);
  // The token it had still serves what it covers.
  assert.equal(text(await tools.notes__read_notes.execute({})), '(no notes)');
});

for (const iss of ['wrong', 'missing']) {
  test(`an authorization response with a ${iss} iss is refused (RFC 9207): the code is never exchanged`, async (t) => {
    const as = await startFixture(t, { knobs: { iss } });
    const person = createPerson();
    const { tools, diagnostics } = await open(t, [entryFor(as)], { onAuthorizationUrl: person.onAuthorizationUrl });
    const degraded = diagnostics.find((d) => d.code === 'server-degraded' && d.server === 'notes');
    assert.ok(degraded, JSON.stringify(diagnostics));
    assert.equal(degraded.errorCode, 'mcp_auth_error');
    assert.match(degraded.message, /\biss\b|issuer/i);
    const landing = await person.visits[0].landing;
    assert.ok(new URL(landing.url).searchParams.get('code'), 'the authorization server did issue a code');
    assert.equal(as.to('/token').length, 0, 'which was not exchanged');
    assert.equal(tools.notes__read_notes, undefined);
  });
}

for (const kind of ['sqlite', 'memory']) {
  test(`no token, code, verifier or client secret appears in a diagnostic, an error, or a ${kind} connection-store row`, async (t) => {
    const client = { client_id: 'desktop-app', client_secret: 'desktop-secret-9b1e44d2', redirect_uris: ['http://127.0.0.1/callback'], grant_types: ['authorization_code', 'refresh_token'], token_endpoint_auth_method: 'client_secret_basic' };
    const as = await startFixture(t, { clients: [client] });
    const storagePath = kind === 'sqlite' ? scratchFile('oauth-store.db') : null;
    const storage = kind === 'sqlite' ? createSqliteMcpConnectionStore(storagePath) : createMemoryMcpConnectionStore();
    const tokenStore = createInspectableTokenStore();
    const person = createPerson();
    const diagnostics = [];
    const errors = [];
    const entry = entryFor(as, { clientId: client.client_id, clientSecret: client.client_secret, tokenEndpointAuthMethod: 'client_secret_basic' });
    const common = { storage, tokenStore, authorizationTimeoutMs: AUTHORIZATION_TIMEOUT_MS, onDiagnostic: (d) => diagnostics.push(d) };
    const attempt = (pending) => pending.catch((error) => void errors.push(error));

    // A login, a refresh after the server dropped the token, a refused step-up, a step-up.
    const toolset = await mcpTools([entry], { ...common, onAuthorizationUrl: person.onAuthorizationUrl });
    t.after(toolset.close);
    await toolset.tools.notes__read_notes.execute({});
    as.expireAccessTokens();
    await attempt(toolset.tools.notes__read_notes.execute({}));
    as.knobs.denyAuthorization = true;
    await attempt(toolset.tools.notes__write_note.execute({ text: 'refused' }));
    as.knobs.denyAuthorization = false;
    await attempt(toolset.tools.notes__write_note.execute({ text: 'stepped up' }));
    await toolset.tools.notes__write_note.execute({ text: 'written' });
    await toolset.close();
    assert.equal(errors.length, 3, errors.map(String).join('\n'));
    assert.ok(refreshes(as).length >= 1 && tokenRequests(as, 'authorization_code').length >= 2);

    // A code refused for its wrong iss, and a login nobody can do, each as a degraded server.
    as.knobs.iss = 'wrong';
    const wrongIss = await mcpTools([entry], { ...common, tokenStore: createInspectableTokenStore(), onAuthorizationUrl: person.onAuthorizationUrl });
    await wrongIss.close();
    await logoutMcpServer(entry, { tokenStore });
    const nobody = await mcpTools([entry], common);
    await nobody.close();
    assert.ok(diagnostics.filter((d) => d.code === 'server-degraded').length >= 2, JSON.stringify(diagnostics));
    await Promise.all(person.visits.map((v) => v.landing));

    const secrets = [...as.secrets(), client.client_secret];
    assert.ok(secrets.length >= 8, `${secrets.length} secrets to look for`);
    const places = {
      diagnostics: JSON.stringify(diagnostics) + diagnostics.map((d) => inspect(d, { depth: null })).join('\n'),
      errors: errors.map((e) => `${e.message}\n${e.stack}\n${inspect(e, { depth: null })}\n${JSON.stringify(e)}`).join('\n'),
      'connection-store rows': JSON.stringify(await storage.list()),
      'connection-store file': ['', '-wal', '-journal'].map((suffix) => (storagePath && existsSync(storagePath + suffix) ? readFileSync(storagePath + suffix, 'latin1') : '')).join('\n'),
      'token-store keys': [...tokenStore.values.keys()].join('\n'),
    };
    assert.ok(places['connection-store rows'].includes(as.mcpUrl), 'the row for the server was written');
    for (const [place, content] of Object.entries(places)) {
      for (const secret of secrets) assert.ok(!content.includes(secret), `${place} holds a secret (${secret.slice(0, 8)}…)`);
    }
  });
}

test('the fixture itself refuses what a real authorization server refuses', async (t) => {
  // Guards the guard: if the fixture accepted anything, the tests above could pass against a sloppy client.
  const as = await startFixture(t);
  const form = (body) => ({ method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(body) });
  const registration = await fetch(`${as.issuer}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ redirect_uris: ['http://127.0.0.1/callback'], grant_types: ['authorization_code', 'refresh_token'], token_endpoint_auth_method: 'none', application_type: 'native' }),
  });
  assert.equal(registration.status, 201);
  const { client_id: clientId } = await registration.json();
  const verifier = 'v'.repeat(43);
  const authorize = async (overrides) => {
    const url = new URL(as.metadata.authorization_endpoint);
    const params = { response_type: 'code', client_id: clientId, redirect_uri: 'http://127.0.0.1:4321/callback', state: 's'.repeat(16), code_challenge: createHash('sha256').update(verifier).digest('base64url'), code_challenge_method: 'S256', resource: as.mcpUrl, ...overrides };
    for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.set(k, v);
    const response = await fetch(url, { redirect: 'manual' });
    return response.status === 302 ? new URL(response.headers.get('location')).searchParams : response.status;
  };
  assert.equal((await authorize({ code_challenge_method: 'plain' })).get('error'), 'invalid_request');
  assert.equal((await authorize({ code_challenge: undefined })).get('error'), 'invalid_request');
  assert.equal((await authorize({ resource: 'http://127.0.0.1:1/mcp' })).get('error'), 'invalid_target');
  assert.equal(await authorize({ redirect_uri: 'http://example.com/callback' }), 400, 'no open redirect');
  const good = await authorize({});
  assert.equal(good.get('iss'), as.issuer);
  const exchange = (overrides) => fetch(as.metadata.token_endpoint, form({ grant_type: 'authorization_code', client_id: clientId, code: good.get('code'), redirect_uri: 'http://127.0.0.1:4321/callback', code_verifier: verifier, resource: as.mcpUrl, ...overrides }));
  assert.equal((await (await exchange({ code_verifier: 'w'.repeat(43) })).json()).error, 'invalid_grant');
  assert.equal((await (await exchange({ redirect_uri: 'http://127.0.0.1:4322/callback' })).json()).error, 'invalid_grant');
  const tokens = await (await exchange({})).json();
  assert.ok(tokens.access_token && tokens.refresh_token);
  const refresh = (token) => fetch(as.metadata.token_endpoint, form({ grant_type: 'refresh_token', client_id: clientId, refresh_token: token }));
  assert.equal((await refresh(tokens.refresh_token)).status, 200);
  assert.equal((await (await refresh(tokens.refresh_token)).json()).error, 'invalid_grant', 'a rotated refresh token works once');
  assert.equal(as.events.filter((e) => e.type === 'refresh-reuse').length, 1);
  assert.ok(as.revoked.has(tokens.access_token), 'reuse revoked the whole family');
  assert.equal((await (await exchange({})).json()).error, 'invalid_grant', 'a code works once');
  const mcp = await fetch(as.mcpUrl, { method: 'POST', headers: { authorization: `Bearer ${tokens.access_token}`, 'content-type': 'application/json' }, body: '{}' });
  assert.equal(mcp.status, 401);
  assert.match(mcp.headers.get('www-authenticate'), /^Bearer error="invalid_token", .*resource_metadata="http:\/\/127\.0\.0\.1:\d+\/\.well-known\/oauth-protected-resource\/mcp"/);
});
