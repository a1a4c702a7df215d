// The engine over stdio against the in-repo fixture server: protocol, errors, cancellation,
// list changes and process life cycle. Every assertion is on what the caller got or what the
// server recorded.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { mcpTools } from '../dist/index.js';
import { fixture, until, processState, scratchFile } from './helpers.mjs';

async function open(entries, opts = {}) {
  const diagnostics = [];
  const toolset = await mcpTools(entries, { onDiagnostic: (d) => diagnostics.push(d), ...opts });
  return { ...toolset, diagnostics };
}

test('handshake: version, client info, only implemented capabilities, initialized', async () => {
  const server = fixture('hs');
  const { tools, close } = await open([server.entry]);
  await close();
  // A modern question first (2026-07-28: server/discover with the protocol version, capabilities and
  // client info in _meta); this server answers it as a session-based one, so initialize follows.
  const [probe, init, initialized, list] = server.received();
  assert.equal(probe.method, 'server/discover');
  assert.equal(probe.params._meta['io.modelcontextprotocol/protocolVersion'], '2026-07-28');
  assert.deepEqual(probe.params._meta['io.modelcontextprotocol/clientCapabilities'], {});
  assert.equal(probe.params._meta['io.modelcontextprotocol/clientInfo'].name, 'mcpferry');
  assert.equal(init.method, 'initialize');
  assert.equal(init.params.protocolVersion, '2025-11-25');
  assert.equal(init.params.clientInfo.name, 'mcpferry');
  assert.match(init.params.clientInfo.version, /^\d+\.\d+\.\d+/);
  assert.deepEqual(init.params.capabilities, {});
  assert.equal(initialized.method, 'notifications/initialized');
  assert.equal(initialized.id, undefined);
  assert.equal(list.method, 'tools/list');
  assert.ok(tools.hs__echo);
});

test('older protocol versions are accepted, unknown ones refused with a clear diagnostic', async () => {
  for (const version of ['2025-06-18', '2025-03-26', '2024-11-05']) {
    const { tools, close } = await open([fixture('v', { FIXTURE_VERSION: version }).entry]);
    assert.ok(tools.v__echo, version);
    await close();
  }
  const { tools, close, diagnostics } = await open([fixture('future', { FIXTURE_VERSION: '2099-01-01' }).entry]);
  await close();
  assert.deepEqual(Object.keys(tools), []);
  const degraded = diagnostics.find((d) => d.code === 'server-degraded');
  assert.equal(degraded.errorCode, 'mcp_protocol_error');
  assert.match(degraded.message, /2099-01-01.*not support/);
});

test('tools are shaped, named server__tool, and server instructions appear nowhere', async () => {
  const { tools, close } = await open([fixture('shape').entry]);
  await close();
  const echo = tools.shape__echo;
  assert.equal(echo.name, 'shape__echo');
  assert.equal(echo.server, 'shape');
  assert.equal(echo.remoteName, 'echo');
  assert.equal(echo.description, 'Echo the text back.');
  assert.deepEqual(echo.inputSchema.required, ['text']);
  assert.equal(typeof echo.execute, 'function');
  assert.doesNotMatch(JSON.stringify(tools), /IGNORE ALL PREVIOUS/);
});

test('calls return the result; arguments and a progress token reach the server', async () => {
  const server = fixture('call');
  const { tools, close } = await open([server.entry]);
  const result = await tools.call__echo.execute({ text: 'héllo "world"' });
  assert.deepEqual(result.content, [{ type: 'text', text: 'echo: héllo "world"' }]);
  await close();
  const call = server.received().find((m) => m.method === 'tools/call');
  assert.deepEqual(call.params.arguments, { text: 'héllo "world"' });
  assert.equal(call.params.name, 'echo');
  assert.equal(typeof call.params._meta.progressToken, 'number');
});

