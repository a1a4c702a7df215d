// DPoP (RFC 9449, the MCP extension io.modelcontextprotocol/auth/dpop) end to end against the OAuth
// fixture with `dpop: true`: its authorization server and MCP server verify every proof with the `jose`
// package (signature, typ, htm, htu, iat, jti replay, ath, and the token's key binding), so what passes
// here was checked by a JOSE implementation other than mcpferry's own. Also: nonces answered with one
// retry and never more, the key kept across a restart by each token store, refresh with a proof, and the
// bearer path unchanged where DPoP is not offered.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { createMemoryTokenStore, mcpTools } from '../dist/index.js';
import { startOAuthFixture } from './fixtures/oauth-server.mjs';
import { here, scratchFile } from './helpers.mjs';

const AUTHORIZATION_TIMEOUT_MS = 10_000;
const entryFor = (as) => ({ name: 'notes', type: 'streamable-http', url: as.mcpUrl, oauth: true });

/** The person at the browser: follows each authorization URL to the loopback listener. */
function createPerson() {
  const visits = [];
  return {
    visits,
    onAuthorizationUrl(url) {
      visits.push(url);
      void fetch(url).then((r) => r.arrayBuffer(), () => {});
    },
  };
}

async function open(t, as, opts = {}) {
  const diagnostics = [];
  const person = createPerson();
  const toolset = await mcpTools([entryFor(as)], {
    authorizationTimeoutMs: AUTHORIZATION_TIMEOUT_MS,
    onAuthorizationUrl: person.onAuthorizationUrl,
    onDiagnostic: (d) => diagnostics.push(d),
    ...opts,
  });
  t.after(toolset.close);
  return { ...toolset, diagnostics, person };
}

async function startFixture(t, opts = {}) {
  const as = await startOAuthFixture({ dpop: true, ...opts });
  t.after(as.close);
  return as;
}

const text = (result) => result.content[0].text;
const proofsAt = (as, server) => as.dpopProofs.filter((p) => p.server === server);
const codeGrants = (as) => as.to('/token').filter((r) => r.form?.grant_type === 'authorization_code');
const mcpRequests = (as) => as.requests.filter((r) => r.server === 'rs' && r.path === '/mcp' && r.method === 'POST');

/** Nothing the host sees holds a proof, a token or the key's secret part. */
function assertNothingSecret(as, ...texts) {
  const secrets = as.secrets();
  for (const shown of texts) for (const secret of secrets) assert.ok(!shown.includes(secret), `a secret reached the host: ${shown}`);
}

test('DPoP where the authorization server offers it: a proof jose verifies at the token request and on every MCP request, the token presented as DPoP, never a proof twice', async (t) => {
  const as = await startFixture(t);
  const toolset = await open(t, as);
  assert.equal(text(await toolset.tools.notes__read_notes.execute({})), '(no notes)');
  assert.equal(text(await toolset.tools.notes__read_notes.execute({})), '(no notes)');

  const [tokenProof, ...others] = proofsAt(as, 'as');
  assert.equal(others.length, 0);
  assert.equal(tokenProof.ok, true, tokenProof.error);
  assert.equal(tokenProof.claims.htm, 'POST');
  assert.equal(tokenProof.claims.htu, `${as.issuer}/token`);
  assert.equal(tokenProof.claims.ath, undefined, 'no ath at the token endpoint');
  assert.deepEqual(Object.keys(tokenProof.header.jwk).sort(), ['crv', 'kty', 'x', 'y'], 'the public key only');

  const [grant] = codeGrants(as);
  const issued = as.accessTokens();
  assert.equal(issued.length, 1);
  const rsProofs = proofsAt(as, 'rs');
  assert.ok(rsProofs.length >= 3, `every MCP request with the token carries a proof (${rsProofs.length})`);
  for (const proof of rsProofs) {
    assert.equal(proof.ok, true, proof.error);
    assert.equal(proof.jkt, tokenProof.jkt, 'the key the token is bound to');
    assert.equal(proof.claims.htu, as.mcpUrl);
  }
  const authorized = mcpRequests(as).filter((r) => r.headers.authorization);
  assert.ok(authorized.every((r) => r.scheme === 'DPoP' && r.headers.authorization.startsWith('DPoP ')), 'the DPoP scheme, never Bearer');
  const jtis = as.dpopProofs.map((p) => p.claims.jti);
  assert.equal(new Set(jtis).size, jtis.length, 'a fresh proof per request');
  assert.ok(grant.headers.dpop, 'the code exchange carried the proof');
  assert.deepEqual(toolset.diagnostics.filter((d) => d.code !== 'server-connected'), []);
});

