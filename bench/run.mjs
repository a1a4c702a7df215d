#!/usr/bin/env node
// Side-by-side benchmark: mcpferry vs @modelcontextprotocol/sdk vs @ai-sdk/mcp (vs a raw pipe floor) on the
// same hand-written echo servers. `npm run bench` builds the release engine and runs this; `BENCH_QUICK=1
// node bench/run.mjs` is a ~1-minute smoke run against whatever engine is built (see lib/config.mjs).
//
// Every client × workload × round is a fresh child process (`node --expose-gc bench/clients/<c>.mjs <W>`),
// so CPU time and memory are that client's alone, and no client inherits another's warm JIT or heap.
// Rounds are interleaved: round r runs every workload for every client, with the client order rotated each
// round so none is always first. Each metric is the median over rounds; ratios are against the SDK.

import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, readSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join, relative } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BENCH_DIR, config, REPO_DIR, SUPPORTED } from './lib/config.mjs';
import { pidsWithArg } from './lib/processes.mjs';

const CLIENT_LABELS = { mcpferry: 'mcpferry', sdk: 'MCP SDK', aisdk: 'AI SDK', raw: 'raw pipe', 'mcpferry-otel': 'mcpferry + OTel', 'mcpferry-base': 'mcpferry (base)' };

// What is reported, in order. `better` says which way is good; `target` is the issue's goal for the
// mcpferry / SDK ratio of that metric.
const METRICS = [
  { w: 'W1', key: 'p50_us', label: 'W1 stdio sequential: p50', unit: 'µs', better: 'lower', target: 0.6 },
  { w: 'W1', key: 'p99_us', label: 'W1 stdio sequential: p99', unit: 'µs', better: 'lower' },
  { w: 'W1', key: 'calls_per_s', label: 'W1 stdio sequential: calls/s', unit: '', better: 'higher' },
  { w: 'W1', key: 'cpu_us_per_call', label: 'W1 stdio sequential: client CPU/call', unit: 'µs', better: 'lower' },
  { w: 'W2', key: 'calls_per_s', label: 'W2 stdio 64 in flight: calls/s', unit: '', better: 'higher', target: 2.5 },
  { w: 'W2', key: 'cpu_us_per_call', label: 'W2 stdio 64 in flight: client CPU/call', unit: 'µs', better: 'lower' },
  { w: 'W1V', key: 'p50_us', label: 'W1V stdio sequential, outputSchema, validation on: p50', unit: 'µs', better: 'lower' },
  { w: 'W1V', key: 'cpu_us_per_call', label: 'W1V stdio sequential, validation on: client CPU/call', unit: 'µs', better: 'lower' },
  { w: 'W1V', key: 'off_cpu_us_per_call', label: 'W1V stdio sequential, validation off: client CPU/call', unit: 'µs', better: 'lower' },
  { w: 'W1V', key: 'validation_cpu_us_per_call', label: 'W1V validation cost per call (on − off, client CPU)', unit: 'µs', better: 'lower' },
  { w: 'W2V', key: 'calls_per_s', label: 'W2V stdio 64 in flight, validation on: calls/s', unit: '', better: 'higher' },
  { w: 'W2V', key: 'cpu_us_per_call', label: 'W2V stdio 64 in flight, validation on: client CPU/call', unit: 'µs', better: 'lower' },
  { w: 'W2V', key: 'off_cpu_us_per_call', label: 'W2V stdio 64 in flight, validation off: client CPU/call', unit: 'µs', better: 'lower' },
  { w: 'W2V', key: 'validation_cpu_us_per_call', label: 'W2V validation cost per call (on − off, client CPU)', unit: 'µs', better: 'lower' },
  { w: 'W3', key: 'seq_p50_us', label: 'W3 HTTP sequential: p50', unit: 'µs', better: 'lower' },
  { w: 'W3', key: 'seq_p99_us', label: 'W3 HTTP sequential: p99', unit: 'µs', better: 'lower' },
  { w: 'W3', key: 'seq_calls_per_s', label: 'W3 HTTP sequential: calls/s', unit: '', better: 'higher', target: 3 },
  { w: 'W3', key: 'seq_cpu_us_per_call', label: 'W3 HTTP sequential: client CPU/call', unit: 'µs', better: 'lower' },
  { w: 'W3', key: 'conc_calls_per_s', label: 'W3 HTTP 64 in flight: calls/s', unit: '', better: 'higher', target: 3 },
  { w: 'W3', key: 'conc_cpu_us_per_call', label: 'W3 HTTP 64 in flight: client CPU/call', unit: 'µs', better: 'lower' },
  { w: 'W4', key: 'wall_ms', label: 'W4 10 stdio servers × 50 tools: wall', unit: 'ms', better: 'lower' },
  { w: 'W4', key: 'cpu_ms', label: 'W4 10 stdio servers × 50 tools: client CPU', unit: 'ms', better: 'lower', target: 0.5 },
  { w: 'W5', key: 'time_ms', label: 'W5 2 000 tools (pages of 100): connect → tool map', unit: 'ms', better: 'lower', target: 0.4 },
  { w: 'W5', key: 'cpu_ms', label: 'W5 2 000 tools: client CPU', unit: 'ms', better: 'lower' },
  { w: 'W5', key: 'heap_delta_mb', label: 'W5 2 000 tools: JS heap held', unit: 'MiB', better: 'lower' },
  { w: 'W5', key: 'rss_delta_mb', label: 'W5 2 000 tools: RSS held', unit: 'MiB', better: 'lower' },
  { w: 'W6', key: 'rss_delta_mb', label: 'W6 20 open stdio connections: RSS Δ', unit: 'MiB', better: 'lower', target: 0.5 },
  { w: 'W6', key: 'heap_delta_mb', label: 'W6 20 open stdio connections: JS heap Δ', unit: 'MiB', better: 'lower' },
  { w: 'W7', key: 'import_ms', label: 'W7 import in a cold process', unit: 'ms', better: 'lower', target: 0.2 },
  { w: 'W8', key: 'first_search_ms', label: 'W8 mcp__search_tools, 2 000 tools: first query (builds the index)', unit: 'ms', better: 'lower' },
  { w: 'W8', key: 'search_p50_us', label: 'W8 mcp__search_tools, 2 000 tools: query p50 (end to end)', unit: 'µs', better: 'lower' },
  { w: 'W8', key: 'search_p99_us', label: 'W8 mcp__search_tools, 2 000 tools: query p99 (end to end)', unit: 'µs', better: 'lower' },
  { w: 'W8', key: 'search_max_us', label: 'W8 mcp__search_tools, 2 000 tools: slowest query', unit: 'µs', better: 'lower' },
  ...['W9', 'W10'].flatMap((w) => {
    const n = (w === 'W9' ? config.w9Sessions : config.w10Sessions).toLocaleString('en-US');
    return [
      { w, key: 'connect_ms', label: `${w} ${n} sessions × 2 HTTP servers: connect all (wall)`, unit: 'ms', better: 'lower', target: 0.5 },
      { w, key: 'connect_cpu_ms', label: `${w} ${n} sessions: connect CPU`, unit: 'ms', better: 'lower' },
      { w, key: 'rss_kib_per_session', label: `${w} ${n} sessions: RSS per session`, unit: 'KiB', better: 'lower', target: 0.3 },
      { w, key: 'heap_kib_per_session', label: `${w} ${n} sessions: JS heap per session`, unit: 'KiB', better: 'lower' },
      { w, key: 'call_ms', label: `${w} ${n} sessions: one call each (wall)`, unit: 'ms', better: 'lower' },
      { w, key: 'call_cpu_us_per_call', label: `${w} ${n} sessions: CPU per call`, unit: 'µs', better: 'lower' },
    ];
  }),
  // W11: resources/read (issue 28) of a BENCH_RESOURCE_BYTES text resource, then the same size as a blob.
  ...(() => {
    const b = config.resourceBytes;
    const size = b % 1024 === 0 ? `${b / 1024} KiB` : `${b.toLocaleString('en-US')}-byte`;
    return [
      { w: 'W11', key: 'seq_p50_us', label: `W11 stdio resources/read ${size} text, sequential: p50`, unit: 'µs', better: 'lower' },
      { w: 'W11', key: 'seq_p99_us', label: `W11 stdio resources/read ${size} text, sequential: p99`, unit: 'µs', better: 'lower' },
      { w: 'W11', key: 'seq_calls_per_s', label: `W11 stdio resources/read ${size} text, sequential: reads/s`, unit: 'reads/s', better: 'higher' },
      { w: 'W11', key: 'seq_cpu_us_per_call', label: `W11 stdio resources/read ${size} text, sequential: client CPU/read`, unit: 'µs', better: 'lower' },
      { w: 'W11', key: 'conc_calls_per_s', label: `W11 stdio resources/read ${size} text, 64 in flight: reads/s`, unit: 'reads/s', better: 'higher' },
      { w: 'W11', key: 'conc_cpu_us_per_call', label: `W11 stdio resources/read ${size} text, 64 in flight: client CPU/read`, unit: 'µs', better: 'lower' },
      { w: 'W11', key: 'blob_seq_p50_us', label: `W11 stdio resources/read ${size} blob, sequential: p50`, unit: 'µs', better: 'lower' },
      { w: 'W11', key: 'blob_seq_cpu_us_per_call', label: `W11 stdio resources/read ${size} blob, sequential: client CPU/read`, unit: 'µs', better: 'lower' },
    ];
  })(),
  // Recovery of a lost server (issue 27), mcpferry only: the other clients have none ('n/a (no recovery)').
  ...[['R1', 'stdio server SIGKILLed'], ['R2', 'HTTP server SIGKILLed, back on its port at once']].flatMap(([w, what]) => {
    const row = { w, unit: 'ms', better: 'lower', unsupported: 'n/a (no recovery)' };
    return [
      { ...row, key: 'p50_ms', label: `${w} ${what} → first successful call, reconnect defaults: p50` },
      { ...row, key: 'p95_ms', label: `${w} ${what} → first successful call, reconnect defaults: p95` },
      { ...row, key: 'fast_p50_ms', label: `${w} ${what} → first successful call, initialDelayMs 50: p50` },
      { ...row, key: 'fast_p95_ms', label: `${w} ${what} → first successful call, initialDelayMs 50: p95` },
      { ...row, key: 'cpu_ms', label: `${w} ${what}: client CPU per recovery, reconnect defaults` },
    ];
  }),
  // Floors: the same metrics against the raw pipe rather than the SDK (`base`).
  { w: 'W2', key: 'calls_per_s', label: 'W2 stdio 64 in flight: calls/s, against the raw pipe', unit: '', better: 'higher', target: 1.0, base: 'raw' },
  { w: 'W2', key: 'cpu_us_per_call', label: 'W2 stdio 64 in flight: client CPU/call, against the raw pipe', unit: 'µs', better: 'lower', target: 1.0, base: 'raw' },
  { w: 'W4', key: 'cpu_ms', label: 'W4 10 stdio servers × 50 tools: client CPU, against the raw pipe', unit: 'ms', better: 'lower', target: 1.5, base: 'raw' },
  { w: 'W5', key: 'time_ms', label: 'W5 2 000 tools: connect → tool map, against the raw pipe', unit: 'ms', better: 'lower', target: 1.1, base: 'raw' },
  { w: 'W5', key: 'cpu_ms', label: 'W5 2 000 tools: client CPU, against the raw pipe', unit: 'ms', better: 'lower', target: 2.0, base: 'raw' },
  { w: 'W7', key: 'process_ms', label: 'W7 cold process: start → import done, against bare `node`', unit: 'ms', better: 'lower', target: 1.3, base: 'raw' },
];

