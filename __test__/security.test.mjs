// The security gates: auth per session and per call, allowedHosts as an SSRF guard (IP tricks,
// redirects, DNS answers), policy.decide, stdio containment, and secrets kept out of every message.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { mcpTools } from '../dist/index.js';
import { startStreamableFixture } from './fixtures/http-server.mjs';
import { FIXTURE, fixture, scratchFile } from './helpers.mjs';

const session = { user: 'u-1' };
const portOf = (url) => new URL(url).port;

async function open(entries, opts = {}) {
  const diagnostics = [];
  const toolset = await mcpTools(entries, { onDiagnostic: (d) => diagnostics.push(d), ...opts });
  return { ...toolset, diagnostics };
}

test('auth: the bearer covers the handshake, is re-resolved per call, and a rotation needs no reconnect', async (t) => {
  let current = 'tok-first-1234';
  const server = await startStreamableFixture({ requireBearer: () => current });
  t.after(server.close);
  const asked = [];
  const { tools, close } = await open([{ name: 'web', type: 'streamable-http', url: server.url }], {
    session,
    auth: async (name, ctx) => (asked.push([name, ctx.session]), { token: current }),
  });
  assert.equal((await tools.web__echo.execute({ text: 'one' })).content[0].text, 'echo: one');
  current = 'tok-second-5678';
  assert.equal((await tools.web__echo.execute({ text: 'two' })).content[0].text, 'echo: two');
  await close();
  const init = server.log.find((r) => r.body?.method === 'initialize');
  assert.equal(init.headers.authorization, 'Bearer tok-first-1234');
  const list = server.log.find((r) => r.body?.method === 'tools/list');
  assert.equal(list.headers.authorization, 'Bearer tok-first-1234');
  const calls = server.calls('echo').map((r) => r.headers.authorization);
  assert.deepEqual(calls, ['Bearer tok-first-1234', 'Bearer tok-second-5678']);
  assert.equal(server.log.filter((r) => r.body?.method === 'initialize').length, 1, 'no reconnect');
  assert.deepEqual(asked[0], ['web', session]);
});

test('auth: a token never appears in an error, a diagnostic or a stderr tail', async (t) => {
  let current = 'tok-good-secret-1';
  let served = 'tok-good-secret-1';
  const server = await startStreamableFixture({ requireBearer: () => served });
  t.after(server.close);
  const { tools, close, diagnostics } = await open([{ name: 'web', type: 'streamable-http', url: server.url }], {
    session,
    auth: async () => ({ token: current }),
  });
  current = 'tok-rotated-wrong-2';
  served = 'tok-something-else';
  const error = await tools.web__echo.execute({ text: 'x' }).catch((e) => e);
  await close();
  assert.equal(error.code, 'mcp_transport_error');
  assert.match(error.message, /401/);
  // The server echoed the token back in its body; the client redacted it.
  assert.match(error.message, /\[redacted\]/);
  for (const text of [error.message, error.stack, JSON.stringify(diagnostics)]) {
    assert.doesNotMatch(text, /tok-good-secret-1|tok-rotated-wrong-2/);
  }

  // A stdio server that prints a secret it was given: the tail carries no secret.
  const printer = fixture('printer', { FIXTURE_MODE: 'exit-on-start', API_TOKEN: 'env-secret-value-99' });
  printer.entry.args = ['-e', 'console.error("using " + process.env.API_TOKEN); process.exit(1)'];
  const out = await open([printer.entry]);
  await out.close();
  const tail = out.diagnostics.find((d) => d.code === 'server-degraded').stderrTail;
  assert.match(tail, /using \[redacted\]/);
});

test('auth or an allowedHosts resolver without session is a wiring-time config error', async () => {
  const entry = { name: 'web', type: 'streamable-http', url: 'http://127.0.0.1:9/mcp' };
  await assert.rejects(mcpTools([entry], { auth: async () => ({ token: 't' }) }), { code: 'mcp_config_invalid', message: /auth requires session/ });
  await assert.rejects(mcpTools([entry], { allowedHosts: () => ['x'] }), { code: 'mcp_config_invalid', message: /requires session/ });
  await assert.rejects(
    mcpTools([{ ...entry, headers: { Authorization: 'Bearer static-secret' } }], { session, auth: async () => ({ token: 't' }) }),
    (e) => e.code === 'mcp_config_invalid' && /Authorization/.test(e.message) && !/static-secret/.test(e.message),
  );
});

