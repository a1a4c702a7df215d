// Failures a person can see: a server that can't start is printed (once) or thrown, its exit says why,
// the handshake bound is an option honoured both ways, and progress diagnostics carry timings.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { mcpTools, McpTimeoutError, McpTransportError } from '../dist/index.js';
import { fixture, here, scratchFile } from './helpers.mjs';

const typo = { name: 'typo', type: 'stdio', command: 'nodee', args: ['server.js'] };
const DIST = pathToFileURL(join(here, '..', 'dist', 'index.js')).href;

/** Run `body` (an ES module's text, with `mcpTools` imported) in a child process; its stderr and status. */
function runChild(body) {
  const script = `${scratchFile('child')}.mjs`;
  writeFileSync(script, `import { mcpTools } from ${JSON.stringify(DIST)};\n${body}\n`);
  const child = spawnSync(process.execPath, [script], { encoding: 'utf8', timeout: 60_000 });
  return { stderr: child.stderr, stdout: child.stdout, status: child.status };
}

test("a command typo rejects with onDegraded: 'throw', naming the server and the command", async () => {
  const good = fixture('good');
  const error = await mcpTools([good.entry, typo], { onDegraded: 'throw' }).then(
    () => assert.fail('mcpTools resolved'),
    (e) => e,
  );
  assert.ok(error instanceof McpTransportError, String(error));
  assert.equal(error.code, 'mcp_transport_error');
  assert.match(error.message, /"typo".*command not found: "nodee"/);
  assert.deepEqual(error.servers.map((s) => [s.server, s.errorCode]), [['typo', 'mcp_transport_error']]);
});

test('without onDiagnostic a degraded server is printed to stderr once; warnings: false keeps it silent', () => {
  const printed = runChild(`
    const toolset = await mcpTools([${JSON.stringify(typo)}]);
    console.log(JSON.stringify(Object.keys(toolset.tools)));
    await toolset.close();
  `);
  assert.equal(printed.status, 0, printed.stderr);
  assert.deepEqual(JSON.parse(printed.stdout), []);
  const warnings = printed.stderr.split('\n').filter((l) => l.startsWith('mcpferry: warning:'));
  assert.equal(warnings.length, 1, printed.stderr);
  assert.match(warnings[0], /MCP server "typo" is unavailable: command not found: "nodee"/);

  const silent = runChild(`
    const toolset = await mcpTools([${JSON.stringify(typo)}], { warnings: false });
    await toolset.close();
  `);
  assert.equal(silent.status, 0, silent.stderr);
  assert.equal(silent.stderr, '');

  // With onDiagnostic, the application decides: nothing is printed.
  const delivered = runChild(`
    const seen = [];
    const toolset = await mcpTools([${JSON.stringify(typo)}], { onDiagnostic: (d) => seen.push(d.code) });
    console.log(JSON.stringify(seen));
    await toolset.close();
  `);
  assert.deepEqual(JSON.parse(delivered.stdout), ['server-degraded']);
  assert.equal(delivered.stderr, '');
});

test('a script that exits: the failure names its last error line, not only the exit code', async () => {
  const missing = join(here, 'fixtures', 'no-such-server-script.js');
  const entry = { name: 'gone', type: 'stdio', command: process.execPath, args: [missing] };
  const error = await mcpTools([entry], { onDegraded: 'throw' }).then(
    () => assert.fail('mcpTools resolved'),
    (e) => e,
  );
  assert.equal(error.code, 'mcp_transport_error');
  assert.match(error.message, /exited with code 1: .*no-such-server-script\.js/);
  assert.match(error.message, /Cannot find module|not found/i);
  assert.match(error.servers[0].stderrTail, /no-such-server-script\.js/);

  const said = fixture('said', { FIXTURE_MODE: 'exit-on-start' });
  const diagnostics = [];
  const toolset = await mcpTools([said.entry], { onDiagnostic: (d) => diagnostics.push(d) });
  await toolset.close();
  assert.match(diagnostics[0].message, /exited with code 3: fixture: cannot open config file \/nonexistent\.toml$/);
});

test('connectTimeoutMs bounds the handshake both ways: 1 s fails a server that answers after 2 s, 5 s waits for it', async () => {
  const slow = () => fixture('slow', { FIXTURE_INIT_DELAY_MS: '2000' }).entry;
  const started = Date.now();
  const error = await mcpTools([slow()], { connectTimeoutMs: 1000, onDegraded: 'throw' }).then(
    () => assert.fail('mcpTools resolved'),
    (e) => e,
  );
  assert.ok(error instanceof McpTimeoutError, String(error));
  assert.match(error.message, /"slow"/);
  assert.ok(Date.now() - started < 1900, `gave up after ${Date.now() - started} ms, not at the 1 s bound`);

  // timeoutMs alone (short) does not shorten a connectTimeoutMs given beside it.
  const toolset = await mcpTools([slow()], { connectTimeoutMs: 5000, timeoutMs: 1000, onDegraded: 'throw' });
  assert.equal((await toolset.tools.slow__echo.execute({ text: 'late' })).content[0].text, 'echo: late');
  await toolset.close();
});