test('the bearer path is unchanged where DPoP is not offered: no proof anywhere, the token presented as Bearer', async (t) => {
  const as = await startOAuthFixture();
  t.after(as.close);
  const toolset = await open(t, as);
  assert.equal(text(await toolset.tools.notes__read_notes.execute({})), '(no notes)');
  assert.equal(as.requests.filter((r) => r.headers.dpop !== undefined).length, 0);
  assert.ok(mcpRequests(as).filter((r) => r.headers.authorization).every((r) => r.headers.authorization.startsWith('Bearer ')));
});

test('a use_dpop_nonce from the authorization server and from the MCP server is answered with one retry carrying the new nonce', async (t) => {
  const as = await startFixture(t, { knobs: { asNonce: 'once', rsNonce: 'once' } });
  const toolset = await open(t, as);
  assert.equal(text(await toolset.tools.notes__read_notes.execute({})), '(no notes)');
  assert.equal(text(await toolset.tools.notes__read_notes.execute({})), '(no notes)');
  const grants = codeGrants(as);
  assert.equal(grants.length, 2, 'the code exchange, refused for its nonce, then once more');
  const [first, second] = proofsAt(as, 'as');
  assert.equal(first.claims.nonce, undefined);
  assert.ok(second.claims.nonce, 'the retry carries the nonce the server gave');
  const demanded = as.events.filter((e) => e.type === 'dpop-nonce-demanded');
  assert.deepEqual(demanded.map((e) => e.server), ['as', 'rs'], 'one demand each: the nonce is remembered afterwards');
  const rs = proofsAt(as, 'rs');
  assert.equal(rs[0].claims.nonce, undefined);
  assert.ok(rs.slice(1).every((p) => p.claims.nonce === rs[1].claims.nonce && p.claims.nonce), 'every later proof carries the nonce');
});

test('an authorization server that always demands a new nonce gets exactly one retry; the login fails typed, with no proof in the error', async (t) => {
  const as = await startFixture(t, { knobs: { asNonce: 'always' } });
  const toolset = await open(t, as);
  const error = toolset.diagnostics.find((d) => d.code === 'server-degraded');
  assert.equal(error?.errorCode, 'mcp_auth_error', JSON.stringify(toolset.diagnostics));
  assert.match(error.message, /use_dpop_nonce/);
  // Each authorization sends its code exchange twice at most; mcpferry gives up after three authorizations in a row.
  const grants = codeGrants(as);
  const authorizations = as.to('/authorize').length;
  assert.ok(authorizations >= 1);
  assert.equal(grants.length, 2 * authorizations, `${grants.length} code exchanges for ${authorizations} authorizations`);
  assertNothingSecret(as, ...toolset.diagnostics.map((d) => JSON.stringify(d)));
});

test('an MCP server that always demands a new nonce gets exactly one retry per request, never a loop', async (t) => {
  const as = await startFixture(t, { knobs: { rsNonce: 'always' } });
  const { diagnostics } = await open(t, as);
  const error = diagnostics.find((d) => d.code === 'server-degraded');
  assert.equal(error?.errorCode, 'mcp_auth_error', JSON.stringify(diagnostics));
  assert.match(error.message, /use_dpop_nonce again/);
  const withProof = mcpRequests(as).filter((r) => r.headers.dpop);
  assert.equal(withProof.length, 2, 'the request with the token, and its one retry with the nonce');
  assert.equal(as.events.filter((e) => e.type === 'dpop-nonce-demanded').length, 2);
  assertNothingSecret(as, ...diagnostics.map((d) => JSON.stringify(d)));
});

