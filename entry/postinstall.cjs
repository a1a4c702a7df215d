'use strict';
// The published package's `postinstall` (scripts/package.mjs adds it to the packed manifest; a checkout has
// none): when this machine's engine package did not come with mcpferry, say so now, naming the package and
// the command that installs it, rather than only when the application first loads mcpferry. It only looks
// at what is installed: it downloads nothing, builds nothing, and never fails the install (exit 0 always).
// npm shows a dependency's install-script output only with --foreground-scripts (or in its log); the
// loader repeats the same command when the engine is missing (binding.cjs).

const fs = require('node:fs');
const path = require('node:path');

function check() {
  const { PACKAGE, PREBUILT, manifest, platformName, installedVersion, absoluteSource, installCommand } = require('./engine-package.cjs');
  const platform = platformName();
  // A build from source (a git URL install) leaves the engine in the package root; the loader takes it first.
  if (fs.existsSync(path.join(__dirname, '..', `${manifest.napi.binaryName}.${platform}.node`))) return;
  if (!PREBUILT[platform]) {
    warn(`${PACKAGE}: there is no prebuilt native engine for this platform (${platform}); ${PACKAGE} will not load until one is built from source (see its README, Install).`);
    return;
  }
  const name = `${PACKAGE}-${platform}`;
  const installed = installedVersion(name);
  if (installed === manifest.version) return;
  // npm tells a lifecycle script where the package being installed came from, and from which project.
  const from = process.env.npm_package_resolved ? absoluteSource(process.env.npm_package_resolved, process.env.INIT_CWD || process.cwd()) : null;
  const state = installed ? `is at ${installed}, not ${manifest.version}` : 'was not installed';
  warn(
    `${PACKAGE}: warning: the native engine for this platform ships in the package "${name}", which ${state}. ` +
      `${PACKAGE} will fail to load until it is installed: ${installCommand(name, from)}`,
  );
}

function warn(message) {
  process.stderr.write(`\n${message}\n\n`);
}

try {
  check();
} catch (error) {
  warn(`mcpferry: the install check could not run (${error && error.message}); nothing was changed.`);
}
process.exitCode = 0;