test('allowedHosts: a host outside the list gets no request at all', async (t) => {
  const server = await startStreamableFixture();
  t.after(server.close);
  const port = portOf(server.url);
  const refused = [
    server.url, // 127.0.0.1 is not example.com
    `http://2130706433:${port}/mcp`, // decimal 127.0.0.1
    `http://0177.0.0.1:${port}/mcp`, // octal
    `http://[::ffff:127.0.0.1]:${port}/mcp`, // IPv4-mapped IPv6
    `http://example.com.localhost:${port}/mcp`,
  ];
  for (const url of refused) {
    const { tools, close, diagnostics } = await open([{ name: 'web', type: 'streamable-http', url }], { allowedHosts: ['example.com', 'localhost'] });
    await close();
    assert.deepEqual(Object.keys(tools), [], url);
    assert.equal(diagnostics[0].errorCode, 'mcp_host_not_allowed', url);
  }
  assert.equal(server.log.length, 0, 'the server saw nothing');
  await assert.rejects(mcpTools([{ name: 'web', type: 'streamable-http', url: `http://localhost@127.0.0.1:${port}/mcp` }], { allowedHosts: ['localhost'] }), {
    code: 'mcp_config_invalid',
  });
});

test('allowedHosts: canonical forms of a listed address and name are allowed', async (t) => {
  const server = await startStreamableFixture();
  t.after(server.close);
  const port = portOf(server.url);
  for (const [url, hosts] of [
    [`http://2130706433:${port}/mcp`, ['127.0.0.1']],
    [`http://127.1:${port}/mcp`, ['127.0.0.1']],
    [`http://LOCALHOST:${port}/mcp`, ['localhost.']],
  ]) {
    const { tools, close, diagnostics } = await open([{ name: 'web', type: 'streamable-http', url }], { allowedHosts: hosts });
    assert.deepEqual(diagnostics, [], url);
    assert.equal((await tools.web__echo.execute({ text: url })).content[0].text, `echo: ${url}`);
    await close();
  }
});

test('allowedHosts: a name resolving to an internal address is refused unless it is listed itself', async (t) => {
  const server = await startStreamableFixture();
  t.after(server.close);
  const url = `http://localhost:${portOf(server.url)}/mcp`;
  // `*` admits any name, but localhost resolves to loopback and neither it nor the address is listed.
  const wildcard = await open([{ name: 'web', type: 'streamable-http', url }], { allowedHosts: ['*'] });
  await wildcard.close();
  assert.equal(wildcard.diagnostics[0].errorCode, 'mcp_host_not_allowed');
  assert.match(wildcard.diagnostics[0].message, /internal addresses/);
  assert.equal(server.log.length, 0);
  // Listing the address vouches for it.
  const byAddress = await open([{ name: 'web', type: 'streamable-http', url }], { allowedHosts: ['*', '127.0.0.1'] });
  await byAddress.close();
  assert.deepEqual(byAddress.diagnostics, []);
});

test('allowedHosts: the resolver form is asked per server with the session', async (t) => {
  const server = await startStreamableFixture();
  t.after(server.close);
  const asked = [];
  const { tools, close } = await open([{ name: 'web', type: 'streamable-http', url: server.url }], {
    session,
    allowedHosts: async (name, ctx) => (asked.push([name, ctx.session]), ['127.0.0.1']),
  });
  await close();
  assert.ok(tools.web__echo);
  assert.deepEqual(asked, [['web', session]]);
});

test('allowedHosts: every redirect hop is checked; Authorization is dropped on a cross-origin hop', async (t) => {
  const target = await startStreamableFixture();
  t.after(target.close);
  const elsewhere = `http://localhost:${portOf(target.url)}/mcp`;
  const redirector = await startStreamableFixture({ redirectTo: () => elsewhere });
  t.after(redirector.close);

  const refused = await open([{ name: 'web', type: 'streamable-http', url: redirector.url }], { allowedHosts: ['127.0.0.1'] });
  await refused.close();
  assert.equal(refused.diagnostics[0].errorCode, 'mcp_host_not_allowed');
  assert.match(refused.diagnostics[0].message, /redirect/);
  assert.equal(target.log.length, 0, 'the redirect target saw nothing');

  const before = redirector.log.length;
  const followed = await open([{ name: 'web', type: 'streamable-http', url: redirector.url }], {
    allowedHosts: ['127.0.0.1', 'localhost'],
    session,
    auth: async () => ({ token: 'tok-cross-origin-1' }),
  });
  await followed.close();
  assert.equal(redirector.log[before].headers.authorization, 'Bearer tok-cross-origin-1');
  const arrived = target.log.find((r) => r.body?.method === 'initialize');
  assert.ok(arrived, 'the allowed redirect was followed');
  assert.equal(arrived.headers.authorization, undefined);
});