test('progress: server-connecting then server-connected with elapsedMs, protocol, server info and catalogue size', async () => {
  const seen = [];
  const toolset = await mcpTools([fixture('p', { FIXTURE_INIT_DELAY_MS: '150' }).entry], { progress: true, onDiagnostic: (d) => seen.push(d) });
  await toolset.close();
  const [connecting, connected] = seen;
  assert.deepEqual([connecting.code, connecting.server, connecting.transport], ['server-connecting', 'p', 'stdio']);
  assert.equal(connected.code, 'server-connected');
  assert.ok(connected.elapsedMs >= 150 && connected.elapsedMs < 30_000, String(connected.elapsedMs));
  assert.equal(connected.protocolVersion, '2025-11-25');
  assert.deepEqual(connected.serverInfo, { name: 'fixture', version: '1.0.0' });
  assert.deepEqual(connected.capabilities, ['tools']);
  assert.ok(connected.toolCount > 5, String(connected.toolCount));
  assert.match(connected.message, /connected to MCP server "p" in \d+ ms/);

  // Without progress: true they are not delivered (onDiagnostic is for what needs attention).
  const quiet = [];
  const again = await mcpTools([fixture('q').entry], { onDiagnostic: (d) => quiet.push(d) });
  await again.close();
  assert.deepEqual(quiet, []);
});

test('the new options are checked like every other', async () => {
  await assert.rejects(mcpTools([], { onDegraded: 'panic' }), { code: 'mcp_config_invalid', message: /onDegraded must be "warn" or "throw"/ });
  await assert.rejects(mcpTools([], { connectTimeoutMs: 0 }), { code: 'mcp_config_invalid', message: /connectTimeoutMs/ });
  await assert.rejects(mcpTools([], { warnings: 'no' }), { code: 'mcp_config_invalid', message: /warnings must be a boolean/ });
});

test('MCPFERRY_LOG=debug prints structured engine logs to stderr, never a header or env value', async (t) => {
  const { startStreamableFixture } = await import('./fixtures/http-server.mjs');
  const server = await startStreamableFixture();
  t.after(server.close);
  const servers = [
    { name: 'web', type: 'streamable-http', url: server.url, headers: { 'X-Api-Key': 'header-secret-6161' } },
    fixture('local', { API_TOKEN: 'env-secret-7272' }).entry,
  ];
  const script = `${scratchFile('logs')}.mjs`;
  writeFileSync(script, `import { mcpTools } from ${JSON.stringify(DIST)};
    const toolset = await mcpTools(${JSON.stringify(servers)});
    await toolset.tools.web__echo.execute({ text: 'a' });
    await toolset.tools.local__fail.execute({}).catch(() => {});
    await toolset.close();`);
  // Async: the HTTP fixture answers from this process.
  const { spawn } = await import('node:child_process');
  const stderr = await new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script], { env: { ...process.env, MCPFERRY_LOG: 'mcpferry=debug' }, stdio: ['ignore', 'ignore', 'pipe'] });
    let text = '';
    child.stderr.on('data', (c) => (text += c));
    child.on('error', reject);
    child.on('close', () => resolve(text));
  });
  assert.match(stderr, /DEBUG mcpferry::toolset::supervisor: connecting toolset=\d+ server=web transport="streamable-http"/);
  assert.match(stderr, /INFO mcpferry::toolset::supervisor: connected and listed .*server=local .*protocol="2025-11-25" tools=\d+/);
  assert.match(stderr, /era negotiated .*server=web/);
  assert.match(stderr, /call started .*server=web tool=web__echo/);
  assert.match(stderr, /call ended .*server=local tool=local__fail call_id=\d+ code="mcp_tool_error" elapsed_us=\d+/);
  assert.ok(!stderr.includes('header-secret-6161') && !stderr.includes('env-secret-7272'), stderr);
  // Only mcpferry's own lines: no warning text (the servers are healthy) and no other crate's.
  assert.deepEqual(stderr.split('\n').filter((l) => l && !/ mcpferry::/.test(l)), []);
});

test("logs: 'diagnostics' routes this toolset's engine logs to onDiagnostic as log diagnostics", async () => {
  const logs = [];
  const other = [];
  const mine = await mcpTools([fixture('mine').entry], { logs: 'diagnostics', onDiagnostic: (d) => d.code === 'log' && logs.push(d) });
  const theirs = await mcpTools([fixture('theirs').entry], { onDiagnostic: (d) => other.push(d) });
  await mine.tools.mine__echo.execute({ text: 'x' });
  await theirs.tools.theirs__echo.execute({ text: 'y' });
  await mine.close();
  await theirs.close();
  const messages = logs.map((d) => `${d.level} ${d.server}: ${d.message}`);
  assert.ok(messages.some((m) => /^debug mine: connecting transport=stdio$/.test(m)), messages.join('\n'));
  assert.ok(messages.some((m) => /^info mine: connected and listed elapsed_ms=\d+ protocol=2025-11-25 tools=\d+$/.test(m)), messages.join('\n'));
  assert.ok(messages.some((m) => /^debug mine: call ended tool=mine__echo call_id=\d+ code=ok elapsed_us=\d+$/.test(m)), messages.join('\n'));
  assert.ok(logs.every((d) => d.server === 'mine' && d.target.startsWith('mcpferry')), 'another toolset\'s events never arrive');
  assert.deepEqual(other, []);
  await assert.rejects(mcpTools([], { logs: 'diagnostics' }), { code: 'mcp_config_invalid', message: /needs options.onDiagnostic/ });
});
