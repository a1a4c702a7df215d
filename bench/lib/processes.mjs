// Processes found by an argument of their command line (Linux /proc). The harness tags every server it
// starts (`--bench-run=<id>`), so bench/run.mjs can find strays, and the recovery rows (R1) find the pid
// of the stdio server mcpferry spawned by a tag of its own.

import { readFileSync, readdirSync } from 'node:fs';

/** Pids of the live processes with `arg` as one of their argv entries. */
export function pidsWithArg(arg) {
  const found = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (argv.includes(arg)) found.push(Number(entry));
    } catch {
      // the process ended while we looked
    }
  }
  return found;
}
