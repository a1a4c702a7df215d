// Knobs shared by the orchestrator (bench/run.mjs) and the client processes (bench/clients/*.mjs).
// Every count can be overridden from the environment, so a run can be made as short or as long as needed:
//   BENCH_QUICK=1          smoke run (~1 minute): 3 rounds and small counts; writes bench/results-quick.md
//   BENCH_ROUNDS           rounds (each round runs every workload once per client, in rotated order)
//   BENCH_WARMUP           warm-up calls before W1/W2 are measured (a third for W3), sequential then in flight;
//                          the servers are fresh Node processes too, and under ~1 000 calls their JIT is not
//                          settled: the raw pipe's p50 was 3× worse with 200
//   BENCH_W1_CALLS         measured sequential stdio calls (W1)
//   BENCH_W2_CALLS         measured stdio calls with BENCH_CONCURRENCY in flight (W2)
//   BENCH_W3_SEQ_CALLS     measured sequential HTTP calls (W3)
//   BENCH_W3_CONC_CALLS    measured HTTP calls with BENCH_CONCURRENCY in flight (W3)
//   BENCH_W7_REPS          cold processes per client per round for the import time (W7)
//   BENCH_W9_SESSIONS      sessions (one toolset each, 2 HTTP servers of 50 tools) held at once in W9
//   BENCH_W10_SESSIONS     the same for W10
//   BENCH_W11_CALLS        measured sequential resources/read of the text resource, and of the blob one (W11)
//   BENCH_W11_CONC_CALLS   measured resources/read with BENCH_CONCURRENCY in flight (W11)
//   BENCH_RESOURCE_BYTES   size of W11's text and blob resources in bytes (default 4096)
//   BENCH_R_SAMPLES        recoveries per reconnect setting per round in R1/R2 (each on a fresh toolset)
//   BENCH_SESSIONS_ERA     `modern`: W9/W10's HTTP servers also speak 2026-07-28 (server/discover, stateless
//                          requests; initialize still answered for clients of the 2025 era). Default `legacy`:
//                          2025-11-25 only, as the recorded rows were measured
//   BENCH_CLIENTS          comma-separated subset of mcpferry,sdk,aisdk,raw,mcpferry-otel (default: all but
//                          mcpferry-otel, mcpferry with OpenTelemetry providers registered)
//   BENCH_WORKLOADS        comma-separated subset of W1, W2, W1V, W2V, W3..W11, R1, R2
//   BENCH_OUT              where to write the markdown report
//   BENCH_CHILD_TIMEOUT_MS a client process taking longer is killed and its result recorded as failed

import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const BENCH_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const REPO_DIR = resolve(BENCH_DIR, '..');
export const ECHO_STDIO = join(BENCH_DIR, 'servers', 'echo-stdio.mjs');
export const ECHO_HTTP = join(BENCH_DIR, 'servers', 'echo-http.mjs');

const quick = process.env.BENCH_QUICK === '1' || process.env.BENCH_QUICK === 'true';

function count(name, full, smoke) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return quick ? smoke : full;
  const value = Number.parseInt(raw, 10);
  if (!Number.isFinite(value) || value < 1) throw new Error(`${name} must be a positive integer, got ${JSON.stringify(raw)}`);
  return value;
}

function choice(name, allowed, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!allowed.includes(raw)) throw new Error(`${name} must be one of ${allowed.join(', ')}, got ${JSON.stringify(raw)}`);
  return raw;
}

function list(name, all, fallback = all) {
  const raw = process.env[name];
  if (!raw) return fallback;
  const picked = raw.split(',').map((s) => s.trim()).filter(Boolean);
  for (const p of picked) if (!all.includes(p)) throw new Error(`${name}: unknown ${JSON.stringify(p)} (known: ${all.join(', ')})`);
  return all.filter((x) => picked.includes(x)); // keep the canonical order
}

export const ALL_CLIENTS = ['mcpferry', 'sdk', 'aisdk', 'raw', 'mcpferry-otel', 'mcpferry-base'];
export const ALL_WORKLOADS = ['W1', 'W2', 'W1V', 'W2V', 'W3', 'W4', 'W5', 'W6', 'W7', 'W8', 'W9', 'W10', 'W11', 'R1', 'R2'];

// The raw pipe is a floor for the stdio path only: the call path (W1, W2), many servers' connect (W4), a big catalogue (W5) and
// resources/read (W11).
// W8 (tool search) is a feature only mcpferry has, and so are R1/R2 (recovery of a lost server): the MCP SDK
// and the AI SDK restart no stdio process and open no new session for a server that went away (their
// `reconnectionOptions` only resume an HTTP GET event stream), so they have no recovery time to measure.
const COMMON_WORKLOADS = ALL_WORKLOADS.filter((w) => !['W8', 'R1', 'R2'].includes(w));
export const SUPPORTED = {
  mcpferry: ALL_WORKLOADS,
  sdk: COMMON_WORKLOADS,
  aisdk: COMMON_WORKLOADS,
  raw: ['W1', 'W2', 'W4', 'W5', 'W7', 'W11'], // no schemas to validate on a raw pipe: not in W1V/W2V; W7 imports nothing (bare `node`)
  // What OpenTelemetry costs a call (spans and metrics recorded): asked for by name, not in a default run.
  'mcpferry-otel': ['W1', 'W2', 'W3'],
  // Another checkout's build (BENCH_BASE_DIR), for an A/B of two commits in one run: asked for by name.
  'mcpferry-base': ALL_WORKLOADS,
};

export const config = {
  quick,
  rounds: count('BENCH_ROUNDS', 5, 3),
  warmup: count('BENCH_WARMUP', 1000, 1000),
  concurrency: count('BENCH_CONCURRENCY', 64, 64),
  w1Calls: count('BENCH_W1_CALLS', 5000, 1000),
  w2Calls: count('BENCH_W2_CALLS', 20000, 3000),
  w3SeqCalls: count('BENCH_W3_SEQ_CALLS', 1000, 300),
  w3ConcCalls: count('BENCH_W3_CONC_CALLS', 5000, 1500),
  w4Servers: 10,
  w4Tools: 50,
  w5Tools: 2000,
  w5Page: 100,
  w6Connections: 20,
  w7Reps: count('BENCH_W7_REPS', 15, 5),
  w9Sessions: count('BENCH_W9_SESSIONS', 200, 200),
  w10Sessions: count('BENCH_W10_SESSIONS', 1000, 1000),
  sessionServers: 2,
  sessionTools: 50,
  sessionWidth: 50,
  w11Calls: count('BENCH_W11_CALLS', 5000, 1000),
  w11ConcCalls: count('BENCH_W11_CONC_CALLS', 20000, 3000),
  resourceBytes: count('BENCH_RESOURCE_BYTES', 4096, 4096),
  rSamples: count('BENCH_R_SAMPLES', 8, 3),
  sessionsEra: choice('BENCH_SESSIONS_ERA', ['legacy', 'modern'], 'legacy'),
  clients: list('BENCH_CLIENTS', ALL_CLIENTS, ALL_CLIENTS.filter((c) => c !== 'mcpferry-otel' && c !== 'mcpferry-base')),
  workloads: list('BENCH_WORKLOADS', ALL_WORKLOADS),
  out: process.env.BENCH_OUT || join(BENCH_DIR, quick ? 'results-quick.md' : 'results.md'),
  childTimeoutMs: count('BENCH_CHILD_TIMEOUT_MS', 180_000, 120_000),
};
