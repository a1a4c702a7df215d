#!/usr/bin/env node
// `npm run package`: build the release engine for this machine (or --target <rust triple>) and leave the two
// installable tarballs in packages/: the main package `mcpferry` and its platform package
// `mcpferry-<platform>`. Install them together, with no registry access to mcpferry:
//   npm install ./packages/mcpferry-0.1.0.tgz ./packages/mcpferry-linux-x64-gnu-0.1.0.tgz
//
//   node scripts/package.mjs [--target <rust triple>] [--binary <file.node>] [--out <dir>]
//     --binary  pack this already-built engine instead of building one (the install test packs the debug build)
//     --zig     cross-link with cargo-zigbuild (used by scripts/build-platforms.mjs)
//   node scripts/package.mjs --lint            (`npm run lint:package`: @arethetypeswrong/cli and publint
//                                              on the main package as packed)
//   node scripts/package.mjs --check-pack      (prepack: refuse a development build in the root)
//   node scripts/package.mjs --check-publish   (prepublishOnly: refuse to publish a stray local binary,
//                                              put LICENSE into every platform package)
//
// The main package is packed exactly as `napi pre-publish` publishes it: package.json gains
// `optionalDependencies` on every platform package of `napi.targets`, at this version.

import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = fileURLToPath(new URL('..', import.meta.url));
export const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));

const ARCH = { x86_64: 'x64', aarch64: 'arm64' };
const OS = { linux: 'linux', darwin: 'darwin', windows: 'win32' };

/** napi-rs's name for a Rust target: `x86_64-unknown-linux-gnu` → `linux-x64-gnu`. */
export function platformOf(target) {
  const [cpu, , os, abi] = target.split('-');
  if (!ARCH[cpu] || !OS[os]) throw new Error(`unsupported target ${target}`);
  return [OS[os], ARCH[cpu], abi].filter(Boolean).join('-');
}

/** The Rust target of this machine, from rustc (or, without Rust, from Node's view of the platform). */
export function hostTarget() {
  const rustc = spawnSync('rustc', ['-vV'], { encoding: 'utf8' });
  const host = rustc.status === 0 ? rustc.stdout.match(/^host: (.+)$/m)?.[1] : undefined;
  if (host) return host;
  const libc = process.report?.getReport?.().header?.glibcVersionRuntime ? 'gnu' : 'musl';
  const platform = process.platform === 'linux' ? `linux-${process.arch}-${libc}` : process.platform === 'win32' ? `win32-${process.arch}-msvc` : `${process.platform}-${process.arch}`;
  const target = manifest.napi.targets.find((t) => platformOf(t) === platform);
  if (!target) throw new Error(`no napi target for ${platform}`);
  return target;
}

