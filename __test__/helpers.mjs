// Shared by the test suites: fixture server entries and readers for what the fixture recorded.

import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

export const here = dirname(fileURLToPath(import.meta.url));
export const FIXTURE = join(here, 'fixtures', 'server.mjs');
export const RUNTIME = typeof Bun !== 'undefined' ? 'bun' : `node ${process.versions.node}`;

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
