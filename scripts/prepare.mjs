#!/usr/bin/env node
// `prepare`: npm runs it in a development checkout on `npm install`, and in the clone when mcpferry is
// installed from a git URL (`npm install github:mcpferry/mcpferry`). Only the second has to build: a
// checkout builds with `npm run build` (debug; `npm test` and `npm run demo` do it), and the published
// package carries no `prepare` at all (scripts/package.mjs --check-publish removes it before packing).
//
// From a git URL there is no prebuilt engine, so this builds the release engine for this machine from
// source, which needs a Rust toolchain; without one it stops with a message that says so and what to do.

import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const RUST_VERSION = '1.89';

// pacote (npm's fetcher) sets _PACOTE_NO_PREPARE_ while it prepares a git dependency's clone.
const fromGit = Boolean(process.env._PACOTE_NO_PREPARE_);
if (!fromGit && !process.env.MCPFERRY_BUILD_ON_PREPARE) process.exit(0);

// pacote runs prepare a second time when it packs the prepared clone; the first run built everything.
const built = existsSync(join(root, 'dist', 'index.js')) && spawnSync(process.execPath, ['-e', "require('./index.js')"], { cwd: root }).status === 0;
if (built) process.exit(0);

if (spawnSync('cargo', ['--version'], { stdio: 'ignore' }).status !== 0) {
  console.error(
    [
      'mcpferry: installing from a git URL builds the native engine from source, and no Rust toolchain was found (`cargo` is not on PATH).',
      `Either install the published package, which ships prebuilt engines: npm install mcpferry`,
      `or install Rust ≥ ${RUST_VERSION} (https://rustup.rs) and run the install again.`,
    ].join('\n'),
  );
  process.exit(1);
}

for (const [command, args] of [
  ['npx', ['napi', 'build', '--platform', '--release', '--output-dir', '.']],
  // build:ts installs the Node 22 development packages the adapters' types come from (scripts/node22.mjs).
  ['npm', ['run', 'build:ts']],
]) {
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) {
    console.error(`mcpferry: building from source failed at \`${command} ${args.join(' ')}\` (exit ${result.status}).`);
    process.exit(1);
  }
}