test('policy.decide gates every call; deny and failures mean the server receives nothing', async () => {
  const server = fixture('gated');
  const requests = [];
  const decisions = {
    gated__echo: { kind: 'allow' },
    gated__fail: { kind: 'deny', reason: 'not today' },
    gated__slow: { kind: 'ask', reason: 'slow is expensive' },
    gated__pid: { kind: 'ask' },
    gated__env: 'throw',
    gated__ping_client: 'reject',
    gated__big: { kind: 'sure' },
  };
  const { tools, close } = await open([server.entry], {
    session,
    policy: {
      decide(request) {
        requests.push(request);
        const d = decisions[request.toolName];
        if (d === 'throw') throw new Error('policy bug');
        if (d === 'reject') return Promise.reject(new Error('policy down'));
        return d;
      },
      ask: async (request, reason) => request.toolName === 'gated__pid' && reason === undefined,
    },
  });
  assert.equal((await tools.gated__echo.execute({ text: 'ok' })).content[0].text, 'echo: ok');
  await assert.rejects(tools.gated__fail.execute({}), { code: 'mcp_policy_denied', message: /not today/ });
  await assert.rejects(tools.gated__slow.execute({ ms: 1 }), { code: 'mcp_approval_required', message: /slow is expensive/ });
  assert.match((await tools.gated__pid.execute({})).content[0].text, /^\d+$/);
  await assert.rejects(tools.gated__env.execute({}), { code: 'mcp_policy_denied' });
  await assert.rejects(tools.gated__ping_client.execute({}), { code: 'mcp_policy_denied' });
  await assert.rejects(tools.gated__big.execute({}), { code: 'mcp_policy_denied' });
  await close();
  const called = server.received().filter((m) => m.method === 'tools/call').map((m) => m.params.name);
  assert.deepEqual(called, ['echo', 'pid']);
  assert.deepEqual(requests[0], { kind: 'tool', toolName: 'gated__echo', server: 'gated', remoteName: 'echo', args: { text: 'ok' }, session });
  assert.equal('annotations' in requests[0], false);
});

test('policy ask without an approver rejects with mcp_approval_required', async () => {
  const server = fixture('asker');
  const { tools, close } = await open([server.entry], { policy: { decide: () => ({ kind: 'ask' }) } });
  await assert.rejects(tools.asker__echo.execute({ text: 'x' }), { code: 'mcp_approval_required' });
  await close();
  assert.equal(server.received().filter((m) => m.method === 'tools/call').length, 0);
});

test('stdio containment: a symlink leaving the root skips that entry; the others load', { skip: process.platform === 'win32' && 'the launchers are #!/bin/sh scripts, and a symlink needs a privilege on Windows' }, async () => {
  const base = scratchFile('plugin');
  const root = join(base, 'plugin');
  mkdirSync(join(root, 'bin'), { recursive: true });
  const launcher = `#!/bin/sh\nexec "${process.execPath}" "${FIXTURE}"\n`;
  writeFileSync(join(root, 'bin', 'server'), launcher);
  writeFileSync(join(base, 'outside'), launcher);
  chmodSync(join(root, 'bin', 'server'), 0o755);
  chmodSync(join(base, 'outside'), 0o755);
  symlinkSync(join(base, 'outside'), join(root, 'bin', 'escape'));

  const { tools, close, diagnostics } = await open([
    { name: 'inside', type: 'stdio', command: 'bin/server', root },
    { name: 'escaping', type: 'stdio', command: 'bin/escape', root },
    { name: 'wandering', type: 'stdio', command: 'bin/server', root, cwd: '..' },
  ]);
  assert.equal((await tools.inside__echo.execute({ text: 'contained' })).content[0].text, 'echo: contained');
  await close();
  const skipped = diagnostics.filter((d) => d.code === 'server-degraded');
  assert.deepEqual(skipped.map((d) => [d.server, d.errorCode]), [
    ['escaping', 'mcp_containment_violation'],
    ['wandering', 'mcp_containment_violation'],
  ]);
});
