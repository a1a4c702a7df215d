'use strict';
// Loads the native engine through the loader `napi build` generates (../index.js) and, when that fails,
// replaces its generic "Cannot find native binding" with an error that names the platform package this
// machine needs, the Rust target it was built for, and how to get it. index.js stays generated as is.

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
    const report = process.report && typeof process.report.getReport === 'function' ? process.report.getReport() : null;
    if (report && report.header) return report.header.glibcVersionRuntime ? 'gnu' : 'musl';
  } catch {
    // fall through to the filesystem check
  }
  try {
    return require('node:fs').readFileSync('/usr/bin/ldd', 'utf8').includes('musl') ? 'musl' : 'gnu';
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

function loadError(cause) {
  const platform = platformName();
  const target = PREBUILT[platform];
  const name = `${PACKAGE}-${platform}`;
  const { version } = manifest;
  const reason = cause && cause.message ? cause.message.split('\n')[0] : String(cause);
  let message;
  if (!target) {
    message =
      `${PACKAGE}: there is no prebuilt native engine for this platform (${platform}, Node ${process.version}).\n` +
      `Prebuilt: ${Object.keys(PREBUILT).join(', ')}.\n` +
      `Build it from source instead (needs Rust ≥ 1.89): git clone ${REPOSITORY} && cd mcpferry && npm install && npm run build:release`;
  } else {
    const installed = installedVersion(name);
    message = installed
      ? `${PACKAGE}: the native engine package "${name}@${installed}" (Rust target ${target}) is installed but did not load: ${reason}\n` +
        `Fix: reinstall it at the version mcpferry expects: npm install ${name}@${version}`
      : `${PACKAGE}: the native engine for this platform is missing. It ships in the package "${name}" ` +
        `(Rust target ${target}), an optional dependency of ${PACKAGE}@${version} that is not installed.\n` +
        `Fix: npm install ${PACKAGE}@${version} again without --omit=optional / --no-optional ` +
        `(a lockfile written on another platform can skip it: delete node_modules and package-lock.json, then npm install), ` +
        `or add it directly: npm install ${name}@${version}`;
  }
  const error = new Error(message);
  error.code = 'MCPFERRY_NATIVE_BINDING_MISSING';
  error.platform = platform;
  error.target = target ?? null;
  error.packageName = target ? name : null;
  error.cause = cause;
  return error;
}

/** The engine package for this process's own platform, when napi-rs's loader picked another libc. */
function ownPlatformPackage() {
  const platform = platformName();
  return PREBUILT[platform] ? require(`${PACKAGE}-${platform}`) : null;
}

try {
  module.exports = require('../index.js');
} catch (cause) {
  let engine = null;
  try {
    engine = ownPlatformPackage();
  } catch {
    // not installed either: report the first failure
  }
  if (!engine) throw loadError(cause);
  module.exports = engine;
}

