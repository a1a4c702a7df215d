// What a broken or hostile stdio server can do to the engine, and what it must not be able to do:
// see another server's pipes, grow our memory by not reading, hold a call until its timeout with a
// line that never ends, or get a secret past redaction by having it cut at the edge of a quote.
// On Node the suite runs twice: stdout read on the JS event loop (default) and by the engine.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { mcpTools } from '../../dist/index.js';
import { ENGINE_READS, here, rerunWithEngineReader, until } from '../helpers.mjs';

const SERVER = join(here, 'fixtures', 'stdio-hardening.mjs');
const MiB = 1024 * 1024;
const READER = ENGINE_READS ? 'engine reader' : 'JS reader';

const entry = (name, env = {}) => ({ name, type: 'stdio', command: process.execPath, args: [SERVER], env });

async function open(entries, opts = {}) {
  const diagnostics = [];
  const toolset = await mcpTools(entries, { onDiagnostic: (d) => diagnostics.push(d), ...opts });
  return { ...toolset, diagnostics };
}

/** Settle `promise` and say how long it took. */
async function timed(promise) {
  const started = Date.now();
  const outcome = await promise.then(
    (value) => ({ value }),
    (error) => ({ error }),
  );
  return { ...outcome, ms: Date.now() - started };
}

/** This process's descriptors: number → { target, cloexec }. */
function hostDescriptors() {
  const fds = new Map();
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      const flags = parseInt(/^flags:\s*([0-7]+)/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))[1], 8);
      fds.set(fd, { target, cloexec: (flags & 0o2000000) !== 0 });
    } catch {
      // Gone between listing and reading (the listing's own handle).
    }
  }
  return fds;
}

/** Targets that name one object, so a match means the very same pipe, socket or file is shared. */
const identifying = (target) => !target.startsWith('anon_inode:') && target !== '/dev/null';

test(`[${READER}] concurrently spawned servers hold no descriptor of another server or of the host`, { skip: process.platform === 'win32' && 'descriptors are read from /proc (Linux); on Windows std makes only the three pipes inheritable' }, async () => {
  // What this process inherited without close-on-exec (from the test runner) its children inherit
  // too; that is the runner's doing, not ours, so it is left out.
  const before = hostDescriptors();
  const inherited = new Set([...before.values()].filter((d) => !d.cloexec).map((d) => d.target));
  const names = ['a', 'b', 'c', 'd', 'e'];
  const { tools, close } = await open(names.map((n) => entry(n)));
  try {
    const servers = {};
    for (const name of names) {
      const result = await tools[`${name}__fds`].execute({});
      servers[name] = JSON.parse(result.content[0].text).fds;
    }
    const host = hostDescriptors();
    for (const [fd, { target, cloexec }] of host) {
      if (!before.has(fd)) assert.ok(cloexec, `host descriptor ${fd} (${target}) created since the start is not close-on-exec`);
    }
    const hostTargets = new Set([...host.values()].map((d) => d.target).filter((t) => identifying(t) && !inherited.has(t)));
    for (const name of names) {
      const others = new Map();
      for (const other of names.filter((n) => n !== name)) {
        for (const fd of ['0', '1', '2']) others.set(servers[other][fd], `${other}'s fd ${fd}`);
      }
      // A runtime may keep a copy of its own stdio (Bun duplicates its stdout): that pipe is its own.
      const own = new Set(['0', '1', '2'].map((fd) => servers[name][fd]));
      for (const [fd, target] of Object.entries(servers[name])) {
        if (Number(fd) <= 2 || own.has(target) || !identifying(target) || inherited.has(target)) continue;
        assert.ok(!others.has(target), `server ${name} holds ${others.get(target)} (${target}) as its fd ${fd}`);
        assert.ok(!hostTargets.has(target), `server ${name} holds the host's ${target} as its fd ${fd}`);
      }
    }
  } finally {
    await close();
  }
});

