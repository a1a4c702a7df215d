// Issue 26 item 7: a stdio server's stderr while it runs. `stderr: 'pipe'` (default) keeps the tail for
// a failure's `stderrTail`; 'diagnostics' also delivers each line as a `server-stderr` diagnostic,
// redacted and bounded (2 KiB a line, 50 lines a second, the rest counted in `server-stderr-dropped`);
// 'inherit' passes the host's own stderr through; 'ignore' discards it.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { mcpTools } from '../dist/index.js';
import { here, until } from './helpers.mjs';
import { hostileStdio, open, closeWithin, exitWhenDone } from './fixtures/hostile/harness.mjs';

exitWhenDone(after);

const CLOSE_MS = 3000;
const SECRET = 'sk-live-0123456789abcdef';
const NODE = typeof Bun === 'undefined' ? process.execPath : 'node';
const LINES_PER_SECOND = 50;

async function withServer(stderr, body) {
  const server = hostileStdio('h', '', { API_TOKEN: SECRET });
  const toolset = await open([{ ...server.entry, ...(stderr && { stderr }) }], { timeoutMs: 10_000 });
  try {
    await body(toolset);
  } finally {
    await closeWithin(toolset, CLOSE_MS);
  }
}

const stderrLines = (diagnostics) => diagnostics.filter((d) => d.code === 'server-stderr');

test("stderr: 'diagnostics' delivers each line as it comes, with the server's secrets redacted", async () => {
  await withServer('diagnostics', async ({ tools, diagnostics }) => {
    await tools.h__stderr_lines.execute({ lines: ['starting up', `using token ${SECRET} now`, '\u001b[31mred\u001b[0m', 'z'.repeat(5000)] });
    const lines = await until(() => (stderrLines(diagnostics).length >= 4 ? stderrLines(diagnostics) : null));
    assert.deepEqual(lines.slice(0, 3).map((d) => [d.server, d.line, d.truncated]), [
      ['h', 'starting up', false],
      ['h', 'using token [redacted] now', false],
      ['h', ' [31mred [0m', false],
    ]);
    assert.equal(lines[3].line, 'z'.repeat(2048));
    assert.equal(lines[3].truncated, true);
    assert.ok(!JSON.stringify(diagnostics).includes(SECRET), 'the secret reached a diagnostic');
  });
});

test("stderr: 'diagnostics' bounds a flood: at most 50 lines a second, the rest counted", async () => {
  await withServer('diagnostics', async ({ tools, diagnostics }) => {
    const started = Date.now();
    await tools.h__stderr_lines.execute({ lines: ['flood'], times: 10_000 });
    const dropped = () => diagnostics.filter((d) => d.code === 'server-stderr-dropped').reduce((n, d) => n + d.dropped, 0);
    await until(() => stderrLines(diagnostics).length + dropped() === 10_000, { timeoutMs: 10_000 });
    const seconds = Math.ceil((Date.now() - started) / 1000) + 1;
    assert.ok(stderrLines(diagnostics).length <= LINES_PER_SECOND * seconds, `${stderrLines(diagnostics).length} lines in ${seconds} s`);
    assert.ok(dropped() >= 10_000 - LINES_PER_SECOND * seconds);
    assert.match(diagnostics.find((d) => d.code === 'server-stderr-dropped').message, /dropped \d+ stderr lines/);
  });
});

test("stderr: 'diagnostics' needs onDiagnostic; an unknown mode is refused", async () => {
  const { entry } = hostileStdio('h');
  await assert.rejects(mcpTools([{ ...entry, stderr: 'diagnostics' }]), { code: 'mcp_config_invalid', message: /needs options\.onDiagnostic/ });
  await assert.rejects(mcpTools([{ ...entry, stderr: 'file' }], { onDiagnostic() {} }), { code: 'mcp_config_invalid', message: /stderr must be one of/ });
});

for (const { mode, tail } of [
  { mode: undefined, tail: true },
  { mode: 'pipe', tail: true },
  { mode: 'diagnostics', tail: true },
  { mode: 'inherit', tail: false },
  { mode: 'ignore', tail: false },
]) {
  test(`stderr: ${mode ?? 'default'} — a server that fails at start ${tail ? 'has its redacted stderrTail' : 'has no stderrTail'}; no server-stderr ${mode === 'diagnostics' ? 'except its lines' : 'at all'}`, async () => {
    const script = `process.stderr.write('Error: cannot start with ${SECRET}\\n'); process.exit(3)`;
    const diagnostics = [];
    const entry = { name: 'f', type: 'stdio', command: NODE, args: ['-e', script], env: { API_TOKEN: SECRET }, ...(mode && { stderr: mode }) };
    // 'inherit' would print into this test's output: the host's stderr is checked in its own test below.
    if (mode === 'inherit') entry.args = ['-e', script.replace('process.stderr.write', 'void')];
    const toolset = await mcpTools([entry], { onDiagnostic: (d) => diagnostics.push(d), timeoutMs: 10_000 });
    await toolset.close();
    const degraded = diagnostics.find((d) => d.code === 'server-degraded');
    assert.ok(degraded, JSON.stringify(diagnostics));
    if (tail) assert.match(degraded.stderrTail, /Error: cannot start with \[redacted\]/);
    else assert.equal(degraded.stderrTail, null);
    // Each start of the server (a failed first start may be tried again) delivers its line.
    const lines = stderrLines(diagnostics);
    if (mode === 'diagnostics') assert.ok(lines.length >= 1 && lines.every((d) => d.line === 'Error: cannot start with [redacted]'), JSON.stringify(lines));
    else assert.deepEqual(lines, []);
    assert.ok(!JSON.stringify(diagnostics).includes(SECRET));
  });
}

/** Run the stderr-host fixture with `mode`: what it printed, its stderr, and the server's descriptors. */
async function host(mode) {
  const child = spawn(NODE, [join(here, 'fixtures', 'stderr-host.mjs'), mode], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c) => (stdout += c));
  child.stderr.on('data', (c) => (stderr += c));
  const code = await new Promise((resolve) => child.on('close', resolve));
  assert.equal(code, 0, stderr.slice(-2000));
  return { ...JSON.parse(stdout), stderr };
}

test("stderr: 'inherit' writes to the host's own stderr, and the server holds no other descriptor of the host's", { skip: process.platform !== 'linux' && 'descriptors are read from /proc' }, async () => {
  const { server, hostStderr, stderr } = await host('inherit');
  assert.match(stderr, /a line from the server/);
  assert.equal(server['2'], hostStderr, 'fd 2 is the host stderr');
  const shared = Object.entries(server).filter(([fd, target]) => fd !== '2' && target === hostStderr);
  assert.deepEqual(shared, [], 'only fd 2 is the host stderr');
  // Its stdin and stdout are the engine's pipes, distinct from the host's stderr.
  assert.match(server['0'], /^pipe:/);
  assert.match(server['1'], /^pipe:/);
});

for (const mode of ['ignore', 'pipe']) {
  test(`stderr: '${mode}' keeps the server's stderr out of the host's`, { skip: process.platform !== 'linux' && 'descriptors are read from /proc' }, async () => {
    const { server, hostStderr, stderr } = await host(mode);
    assert.doesNotMatch(stderr, /a line from the server/);
    assert.notEqual(server['2'], hostStderr);
    if (mode === 'ignore') assert.equal(server['2'], '/dev/null');
  });
}