test('a use_dpop_nonce refusing the GET stream is answered like a POST\'s: one retry with the new nonce, and the stream opens', async (t) => {
  const as = await startFixture(t, { knobs: { getStream: 'nonce' } });
  const toolset = await open(t, as);
  assert.equal(text(await toolset.tools.notes__read_notes.execute({})), '(no notes)');
  const waitFor = async (found) => {
    for (let i = 0; i < 100 && !found(); i++) await new Promise((resolve) => setTimeout(resolve, 50));
    return found();
  };
  const opened = await waitFor(() => as.events.find((e) => e.type === 'get-stream-open'));
  assert.ok(opened, `the GET stream was opened after its nonce refusal: ${JSON.stringify(as.events.map((e) => e.type))}`);
  const demanded = as.events.filter((e) => e.type === 'dpop-nonce-demanded');
  assert.deepEqual(demanded.map((e) => e.method), ['GET'], 'one refusal, answered once');
  const getProofs = proofsAt(as, 'rs').filter((p) => p.claims.htm === 'GET');
  assert.equal(getProofs.length, 2, 'the GET, and its one retry');
  assert.equal(getProofs[0].claims.nonce, undefined);
  assert.ok(getProofs[1].claims.nonce && getProofs[1].claims.nonce === opened.nonce, 'the retry carries the nonce the GET was given');
  assertNothingSecret(as, ...toolset.diagnostics.map((d) => JSON.stringify(d)));
});

