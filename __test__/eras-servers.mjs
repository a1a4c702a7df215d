// The servers of the dual-era tests, shared by the suites that talk to them: the TypeScript SDK 2.x
// fixture over HTTP, and the official Python SDK 2.x (`mcp` from PyPI) in a venv cached under
// node_modules/.cache/mcpferry/py, with its fixture over HTTP.

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { here, until } from './helpers.mjs';

export const TS2 = join(here, 'fixtures', 'ts2-server.mjs');
export const PY2 = join(here, 'fixtures', 'py2-server.py');
const PYTHON_SDK = 'mcp==2.3.0';
const VENV = join(here, '..', 'node_modules', '.cache', 'mcpferry', 'py');
/** Written once the venv holds PYTHON_SDK, so later runs reuse it. */
const VENV_READY = join(VENV, `${PYTHON_SDK}.installed`);
/** Creating the venv and installing the SDK from PyPI, in ms (about 15 s when uncached). */
const PYTHON_INSTALL_TIMEOUT_MS = 120_000;
/** How long a spawned HTTP server may take to listen, in ms. */
const SERVER_START_TIMEOUT_MS = 20_000;

/** The venv's python with the Python SDK 2.x, or the reason it cannot be had. */
export function pythonSdk() {
  const python = join(VENV, 'bin', 'python');
  if (existsSync(VENV_READY) && existsSync(python)) return { python };
  const run = (command, args) => {
    const r = spawnSync(command, args, { encoding: 'utf8', timeout: PYTHON_INSTALL_TIMEOUT_MS });
    if (r.error) return `${command} ${args.join(' ')}: ${r.error.message}`;
    if (r.status !== 0) return `${command} ${args.join(' ')}: exit ${r.status}: ${r.stderr.trim().split('\n').slice(-3).join(' / ')}`;
    return null;
  };
  const started = Date.now();
  rmSync(VENV, { recursive: true, force: true });
  mkdirSync(VENV, { recursive: true });
  const failed = run('python3', ['-m', 'venv', VENV]) ?? run(join(VENV, 'bin', 'pip'), ['install', '--quiet', '--disable-pip-version-check', PYTHON_SDK]);
  if (failed) return { skip: `Python SDK 2.x unavailable (${failed})` };
  writeFileSync(VENV_READY, `${new Date().toISOString()}\n`);
  console.log(`# installed ${PYTHON_SDK} into ${VENV} in ${((Date.now() - started) / 1000).toFixed(1)} s (cached for later runs)`);
  return { python };
}

export function freePort() {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/** The TypeScript 2.x fixture over HTTP: resolves to `{ url, seen(), stop }` once it listens. */
export async function startTs2Http() {
  const child = spawn(process.execPath, [TS2, 'http'], { stdio: ['ignore', 'pipe', 'inherit'] });
  let timer;
  const line = await Promise.race([
    new Promise((resolve) => createInterface({ input: child.stdout }).once('line', resolve)),
    new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('ts2 HTTP fixture did not start')), SERVER_START_TIMEOUT_MS))),
  ]).finally(() => clearTimeout(timer));
  const { url, seen } = JSON.parse(line);
  return { url, seen: async () => (await fetch(seen)).json(), stop: () => child.kill() };
}

/** The Python fixture over HTTP (the SDK's own uvicorn app): resolves once a request is answered. */
export async function startPy2Http(python) {
  const port = await freePort();
  const child = spawn(python, [PY2, 'http', String(port)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr = (stderr + chunk).slice(-4000)));
  const url = `http://127.0.0.1:${port}/mcp`;
  await until(() => fetch(url).then(() => true, () => false), { timeoutMs: SERVER_START_TIMEOUT_MS, stepMs: 100 }).catch((e) => {
    child.kill();
    throw new Error(`${e.message}\n${stderr}`);
  });
  return { url, stop: () => child.kill() };
}
