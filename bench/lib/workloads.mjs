// The workloads, written once and driven through a small adapter per client, so that every client is
// measured by exactly the same code. A client file (bench/clients/*.mjs) only says how to connect, look up
// a tool and call it with that client's public API, then hands itself to runClient().
//
// Adapter:
//   name           label for errors
//   imports        module URLs a user of this client has to import (W7 times importing them cold)
//   connect(servers, { validation, reconnect, onDiagnostic })
//       -> { toolCount, tool(server, toolName) -> (args) => Promise<CallToolResult>, close(), servers?() }
//     servers: [{ name, kind: 'stdio', command, args, env } | { name, kind: 'http', url }]
//     It resolves when the tool map is ready to use (initialize, initialized and every tools/list page done).
//     `validation: false` (W1V/W2V) asks a client that can switch its schema validation off to do so.
//   canSkipValidation  true for a client that honours `validation: false` (W1V/W2V then measure it both ways)
//       The connection may also have `readResource(server, uri) -> Promise<{ contents }>` (W11), the
//       client's own resources/read, its result as that client returns it (a blob as bytes or as base64).
//   recovers      true for a client that brings a lost server back by itself (R1/R2, mcpferry only); its
//     connect() then honours `reconnect` (its option of that name) and `onDiagnostic` (each diagnostic as it
//     comes), and the connection has `servers()` (each server's state).
//
// Each workload runs in its own process (spawned by bench/run.mjs), so process.cpuUsage() and the memory
// figures belong to this client alone: the servers are separate processes.

import { spawn, execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { config, ECHO_HTTP, ECHO_STDIO, REPO_DIR } from './config.mjs';
import { pidsWithArg } from './processes.mjs';
import { resourceText } from '../servers/resource-text.mjs';

// Lets bench/run.mjs find any server process a client failed to reap.
const RUN_TAG = `--bench-run=${process.env.BENCH_RUN_ID ?? 'manual'}`;
const MiB = 1024 * 1024;

export function stdioServer(name, env = {}) {
  return { name, kind: 'stdio', command: process.execPath, args: [ECHO_STDIO, RUN_TAG], env };
}

// A ~200-byte argument object (its JSON is 200 bytes), the size of a typical small tool call.
const ARGS = (() => {
  const base = { message: '', count: 42, tags: ['bench', 'echo'] };
  base.message = 'x'.repeat(200 - JSON.stringify(base).length);
  return base;
})();
const ARGS_JSON = JSON.stringify(ARGS);

function checkEcho(result) {
  const text = result?.content?.[0]?.text;
  if (text !== ARGS_JSON) throw new Error(`echo returned ${JSON.stringify(result).slice(0, 200)}`);
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

function cpuMicros(since) {
  const d = process.cpuUsage(since);
  return d.user + d.system;
}

function gc() {
  // --expose-gc is passed by bench/run.mjs; run twice so weakly held garbage goes too.
  globalThis.gc?.();
  globalThis.gc?.();
}

// Correctness before speed, then enough calls, sequential and concurrent, for every client's JIT to settle.
async function warm(call, n = config.warmup, check = checkEcho) {
  for (let i = 0; i < 3; i++) check(await call(ARGS));
  for (let i = 0; i < n; i++) await call(ARGS);
  await inFlight(call, n, config.concurrency);
}

async function inFlight(call, n, width) {
  let started = 0;
  const worker = async () => {
    while (started < n) {
      started++;
      await call(ARGS);
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, n) }, worker));
}

async function sequential(call, n) {
  const latencies = new Float64Array(n);
  gc();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const s = performance.now();
    await call(ARGS);
    latencies[i] = performance.now() - s;
  }
  const wallMs = performance.now() - t0;
  const cpu = cpuMicros(cpu0);
  latencies.sort();
  return {
    p50_us: percentile(latencies, 0.5) * 1000,
    p99_us: percentile(latencies, 0.99) * 1000,
    calls_per_s: n / (wallMs / 1000),
    cpu_us_per_call: cpu / n,
  };
}

async function concurrent(call, n) {
  gc();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await inFlight(call, n, config.concurrency);
  const wallMs = performance.now() - t0;
  return { calls_per_s: n / (wallMs / 1000), cpu_us_per_call: cpuMicros(cpu0) / n };
}

