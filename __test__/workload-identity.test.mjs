// Workload identity federation (SEP-1933) end to end: grant `workload_identity` against the OAuth fixture,
// whose authorization server verifies the workload's JWT with the `jose` package (signature, audience =
// its issuer, expiry) before it issues a token for the MCP server. The assertion comes from a file (as a
// Kubernetes projected service-account token does) or from the host's callback; it is fetched again
// before it expires, the token is renewed before it expires, and a bad assertion is a typed error that
// names no secret. Configuration mistakes are refused when the toolset is made.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { generateKeyPair, SignJWT } from 'jose';
import { mcpTools } from '../dist/index.js';
import { JWT_BEARER_GRANT, NOTES_READ, startOAuthFixture } from './fixtures/oauth-server.mjs';
import { scratchFile } from './helpers.mjs';

const WORKLOAD_ISSUER = 'https://cluster.example/serviceaccount';
const CLIENT_ID = 'workload-client';

async function startFixture(t, knobs = {}) {
  const keys = await generateKeyPair('ES256');
  const as = await startOAuthFixture({
    workload: { publicKey: keys.publicKey, issuer: WORKLOAD_ISSUER },
    clients: [{ client_id: CLIENT_ID, token_endpoint_auth_method: 'none', grant_types: [JWT_BEARER_GRANT] }],
    knobs,
  });
  t.after(as.close);
  /** A workload JWT for this authorization server, living `seconds` from now. */
  const assertion = (seconds, { key = keys.privateKey, audience = as.issuer } = {}) =>
    new SignJWT({ 'kubernetes.io': { namespace: 'agents' } })
      .setProtectedHeader({ alg: 'ES256', typ: 'JWT' })
      .setIssuer(WORKLOAD_ISSUER)
      .setSubject('system:serviceaccount:agents:mcp-client')
      .setAudience(audience)
      .setIssuedAt()
      .setExpirationTime(Math.floor(Date.now() / 1000) + seconds)
      .sign(key);
  return { as, assertion };
}

async function open(t, as, oauth) {
  const diagnostics = [];
  const toolset = await mcpTools([{ name: 'notes', type: 'streamable-http', url: as.mcpUrl, oauth: { grant: 'workload_identity', clientId: CLIENT_ID, ...oauth } }], {
    onDiagnostic: (d) => diagnostics.push(d),
  });
  t.after(toolset.close);
  return { ...toolset, diagnostics };
}

const text = (result) => result.content[0].text;
const grants = (as) => as.to('/token').filter((r) => r.form?.grant_type === JWT_BEARER_GRANT);
const degraded = (toolset) => toolset.diagnostics.find((d) => d.code === 'server-degraded');

test('an assertion file is exchanged with the JWT bearer grant for the resource; the authorization server verifies it (jose); the tools work', async (t) => {
  const { as, assertion } = await startFixture(t);
  const file = scratchFile('wif-token');
  const jwt = await assertion(3600);
  writeFileSync(file, `${jwt}\n`);
  const toolset = await open(t, as, { assertionFile: file });
  assert.equal(text(await toolset.tools.notes__read_notes.execute({})), '(no notes)');
  const [grant] = grants(as);
  assert.equal(grant.form.assertion, jwt);
  assert.deepEqual(grant.form.resource, [as.mcpUrl]);
  assert.equal(grant.form.scope, NOTES_READ);
  assert.equal(grant.form.client_id, CLIENT_ID);
  assert.equal(grant.headers.authorization, undefined, 'a public client: no client secret');
  assert.deepEqual(as.assertions.map((a) => a.ok), [true]);
  assert.equal(as.to('/authorize').length + as.to('/register').length, 0, 'no person, no registration');
});

test('the assertion is read again as it nears its expiry, and the token is renewed before it expires: no request is refused', async (t) => {
  const { as, assertion } = await startFixture(t, { accessTokenTtl: 2 });
  const file = scratchFile('wif-rotating-token');
  const first = await assertion(61); // good for the margin (a minute) now, and within it a second later
  writeFileSync(file, first);
  const toolset = await open(t, as, { assertionFile: file });
  await toolset.tools.notes__read_notes.execute({});
  // The platform rotates the file, as kubelet does a projected token.
  const second = await assertion(3600);
  writeFileSync(file, second);
  await new Promise((resolve) => setTimeout(resolve, 1_200));
  assert.equal(text(await toolset.tools.notes__read_notes.execute({})), '(no notes)');
  assert.deepEqual(grants(as).map((g) => g.form.assertion), [first, second], 'renewed with the rotated assertion');
  assert.equal(as.toolCalls.length, 2);
  assert.equal(as.mcpCalls('read_notes').length, 2, 'neither call was refused and sent again');
  assert.deepEqual(toolset.diagnostics.filter((d) => d.code === 'server-degraded'), []);
});

