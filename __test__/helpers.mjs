// Shared by the test suites: fixture server entries and readers for what the fixture recorded.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, existsSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

export const here = dirname(fileURLToPath(import.meta.url));
export const FIXTURE = join(here, 'fixtures', 'server.mjs');

/**
 * A fixture that serves Streamable HTTP and prints `{"url": …, "seen"?: …}` once listening (those on
 * fixtures/sdk2-http.mjs): `{ url, seen(), stop }`, `seen()` the JSON-RPC bodies it received.
 */
export async function startHttpFixture(script, args = ['http']) {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const line = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} did not start`)), 20_000);
    createInterface({ input: child.stdout }).once('line', (l) => (clearTimeout(timer), resolve(l)));
  });
  const { url, seen } = JSON.parse(line);
  return { url, seen: async () => (await fetch(seen)).json(), stop: () => child.kill() };
}
export const RUNTIME = typeof Bun !== 'undefined' ? 'bun' : `node ${process.versions.node}`;

/**
 * The development packages that need Node 22 (ai 7, @openai/agents, openai 7: scripts/node22.mjs), which
 * scripts/test.mjs installs with Node 22 and names in MCPFERRY_NODE22_MODULES for the Node 22 and Bun runs.
 * Unset on Node 20, which those packages don't support: tests that need them skip with NEEDS_NODE22.
 * To run such a file alone: MCPFERRY_NODE22_MODULES=$PWD/scripts/node22/node_modules <node22> --test …
 */
export const NODE22_MODULES = process.env.MCPFERRY_NODE22_MODULES || null;
export const NEEDS_NODE22 = NODE22_MODULES ? false : 'needs the Node 22 development packages (ai 7, openai 7, @openai/agents require Node 22; scripts/node22.mjs)';
/** Imports a package from those modules (ESM resolution from scripts/node22/load.mjs), or null without them. */
export async function importNode22(specifier) {
  if (!NODE22_MODULES) return null;
  const { load } = await import(pathToFileURL(join(NODE22_MODULES, '..', 'load.mjs')).href);
  return load(specifier);
}

const scratch = mkdtempSync(join(tmpdir(), 'mcpferry-test-'));
let files = 0;
export const scratchFile = (stem) => join(scratch, `${stem}-${++files}`);

/** A stdio entry for the fixture server; `record` is where it logs what it receives. */
export function fixture(name, env = {}) {
  const record = scratchFile(`${name}.jsonl`);
  return {
    entry: { name, type: 'stdio', command: process.execPath, args: [FIXTURE], env: { FIXTURE_RECORD: record, ...env } },
    record,
    received: () => (existsSync(record) ? readFileSync(record, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)) : []),
  };
}

export async function until(predicate, { timeoutMs = 5000, stepMs = 10 } = {}) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await predicate();
    if (value) return value;
    await new Promise((r) => setTimeout(r, stepMs));
  }
  throw new Error(`condition not met within ${timeoutMs} ms: ${predicate}`);
}

/**
 * Full collections, on Node (through --expose-gc, set late) and on Bun, with a turn of the event loop
 * between them for the finalizers (FinalizationRegistry callbacks) the first one queued.
 */
export async function collectGarbage() {
  const gc = typeof Bun !== 'undefined' ? () => Bun.gc(true) : (setFlagsFromString('--expose-gc'), runInNewContext('gc'));
  gc();
  await new Promise((resolve) => setTimeout(resolve, 20));
  gc();
}

/** The state letter of a process (R, S, Z, …) or null when it no longer exists. */
export function processState(pid) {
  if (process.platform === 'win32') {
    // No /proc, and no zombies to tell apart: a process that still runs reads as 'R'.
    try {
      process.kill(pid, 0);
      return 'R';
    } catch {
      return null;
    }
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
  } catch {
    return null;
  }
}

/** The official Python SDK's version the Python fixtures (fixtures/*.py) run on. */
export const PYTHON_SDK = 'mcp==2.3.0';
const VENV = join(here, '..', 'node_modules', '.cache', 'mcpferry', 'py');
/** Written once the venv holds PYTHON_SDK, so later runs reuse it. */
const VENV_READY = join(VENV, `${PYTHON_SDK}.installed`);
/** Creating the venv and installing the SDK from PyPI, in ms (about 15 s when uncached). */
const PYTHON_INSTALL_TIMEOUT_MS = 120_000;

/**
 * The python of a venv holding the official Python SDK (`{ python }`), created and installed from PyPI on
 * first use and cached under node_modules/.cache/mcpferry/py; or `{ skip }` with the reason it cannot be had.
 * Test files run in parallel: one process installs (holding a lock directory), the others wait for it.
 */
export function pythonSdk() {
  const python = join(VENV, 'bin', 'python');
  const ready = () => existsSync(VENV_READY) && existsSync(python) && venvIsHere();
  return withVenvLock(ready, () => ({ python }), () => installPythonSdk(python));
}

/**
 * Whether the venv was made at this path: its scripts' shebangs name the path it was made at, so one
 * reached through another checkout's node_modules (a moved or symlinked tree) would fail to start.
 */
function venvIsHere() {
  try {
    return readFileSync(join(VENV, 'pyvenv.cfg'), 'utf8').includes(VENV);
  } catch {
    return false;
  }
}

/** The published PyPI server `mcp-server-time` (Python SDK 2.x, both eras), pinned. */
export const PYTHON_TIME_SERVER = 'mcp-server-time==2026.10.19';

/**
 * The `mcp-server-time` executable (`{ command }`), installed from PyPI into the Python SDK's venv (beside
 * the SDK, which it requires) on first use and cached there; or `{ skip }` with the reason it cannot be had.
 */
export function pythonTimeServer() {
  const sdk = pythonSdk();
  if (sdk.skip) return sdk;
  const command = join(VENV, 'bin', 'mcp-server-time');
  const marker = join(VENV, `${PYTHON_TIME_SERVER}.installed`);
  const ready = () => existsSync(marker) && existsSync(command);
  return withVenvLock(ready, () => ({ command }), () => {
    const failed = runInstall(join(VENV, 'bin', 'pip'), ['install', '--quiet', '--disable-pip-version-check', PYTHON_TIME_SERVER]);
    if (failed) return { skip: `${PYTHON_TIME_SERVER} unavailable (${failed})` };
    writeFileSync(marker, `${new Date().toISOString()}\n`);
    return { command };
  });
}

/** `install()` under the venv's lock directory unless `ready()`; `done()` once it is. */
function withVenvLock(ready, done, install) {
  if (ready()) return done();
  const lock = `${VENV}.lock`;
  mkdirSync(dirname(VENV), { recursive: true });
  const deadline = Date.now() + PYTHON_INSTALL_TIMEOUT_MS + 10_000;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (ready()) return done();
      // A lock older than an install can take was left by a process that died: take it over.
      const stale = (() => {
        try {
          return Date.now() - statSync(lock).mtimeMs > PYTHON_INSTALL_TIMEOUT_MS + 10_000;
        } catch {
          return false;
        }
      })();
      if (stale) rmSync(lock, { recursive: true, force: true });
      if (Date.now() > deadline) return { skip: 'the Python venv is unavailable (another test process holds its install lock)' };
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
    }
  }
  try {
    if (ready()) return done();
    return install();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** Run one install step: null, or why it failed. */
function runInstall(command, args) {
  const r = spawnSync(command, args, { encoding: 'utf8', timeout: PYTHON_INSTALL_TIMEOUT_MS });
  if (r.error) return `${command} ${args.join(' ')}: ${r.error.message}`;
  if (r.status !== 0) return `${command} ${args.join(' ')}: exit ${r.status}: ${r.stderr.trim().split('\n').slice(-3).join(' / ')}`;
  return null;
}

function installPythonSdk(python) {
  const started = Date.now();
  rmSync(VENV, { recursive: true, force: true });
  mkdirSync(VENV, { recursive: true });
  const failed = runInstall('python3', ['-m', 'venv', VENV]) ?? runInstall(join(VENV, 'bin', 'pip'), ['install', '--quiet', '--disable-pip-version-check', PYTHON_SDK]);
  if (failed) return { skip: `Python SDK 2.x unavailable (${failed})` };
  writeFileSync(VENV_READY, `${new Date().toISOString()}\n`);
  console.log(`# installed ${PYTHON_SDK} into ${VENV} in ${((Date.now() - started) / 1000).toFixed(1)} s (cached for later runs)`);
  return { python };
}