test('isError results reject with mcp_tool_error carrying the server text', async () => {
  const { tools, close } = await open([fixture('err').entry]);
  await assert.rejects(tools.err__fail.execute({}), (e) => {
    assert.equal(e.code, 'mcp_tool_error');
    assert.equal(e.message, 'MCP tool error: Invalid departure date: must be in the future.');
    assert.equal(e.name, 'McpToolError');
    return true;
  });
  await assert.rejects(tools.err__protocol_error.execute({}), (e) => {
    assert.equal(e.code, 'mcp_protocol_error');
    assert.match(e.message, /-32602.*bad params/);
    return true;
  });
  // The server stays usable after both kinds of failure.
  assert.equal((await tools.err__echo.execute({ text: 'still here' })).content[0].text, 'echo: still here');
  await close();
});

test('a timeout rejects with mcp_timeout and cancels the request on the server', async () => {
  const server = fixture('to');
  // The call's timeout: the handshake (its own bound, the whole of it) keeps time for the process to start.
  const { tools, close } = await open([server.entry], { timeoutMs: 200, connectTimeoutMs: 30_000 });
  const started = Date.now();
  await assert.rejects(tools.to__slow.execute({ ms: 5000 }), { code: 'mcp_timeout' });
  assert.ok(Date.now() - started < 2000);
  const call = server.received().find((m) => m.method === 'tools/call');
  const cancel = await until(() => server.received().find((m) => m.method === 'notifications/cancelled'));
  assert.equal(cancel.params.requestId, call.id);
  await close();
});

test('progress notifications reset the idle timer', async () => {
  const { tools, close } = await open([fixture('prog').entry], { timeoutMs: 250, connectTimeoutMs: 30_000 });
  // 6 steps 120 ms apart: 720 ms in all, never 250 ms without a sign of life.
  const result = await tools.prog__progress.execute({ steps: 6, intervalMs: 120 });
  assert.equal(result.content[0].text, 'progress done after 6 steps');
  await close();
});

test('an abort rejects with mcp_aborted, cancels on the server, and leaves no listener behind', async () => {
  const server = fixture('ab');
  const { tools, close } = await open([server.entry]);
  const controller = new AbortController();
  const pending = tools.ab__slow.execute({ ms: 10_000 }, { signal: controller.signal });
  await until(() => server.received().some((m) => m.method === 'tools/call'));
  controller.abort();
  await assert.rejects(pending, { code: 'mcp_aborted' });
  const call = server.received().find((m) => m.method === 'tools/call');
  const cancel = await until(() => server.received().find((m) => m.method === 'notifications/cancelled'));
  assert.equal(cancel.params.requestId, call.id);

  // Aborted in the same tick it was made: the call never leaves this process.
  const early = new AbortController();
  const beforeEarly = server.received().length;
  const aborted = tools.ab__echo.execute({ text: 'never sent' }, { signal: early.signal });
  early.abort();
  await assert.rejects(aborted, { code: 'mcp_aborted' });
  await tools.ab__echo.execute({ text: 'flush' });
  assert.equal(server.received().slice(beforeEarly).filter((m) => m.params?.arguments?.text === 'never sent').length, 0);

  // An already-aborted signal never reaches the server.
  const before = server.received().length;
  await assert.rejects(tools.ab__echo.execute({ text: 'x' }, { signal: controller.signal }), { code: 'mcp_aborted' });
  assert.equal(server.received().length, before);

  // One signal shared by many calls: no listener survives a settled call.
  const shared = new AbortController();
  const counted = countListeners(shared.signal);
  await Promise.all(Array.from({ length: 50 }, (_, i) => tools.ab__echo.execute({ text: String(i) }, { signal: shared.signal })));
  await assert.rejects(tools.ab__fail.execute({}, { signal: shared.signal }), { code: 'mcp_tool_error' });
  assert.equal(counted.live(), 0);
  assert.equal(counted.added(), 51);
  await close();
});