test('the fixture refuses a replayed proof: the same proof sent again is answered invalid_dpop_proof', async (t) => {
  const as = await startFixture(t);
  const toolset = await open(t, as);
  await toolset.tools.notes__read_notes.execute({});
  const last = mcpRequests(as).findLast((r) => r.headers.dpop);
  const replay = await fetch(as.mcpUrl, {
    method: 'POST',
    headers: { authorization: last.headers.authorization, dpop: last.headers.dpop, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: last.body,
  });
  assert.equal(replay.status, 401);
  assert.match(replay.headers.get('www-authenticate'), /^DPoP error="invalid_dpop_proof"/);
  assert.match((await replay.json()).error_description, /replayed/);
  // And mcpferry's own requests after it still work: each had a fresh jti.
  assert.equal(text(await toolset.tools.notes__read_notes.execute({})), '(no notes)');
});

test('an access token near its expiry is refreshed with a proof of the same key (the refresh token is bound to it)', async (t) => {
  const as = await startFixture(t, { knobs: { accessTokenTtl: 2 } });
  const toolset = await open(t, as);
  await toolset.tools.notes__read_notes.execute({});
  await new Promise((resolve) => setTimeout(resolve, 1_200));
  assert.equal(text(await toolset.tools.notes__read_notes.execute({})), '(no notes)');
  const refreshes = as.to('/token').filter((r) => r.form?.grant_type === 'refresh_token');
  assert.equal(refreshes.length, 1);
  assert.ok(refreshes[0].headers.dpop, 'the refresh carried a proof');
  const [login, refresh] = proofsAt(as, 'as');
  assert.equal(refresh.ok, true, refresh.error);
  assert.equal(refresh.jkt, login.jkt);
  assert.equal(as.events.filter((e) => e.type === 'refresh').length, 1);
});

test('memory token store: a second toolset sharing it proves the same key with the stored token, with no login', async (t) => {
  const as = await startFixture(t);
  const tokenStore = createMemoryTokenStore();
  const first = await open(t, as, { tokenStore });
  await first.tools.notes__read_notes.execute({});
  await first.close();
  const loginJkt = proofsAt(as, 'as')[0].jkt;
  const before = as.dpopProofs.length;
  const second = await open(t, as, { tokenStore });
  assert.equal(text(await second.tools.notes__read_notes.execute({})), '(no notes)');
  assert.equal(second.person.visits.length, 0, 'no login');
  const after = as.dpopProofs.slice(before);
  assert.ok(after.length >= 2 && after.every((p) => p.server === 'rs' && p.ok && p.jkt === loginJkt), 'the same key, from the store');
});

const CHILD = join(here, 'fixtures', 'dpop-restart-child.mjs');

/** Run `command` (asynchronously: the fixture answers from this process) and return its JSON lines. */
async function jsonLines(command, args, env) {
  const run = await promisify(execFile)(command, args, { env: { ...process.env, ...env }, timeout: 90_000 }).catch((error) => error);
  const lines = `${run.stdout ?? ''}`.trim().split('\n').filter((l) => l.startsWith('{'));
  assert.ok(lines.length, `no output from the child: ${run.stderr ?? run.message}`);
  return lines.map((l) => JSON.parse(l));
}

function assertSameKeyAfterRestart(as, first, second) {
  assert.equal(first.text, '(no notes)', JSON.stringify(first));
  assert.equal(first.logins, 1);
  assert.equal(second.text, '(no notes)', JSON.stringify(second));
  assert.equal(second.logins, 0, 'the restarted process did not log in again');
  assert.equal(codeGrants(as).length, 1, 'one code exchange in all');
  const rs = proofsAt(as, 'rs');
  const loginJkt = proofsAt(as, 'as')[0].jkt;
  assert.ok(rs.length >= 4 && rs.every((p) => p.ok && p.jkt === loginJkt), 'both processes proved the key the token is bound to');
}

test('encrypted file token store: a restarted process proves the same key with the stored token', async (t) => {
  const as = await startFixture(t);
  const env = { DPOP_STORE: 'file', DPOP_TOKEN_FILE: scratchFile('dpop-tokens.bin'), DPOP_TOKEN_KEY: randomBytes(32).toString('hex') };
  const [first] = await jsonLines(process.execPath, [CHILD], { DPOP_MCP_URL: as.mcpUrl, ...env });
  const [second] = await jsonLines(process.execPath, [CHILD], { DPOP_MCP_URL: as.mcpUrl, ...env });
  assertSameKeyAfterRestart(as, first, second);
});

test('OS keyring token store: a restarted process proves the same key (gnome-keyring on a private session bus)', async (t) => {
  if (process.platform !== 'linux') return t.skip('the Secret Service is the Linux store');
  const onPath = (program) => spawnSync('sh', ['-c', `command -v ${program}`]).status === 0;
  const missing = ['dbus-run-session', 'gnome-keyring-daemon'].filter((program) => !onPath(program));
  if (missing.length) return t.skip(`${missing.join(' and ')} not installed (apt-get install dbus-daemon gnome-keyring)`);
  const as = await startFixture(t);
  // One session bus and keyring for both runs; each run is a new process (the restart).
  const data = scratchFile('dpop-keyring-data');
  mkdirSync(data, { recursive: true, mode: 0o700 });
  const env = { DPOP_STORE: 'keyring', DPOP_KEYRING_SERVICE: `mcpferry-dpop-${randomBytes(4).toString('hex')}`, XDG_DATA_HOME: data, XDG_RUNTIME_DIR: data };
  const both = 'printf throwaway-password | gnome-keyring-daemon --unlock --components=secrets >/dev/null 2>&1 && "$0" "$1" && "$0" "$1"';
  const lines = await jsonLines('dbus-run-session', ['--', 'sh', '-c', both, process.execPath, CHILD], { DPOP_MCP_URL: as.mcpUrl, ...env });
  assert.equal(lines.length, 2, `two runs expected: ${JSON.stringify(lines)}`);
  assertSameKeyAfterRestart(as, lines[0], lines[1]);
});