const runId = `${process.pid}-${Date.now().toString(36)}`;
const children = new Set(); // live client processes, killed if we are interrupted

function runChild(client, workload) {
  return new Promise((resolve) => {
    const started = performance.now();
    // detached: the child leads its own process group, so a timeout can kill it together with any server
    // it spawned into that group (mcpferry puts servers in groups of their own; those exit on stdin EOF).
    const child = spawn(process.execPath, ['--expose-gc', join(BENCH_DIR, 'clients', `${client}.mjs`), workload], {
      cwd: REPO_DIR,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, BENCH_RUN_ID: runId },
    });
    children.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr = (stderr + c).slice(-8000)));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child.pid);
    }, config.childTimeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      children.delete(child);
      killGroup(child.pid); // anything left in its group
      const seconds = (performance.now() - started) / 1000;
      const line = stdout.split('\n').find((l) => l.startsWith('BENCH_RESULT '));
      let result;
      if (line) result = JSON.parse(line.slice('BENCH_RESULT '.length));
      else {
        const why = timedOut ? `timed out after ${config.childTimeoutMs} ms` : `exited with ${signal ?? code} and no result`;
        result = { client, workload, error: `${why}\n${stderr.trim().slice(-1500)}` };
      }
      resolve({ ...result, seconds });
    });
  });
}