/** Counts abort listeners on a signal by wrapping add/removeEventListener (works on every runtime). */
function countListeners(signal) {
  let live = 0;
  let added = 0;
  const add = signal.addEventListener.bind(signal);
  const remove = signal.removeEventListener.bind(signal);
  signal.addEventListener = (type, fn, o) => (type === 'abort' && (live++, added++), add(type, fn, o));
  signal.removeEventListener = (type, fn, o) => (type === 'abort' && live--, remove(type, fn, o));
  return { live: () => live, added: () => added };
}

test('a server that crashes mid-call fails the pending call at once and is reported with its stderr', async () => {
  const { tools, close, diagnostics } = await open([fixture('boom').entry]);
  const slow = tools.boom__slow.execute({ ms: 30_000 }).then(() => assert.fail('resolved'), (e) => e);
  const started = Date.now();
  await assert.rejects(tools.boom__crash.execute({}), (e) => {
    assert.equal(e.code, 'mcp_transport_error');
    assert.match(e.message, /exited with code 7/);
    return true;
  });
  const lost = await slow;
  assert.equal(lost.code, 'mcp_transport_error');
  assert.equal(lost.sent, true, 'a call in flight at the crash may have run');
  assert.ok(Date.now() - started < 2000, 'no caller waits for a timeout');
  const reported = await until(() => diagnostics.find((d) => d.code === 'server-lost'));
  assert.match(reported.stderrTail, /fatal error, crashing now/);
  assert.equal(diagnostics.filter((d) => d.code === 'server-degraded').length, 0, 'a loss is not a failed start');
  // Its supervisor starts it again: a later call waits for that and succeeds.
  assert.equal((await tools.boom__echo.execute({ text: 'x' })).content[0].text, 'echo: x');
  await close();
});

test('with reconnect: false a crashed server stays down and its later calls fail fast', async () => {
  const { tools, close, diagnostics } = await open([fixture('boom').entry], { reconnect: false });
  await assert.rejects(tools.boom__crash.execute({}), { code: 'mcp_transport_error' });
  await until(() => diagnostics.find((d) => d.code === 'server-failed'));
  const started = Date.now();
  await assert.rejects(tools.boom__echo.execute({ text: 'x' }), { code: 'mcp_server_unavailable' });
  assert.ok(Date.now() - started < 1000, 'at once');
  await close();
});

test('a server that writes garbage fails its pending calls with mcp_protocol_error', async () => {
  const { tools, close, diagnostics } = await open([fixture('junk').entry]);
  const slow = tools.junk__slow.execute({ ms: 30_000 }).then(() => assert.fail('resolved'), (e) => e);
  await assert.rejects(tools.junk__garbage.execute({}), (e) => {
    assert.equal(e.code, 'mcp_protocol_error');
    assert.match(e.message, /not JSON-RPC: this is not json/);
    return true;
  });
  assert.equal((await slow).code, 'mcp_protocol_error');
  await until(() => diagnostics.find((d) => d.code === 'server-lost' && d.errorCode === 'mcp_protocol_error'));
  await close();
});

test('an oversized response fails that call only; the connection survives', async () => {
  const { tools, close } = await open([fixture('big').entry], { maxResultBytes: 64 * 1024 });
  await assert.rejects(tools.big__big.execute({ bytes: 200_000 }), { code: 'mcp_result_too_large' });
  assert.equal((await tools.big__big.execute({ bytes: 1000 })).content[0].text.length, 1000);
  await close();
});

test('a server that fails to start is degraded with its stderr tail; the others work', async () => {
  const good = fixture('good');
  const { tools, close, diagnostics } = await open([
    fixture('broken', { FIXTURE_MODE: 'exit-on-start' }).entry,
    { name: 'missing', type: 'stdio', command: 'no-such-mcp-server-binary' },
    fixture('mute', { FIXTURE_MODE: 'garbage-on-init' }).entry,
    good.entry,
  ]);
  assert.equal((await tools.good__echo.execute({ text: 'ok' })).content[0].text, 'echo: ok');
  assert.deepEqual(Object.keys(tools).filter((n) => !n.startsWith('good__')), []);
  const byServer = Object.fromEntries(diagnostics.filter((d) => d.code === 'server-degraded').map((d) => [d.server, d]));
  assert.match(byServer.broken.stderrTail, /cannot open config file/);
  assert.match(byServer.broken.message, /exited with code 3/);
  assert.match(byServer.missing.message, /command not found/);
  assert.equal(byServer.mute.errorCode, 'mcp_protocol_error');
  await close();
});

