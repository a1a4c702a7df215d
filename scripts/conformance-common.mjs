// What both conformance runners (scripts/conformance.mjs: the client scenarios; scripts/conformance-server.mjs:
// the server scenarios) need: the suite's CLI run as a child with its output kept, and the result files it writes.

import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { node22Modules } from './node22.mjs';

// The suites need Node 22, so they are installed with it, in scripts/node22 (scripts/node22.mjs).
const require = createRequire(join(node22Modules(), '..', 'package.json'));

/** The folder of an installed suite package. */
export function suiteDir(pkg) {
  return dirname(require.resolve(`${pkg}/package.json`));
}

/** The CLI script of an installed suite package. */
export function suiteCli(pkg) {
  return join(suiteDir(pkg), 'dist', 'index.js');
}

/** Every file named `name` under `dir` (the CLI nests results as <dir>/<scenario>-<timestamp>/...). */
export function findFiles(dir, name) {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name === name)
    .map((e) => join(e.parentPath ?? e.path, e.name));
}

/** Runs `command args` (killed after `timeoutMs`): `{ code, signal, output }`, stdout and stderr together. */
export function runCollecting(command, args, { timeoutMs, ...options }) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, output });
    });
  });
}