test(`[${READER}] a server that never reads its input makes sends fail at once; the queue stays bounded`, async () => {
  const gc = typeof Bun !== 'undefined' ? () => Bun.gc(true) : (setFlagsFromString('--expose-gc'), runInNewContext('gc'));
  const { tools, close } = await open([entry('deaf', { FIXTURE_DEAF: '1' })], { timeoutMs: 8000 });
  try {
    const text = 'z'.repeat(MiB);
    const calls = 200;
    gc();
    const rssBefore = process.memoryUsage().rss;
    const settled = [];
    // One call per turn of the event loop, as an agent makes them (calls made in the same turn go
    // to the engine together, and a burst that finds the queue empty is taken whole).
    for (let i = 0; i < calls; i++) {
      timed(tools.deaf__echo.execute({ text })).then((outcome) => settled.push(outcome));
      await new Promise((resolve) => setImmediate(resolve));
    }
    // Sends that fail, fail at once; the few the queue holds wait for their timeout. Told apart by their
    // code, not by the clock: on a loaded machine the loop above can outlast the 8 s timeout, so queued
    // calls may time out before the last refusal is seen.
    const refused = () => settled.filter(({ error }) => error?.code === 'mcp_transport_error');
    await until(() => refused().length >= calls - 24 || settled.length === calls, { timeoutMs: 60_000 });
    for (const { error, ms } of settled) {
      assert.ok(['mcp_transport_error', 'mcp_timeout'].includes(error?.code), String(error));
      if (error.code === 'mcp_timeout') continue;
      assert.match(error.message, /not reading its input/);
      assert.ok(ms < 8000, `refused after ${ms} ms, not before the 8000 ms timeout`);
    }
    // 16 MiB of queue, plus what the pipe and the server's unread buffer took.
    assert.ok(calls - refused().length <= 24, `${calls - refused().length} calls of 1 MiB were queued`);
    gc();
    const grew = (process.memoryUsage().rss - rssBefore) / MiB;
    assert.ok(grew < 120, `RSS grew by ${grew.toFixed(0)} MiB for ${calls} MiB sent to a server that reads nothing`);
  } finally {
    await close();
  }
});

test(`[${READER}] a line far over the limit with no newline fails its call at once and ends the server`, async () => {
  const { tools, close, diagnostics } = await open([entry('flood')], { timeoutMs: 10_000 });
  try {
    const flooded = await timed(tools.flood__flood.execute({ bytes: 50 * MiB }));
    assert.equal(flooded.error?.code, 'mcp_result_too_large', String(flooded.error));
    assert.ok(flooded.ms < 3000, `the oversized answer failed after ${flooded.ms} ms`);
    // The line never ends: the server's output can't be split into messages any more, so the server
    // is lost, and started again: a later call goes to the new process instead of waiting for a response
    // that would be read as the rest of that line.
    const lost = await until(() => diagnostics.find((d) => d.code === 'server-lost'));
    assert.equal(lost.errorCode, 'mcp_transport_error');
    assert.match(lost.message, /with no end/);
    const later = await timed(tools.flood__echo.execute({ text: 'after' }));
    assert.equal(later.error, undefined, `the later call reaches the restarted server: ${later.error}`);
    assert.ok(later.ms < 8000, `the later call took ${later.ms} ms`);
  } finally {
    await close();
  }
});

const SECRET = 'sk-secret-123';
const STDERR_TAIL_BYTES = 8 * 1024; // src/limits.rs
const MAX_QUOTED_BYTES = 200; // src/limits.rs

/** Every piece of the secret of at least 4 characters. */
const fragments = [];
for (let start = 0; start < SECRET.length; start++) {
  for (let end = start + 4; end <= SECRET.length; end++) fragments.push(SECRET.slice(start, end));
}

test(`[${READER}] a secret cut at the edge of a stderr tail or an error quote leaks no piece of itself`, async () => {
  // Each server cuts the key at a different place: `tailSplit` characters of it before the tail's cut,
  // `quoteSplit` before the quote's.
  const splits = [
    [2, 11],
    [6, 4],
    [12, 1],
  ];
  const { tools, close, diagnostics } = await open(splits.map((_, i) => entry(`leaky${i}`, { API_KEY: SECRET })));
  try {
    for (const [i, [tailSplit, quoteSplit]] of splits.entries()) {
      const args = { tailBytes: STDERR_TAIL_BYTES, tailSplit, quoteBytes: MAX_QUOTED_BYTES, quoteSplit };
      const error = await tools[`leaky${i}__leak`].execute(args).catch((e) => e);
      assert.equal(error.code, 'mcp_protocol_error', String(error));
      assert.ok(/x\[redacted\]/.test(error.message), `the quote shows the key redacted: …${error.message.slice(-30)}`);
      const degraded = await until(() => diagnostics.find((d) => d.code === 'server-lost' && d.server === `leaky${i}`));
      const tail = degraded.stderrTail;
      assert.ok(/^\[redacted\]y+$/.test(tail), `the tail starts with the key it cut, redacted whole: ${tail.slice(0, 30)}…`);
      assert.ok(tail.length < STDERR_TAIL_BYTES + '[redacted]'.length, `${tail.length} bytes`);
      for (const text of [error.message, degraded.message, degraded.stderrTail]) {
        const found = fragments.find((f) => text.includes(f));
        assert.equal(found, undefined, `"${found}" of the secret appears in: …${text.slice(-40)}`);
      }
    }
    assert.ok(!fragments.some((f) => JSON.stringify(diagnostics).includes(f)));
  } finally {
    await close();
  }
});

rerunWithEngineReader(test, import.meta.url);