/** `metrics` with every key prefixed: `prefixed('seq_', { p50_us })` is `{ seq_p50_us }`. */
function prefixed(prefix, metrics) {
  return Object.fromEntries(Object.entries(metrics).map(([k, v]) => [`${prefix}${k}`, v]));
}

async function connectChecked(adapter, servers, expectedTools, options = {}) {
  const conn = await adapter.connect(servers, options);
  if (conn.toolCount !== expectedTools) {
    await conn.close().catch(() => {});
    throw new Error(`expected ${expectedTools} tools, the tool map has ${conn.toolCount}`);
  }
  return conn;
}

/** `env.ECHO_LISTEN === 'stdin'`: resolves once the server has started, but it listens only on `listen()`
 * (which resolves with its url); otherwise it resolves listening, with `url`. */
async function startHttpServer(tools = 10, env = {}) {
  const child = spawn(process.execPath, [ECHO_HTTP, RUN_TAG], { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, ECHO_TOOLS: String(tools), ...env } });
  child.stdin.on('error', () => {}); // EPIPE once R2 has killed it
  const lines = createInterface({ input: child.stdout });
  const exited = () => child.exitCode !== null || child.signalCode !== null;
  const server = {
    async listen() {
      const line = once(lines, 'line');
      if (env.ECHO_LISTEN === 'stdin') child.stdin.write('listen\n');
      server.url = JSON.parse((await line)[0]).url;
      return server.url;
    },
    async stop() {
      if (exited()) return;
      child.stdin.end(); // the server exits on end of stdin
      await once(child, 'exit');
    },
    /** SIGKILL; resolves once it is gone (its sockets closed). */
    async kill() {
      const gone = exited() ? Promise.resolve() : once(child, 'exit');
      child.kill('SIGKILL');
      await gone;
    },
  };
  if (env.ECHO_LISTEN === 'stdin') await once(lines, 'line'); // {"waiting":true}
  else await server.listen();
  return server;
}

/** `measure` on the structured echo tool with validation as the client does it by default and, for a client
 * that can skip it, without: `{ ...on, off_<metric>..., validation_cpu_us_per_call }`. */
async function withAndWithoutValidation(adapter, measure) {
  const once = async (options) => {
    const conn = await connectChecked(adapter, [stdioServer('echo', { ECHO_STRUCTURED: '1' })], 10, options);
    try {
      const call = conn.tool('echo', 'echo');
      const first = await call(ARGS);
      if (JSON.stringify(first?.structuredContent) !== ARGS_JSON) throw new Error(`no structuredContent: ${JSON.stringify(first).slice(0, 200)}`);
      await warm(call);
      return await measure(call);
    } finally {
      await conn.close();
    }
  };
  const on = await once({});
  if (!adapter.canSkipValidation) return on;
  const off = await once({ validation: false });
  return { ...on, ...prefixed('off_', off), validation_cpu_us_per_call: on.cpu_us_per_call - off.cpu_us_per_call };
}

