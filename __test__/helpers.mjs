// Shared by the test suites: fixture server entries and readers for what the fixture recorded.

import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const here = dirname(fileURLToPath(import.meta.url));
export const FIXTURE = join(here, 'fixtures', 'server.mjs');
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