test('a server that never answers initialize is cut off by the timeout', async () => {
  const { tools, close, diagnostics } = await open([fixture('silent', { FIXTURE_MODE: 'no-init-response' }).entry], { timeoutMs: 300 });
  assert.deepEqual(Object.keys(tools), []);
  assert.equal(diagnostics.find((d) => d.code === 'server-degraded').errorCode, 'mcp_timeout');
  await close();
});

test('the child gets the env allowlist plus its own env, never the parent env', async () => {
  process.env.MCPFERRY_TEST_SECRET = 'parent-secret-value';
  const { tools, close } = await open([fixture('envy', { GIVEN: 'given-value' }).entry]);
  delete process.env.MCPFERRY_TEST_SECRET;
  const childEnv = JSON.parse((await tools.envy__env.execute({})).content[0].text);
  await close();
  assert.equal(childEnv.GIVEN, 'given-value');
  assert.equal(childEnv.MCPFERRY_TEST_SECRET, undefined);
  const inherited =
    process.platform === 'win32'
      ? ['APPDATA', 'COMSPEC', 'HOMEDRIVE', 'HOMEPATH', 'LOCALAPPDATA', 'PATH', 'PATHEXT', 'PROCESSOR_ARCHITECTURE', 'PROGRAMFILES', 'SYSTEMDRIVE', 'SYSTEMROOT', 'TEMP', 'TMP', 'USERNAME', 'USERPROFILE']
      : ['PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'TERM', 'LANG', 'TMPDIR'];
  // Windows names are case-insensitive (the child may see SystemRoot for SYSTEMROOT).
  const key = (name) => (process.platform === 'win32' ? name.toUpperCase() : name);
  const allowed = new Set([...inherited, 'GIVEN', 'FIXTURE_RECORD'].map(key));
  // Runtimes may add a few of their own at start-up (wine gives every process its WINE* ones); none of the
  // parent's may arrive.
  for (const name of Object.keys(childEnv).filter((n) => process.platform !== 'win32' || !n.startsWith('WINE'))) {
    if (!allowed.has(key(name))) assert.equal(process.env[name] === childEnv[name] && name in process.env, false, `${name} leaked`);
  }
});

test('the server can ping the client and gets an answer', async () => {
  const { tools, close } = await open([fixture('pinger').entry]);
  const answer = JSON.parse((await tools.pinger__ping_client.execute({})).content[0].text);
  await close();
  assert.deepEqual(answer, { jsonrpc: '2.0', id: 'srv-1', result: {} });
});

test('tools/list is followed across pages; a repeated cursor is refused', async () => {
  const server = fixture('paged', { FIXTURE_TOOLS: '250', FIXTURE_PAGE_SIZE: '100' });
  const { tools, close } = await open([server.entry]);
  await close();
  assert.equal(Object.keys(tools).length, 14 + 250);
  const lists = server.received().filter((m) => m.method === 'tools/list');
  assert.deepEqual(lists.map((m) => m.params?.cursor), [undefined, '100', '200']);

  const looping = await open([fixture('loop', { FIXTURE_MODE: 'repeat-cursor' }).entry]);
  await looping.close();
  assert.deepEqual(Object.keys(looping.tools), []);
  assert.match(looping.diagnostics.find((d) => d.code === 'server-degraded').message, /repeated the cursor "same"/);
});

test('list_changed updates the tool map in place and reports the change', async () => {
  const { tools, close, diagnostics } = await open([fixture('live').entry]);
  const map = tools;
  assert.ok(map.live__to_remove);
  await tools.live__mutate.execute({});
  const changed = await until(() => diagnostics.find((d) => d.code === 'tools-changed'));
  assert.deepEqual(changed.added, ['live__added_tool']);
  assert.deepEqual(changed.removed, ['live__to_remove']);
  assert.deepEqual(changed.changed, ['live__echo']);
  assert.equal(map, tools);
  assert.ok(map.live__added_tool);
  assert.equal(map.live__to_remove, undefined);
  assert.equal(map.live__echo.description, 'Echo, now with a changed description.');
  assert.equal((await map.live__added_tool.execute({})).content[0].text, 'called added_tool');
  await close();
});

test('a tool the server withdrew is refused with a message the model can act on', async () => {
  const { tools, close, diagnostics } = await open([fixture('gone').entry]);
  const stale = tools.gone__to_remove;
  await tools.gone__mutate.execute({});
  await until(() => diagnostics.find((d) => d.code === 'tools-changed'));
  await assert.rejects(stale.execute({}), (e) => {
    assert.equal(e.code, 'mcp_tool_unavailable');
    assert.match(e.message, /no longer\) publish it/);
    return true;
  });
  await close();
});

