// The Bun the suites run on: the npm package `bun`. Its bin shim works only after bun's postinstall, which
// npm 11 does not run for a dependency (package.json denies it in allowScripts), so the platform
// package's own binary (@oven/bun-<os>-<arch>) is used when the shim can't run.

import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;

export function bun() {
  const oven = join(root, 'node_modules', '@oven');
  const platformBinaries = existsSync(oven)
    ? readdirSync(oven).map((dir) => join(oven, dir, 'bin', process.platform === 'win32' ? 'bun.exe' : 'bun'))
    : [];
  for (const candidate of [join(root, 'node_modules', '.bin', 'bun'), ...platformBinaries]) {
    if (existsSync(candidate) && spawnSync(candidate, ['--version']).status === 0) return candidate;
  }
  throw new Error('no runnable Bun binary in node_modules (npm package "bun")');
}