// W9/W10: `n` user sessions in one process, each its own toolset (mcpferry) or its own clients (the SDKs),
// each connected to the same `sessionServers` Streamable HTTP servers of `sessionTools` tools: connected
// `sessionWidth` sessions at a time, then one call per session (as many in flight). What a multi-tenant agent
// backend pays per user: connect wall time and CPU, RSS and JS heap held per open session, the calls.
async function sessions(adapter, n) {
  const era = config.sessionsEra === 'modern' ? { ECHO_MODERN: '1' } : {};
  const servers = await Promise.all(Array.from({ length: config.sessionServers }, () => startHttpServer(config.sessionTools, era)));
  const entries = servers.map((s, i) => ({ name: `s${i + 1}`, kind: 'http', url: s.url }));
  const conns = [];
  try {
    gc();
    await sleep(50);
    const before = process.memoryUsage();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    let next = 0;
    const connector = async () => {
      while (next < n) {
        next++;
        conns.push(await connectChecked(adapter, entries, config.sessionServers * config.sessionTools));
      }
    };
    await Promise.all(Array.from({ length: Math.min(config.sessionWidth, n) }, connector));
    const connectMs = performance.now() - t0;
    const connectCpu = cpuMicros(cpu0);
    await sleep(200);
    gc();
    const held = process.memoryUsage();
    const cpu1 = process.cpuUsage();
    const t1 = performance.now();
    let i = 0;
    const caller = async () => {
      while (i < conns.length) {
        const conn = conns[i];
        const server = entries[i % entries.length].name;
        i++;
        checkEcho(await conn.tool(server, 'echo')(ARGS));
      }
    };
    await Promise.all(Array.from({ length: Math.min(config.sessionWidth, n) }, caller));
    const callMs = performance.now() - t1;
    const callCpu = cpuMicros(cpu1);
    return {
      connect_ms: connectMs,
      connect_cpu_ms: connectCpu / 1000,
      rss_kib_per_session: (held.rss - before.rss) / 1024 / n,
      heap_kib_per_session: (held.heapUsed - before.heapUsed) / 1024 / n,
      call_ms: callMs,
      call_cpu_us_per_call: callCpu / n,
    };
  } finally {
    await Promise.all(conns.map((c) => c.close().catch(() => {})));
    await Promise.all(servers.map((s) => s.stop()));
  }
}

// R1/R2: recovery of a lost server, "kill → first successful call". Each recovery is a fresh toolset
// (the crash-loop bound counts a server's ends over a minute: samples on one toolset would measure that
// bound, not a recovery), live and warmed by a few calls; then its server is SIGKILLed by pid and echo is
// called until a call succeeds. A call the loss catches in flight fails (it may have run) and the next is
// made at once; a call made while the server is `reconnecting` waits for it. Once kill() has returned,
// the killed process can answer nothing more, so the successful call is the new process's or session's.
// Each recovery is measured with the `reconnect` defaults (first backoff initialDelayMs 500, plus up to 20%
// jitter) and with `{ initialDelayMs: 50 }`, alternately.
const RECONNECT_SETTINGS = [
  { prefix: '', reconnect: undefined },
  { prefix: 'fast_', reconnect: { initialDelayMs: 50 } },
];
// Longest a recovery (or a diagnostic it is waiting for) may take before the sample is a failure.
const RECOVERY_BOUND_MS = 30_000;

function bounded(promise, what, ms = RECOVERY_BOUND_MS) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** The diagnostics a recovery is followed by: `lost` and `reconnected` resolve with theirs. */
function recoveryWatch() {
  const watch = {};
  watch.lost = new Promise((resolve) => (watch.onLost = resolve));
  watch.reconnected = new Promise((resolve) => (watch.onReconnected = resolve));
  watch.onDiagnostic = (d) => {
    if (d.code === 'server-lost') watch.onLost(d);
    else if (d.code === 'server-reconnected') watch.onReconnected(d);
  };
  return watch;
}

/** echo, called until a call succeeds; resolves with the number of calls that failed first. */
async function firstSuccess(conn, deadline) {
  for (let failed = 0; ; failed++) {
    try {
      checkEcho(await conn.tool('echo', 'echo')(ARGS));
      return failed;
    } catch (error) {
      if (performance.now() > deadline || failed >= 1000) {
        throw new Error(`no successful call after ${failed + 1} tries: ${error?.code ?? ''} ${error?.message ?? error}`);
      }
    }
  }
}

/** One recovery of the server `echo` of `conn`: `kill(t0)` ends it (and for HTTP brings it back), then
 * wall time and this process's CPU from the kill to the first successful call. */
async function timeRecovery(conn, watch, kill) {
  for (let i = 0; i < 20; i++) checkEcho(await conn.tool('echo', 'echo')(ARGS));
  const state = conn.servers().find((s) => s.name === 'echo');
  if (state?.state !== 'live') throw new Error(`the server is not live before the kill: ${JSON.stringify(state)}`);
  gc();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const killed = Promise.resolve(kill(t0));
  const killFailed = killed.then(() => new Promise(() => {})); // rejects only if kill() does
  const failedCalls = await Promise.race([firstSuccess(conn, t0 + RECOVERY_BOUND_MS), killFailed]);
  const ms = performance.now() - t0;
  const cpu = cpuMicros(cpu0);
  const extra = await killed;
  const reconnected = await bounded(watch.reconnected, 'server-reconnected diagnostic');
  const after = conn.servers().find((s) => s.name === 'echo');
  if (after?.restarts !== 1) throw new Error(`expected one restart, servers() says ${JSON.stringify(after)}`);
  return { ms, cpu_ms: cpu / 1000, failed_calls: failedCalls, engine_ms: reconnected.elapsedMs, attempts: reconnected.attempt, ...extra };
}

