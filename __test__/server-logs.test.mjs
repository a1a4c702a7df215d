// Server logs: `notifications/message` reaches onDiagnostic as a bounded, redacted `server-log`;
// `serverLogLevel` asks for them — `logging/setLevel` on session-era servers that declare `logging`, the
// per-request `_meta` level on 2026-07-28 ones — and nothing is asked without it. Against the raw stdio
// fixture, server-everything (stdio and Streamable HTTP) and the TypeScript SDK 2.x fixture (both eras).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mcpTools } from '../dist/index.js';
import { EVERYTHING_STDIO_AND_HTTP } from '../examples/servers/everything-http.mjs';
import { TS2, startTs2Http } from './eras-servers.mjs';
import { fixture, rerunWithEngineReader, until } from './helpers.mjs';

const SECRET = 'sk-fixture-logs-0123456789abcdef';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const logsOf = (diagnostics) => diagnostics.filter((d) => d.code === 'server-log');

async function fixtureToolset(t, env, options = {}) {
  const fx = fixture('fx', { FIXTURE_API_KEY: SECRET, FIXTURE_NOTIFY_TOOLS: '1', ...env });
  const diagnostics = [];
  const toolset = await mcpTools([fx.entry], { timeoutMs: 10_000, onDiagnostic: (d) => diagnostics.push(d), ...options });
  t.after(() => toolset.close());
  return { ...toolset, diagnostics, received: fx.received };
}