function killGroup(pid) {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // ESRCH: the group is already gone, which is the normal case.
  }
}

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    for (const child of children) killGroup(child.pid);
    process.exit(130);
  });
}

// Server processes of this run still alive (each was started with `--bench-run=<runId>` in its argv).
const strayServers = () => pidsWithArg(`--bench-run=${runId}`);

function median(values) {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return undefined;
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function engineBuild() {
  // The release profile strips symbols and debug info; a debug build has .debug_info. Read only the ELF
  // section headers rather than the (large) file. NAPI_RS_NATIVE_LIBRARY_PATH is napi-rs's own override of
  // which engine index.js loads, handy to bench a build kept elsewhere.
  const file = process.env.NAPI_RS_NATIVE_LIBRARY_PATH || join(REPO_DIR, 'mcpferry.linux-x64-gnu.node');
  let fd;
  try {
    fd = openSync(file, 'r');
    const read = (pos, len) => {
      const buf = Buffer.alloc(len);
      readSync(fd, buf, 0, len, pos);
      return buf;
    };
    const ehdr = read(0, 64);
    const shoff = Number(ehdr.readBigUInt64LE(0x28));
    const shentsize = ehdr.readUInt16LE(0x3a);
    const shnum = ehdr.readUInt16LE(0x3c);
    const shstrndx = ehdr.readUInt16LE(0x3e);
    const headers = read(shoff, shnum * shentsize);
    const strtab = headers.subarray(shstrndx * shentsize);
    const names = read(Number(strtab.readBigUInt64LE(0x18)), Number(strtab.readBigUInt64LE(0x20))).toString('latin1');
    return names.includes('.debug_info') ? 'debug (NOT representative: run `npm run bench`)' : 'release';
  } catch (error) {
    return `unknown (${error.code ?? error.message})`;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

function machine() {
  const cpuinfo = readFileSync('/proc/cpuinfo', 'utf8');
  const model = /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1]?.trim() ?? cpus()[0]?.model ?? 'unknown';
  const cores = (cpuinfo.match(/^processor\s*:/gm) ?? []).length || cpus().length;
  return { model, cores };
}

function packageVersion(name) {
  try {
    // Packages that need Node 22 (@ai-sdk/mcp) are installed in scripts/node22 (scripts/node22.mjs).
    const dir = [join(REPO_DIR, 'node_modules'), join(REPO_DIR, 'scripts', 'node22', 'node_modules')].find((d) => existsSync(join(d, name)));
    return JSON.parse(readFileSync(join(dir ?? REPO_DIR, name, 'package.json'), 'utf8')).version;
  } catch {
    return 'not installed';
  }
}

function fmt(value) {
  if (value === undefined) return '—';
  const abs = Math.abs(value);
  if (abs >= 1000) return Math.round(value).toLocaleString('en-US');
  if (abs >= 100) return value.toFixed(0);
  if (abs >= 10) return value.toFixed(1);
  return value.toFixed(2);
}

function fmtRatio(r) {
  return r === undefined ? '—' : `${r.toFixed(2)}×`;
}

function meets(metric, ratio) {
  return metric.better === 'lower' ? ratio <= metric.target : ratio >= metric.target;
}

// ---------------------------------------------------------------------------------------------------

const startedAt = new Date();
const t0 = performance.now();
const results = [];
const jobs = config.workloads.flatMap((w) => config.clients.filter((c) => SUPPORTED[c].includes(w)).map((c) => [c, w]));
console.log(`mcpferry bench: ${config.quick ? 'QUICK smoke run' : 'full run'}, ${config.rounds} rounds × ${jobs.length} client processes; engine build: ${engineBuild()}`);

for (let round = 1; round <= config.rounds; round++) {
  for (const workload of config.workloads) {
    const clients = config.clients.filter((c) => SUPPORTED[c].includes(workload));
    const shift = (round - 1) % clients.length;
    const order = [...clients.slice(shift), ...clients.slice(0, shift)];
    for (const client of order) {
      const result = await runChild(client, workload);
      results.push({ round, ...result });
      const status = result.error ? `FAILED: ${result.error.split('\n')[0]}` : 'ok';
      console.log(`  round ${round}/${config.rounds} ${workload} ${client.padEnd(8)} ${result.seconds.toFixed(1).padStart(5)} s  ${status}`);
    }
  }
}

// Every client closed its connections and every server exits on stdin EOF; give them a moment, then
// make sure. A stray is a bug in a client's close() and is reported.
let strays = strayServers();
for (let i = 0; i < 30 && strays.length > 0; i++) {
  await sleep(100);
  strays = strayServers();
}
for (const pid of strays) {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

// ---------------------------------------------------------------------------------------------------
// Aggregate: per client and metric, the median over the rounds that succeeded.

const value = (client, metric) =>
  median(results.filter((r) => r.client === client && r.workload === metric.w && r.metrics).map((r) => r.metrics[metric.key]));
const errorsOf = (client, w) => results.filter((r) => r.client === client && r.workload === w && r.error);

const elapsed = (performance.now() - t0) / 1000;
const { model, cores } = machine();
const clientsShown = config.clients;
const lines = [];
lines.push('# mcpferry benchmark');
lines.push('');
if (config.quick) lines.push('> **Smoke run (BENCH_QUICK=1): small counts, numbers are indicative only.**\n');
lines.push('| | |');
lines.push('|---|---|');
lines.push(`| Date | ${startedAt.toISOString()} |`);
lines.push(`| Node | ${process.version} |`);
lines.push(`| Machine | ${model}, ${cores} cores (${process.platform} ${process.arch}) |`);
lines.push(`| mcpferry | ${JSON.parse(readFileSync(join(REPO_DIR, 'package.json'), 'utf8')).version}, engine build: ${engineBuild()} |`);
lines.push(`| @modelcontextprotocol/sdk | ${packageVersion('@modelcontextprotocol/sdk')} |`);
lines.push(`| @ai-sdk/mcp | ${packageVersion('@ai-sdk/mcp')} |`);
lines.push(`| Rounds | ${config.rounds} (medians reported; clients interleaved, order rotated per round) |`);
lines.push(
  `| Counts | W1 ${config.w1Calls} calls, W2 ${config.w2Calls} calls, W3 ${config.w3SeqCalls} sequential + ${config.w3ConcCalls} in flight, ` +
    `${config.concurrency} in flight, ${config.warmup} warm-up calls (W1/W2; a third of that for W3), W7 ${config.w7Reps} cold processes per round, ` +
    `W9/W10 ${config.w9Sessions}/${config.w10Sessions} sessions (${config.sessionWidth} connecting at a time` +
    `${config.sessionsEra === 'modern' ? '; servers speak 2026-07-28 too, BENCH_SESSIONS_ERA=modern' : ''}), ` +
    `W11 ${config.w11Calls} sequential + ${config.w11ConcCalls} in flight reads of a ${config.resourceBytes}-byte text resource and ${config.w11Calls} of the blob, ` +
    `R1/R2 ${config.rSamples} recoveries per reconnect setting per round |`,
);
lines.push(`| Run time | ${elapsed.toFixed(0)} s |`);
lines.push('');

const header = ['Workload', 'Unit', ...clientsShown.map((c) => CLIENT_LABELS[c])];
const ratioClients = clientsShown.filter((c) => c !== 'sdk');
if (clientsShown.includes('sdk')) header.push(...ratioClients.map((c) => `${CLIENT_LABELS[c]} / SDK`));
header.push('Target (mcpferry / SDK)', 'Met');
lines.push(`| ${header.join(' | ')} |`);
lines.push(`|${header.map((_, i) => (i < 2 ? '---' : '---:')).join('|')}|`);

const verdicts = [];
for (const metric of METRICS) {
  if (!config.workloads.includes(metric.w)) continue;
  const row = [metric.label, metric.unit || 'calls/s'];
  const values = {};
  for (const c of clientsShown) {
    if (!SUPPORTED[c].includes(metric.w)) {
      row.push(metric.unsupported ?? 'n/a');
      continue;
    }
    values[c] = value(c, metric);
    row.push(values[c] === undefined && errorsOf(c, metric.w).length ? 'failed' : fmt(values[c]));
  }
  const ratio = (c) => (values[c] !== undefined && values.sdk ? values[c] / values.sdk : undefined);
  if (clientsShown.includes('sdk')) for (const c of ratioClients) row.push(fmtRatio(ratio(c)));
  if (metric.target !== undefined) {
    const base = metric.base ?? 'sdk';
    const r = values.mcpferry !== undefined && values[base] ? values.mcpferry / values[base] : undefined;
    const met = r === undefined ? 'n/a' : meets(metric, r) ? 'met' : 'not met';
    row.push(`${metric.better === 'lower' ? '≤' : '≥'} ${metric.target}×${base === 'sdk' ? '' : ` ${CLIENT_LABELS[base]}`}`, met);
    verdicts.push({ metric, ratio: r, met });
  } else {
    row.push('', '');
  }
  lines.push(`| ${row.join(' | ')} |`);
}
lines.push('');
lines.push(`Ratios are client / SDK of the medians; for calls/s higher is better, for everything else lower is better. ` +
  `"n/a": the raw pipe is a floor for stdio only (the call path W1, W2, many servers' connect W4, the big catalogue W5 and resources/read W11) and, importing nothing, bare \`node\` for W7; rows marked "against the raw pipe" take their target ratio against it; W8 is tool search, which only mcpferry has (its target is absolute: under 1 ms per query); ` +
  `R1/R2 are recovery of a lost server, which only mcpferry does ("n/a (no recovery)": the MCP SDK and the AI SDK restart no stdio server and open no new session by themselves). ` +
  `W1V/W2V: each client validates what it does by default (mcpferry: arguments and structuredContent; the MCP SDK: structuredContent); ` +
  `the "validation off" and "cost" rows are mcpferry's alone, measured in the same process with validateArguments and validateResults off.`);
lines.push('');

lines.push('## Targets');
lines.push('');
for (const { metric, ratio, met } of verdicts) {
  lines.push(`- ${metric.label}: mcpferry / ${CLIENT_LABELS[metric.base ?? 'sdk']} = ${fmtRatio(ratio)}, target ${metric.better === 'lower' ? '≤' : '≥'} ${metric.target}× — **${met}**`);
}
lines.push('');

const failures = results.filter((r) => r.error);
if (failures.length > 0 || strays.length > 0) {
  lines.push('## Failures');
  lines.push('');
  for (const f of failures) lines.push(`- round ${f.round} ${f.workload} ${f.client}: \`${f.error.split('\n')[0].replaceAll('`', "'")}\``);
  if (strays.length > 0) lines.push(`- ${strays.length} server process(es) outlived their client and were killed: ${strays.join(', ')}`);
  lines.push('');
}

lines.push('## What is measured');
lines.push('');
lines.push(
  [
    '- Servers: `bench/servers/echo-stdio.mjs` (newline JSON-RPC) and `bench/servers/echo-http.mjs` (node:http, Streamable HTTP, JSON',
    '  bodies, stateful `Mcp-Session-Id`), hand-written without any SDK. Each is a separate process, so its CPU is not counted.',
    '- Each client × workload × round runs in a fresh `node --expose-gc` process; client CPU is `process.cpuUsage()` of that',
    '  process (all its threads, so mcpferry\'s engine threads are counted), memory is `process.memoryUsage()` after GC.',
    '- W1/W2: `tools/call` echo with a 200-byte argument over stdio, after warm-up; W2 keeps 64 calls in flight.',
    '- W3: the same over Streamable HTTP with JSON responses on one session, sequential then 64 in flight.',
    '- W4: spawn + initialize + list 10 stdio servers of 50 tools concurrently (the first connect of a fresh process;',
    '  modules already imported). W5: one server of 2 000 tools paged by 100, time to a usable tool map, then heap/RSS',
    '  held (Δ vs the same process before connecting). W6: RSS Δ of one process holding 20 open stdio connections.',
    '- W7: median wall time of the `import()` alone in fresh `node` processes: `entry/index.mjs` for mcpferry (what',
    '  `import \'mcpferry\'` loads, the native engine included); `client/index.js` + `client/stdio.js` +',
    '  `client/streamableHttp.js` for the SDK; `@ai-sdk/mcp` + `@ai-sdk/mcp/mcp-stdio` for the AI SDK. The row against',
    '  bare `node` is the whole process from its start to the import done; the raw pipe imports nothing, so its row is',
    '  bare `node` (`--input-type=module -e`, as every client\'s).',
    '- SDK: `Client` + `StdioClientTransport` / `StreamableHTTPClientTransport`, every `tools/list` page, `callTool`.',
    '- AI SDK: `createMCPClient` + `StdioMCPTransport` / `{ type: \'http\' }`, `client.tools()`, each tool\'s `execute()`;',
    '  defaults kept, so it first probes `server/discover` (answered "method not found") before `initialize`.',
    '- Raw pipe: a minimal JSON-RPC client in plain Node (no validation), the practical floor for W1/W2/W5.',
    '- W9/W10: 200 / 1 000 user sessions in one process, each its own toolset (mcpferry: one `mcpTools()` per session;',
    '  the SDKs: one client per server per session) on the same 2 `echo-http.mjs` servers of 50 tools, connected 50',
    '  at a time; then one `echo` call per session, 50 in flight. RSS and heap per session are the Δ against before',
    '  connecting, after GC, divided by the sessions held.',
    '- W11: `resources/read` over stdio of the echo server\'s 4 KiB (BENCH_RESOURCE_BYTES) text resource, after warm-up,',
    '  sequential then 64 in flight, then the same size as a blob (base64 on the wire) sequentially, on one connection;',
    '  the server declares `resources` only here (`ECHO_RESOURCES=1`), so W1–W10 see the same server as before.',
    '  mcpferry: `toolset.readResource(server, uri)` (a blob decoded to bytes by the engine); the MCP SDK and the AI SDK:',
    '  `client.readResource({ uri })` (a blob left as the base64 string); raw pipe: the `resources/read` request alone.',
    '- R1/R2: recovery time, wall from the SIGKILL of the server (by pid) to the first successful `echo` call, each',
    '  recovery on a fresh live toolset, with the `reconnect` defaults (first backoff 500 ms + up to 20% jitter) and',
    '  with `initialDelayMs: 50`; calls are made from the kill on until one succeeds (one the loss catches fails, one',
    '  made while reconnecting waits). R1 stdio: mcpferry starts the server again. R2 Streamable HTTP: the server is',
    '  started again on its port as soon as mcpferry reports it lost (a replacement process started ahead binds then:',
    '  `outage_ms`), so the row is detection + backoff + a new session, not downtime. p50/p95 are over one round\'s',
    '  recoveries (median over rounds); CPU is this process\'s for one recovery, kill → success.',
  ].join('\n'),
);
lines.push('');

/** The `## Earlier runs` section of the report at `path` (to its end), or '' when there is none. */
function earlierRuns(path) {
  if (!existsSync(path)) return '';
  const report = readFileSync(path, 'utf8');
  const at = report.indexOf('\n## Earlier runs\n');
  return at < 0 ? '' : report.slice(at);
}

lines.push('<details><summary>Every round</summary>');
lines.push('');
lines.push('| Round | Workload | Client | Seconds | Result |');
lines.push('|---:|---|---|---:|---|');
for (const r of results) {
  const body = r.error
    ? `error: ${r.error.split('\n')[0].replaceAll('|', '\\|')}`
    : Object.entries(r.metrics).map(([k, v]) => `${k}=${fmt(v)}`).join(', ');
  lines.push(`| ${r.round} | ${r.workload} | ${r.client} | ${r.seconds.toFixed(1)} | ${body} |`);
}
lines.push('');
lines.push('</details>');
lines.push('');

// The hand-kept history below the generated report (`## Earlier runs`: past runs with their dates, machines and
// commits) is carried over, so a new run never erases the record the docs quote.
writeFileSync(config.out, lines.join('\n') + earlierRuns(config.out));
console.log('');
console.log(lines.slice(0, lines.indexOf('## What is measured')).join('\n'));
console.log(`Wrote ${relative(process.cwd(), config.out) || config.out} in ${elapsed.toFixed(0)} s.`);
if (strays.length > 0) process.exitCode = 1;