// R1: the stdio server, found by a tag of its own in its argv, SIGKILLed; mcpferry starts it again.
async function stdioRecovery(adapter, reconnect) {
  const tag = `--bench-recovery=${randomUUID()}`;
  const server = stdioServer('echo');
  server.args.push(tag);
  const watch = recoveryWatch();
  const conn = await connectChecked(adapter, [server], 10, { reconnect, onDiagnostic: watch.onDiagnostic });
  try {
    const pids = pidsWithArg(tag);
    if (pids.length !== 1) throw new Error(`expected one server process, found ${pids.length}`);
    const sample = await timeRecovery(conn, watch, () => {
      process.kill(pids[0], 'SIGKILL');
    });
    const now = pidsWithArg(tag);
    if (now.length !== 1 || now[0] === pids[0]) throw new Error(`expected one new server process, found ${JSON.stringify(now)} (killed ${pids[0]})`);
    return sample;
  } finally {
    await conn.close();
  }
}

// R2: the HTTP server SIGKILLed and started again on its port as soon as mcpferry has seen the loss (its
// `server-lost`): the replacement was started ahead and only binds then, so the outage is the detection
// (echo-http.mjs offers no GET stream: the loss is seen by the calls after the kill) plus a bind, and what
// is measured is mcpferry's detection, backoff and new session, not a server's downtime.
async function httpRecovery(adapter, reconnect) {
  const first = await startHttpServer();
  const servers = [first];
  let conn;
  try {
    const second = await startHttpServer(10, { ECHO_PORT: new URL(first.url).port, ECHO_LISTEN: 'stdin' });
    servers.push(second);
    const watch = recoveryWatch();
    conn = await connectChecked(adapter, [{ name: 'echo', kind: 'http', url: first.url }], 10, { reconnect, onDiagnostic: watch.onDiagnostic });
    return await timeRecovery(conn, watch, async (t0) => {
      const gone = first.kill();
      // A refused connection is what makes it lost, so its port is free by then.
      await bounded(watch.lost, 'server-lost diagnostic');
      const url = await bounded(second.listen(), 'listening replacement');
      const outage = performance.now() - t0;
      if (url !== first.url) throw new Error(`the server came back on ${url}, not ${first.url}`);
      await gone;
      return { outage_ms: outage };
    });
  } finally {
    await conn?.close();
    await Promise.all(servers.map((s) => s.stop()));
  }
}

/** `config.rSamples` recoveries per reconnect setting (alternating which goes first), summarized per setting:
 * `<prefix>p50_ms`, `<prefix>p95_ms` (kill → first successful call), `<prefix>cpu_ms` (median client CPU of a
 * recovery), `<prefix>engine_ms` (median loss → live again, as the engine reports it), `<prefix>attempts`
 * (most reconnect attempts one recovery took), `<prefix>failed_calls` (mean calls that failed before the
 * first success) and, where the server was restarted, `<prefix>outage_ms` (median kill → listening again). */