function run(command, args, options = {}) {
  const result = spawnSync(command, args, { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', ...options });
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed (exit ${result.status})`);
  return result.stdout;
}

/** `npm pack` a staged directory into `out`; returns the tarball's path. Lifecycle scripts never run here. */
function pack(dir, out) {
  mkdirSync(out, { recursive: true });
  const json = run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', out], { cwd: dir });
  return join(out, JSON.parse(json)[0].filename);
}

/** The main package as published: dist, entry, loader, types, LICENSE, README, and the optionalDependencies. */
export function packMain(out) {
  if (!existsSync(join(root, 'dist', 'index.js'))) throw new Error('dist/ is missing: run `npm run build:ts` first');
  const stage = mkdtempSync(join(tmpdir(), 'mcpferry-stage-'));
  try {
    for (const entry of ['bin', 'dist', 'entry', 'index.js', 'index.d.ts', 'LICENSE', 'README.md', 'SECURITY.md']) {
      copy(join(root, entry), join(stage, entry));
    }
    const optionalDependencies = Object.fromEntries(manifest.napi.targets.map((t) => [`${manifest.name}-${platformOf(t)}`, manifest.version]));
    writeFileSync(join(stage, 'package.json'), `${JSON.stringify({ ...publishedManifest(manifest), optionalDependencies }, null, 2)}\n`);
    return pack(stage, out);
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

/** The platform package npm/<platform> with `binary` as its engine. */
export function packPlatform(target, binary, out) {
  const platform = platformOf(target);
  const dir = join(root, 'npm', platform);
  const stage = mkdtempSync(join(tmpdir(), 'mcpferry-stage-'));
  try {
    for (const file of ['package.json', 'README.md']) copyFileSync(join(dir, file), join(stage, file));
    copyFileSync(join(root, 'LICENSE'), join(stage, 'LICENSE'));
    copyFileSync(binary, join(stage, `${manifest.napi.binaryName}.${platform}.node`));
    return pack(stage, out);
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

function copy(from, to) {
  if (statSync(from).isDirectory()) {
    mkdirSync(to, { recursive: true });
    for (const name of readdirSync(from)) copy(join(from, name), join(to, name));
  } else {
    copyFileSync(from, to);
  }
}

/** Build the release engine for `target` into `outDir` with the napi CLI; returns the .node path. */
export function buildRelease(target, outDir, { zig = false } = {}) {
  mkdirSync(outDir, { recursive: true });
  const args = ['napi', 'build', '--platform', '--release', '--target', target, '--output-dir', outDir, '--no-js', '--dts', 'binding.d.ts'];
  if (zig) args.push('--cross-compile');
  run('npx', args, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
  return join(outDir, `${manifest.napi.binaryName}.${platformOf(target)}.node`);
}

/**
 * prepack: `files` lists mcpferry.*.node so that a git-URL install (which packs the clone without running
 * prepack) keeps the engine it built; a development build in the root must not reach a tarball otherwise.
 */
function checkPack() {
  const stray = readdirSync(root).filter((f) => f.endsWith('.node'));
  if (stray.length) {
    throw new Error(`refusing to pack: ${stray.join(', ')} in the package root would ship inside the main package. ` + 'Use `npm run package` (it packs the main and the platform package), or delete the file.');
  }
}

/** The published package's install check (entry/postinstall.cjs): it warns when the engine package is missing. */
export const POSTINSTALL = 'node entry/postinstall.cjs';

/**
 * The manifest as published: without `prepare`, which only builds git-URL installs (scripts/prepare.mjs), and
 * with the `postinstall` install check, which a checkout has none of (its engine comes from `npm run build`).
 * npm 11 lists a dependency with install scripts among those "not yet covered by allowScripts" (the project
 * installing it approves or denies them): the check is the one install script, and it only reads files.
 */
export function publishedManifest(pkg) {
  const { prepare, ...scripts } = pkg.scripts ?? {};
  return { ...pkg, scripts: { ...scripts, postinstall: POSTINSTALL } };
}

/**
 * prepublishOnly (npm reads the manifest to publish after it, as `napi pre-publish` relies on too): drop
 * `prepare` from package.json, refuse a local build in the root, and give every platform package LICENSE.
 */
function checkPublish() {
  checkPack();
  for (const target of manifest.napi.targets) copyFileSync(join(root, 'LICENSE'), join(root, 'npm', platformOf(target), 'LICENSE'));
  writeFileSync(join(root, 'package.json'), `${JSON.stringify(publishedManifest(manifest), null, 2)}\n`);
}

/** attw and publint (devDependencies) on the main package exactly as it is packed. */
function lint() {
  const work = mkdtempSync(join(tmpdir(), 'mcpferry-lint-'));
  try {
    const tarball = packMain(work);
    run('tar', ['-xzf', tarball, '-C', work]);
    const bin = (name) => join(root, 'node_modules', '.bin', name);
    for (const tool of ['attw', 'publint']) {
      if (!existsSync(bin(tool))) throw new Error(`${tool} is not installed: add the devDependencies @arethetypeswrong/cli and publint`);
    }
    // node16 profile: subpath exports need moduleResolution node16, nodenext or bundler (node10 predates exports).
    run(bin('attw'), ['--profile', 'node16', tarball], { stdio: ['ignore', 'inherit', 'inherit'] });
    run(bin('publint'), ['--strict', join(work, 'package')], { stdio: ['ignore', 'inherit', 'inherit'] });
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function option(name) {
  const i = process.argv.indexOf(name);
  return i === -1 ? undefined : process.argv[i + 1];
}

const FLAGS = new Set(['--check-publish', '--check-pack', '--lint', '--zig']);
const OPTIONS = new Set(['--target', '--binary', '--out']);

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    for (let i = 2; i < process.argv.length; i += OPTIONS.has(process.argv[i]) ? 2 : 1) {
      if (!FLAGS.has(process.argv[i]) && !OPTIONS.has(process.argv[i])) throw new Error(`unknown argument ${process.argv[i]} (see the top of scripts/package.mjs)`);
    }
    if (process.argv.includes('--check-publish')) {
      checkPublish();
    } else if (process.argv.includes('--check-pack')) {
      checkPack();
    } else if (process.argv.includes('--lint')) {
      lint();
    } else {
      const target = option('--target') ?? hostTarget();
      const out = resolve(option('--out') ?? join(root, 'packages'));
      mkdirSync(out, { recursive: true });
      const binary = option('--binary') ?? buildRelease(target, join(out, '.build', target), { zig: process.argv.includes('--zig') });
      run('npm', ['run', 'build:ts'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
      const tarballs = [packMain(out), packPlatform(target, resolve(binary), out)];
      for (const tarball of tarballs) console.log(`${basename(tarball)}  ${(statSync(tarball).size / 1e6).toFixed(2)} MB`);
      console.log(`engine ${basename(binary)}: ${(statSync(binary).size / 1e6).toFixed(2)} MB unpacked`);
    }
  } catch (error) {
    console.error(`package: ${error.message}`);
    process.exit(1);
  }
}