test('allow and block filters use globs on original names; both at once throws', async () => {
  const allowed = await open([fixture('f').entry], { tools: { allow: ['ec*', 'fai?'] } });
  await allowed.close();
  assert.deepEqual(Object.keys(allowed.tools).sort(), ['f__echo', 'f__fail']);
  const blocked = await open([fixture('f').entry], { tools: { block: ['*'] } });
  await blocked.close();
  assert.deepEqual(Object.keys(blocked.tools), []);
  await assert.rejects(mcpTools([fixture('f').entry], { tools: { allow: ['a'], block: ['b'] } }), {
    code: 'mcp_config_invalid',
    message: /either `allow` or `block`, not both/,
  });
});

test('names are made provider-safe with a stable hash; colliding servers both get suffixes', async () => {
  const extra = JSON.stringify([
    { name: 'search.docs', description: 'dotted', inputSchema: { type: 'object' } },
    { name: 'x'.repeat(90), description: 'long', inputSchema: { type: 'object' } },
    { name: 'résumé', description: 'unicode', inputSchema: { type: 'object' } },
  ]);
  const { tools, close, diagnostics } = await open([fixture('docs', { FIXTURE_EXTRA_TOOLS: extra }).entry]);
  const names = Object.keys(tools);
  for (const name of names) assert.match(name, /^[a-zA-Z0-9_-]{1,64}$/);
  // The first 8 hex digits of sha256("docs__search.docs"): the same in every process.
  assert.ok(tools['docs__search_docs_31310365'], names.join(' '));
  assert.equal(tools['docs__search_docs_31310365'].remoteName, 'search.docs');
  assert.equal(names.filter((n) => n.startsWith('docs__xxxx')).map((n) => n.length)[0], 64);
  assert.ok(diagnostics.some((d) => d.code === 'tool-name-rewritten' && d.tool === 'search.docs'));
  assert.equal((await tools['docs__search_docs_31310365'].execute({})).content[0].text, 'called search.docs');
  await close();

  const a = fixture('local', { WHICH: 'a' });
  const b = fixture('local', { WHICH: 'b' });
  b.entry.args = [...b.entry.args, '--variant-b'];
  const both = await open([a.entry, b.entry]);
  await both.close();
  const echoes = Object.keys(both.tools).filter((n) => n.endsWith('__echo'));
  assert.equal(echoes.length, 2);
  for (const name of echoes) assert.match(name, /^local_[0-9a-f]{8}__echo$/);
  const collision = both.diagnostics.find((d) => d.code === 'server-name-collision');
  assert.equal(collision.server, 'local');
  assert.equal(collision.labels.length, 2);
});