test('the host\'s oauth.assertion callback gives the assertion', async (t) => {
  const { as, assertion } = await startFixture(t);
  let asked = 0;
  const jwt = await assertion(3600);
  const toolset = await open(t, as, {
    assertion: async () => {
      asked++;
      return jwt;
    },
  });
  assert.equal(text(await toolset.tools.notes__read_notes.execute({})), '(no notes)');
  assert.equal(asked, 1);
  assert.equal(grants(as)[0].form.assertion, jwt);
});

test('a bad assertion is a typed error that names its source and no secret; nothing malformed or expired is sent', async (t) => {
  const { as, assertion } = await startFixture(t);
  const file = scratchFile('wif-bad-token');
  for (const [content, says] of [
    ['sekrit-not-a-jwt-value', /not a compact JWT/],
    [await assertion(-30), /has expired/],
  ]) {
    writeFileSync(file, content);
    const toolset = await open(t, as, { assertionFile: file });
    const error = degraded(toolset);
    assert.equal(error?.errorCode, 'mcp_auth_error', JSON.stringify(toolset.diagnostics));
    assert.match(error.message, says);
    assert.match(error.message, /oauth\.assertionFile/);
    assert.ok(!JSON.stringify(toolset.diagnostics).includes(content), 'the assertion is not quoted');
    await toolset.close();
  }
  assert.equal(grants(as).length, 0, 'nothing was sent to the token endpoint');

  // One the authorization server refuses (signed by another key): typed, and the assertion is not quoted.
  const stranger = await generateKeyPair('ES256');
  const forged = await assertion(3600, { key: stranger.privateKey });
  const toolset = await open(t, as, { assertion: () => forged });
  const error = degraded(toolset);
  assert.equal(error?.errorCode, 'mcp_auth_error');
  assert.match(error.message, /invalid_grant/);
  assert.ok(!JSON.stringify(toolset.diagnostics).includes(forged));
  assert.deepEqual(as.assertions.map((a) => a.ok), Array(as.assertions.length).fill(false));
});

test('an assertion whose aud names another authorization server is not sent to the one the MCP server names, unless authorizationServer pins it', async (t) => {
  const { as, assertion } = await startFixture(t);
  // A platform token meant for the real authorization server; the MCP server points at this one instead.
  const meantElsewhere = await assertion(3600, { audience: 'https://real-as.example' });
  const toolset = await open(t, as, { assertion: () => meantElsewhere });
  const error = degraded(toolset);
  assert.equal(error?.errorCode, 'mcp_auth_error', JSON.stringify(toolset.diagnostics));
  assert.match(error.message, /aud names neither it nor its token endpoint/);
  assert.match(error.message, /oauth\.authorizationServer/);
  assert.ok(!JSON.stringify(toolset.diagnostics).includes(meantElsewhere), 'the assertion is not quoted');
  assert.equal(grants(as).length, 0, 'the assertion never reached the token endpoint');
  await toolset.close();

  // An audience naming the token endpoint is as good as one naming the issuer: sent (this fixture
  // itself accepts only its issuer, and refuses it there).
  const forEndpoint = await assertion(3600, { audience: `${as.issuer}/token` });
  const byEndpoint = await open(t, as, { assertion: () => forEndpoint });
  assert.deepEqual(grants(as).map((g) => g.form.assertion), [forEndpoint]);
  await byEndpoint.close();

  // With the authorization server pinned by the host, the audience is the platform's business: sent.
  const pinned = await open(t, as, { assertion: () => meantElsewhere, authorizationServer: as.issuer });
  assert.equal(degraded(pinned)?.errorCode, 'mcp_auth_error');
  assert.deepEqual(grants(as).map((g) => g.form.assertion), [forEndpoint, meantElsewhere], 'sent where the host pinned it');
});

test('workload identity settings are checked when the toolset is made', async () => {
  const url = 'http://127.0.0.1:9/mcp';
  const present = scratchFile('wif-present-token');
  writeFileSync(present, 'a.b.c');
  for (const [oauth, says] of [
    [{ grant: 'workload_identity' }, /needs assertionFile \(a path\) or assertion \(a function\)/],
    [{ grant: 'workload_identity', assertionFile: 'relative/token' }, /absolute path/],
    [{ grant: 'workload_identity', assertionFile: '/nonexistent/mcpferry/token' }, /not a file/],
    [{ grant: 'workload_identity', assertion: 'eyJhbGciOi.x.y' }, /must be a function/],
    [{ assertionFile: present }, /only with grant workload_identity/],
    [{ grant: 'workload_identity', assertionFile: present, assertion: () => 'x' }, /not both/],
  ]) {
    const error = await mcpTools([{ name: 'w', type: 'streamable-http', url, oauth }]).then(
      () => assert.fail(`accepted ${JSON.stringify(oauth)}`),
      (e) => e,
    );
    assert.equal(error.code, 'mcp_config_invalid', `${JSON.stringify(oauth)}: ${error.message}`);
    assert.match(error.message, says);
    assert.doesNotMatch(error.message, /eyJhbGciOi/);
  }
});
