// stdio servers that are slow to start (issue 26): silence is no evidence of an era. `server/discover`
// stays pending for the whole of connectTimeoutMs; once the server has read it (its stdin pipe drained)
// and stayed quiet for 5 s (STDIO_PROBE_QUIET_MS), `initialize` goes out beside it, and the answers
// decide the era. The servers here say nothing for 6 s, longer than that period and than the probe
// timeout mcpferry used to give up at; some sit behind a launcher that drains their stdin meanwhile (as
// `docker run -i` does), so the client sees the probe read and sends `initialize` too.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { mcpTools, McpTimeoutError } from '../dist/index.js';
import { here, pythonTimeServer, scratchFile } from './helpers.mjs';

const SLOW = join(here, 'fixtures', 'slow-start.mjs');
const LAUNCHER = join(here, 'fixtures', 'draining-launcher.mjs');
const TS2 = join(here, 'fixtures', 'ts2-server.mjs');
/** How long each server says nothing after it is started, in ms: past the 5 s quiet period. */
const START_MS = 6000;
const MODERN = '2026-07-28';
const ENVELOPE = 'io.modelcontextprotocol/protocolVersion';

/** The fixture, silent for START_MS (`drained`: behind the draining launcher, which waits instead). */
function slowServer(name, env, { drained = false } = {}) {
  const record = scratchFile(`${name}.jsonl`);
  const starts = scratchFile(`${name}.starts`);
  const lines = (file) => (existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').filter(Boolean) : []);
  const args = drained ? [LAUNCHER, String(START_MS), process.execPath, SLOW] : [SLOW];
  return {
    entry: { name, type: 'stdio', command: process.execPath, args, env: { SLOW_RECORD: record, SLOW_STARTS: starts, SLOW_START_MS: drained ? '0' : String(START_MS), ...env } },
    received: () => lines(record).map((l) => JSON.parse(l)),
    starts: () => lines(starts).length,
  };
}

/** mcpTools with every diagnostic kept; a degraded server rejects. */
async function open(entries, opts = {}) {
  const diagnostics = [];
  const toolset = await mcpTools(entries, { progress: true, onDegraded: 'throw', onDiagnostic: (d) => diagnostics.push(d), ...opts });
  const connected = (name) => diagnostics.find((d) => d.code === 'server-connected' && d.server === name);
  return { ...toolset, diagnostics, connected };
}

const methods = (server) => server.received().map((m) => m.method);

test('a modern server silent for longer than the quiet period is opened in its era: its late discovery answer is taken', async (t) => {
  const server = slowServer('modern', { SLOW_ERA: 'modern' });
  const toolset = await open([server.entry]);
  t.after(toolset.close);
  assert.equal(toolset.connected('modern').protocolVersion, MODERN);
  assert.equal((await toolset.tools.modern__echo.execute({ text: 'late' })).content[0].text, 'modern: late');
  // The probe sat unread in its pipe while it started: no initialize beside it.
  assert.deepEqual(methods(server), ['server/discover', 'tools/list', 'tools/call']);
  assert.equal(server.received()[1].params._meta[ENVELOPE], MODERN);
  assert.equal(server.starts(), 1);
});

test('behind a launcher that drains its stdin, a slow modern server refuses the initialize sent beside the probe, and is opened in its era', async (t) => {
  const server = slowServer('drained', { SLOW_ERA: 'modern' }, { drained: true });
  const toolset = await open([server.entry]);
  t.after(toolset.close);
  assert.equal(toolset.connected('drained').protocolVersion, MODERN);
  assert.equal((await toolset.tools.drained__echo.execute({ text: 'late' })).content[0].text, 'modern: late');
  // initialize went out after the quiet period and was refused (-32022): the probe's answer opened it.
  assert.deepEqual(methods(server), ['server/discover', 'initialize', 'tools/list', 'tools/call']);
});

test('session-based servers silent for longer than the quiet period: initialize beside the probe; one that dies of it is started again', async (t) => {
  const refusing = slowServer('refusing', { SLOW_ERA: 'session' });
  const silent = slowServer('silent', { SLOW_ERA: 'session-silent' });
  const strict = slowServer('strict', { SLOW_ERA: 'session-strict' });
  const toolset = await open([refusing.entry, silent.entry, strict.entry]);
  t.after(toolset.close);
  for (const server of [refusing, silent]) {
    const name = server.entry.name;
    assert.equal(toolset.connected(name).protocolVersion, '2025-11-25', name);
    assert.equal((await toolset.tools[`${name}__echo`].execute({ text: 'hi' })).content[0].text, 'session: hi');
    assert.deepEqual(methods(server), ['server/discover', 'initialize', 'notifications/initialized', 'tools/list', 'tools/call'], name);
    assert.equal(server.received()[1].params._meta, undefined, 'initialize carries no modern envelope');
  }
  // It read the probe first and exited: started again, it gets initialize alone.
  assert.equal((await toolset.tools.strict__echo.execute({ text: 'again' })).content[0].text, 'session: again');
  assert.equal(strict.starts(), 2);
  assert.deepEqual(methods(strict), ['server/discover', 'initialize', 'notifications/initialized', 'tools/list', 'tools/call']);
});

test('-32022 to initialize naming 2026-07-28 continues in that era: discover is asked again and its answer (or the late one) opens it', async (t) => {
  // The probe is answered 7 s after it is read, past the quiet period; the -32022 to initialize at once.
  const server = slowServer('late', { SLOW_ERA: 'modern', SLOW_DISCOVER_MS: '7000' });
  const toolset = await open([server.entry]);
  t.after(toolset.close);
  assert.equal(toolset.connected('late').protocolVersion, MODERN);
  assert.equal((await toolset.tools.late__echo.execute({ text: 'x' })).content[0].text, 'modern: x');
  const received = server.received();
  assert.deepEqual(received.slice(0, 3).map((m) => m.method), ['server/discover', 'initialize', 'server/discover']);
  assert.equal(received[2].params._meta[ENVELOPE], MODERN);
  assert.ok(!received.some((m) => m.method === 'notifications/initialized'), 'no session was completed');
});

test('a server remembered as session-based that refuses initialize with -32022 naming 2026-07-28 is asked server/discover, and opened in that era', async (t) => {
  const eraFile = scratchFile('era');
  writeFileSync(eraFile, 'session');
  const server = slowServer('turncoat', { SLOW_ERA_FILE: eraFile, SLOW_START_MS: '0' });
  const first = await open([server.entry]);
  await first.close();
  assert.equal(first.connected('turncoat').protocolVersion, '2025-11-25');
  // Redeployed as a modern-only server: the next connection starts with initialize (remembered: no probe).
  writeFileSync(eraFile, 'modern-only');
  const seen = server.received().length;
  const toolset = await open([server.entry]);
  t.after(toolset.close);
  assert.equal(toolset.connected('turncoat').protocolVersion, MODERN);
  assert.equal((await toolset.tools.turncoat__echo.execute({ text: 'now' })).content[0].text, 'modern: now');
  assert.deepEqual(methods(server).slice(seen), ['initialize', 'server/discover', 'tools/list', 'tools/call']);
});

test('TypeScript SDK 2.x serveStdio, slow to start: modern; behind a draining launcher it takes initialize too, and gets that session, complete', async (t) => {
  const slow = { name: 'ts2slow', type: 'stdio', command: 'sh', args: ['-c', `sleep ${START_MS / 1000}; exec "$0" "$1" stdio`, process.execPath, TS2] };
  const drained = { name: 'ts2drained', type: 'stdio', command: process.execPath, args: [LAUNCHER, String(START_MS), process.execPath, TS2, 'stdio'] };
  const toolset = await open([slow, drained]);
  t.after(toolset.close);
  const era = async (name) => JSON.parse((await toolset.tools[`${name}__whoami`].execute({})).content[0].text).era;
  assert.equal(toolset.connected('ts2slow').protocolVersion, MODERN);
  assert.equal(await era('ts2slow'), 'modern');
  // It answered the probe, then fell back to a session for initialize: the connection is that session.
  assert.equal(toolset.connected('ts2drained').protocolVersion, '2025-11-25');
  assert.equal(await era('ts2drained'), 'legacy');
});

test('connectTimeoutMs bounds the whole handshake: a probe and initialize together take no longer', async () => {
  const server = slowServer('bounded', { SLOW_ERA: 'session-silent' });
  const started = Date.now();
  const error = await open([server.entry], { connectTimeoutMs: 4000 }).then(
    () => assert.fail('mcpTools resolved'),
    (e) => e,
  );
  const elapsed = Date.now() - started;
  assert.ok(error instanceof McpTimeoutError, String(error));
  // The server answers initialize at 6 s: before, the probe had 4 s and initialize 4 s more.
  assert.ok(elapsed < START_MS, `gave up after ${elapsed} ms, not at the 4 s bound`);
});

const time = pythonTimeServer();

test('the published mcp-server-time behind a 6 s delayed start connects in its era and answers get_current_time', { skip: time.skip }, async (t) => {
  const delayed = { name: 'time', type: 'stdio', command: 'sh', args: ['-c', `sleep ${START_MS / 1000}; exec "$0"`, time.command] };
  // And as `docker run -i mcp/time` during a pull: its stdin read at once, the server not yet started.
  const drained = { name: 'dtime', type: 'stdio', command: process.execPath, args: [LAUNCHER, String(START_MS), time.command] };
  const toolset = await open([delayed, drained]);
  t.after(toolset.close);
  for (const name of ['time', 'dtime']) {
    assert.equal(toolset.connected(name).protocolVersion, MODERN, name);
    const result = await toolset.tools[`${name}__get_current_time`].execute({ timezone: 'UTC' });
    const answer = JSON.parse(result.content[0].text);
    assert.equal(answer.timezone, 'UTC');
    assert.ok(Math.abs(Date.parse(answer.datetime) - Date.now()) < 10 * 60_000, answer.datetime);
  }
});
