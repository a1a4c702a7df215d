#!/usr/bin/env node
// Soak (issue 10): many calls with RSS flat after warm-up, and many connect/close cycles with open
// descriptors and child processes back to baseline. Runs against whatever engine is built (debug or
// release); scale with the environment:
//
//   SOAK_CALLS=100000      calls on one stdio connection
//   SOAK_IN_FLIGHT=64      calls in flight at a time
//   SOAK_WARMUP=0.2        fraction of the calls before RSS sampling starts
//   SOAK_RSS_BOUND_MIB=16  allowed RSS growth from the first sample after warm-up to the last
//   SOAK_CYCLES=1000       mcpTools + close() cycles
//
//   node --expose-gc bench/soak.mjs        (without --expose-gc RSS is noisier; the bound still applies)
//
// Prints one line per measurement and a JSON summary; exits 1 when a bound is broken.

import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { mcpTools } from '../dist/index.js';

const env = process.env;
const CALLS = Number(env.SOAK_CALLS ?? 100_000);
const IN_FLIGHT = Number(env.SOAK_IN_FLIGHT ?? 64);
const WARMUP = Number(env.SOAK_WARMUP ?? 0.2);
const RSS_BOUND_MIB = Number(env.SOAK_RSS_BOUND_MIB ?? 16);
const CYCLES = Number(env.SOAK_CYCLES ?? 1000);
/** RSS samples taken after warm-up. */
const SAMPLES = 20;
const MIB = 1024 * 1024;

const server = {
  name: 'soak',
  type: 'stdio',
  command: process.execPath,
  args: [fileURLToPath(new URL('./servers/echo-stdio.mjs', import.meta.url)), '--bench-run=soak'],
  env: { ECHO_TOOLS: '1' },
};

const rssMib = () => {
  globalThis.gc?.();
  return process.memoryUsage().rss / MIB;
};
/** This process's open descriptors, each with what it points at. */
function descriptors() {
  const open = new Map();
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      open.set(fd, readlinkSync(`/proc/self/fd/${fd}`));
    } catch {
      // the directory's own descriptor, closed by now
    }
  }
  return open;
}

/** Processes whose parent is this one (zombies included: an unreaped child is a leak too). */
function children() {
  const mine = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === process.pid) mine.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return mine;
}

/** Least-squares slope of `ys` over `xs`. */
function slope(xs, ys) {
  const n = xs.length;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i] - mx) * (ys[i] - my);
    den += (xs[i] - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

async function soakCalls() {
  const toolset = await mcpTools([server], { timeoutMs: 30_000 });
  const echo = toolset.tools.soak__echo;
  const warmup = Math.floor(CALLS * WARMUP);
  const every = Math.max(1, Math.floor((CALLS - warmup) / SAMPLES));
  const samples = [];
  const started = Date.now();
  let next = 0;
  let failures = 0;
  async function worker() {
    while (next < CALLS) {
      const i = next++;
      const result = await echo.execute({ text: `call ${i}` });
      if (result.content[0].text !== JSON.stringify({ text: `call ${i}` })) failures++; // the server echoes the arguments
      if (i >= warmup && (i - warmup) % every === 0) samples.push({ call: i, rssMib: rssMib() });
    }
  }
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  const seconds = (Date.now() - started) / 1000;
  await toolset.close();
  samples.sort((a, b) => a.call - b.call);
  const values = samples.map((s) => s.rssMib);
  const growth = values.at(-1) - values[0];
  const perTenThousand = slope(samples.map((s) => s.call), values) * 10_000;
  const ok = failures === 0 && growth < RSS_BOUND_MIB;
  console.log(
    `calls: ${CALLS} in ${seconds.toFixed(1)} s (${Math.round(CALLS / seconds)}/s, ${IN_FLIGHT} in flight), ` +
      `RSS after warm-up ${values[0].toFixed(1)} → ${values.at(-1).toFixed(1)} MiB (min ${Math.min(...values).toFixed(1)}, ` +
      `max ${Math.max(...values).toFixed(1)}; slope ${perTenThousand.toFixed(2)} MiB per 10k calls), wrong answers ${failures}: ${ok ? 'flat' : 'GROWING'}`,
  );
  return { calls: CALLS, seconds, inFlight: IN_FLIGHT, rssMib: values.map((v) => Number(v.toFixed(1))), growthMib: growth, slopeMibPer10k: perTenThousand, failures, ok };
}

async function soakCycles() {
  // One cycle first, so lazily created descriptors (the engine's runtime, epoll) are in the baseline.
  await (await mcpTools([server])).close();
  const before = descriptors();
  const baseline = { descriptors: before.size, children: children().length, rssMib: rssMib() };
  const started = Date.now();
  let peakChildren = 0;
  const rssSamples = [];
  for (let i = 0; i < CYCLES; i++) {
    const toolset = await mcpTools([server]);
    if (!toolset.tools.soak__echo) throw new Error(`cycle ${i}: no tools`);
    await toolset.close();
    peakChildren = Math.max(peakChildren, children().length);
    if ((i + 1) % Math.max(1, Math.floor(CYCLES / SAMPLES)) === 0) rssSamples.push(Number(rssMib().toFixed(1)));
  }
  const seconds = (Date.now() - started) / 1000;
  const now = descriptors();
  const after = { descriptors: now.size, children: children(), rssMib: rssMib() };
  const ok = after.descriptors === baseline.descriptors && after.children.length === baseline.children;
  console.log(
    `cycles: ${CYCLES} connect/close in ${seconds.toFixed(1)} s (${((seconds * 1000) / CYCLES).toFixed(1)} ms each); ` +
      `descriptors ${baseline.descriptors} → ${after.descriptors}, children ${baseline.children} → ${after.children.length} ` +
      `(peak after a close ${peakChildren}), RSS ${baseline.rssMib.toFixed(1)} → ${after.rssMib.toFixed(1)} MiB: ${ok ? 'back to baseline' : 'LEAK'}`,
  );
  return {
    cycles: CYCLES,
    seconds,
    descriptors: [baseline.descriptors, after.descriptors],
    children: [baseline.children, after.children.length],
    leftChildren: after.children,
    newDescriptors: [...now].filter(([fd, target]) => before.get(fd) !== target).map(([fd, target]) => `${fd} → ${target}`),
    peakChildrenAfterClose: peakChildren,
    rssMib: [Number(baseline.rssMib.toFixed(1)), Number(after.rssMib.toFixed(1))],
    // Not bounded here (the issue bounds descriptors and children); printed to show any trend.
    rssSamplesMib: rssSamples,
    ok,
  };
}

const calls = CALLS > 0 ? await soakCalls() : null;
const cycles = CYCLES > 0 ? await soakCycles() : null;
console.log(JSON.stringify({ node: process.versions.node, calls, cycles }));
process.exit([calls, cycles].every((r) => r === null || r.ok) ? 0 : 1);