async function recoveries(adapter, recoverOnce) {
  if (!adapter.recovers) throw new Error(`${adapter.name} has no automatic recovery of a lost server`);
  const samples = new Map(RECONNECT_SETTINGS.map((s) => [s.prefix, []]));
  for (let i = 0; i < config.rSamples; i++) {
    const order = i % 2 ? [...RECONNECT_SETTINGS].reverse() : RECONNECT_SETTINGS;
    for (const { prefix, reconnect } of order) samples.get(prefix).push(await recoverOnce(adapter, reconnect));
  }
  const metrics = { samples: config.rSamples };
  for (const [prefix, list] of samples) {
    const sorted = (key) => list.map((s) => s[key]).sort((a, b) => a - b);
    metrics[`${prefix}p50_ms`] = percentile(sorted('ms'), 0.5);
    metrics[`${prefix}p95_ms`] = percentile(sorted('ms'), 0.95);
    metrics[`${prefix}cpu_ms`] = percentile(sorted('cpu_ms'), 0.5);
    metrics[`${prefix}engine_ms`] = percentile(sorted('engine_ms'), 0.5);
    metrics[`${prefix}attempts`] = Math.max(...list.map((s) => s.attempts));
    metrics[`${prefix}failed_calls`] = list.reduce((sum, s) => sum + s.failed_calls, 0) / list.length;
    if (list[0].outage_ms !== undefined) metrics[`${prefix}outage_ms`] = percentile(sorted('outage_ms'), 0.5);
  }
  return metrics;
}

