'use strict';
// Which native engine package this machine needs, and the command that installs it here. Shared by the
// loader (binding.cjs, when the engine fails to load) and the install check (postinstall.cjs), so both
// name the same package and give the same command. Reads files only; never downloads anything.

const fs = require('node:fs');
const path = require('node:path');

const PACKAGE = 'mcpferry';
const REPOSITORY = 'https://github.com/mcpferry/mcpferry';

const manifest = require('../package.json');

const ARCH = { x86_64: 'x64', aarch64: 'arm64' };
const OS = { linux: 'linux', darwin: 'darwin', windows: 'win32' };

/** The prebuilt platforms (package.json `napi.targets`), keyed the way napi-rs names them: `linux-x64-gnu`. */
const PREBUILT = Object.fromEntries(
  manifest.napi.targets.map((target) => {
    const [cpu, , os, abi] = target.split('-');
    return [[OS[os], ARCH[cpu], abi].filter(Boolean).join('-'), target];
  }),
);

/**
 * glibc or musl: the C library of this process, which is what the engine is loaded into. Node's report names
 * the glibc it runs on (glibcVersionRuntime) and leaves it out on musl, so the report decides; /usr/bin/ldd
 * (what napi-rs's loader checks first) only tells the distribution's libc, which a musl Node on a glibc
 * system (or the reverse) doesn't share.
 */
function linuxLibc() {
  try {
    // As napi-rs's loader does: a report without its network section never waits on DNS.
    if (process.report) process.report.excludeNetwork = true;
    const report = process.report && typeof process.report.getReport === 'function' ? process.report.getReport() : null;
    if (report && report.header) return report.header.glibcVersionRuntime ? 'gnu' : 'musl';
  } catch {
    // fall through to the filesystem check
  }
  try {
    return fs.readFileSync('/usr/bin/ldd', 'utf8').includes('musl') ? 'musl' : 'gnu';
  } catch {
    return 'gnu';
  }
}

/** This machine's napi-rs platform name, e.g. `linux-x64-gnu`, `darwin-arm64`, `win32-x64-msvc`. */
function platformName() {
  const { platform, arch } = process;
  if (platform === 'linux') return `linux-${arch}-${linuxLibc()}`;
  if (platform === 'win32') return `win32-${arch}-msvc`;
  return `${platform}-${arch}`;
}

function installedVersion(name) {
  try {
    return require(`${name}/package.json`).version;
  } catch {
    return null;
  }
}

const quoted = (file) => (/^[\w@%+=:,./-]+$/.test(file) ? file : JSON.stringify(file));

/**
 * Where npm installed this package from (`resolved` in node_modules/.package-lock.json, npm's record of the
 * tree): a tarball (`file:…`, made absolute) or a registry URL; null when unknown (another package manager,
 * a linked checkout).
 */
function installedFrom() {
  try {
    const packageDir = path.join(__dirname, '..');
    const modules = path.dirname(packageDir);
    if (path.basename(modules) !== 'node_modules') return null;
    const lock = JSON.parse(fs.readFileSync(path.join(modules, '.package-lock.json'), 'utf8'));
    const resolved = lock.packages && lock.packages[`node_modules/${path.basename(packageDir)}`]?.resolved;
    return typeof resolved === 'string' ? absoluteSource(resolved, path.dirname(modules)) : null;
  } catch {
    return null;
  }
}

/** A `resolved` value with a `file:` path made absolute against the project that installed it. */
function absoluteSource(resolved, project) {
  return resolved.startsWith('file:') ? `file:${path.resolve(project, resolved.slice('file:'.length))}` : resolved;
}

/**
 * The command that installs engine package `name` into this project. `from` is where the main package came
 * from: a registry URL (the engine is on that registry too), or a tarball made by `npm run package`, which
 * leaves the engine's tarball in the same folder. mcpferry is not on the npm registry yet, so without either
 * the answer is to make the tarballs.
 */
function installCommand(name, from) {
  const { version } = manifest;
  if (from && /^https?:/.test(from)) return `npm install ${name}@${version}`;
  const tarball = `${name}-${version}.tgz`;
  if (from && from.startsWith('file:') && from.endsWith('.tgz')) {
    const beside = path.join(path.dirname(from.slice('file:'.length)), tarball);
    if (fs.existsSync(beside)) return `npm install ${quoted(beside)}`;
  }
  return (
    `npm install <checkout>/packages/${tarball}, after \`npm run package\` in a checkout of ${REPOSITORY} ` +
    `(mcpferry is not on the npm registry yet; once it is: npm install ${name}@${version})`
  );
}

module.exports = { PACKAGE, REPOSITORY, manifest, PREBUILT, platformName, installedVersion, installedFrom, absoluteSource, installCommand };