test('close ends stdin, escalates to SIGTERM and SIGKILL on the whole group, and is idempotent', async () => {
  const pidfile = scratchFile('grandchild.pid');
  const { tools, close } = await open([
    fixture('family', { FIXTURE_MODE: 'grandchild', FIXTURE_PIDFILE: pidfile }).entry,
    fixture('stubborn', { FIXTURE_MODE: 'ignore-term' }).entry,
  ]);
  const serverPid = Number((await tools.family__pid.execute({})).content[0].text);
  const stubbornPid = Number((await tools.stubborn__pid.execute({})).content[0].text);
  const grandchild = Number(readFileSync(pidfile, 'utf8'));
  assert.ok(['R', 'S'].includes(processState(grandchild)), 'the grandchild runs before close');
  const started = Date.now();
  await Promise.all([close(), close()]);
  await close();
  const took = Date.now() - started;
  // The stubborn server ignores stdin's end and SIGTERM: only SIGKILL, after the grace period, ends it.
  assert.ok(took >= 1000 && took < 5000, `close took ${took} ms`);
  assert.equal(processState(stubbornPid), null, 'the stubborn server was killed and reaped');
  assert.equal(processState(serverPid), null, 'the server was reaped: no zombie of ours');
  // Killed: gone, or a zombie left to an init that does not reap (never one of ours).
  const state = processState(grandchild);
  assert.ok(state === null || state === 'Z', `grandchild state ${state}`);
  // The zombie may be reaped between the two reads: gone is as good as reaped by someone else.
  if (state === 'Z') assert.notEqual(ppidOf(grandchild), process.pid);
  await assert.rejects(tools.family__echo.execute({ text: 'x' }), { code: 'mcp_connection_closed' });
});

/** The parent of `pid`, or null once the process is gone (a zombie its init has just reaped). */
function ppidOf(pid) {
  let stat;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch (error) {
    if (error.code === 'ENOENT' || error.code === 'ESRCH') return null;
    throw error;
  }
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
}

test('bad input is refused with typed errors', async () => {
  await assert.rejects(mcpTools('nope'), { code: 'mcp_config_invalid' });
  await assert.rejects(mcpTools([{ name: 'x', type: 'stdio' }]), { code: 'mcp_config_invalid', message: /command must be/ });
  await assert.rejects(mcpTools([], { timeoutMs: 0 }), { code: 'mcp_config_invalid', message: /timeoutMs/ });
  await assert.rejects(mcpTools([], { timeOutMs: 5 }), { code: 'mcp_config_invalid', message: /unknown option "timeOutMs"/ });
  await assert.rejects(mcpTools([], { disclosure: { budget: 'lots' } }), { code: 'mcp_config_invalid', message: /budget/ });
  await assert.rejects(mcpTools([], { storage: {} }), { code: 'mcp_config_invalid', message: /connection store/ });
  const { tools, close } = await open([fixture('args').entry]);
  await assert.rejects(tools.args__echo.execute('a string'), { code: 'mcp_invalid_arguments' });
  await assert.rejects(tools.args__echo.execute({ n: 1n }), { code: 'mcp_invalid_arguments', message: /not JSON/ });
  await close();
  await assert.rejects(tools.args__echo.execute({ text: 'late' }), { code: 'mcp_connection_closed' });
});

test('a session-based server that exits on the modern probe is started again for initialize, and works', async (t) => {
  const { mkdtempSync, readFileSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const starts = join(mkdtempSync(join(tmpdir(), 'mcpferry-strict-')), 'starts');
  const entry = {
    name: 'strict',
    type: 'stdio',
    command: process.execPath,
    args: [fileURLToPath(new URL('./fixtures/exit-on-unknown.mjs', import.meta.url))],
    env: { STARTS_FILE: starts },
  };
  const { tools, close, diagnostics } = await open([entry]);
  t.after(close);
  assert.deepEqual(diagnostics, []);
  assert.equal((await tools.strict__echo.execute({ text: 'again' })).content[0].text, 'echo: again');
  assert.equal(readFileSync(starts, 'utf8'), 'start\nstart\n', 'probed once, started again once');
});