const workloads = {
  // W1: sequential tools/call over stdio.
  async W1(adapter) {
    const conn = await connectChecked(adapter, [stdioServer('echo')], 10);
    try {
      const call = conn.tool('echo', 'echo');
      await warm(call);
      return await sequential(call, config.w1Calls);
    } finally {
      await conn.close();
    }
  },

  // W2: the same calls with `concurrency` (64) in flight.
  async W2(adapter) {
    const conn = await connectChecked(adapter, [stdioServer('echo')], 10);
    try {
      const call = conn.tool('echo', 'echo');
      await warm(call);
      return await concurrent(call, config.w2Calls);
    } finally {
      await conn.close();
    }
  },

  // W1V, W2V: W1 and W2 on a tool with an outputSchema that returns structuredContent, each client validating
  // what it validates by default (mcpferry: arguments and structuredContent; the MCP SDK: structuredContent).
  // A client that can switch validation off is measured that way too, in the same process: the difference
  // is what validation costs it per call.
  async W1V(adapter) {
    return withAndWithoutValidation(adapter, (call) => sequential(call, config.w1Calls));
  },
  async W2V(adapter) {
    return withAndWithoutValidation(adapter, (call) => concurrent(call, config.w2Calls));
  },

  // W3: Streamable HTTP with JSON responses, sequential then 64 in flight, on one session.
  async W3(adapter) {
    const server = await startHttpServer();
    try {
      const conn = await connectChecked(adapter, [{ name: 'echo', kind: 'http', url: server.url }], 10);
      try {
        const call = conn.tool('echo', 'echo');
        await warm(call, Math.ceil(config.warmup / 3)); // HTTP calls are slower: a third is as much warm-up
        const seq = await sequential(call, config.w3SeqCalls);
        const conc = await concurrent(call, config.w3ConcCalls);
        return { ...prefixed('seq_', seq), ...prefixed('conc_', conc) };
      } finally {
        await conn.close();
      }
    } finally {
      await server.stop();
    }
  },

  // W4: spawn, initialize and list 10 stdio servers of 50 tools each, concurrently. Measured once per
  // process: the cost an agent pays at start-up (the client's modules are already imported; W7 is that).
  async W4(adapter) {
    const servers = Array.from({ length: config.w4Servers }, (_, i) =>
      stdioServer(`srv${String(i + 1).padStart(2, '0')}`, { ECHO_TOOLS: String(config.w4Tools) }));
    gc();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const conn = await connectChecked(adapter, servers, config.w4Servers * config.w4Tools);
    const wallMs = performance.now() - t0;
    const cpu = cpuMicros(cpu0);
    await conn.close();
    return { wall_ms: wallMs, cpu_ms: cpu / 1000 };
  },

  // W5: one server with 2 000 tools in pages of 100: time to a ready tool map, and the memory the
  // client holds for it afterwards (deltas against the same process just before connecting).
  async W5(adapter) {
    const server = stdioServer('big', { ECHO_TOOLS: String(config.w5Tools), ECHO_PAGE: String(config.w5Page) });
    gc();
    const before = process.memoryUsage();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const conn = await connectChecked(adapter, [server], config.w5Tools);
    const timeMs = performance.now() - t0;
    const cpu = cpuMicros(cpu0);
    checkEcho(await conn.tool('big', 'tool_1999')(ARGS));
    await sleep(100);
    gc();
    const after = process.memoryUsage();
    await conn.close();
    return {
      time_ms: timeMs,
      cpu_ms: cpu / 1000,
      heap_delta_mb: (after.heapUsed - before.heapUsed) / MiB,
      rss_delta_mb: (after.rss - before.rss) / MiB,
    };
  },

  // W6: one process holding 20 open stdio connections (each used once): RSS against before connecting.
  async W6(adapter) {
    const servers = Array.from({ length: config.w6Connections }, (_, i) => stdioServer(`c${String(i + 1).padStart(2, '0')}`));
    gc();
    await sleep(50);
    const before = process.memoryUsage();
    const conn = await connectChecked(adapter, servers, config.w6Connections * 10);
    for (const s of servers) checkEcho(await conn.tool(s.name, 'echo')(ARGS));
    await sleep(200);
    gc();
    const after = process.memoryUsage();
    await conn.close();
    return { rss_delta_mb: (after.rss - before.rss) / MiB, heap_delta_mb: (after.heapUsed - before.heapUsed) / MiB };
  },

  // W8: mcpferry's mcp__search_tools over a realistic 2 000-tool catalog (the test suite's generator), through
  // the public API end to end: the first query builds the index, then every query of the suite's set, 10 times.
  async W8(adapter) {
    const fixture = join(REPO_DIR, '__test__', 'fixtures', 'server.mjs');
    const queries = JSON.parse(readFileSync(join(REPO_DIR, '__test__', 'fixtures', 'search-queries.json'), 'utf8')).map((q) => q.query);
    const conn = await adapter.connect([{ name: 'cat', kind: 'stdio', command: process.execPath, args: [fixture, RUN_TAG], env: { FIXTURE_CATALOG: '2000' } }]);
    const search = conn.tool('mcp', 'search_tools');
    const t0 = performance.now();
    await search({ query: 'first query builds the index' });
    const firstMs = performance.now() - t0;
    const times = [];
    for (let round = 0; round < 10; round++) {
      for (const query of queries) {
        const start = performance.now();
        const result = await search({ query });
        times.push((performance.now() - start) * 1000);
        if (!Array.isArray(result.structuredContent?.matches)) throw new Error('search returned no matches list');
      }
    }
    await conn.close();
    times.sort((a, b) => a - b);
    return { first_search_ms: firstMs, search_p50_us: percentile(times, 0.5), search_p99_us: percentile(times, 0.99), search_max_us: times[times.length - 1] };
  },

  // W9: 200 sessions × 2 Streamable HTTP servers of 50 tools (see sessions()).
  async W9(adapter) {
    return sessions(adapter, config.w9Sessions);
  },

  // W10: the same with 1 000 sessions.
  async W10(adapter) {
    return sessions(adapter, config.w10Sessions);
  },

  // W11: resources/read over stdio of a BENCH_RESOURCE_BYTES (4 KiB) text resource, sequential then 64 in
  // flight, then the same size as a blob (base64 on the wire) sequentially, on one connection. The text is
  // checked whole and the blob's length before anything is measured, through each client's own read.
  async W11(adapter) {
    const size = config.resourceBytes;
    const server = stdioServer('echo', { ECHO_RESOURCES: '1', ECHO_RESOURCE_BYTES: String(size) });
    const conn = await connectChecked(adapter, [server], 10);
    try {
      if (typeof conn.readResource !== 'function') throw new Error(`${adapter.name} has no resources/read`);
      const text = () => conn.readResource('echo', 'bench://text');
      const blob = () => conn.readResource('echo', 'bench://blob');
      const expected = resourceText(size);
      const checkText = (result) => {
        const item = result?.contents?.[0];
        if (result?.contents?.length !== 1 || item.uri !== 'bench://text' || item.text !== expected) {
          throw new Error(`resources/read bench://text returned ${JSON.stringify(result).slice(0, 200)}`);
        }
      };
      const checkBlob = (result) => {
        const item = result?.contents?.[0];
        // mcpferry hands bytes (decoded by its engine); the SDKs hand the base64 string of the wire.
        const bytes = item?.blob instanceof Uint8Array ? item.blob : typeof item?.blob === 'string' ? Buffer.from(item.blob, 'base64') : undefined;
        if (item?.uri !== 'bench://blob' || bytes?.length !== size || bytes[size - 1] !== ((size - 1) & 0xff)) {
          throw new Error(`resources/read bench://blob returned ${JSON.stringify(result).slice(0, 200)}`);
        }
      };
      await warm(text, config.warmup, checkText);
      const seq = await sequential(text, config.w11Calls);
      const conc = await concurrent(text, config.w11ConcCalls);
      await warm(blob, Math.ceil(config.warmup / 3), checkBlob);
      const blobSeq = await sequential(blob, config.w11Calls);
      return { bytes: size, ...prefixed('seq_', seq), ...prefixed('conc_', conc), ...prefixed('blob_seq_', blobSeq) };
    } finally {
      await conn.close();
    }
  },

  // R1: a stdio server SIGKILLed while its toolset is live → the first successful call (see recoveries()).
  async R1(adapter) {
    return recoveries(adapter, stdioRecovery);
  },

  // R2: the same for a Streamable HTTP server, killed and started again on its port (see httpRecovery()).
  async R2(adapter) {
    return recoveries(adapter, httpRecovery);
  },

  // W7: import time in a cold process. Each repetition is a fresh `node` that times its own import() of what
  // a user of the client needs (`import_ms`) and the whole process from its start to the import done
  // (`process_ms`: node's own start-up included, so the raw pipe's, which imports nothing, is bare `node`);
  // the median of the repetitions is reported.
  async W7(adapter) {
    const script = [
      'const urls = JSON.parse(process.env.BENCH_IMPORTS);',
      'const t0 = performance.now();',
      'for (const url of urls) await import(url);',
      'const t1 = performance.now();',
      'process.stdout.write(JSON.stringify([t1 - t0, t1]));',
      'process.exit(0);',
    ].join('\n');
    const times = [];
    const processTimes = [];
    for (let i = 0; i < config.w7Reps; i++) {
      let out;
      try {
        out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
          cwd: REPO_DIR,
          env: { ...process.env, BENCH_IMPORTS: JSON.stringify(adapter.imports) },
          encoding: 'utf8',
          timeout: 60_000,
        });
      } catch (error) {
        throw new Error(`cold import failed (${error.status ?? error.signal}): ${String(error.stderr).trim().slice(-600)}`);
      }
      const [importMs, processMs] = JSON.parse(out);
      times.push(importMs);
      processTimes.push(processMs);
    }
    times.sort((a, b) => a - b);
    processTimes.sort((a, b) => a - b);
    return { import_ms: percentile(times, 0.5), process_ms: percentile(processTimes, 0.5) };
  },
};

