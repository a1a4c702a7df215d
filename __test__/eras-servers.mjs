// The servers of the dual-era tests, shared by the suites that talk to them: the TypeScript SDK 2.x
// fixture over HTTP, and the official Python SDK 2.x fixture over HTTP (its venv: helpers.mjs, pythonSdk).

import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { here, until } from './helpers.mjs';

export const TS2 = join(here, 'fixtures', 'ts2-server.mjs');
export const PY2 = join(here, 'fixtures', 'py2-server.py');
/** How long a spawned HTTP server may take to listen, in ms. */
const SERVER_START_TIMEOUT_MS = 20_000;

export function freePort() {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/** The TypeScript 2.x fixture over HTTP (`env` added to its environment): resolves to `{ url, seen(), stop }` once it listens. */
export async function startTs2Http(env = {}) {
  const child = spawn(process.execPath, [TS2, 'http'], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env } });
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
