'use strict';
// Loads the native engine through the loader `napi build` generates (../index.js) and, when that fails,
// replaces its generic "Cannot find native binding" with an error that names the platform package this
// machine needs, the Rust target it was built for, and how to get it. index.js stays generated as is.

const { PACKAGE, REPOSITORY, manifest, PREBUILT, platformName, installedVersion, installedFrom, installCommand } = require('./engine-package.cjs');

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
        `Fix: reinstall it at the version mcpferry expects: ${installCommand(name, installedFrom())}`
      : `${PACKAGE}: the native engine for this platform is missing. It ships in the package "${name}" ` +
        `(Rust target ${target}), an optional dependency of ${PACKAGE}@${version} that is not installed ` +
        `(installed alone, with --omit=optional, or from a lockfile written on another platform).\n` +
        `Fix: ${installCommand(name, installedFrom())}`;
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