/** Entry point of a client process: `node --expose-gc bench/clients/<client>.mjs <workload>`. */
export async function runClient(adapter) {
  const workload = process.argv[2];
  const run = workloads[workload];
  if (!run) {
    console.error(`usage: node --expose-gc ${process.argv[1]} ${Object.keys(workloads).join('|')}`);
    process.exit(2);
  }
  let result;
  try {
    result = { client: adapter.name, workload, metrics: await run(adapter) };
  } catch (error) {
    result = { client: adapter.name, workload, error: String(error?.stack ?? error).slice(0, 2000) };
  }
  // One marked line, so a client library that prints to stdout cannot confuse the orchestrator.
  process.stdout.write(`BENCH_RESULT ${JSON.stringify(result)}\n`);
  // Every connection was closed above; exiting now also covers a library that leaves a timer behind.
  // Servers exit on end of stdin, so none can outlive this process.
  process.exit(0);
}

/**
 * Connect every server with `connectOne` (resolving to `{ client, ... }`); if any fails, close the ones
 * that connected and throw. Shared by the clients whose SDKs connect one server at a time.
 */
export async function connectAll(servers, connectOne) {
  const settled = await Promise.allSettled(servers.map(connectOne));
  const connected = settled.filter((s) => s.status === 'fulfilled').map((s) => s.value);
  const close = () => Promise.all(connected.map((c) => c.client.close())).then(() => {});
  const failed = settled.find((s) => s.status === 'rejected');
  if (failed) {
    await close();
    throw failed.reason;
  }
  return { connected, close };
}