test('stdio fixture: serverLogLevel sends logging/setLevel once after initialize to a server with the capability', async (t) => {
  const { tools, diagnostics, received } = await fixtureToolset(t, { FIXTURE_LOGGING: '1' }, { serverLogLevel: 'info' });
  // (The stdio probe's `server/discover` goes first; this session-era fixture refuses it.)
  const methods = received().map((m) => m.method).filter((m) => m !== 'server/discover');
  assert.deepEqual(methods.slice(0, 4), ['initialize', 'notifications/initialized', 'logging/setLevel', 'tools/list']);
  assert.equal(methods.filter((m) => m === 'logging/setLevel').length, 1);
  assert.deepEqual(received().find((m) => m.method === 'logging/setLevel').params, { level: 'info' });
  // A log below the level asked is not delivered, even from a server that sends it anyway.
  await tools.fx__log.execute({ level: 'debug', data: 'too chatty' });
  await tools.fx__log.execute({ level: 'error', logger: 'db\u001b[2J', env: 'FIXTURE_API_KEY', data: { message: 'refused \u001b]0;pwned\u0007', nested: [{ [SECRET]: SECRET }] } });
  await until(() => logsOf(diagnostics).length >= 1);
  await sleep(50);
  const logs = logsOf(diagnostics);
  assert.equal(logs.length, 1, JSON.stringify(logs));
  const [log] = logs;
  assert.equal(log.server, 'fx');
  assert.equal(log.level, 'error');
  assert.equal(log.logger, 'db [2J');
  assert.equal(log.truncated, false);
  assert.deepEqual(log.data, { message: 'refused  ]0;pwned ', env: '[redacted]', nested: [{ '[redacted]': '[redacted]' }] });
  assert.match(log.message, /^fx \[error\] db \[2J: \{/);
  assert.ok(!JSON.stringify(diagnostics).includes(SECRET), 'the secret never appears');
  assert.ok(!/[\u0000-\u0008\u000b-\u001f\u007f]/.test(JSON.stringify(log)), 'no terminal escapes');
});

test('stdio fixture: a server that never answers logging/setLevel does not hold connect for timeoutMs', async (t) => {
  const started = Date.now();
  const { tools, received } = await fixtureToolset(t, { FIXTURE_LOGGING: '1', FIXTURE_SET_LEVEL_SILENT: '1' }, { serverLogLevel: 'info', timeoutMs: 30_000 });
  const elapsed = Date.now() - started;
  assert.ok(elapsed < 10_000, `connected in ${elapsed} ms, not after the 30 s call timeout`);
  assert.ok(received().some((m) => m.method === 'logging/setLevel'));
  assert.equal((await tools.fx__echo.execute({ text: 'still works' })).content[0].text, 'echo: still works');
});

test('stdio fixture: without serverLogLevel nothing is asked, and unasked logs are still delivered, bounded', async (t) => {
  const { tools, diagnostics, received } = await fixtureToolset(t, { FIXTURE_LOGGING: '1' });
  assert.ok(!received().some((m) => m.method === 'logging/setLevel'));
  await tools.fx__log.execute({ level: 'debug', data: ['x'.repeat(10_000), SECRET] });
  await until(() => logsOf(diagnostics).length === 1);
  const [log] = logsOf(diagnostics);
  assert.equal(log.level, 'debug');
  assert.equal(log.truncated, true);
  assert.equal(typeof log.data, 'string', 'over 4 KiB, data is the head of its JSON text');
  assert.ok(log.data.length <= 4 * 1024 + 1 && log.data.startsWith('["xxx') && log.data.endsWith('…'));
  assert.ok(log.message.length < 700);
  // Malformed logs (an unknown level, a non-string logger) are not delivered.
  await tools.fx__log.execute({ level: 'warn', data: 1 });
  await tools.fx__log.execute({ level: 'info', logger: 7, data: 1 });
  await sleep(50);
  assert.equal(logsOf(diagnostics).length, 1);
});

test('stdio fixture: serverLogLevel asks nothing of a server without the logging capability', async (t) => {
  const { tools, received } = await fixtureToolset(t, {}, { serverLogLevel: 'debug' });
  assert.equal((await tools.fx__echo.execute({ text: 'x' })).content[0].text, 'echo: x');
  assert.ok(!received().some((m) => m.method === 'logging/setLevel'));
});

test('stdio fixture: a flood of logs is bounded to 50 a second, the rest counted in one server-log-dropped', async (t) => {
  const { tools, diagnostics } = await fixtureToolset(t, { FIXTURE_LOGGING: '1' }, { serverLogLevel: 'debug' });
  const count = 2000;
  await tools.fx__flood_logs.execute({ count });
  const dropped = () => diagnostics.filter((d) => d.code === 'server-log-dropped').reduce((n, d) => n + d.dropped, 0);
  await until(() => logsOf(diagnostics).length + dropped() === count, { timeoutMs: 5000 });
  const delivered = logsOf(diagnostics).length;
  assert.ok(delivered >= 50 && delivered <= 100, `${delivered} delivered`);
  const reports = diagnostics.filter((d) => d.code === 'server-log-dropped');
  assert.ok(reports.length >= 1 && reports.length <= 2, JSON.stringify(reports));
  assert.match(reports[0].message, /dropped \d+ log messages of MCP server "fx" \(over 50 a second\)/);
  // The server's calls are unaffected.
  assert.equal((await tools.fx__echo.execute({ text: 'after' })).content[0].text, 'echo: after');
});

test('serverLogLevel is validated like every option', async () => {
  const { entry } = fixture('fx');
  await assert.rejects(mcpTools([entry], { serverLogLevel: 'warn', onDiagnostic() {} }), { code: 'mcp_config_invalid', message: /serverLogLevel must be one of "debug", "info"/ });
  await assert.rejects(mcpTools([entry], { serverLogLevel: 'debug' }), { code: 'mcp_config_invalid', message: /serverLogLevel needs options.onDiagnostic/ });
});


for (const [mode, start] of EVERYTHING_STDIO_AND_HTTP) {
  test(`server-everything over ${mode}: its simulated logs arrive as server-log diagnostics`, async (t) => {
    const server = await start();
    t.after(server.stop);
    const diagnostics = [];
    const { tools, close } = await mcpTools([server.entry], { timeoutMs: 5000, connectTimeoutMs: 30_000, serverLogLevel: 'debug', progress: true, onDiagnostic: (d) => diagnostics.push(d) });
    t.after(close);
    const connected = diagnostics.find((d) => d.code === 'server-connected');
    assert.ok(connected.capabilities.includes('logging'));
    // It sends one at once, then one every 5 s (over HTTP on the session's GET stream: the first is lost if
    // that stream is not open yet, so up to the second one is waited for).
    await tools['everything__toggle-simulated-logging'].execute({});
    await until(() => logsOf(diagnostics).length >= 1, { timeoutMs: 12_000 });
    const [log] = logsOf(diagnostics);
    assert.ok(['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'].includes(log.level));
    assert.match(String(log.data), /-level message|level-message/);
    await tools['everything__toggle-simulated-logging'].execute({});
  });
}

test('2026-07-28 (TypeScript SDK 2.x over HTTP): the per-request _meta level asks for logs, redacted; none without it', async (t) => {
  const server = await startTs2Http({ FIXTURE_LOGGING: '1', FIXTURE_SECRET: SECRET });
  t.after(server.stop);
  const entry = { name: 'ts2', type: 'streamable-http', url: server.url, headers: { 'X-Api-Key': SECRET } };
  const quiet = [];
  const unasked = await mcpTools([entry], { timeoutMs: 5000, onDiagnostic: (d) => quiet.push(d) });
  await unasked.tools.ts2__work.execute({ steps: 2, intervalMs: 5 });
  await unasked.close();
  assert.deepEqual(logsOf(quiet), [], 'a 2026-07-28 server sends no log for a request that did not ask');
  const diagnostics = [];
  const asked = await mcpTools([entry], { timeoutMs: 5000, serverLogLevel: 'info', onDiagnostic: (d) => diagnostics.push(d) });
  t.after(() => asked.close());
  await asked.tools.ts2__work.execute({ steps: 2, intervalMs: 5 });
  await until(() => logsOf(diagnostics).length === 2);
  assert.deepEqual(logsOf(diagnostics).map((d) => [d.level, d.logger, d.data]), [
    ['info', 'work', { step: 1, note: 'using [redacted]' }],
    ['info', 'work', { step: 2, note: 'using [redacted]' }],
  ]);
  const sent = (await server.seen()).filter((r) => r.body?.method === 'tools/call').map((r) => r.body.params._meta['io.modelcontextprotocol/logLevel']);
  assert.deepEqual(sent, [undefined, 'info']);
  assert.ok(!(await server.seen()).some((r) => r.body?.method === 'logging/setLevel'), 'no setLevel in that era');
  assert.ok(!JSON.stringify(diagnostics).includes(SECRET));
});

test('session era (TypeScript SDK 2.x, legacy stdio): setLevel is honoured by the server', async (t) => {
  const diagnostics = [];
  const entry = { name: 'ts2', type: 'stdio', command: process.execPath, args: [TS2, 'stdio-legacy'], env: { FIXTURE_LOGGING: '1', FIXTURE_SECRET: SECRET } };
  const { tools, close } = await mcpTools([entry], { timeoutMs: 5000, serverLogLevel: 'info', onDiagnostic: (d) => diagnostics.push(d) });
  t.after(close);
  await tools.ts2__work.execute({ steps: 2, intervalMs: 5 });
  await until(() => logsOf(diagnostics).length === 2);
  assert.deepEqual(logsOf(diagnostics).map((d) => d.data.note), ['using [redacted]', 'using [redacted]']);
  const errors = [];
  const strict = await mcpTools([entry], { timeoutMs: 5000, serverLogLevel: 'error', onDiagnostic: (d) => errors.push(d) });
  t.after(() => strict.close());
  await strict.tools.ts2__work.execute({ steps: 2, intervalMs: 5 });
  await sleep(100);
  assert.deepEqual(logsOf(errors), [], 'info logs are below the level asked');
});

rerunWithEngineReader(test, import.meta.url);