/** A journal written in JavaScript, in memory (the McpJournal interface): its claims and run counters exposed. */
export function memoryJsJournal() {
  const claims = new Map();
  const counts = new Map();
  const journal = {
    async claim(key, value) {
      if (!claims.has(key)) claims.set(key, value);
      return claims.get(key);
    },
    async get(key) {
      return claims.get(key) ?? null;
    },
    async reserve(runId, counter, limit) {
      const key = `${runId}|${counter}`;
      const count = counts.get(key) ?? 0;
      if (count >= limit) return null;
      counts.set(key, count + 1);
      return count + 1;
    },
    async release(runId, counter) {
      const key = `${runId}|${counter}`;
      counts.set(key, Math.max(0, (counts.get(key) ?? 0) - 1));
    },
    async count(runId, counter) {
      return counts.get(`${runId}|${counter}`) ?? 0;
    },
  };
  return { journal, claims, counts };
}

/** Whether stdio responses are read by the engine here: with MCPFERRY_ENGINE_READER=1, and always on Bun (lib/index.ts). */
export const ENGINE_READS = process.env.MCPFERRY_ENGINE_READER === '1' || typeof Bun !== 'undefined';

/**
 * On Node with the JS reader, a test that runs the file `url` once more with stdout read by the engine
 * (MCPFERRY_ENGINE_READER=1), so a suite covers both readers in one run. Nothing on Bun or in that run.
 */
export function rerunWithEngineReader(test, url) {
  if (ENGINE_READS) return;
  test('the same suite with stdout read by the engine instead of the event loop', () => {
    // Without NODE_TEST_CONTEXT the child runs as a test runner of its own, not as our subtest.
    const { NODE_TEST_CONTEXT, ...env } = process.env;
    const run = spawnSync(process.execPath, ['--test', '--test-reporter=spec', fileURLToPath(url)], {
      env: { ...env, MCPFERRY_ENGINE_READER: '1' },
      encoding: 'utf8',
      timeout: 120_000,
    });
    assert.equal(run.status, 0, (run.stdout + run.stderr).slice(-4000));
  });
}
