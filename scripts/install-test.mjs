#!/usr/bin/env node
// The install test (`npm test` runs it; alone: `npm run test:install [-- <node22 binary>]`). It packs the
// main package and this platform's package the way `npm run package` does, installs the two tarballs into
// a fresh project in the system temp directory (outside the repo, so none of its node_modules is
// reachable) with npm offline and a dead registry, so nothing called mcpferry can come from anywhere
// else, then uses the installed package the way a user would: connect the example stdio server and call
// its tool on Node 20, Node 22 and Bun, from CommonJS and from ESM (mcpferry/mayura, which needs no
// framework, too), and compile a typed usage file with moduleResolution node16, nodenext and bundler. The
// framework subpaths (mcpferry/ai, /openai, /anthropic) are checked the same way in a second project where
// the frameworks are installed (linked from the repo's node_modules, as a user's own install would provide
// them; they are optional peer dependencies).
//
// The platform package carries the DEBUG engine `npm run build` left in the repo root (its debug info
// stripped, to pack fast); `npm run package` is the release path and packs the same way.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { hostTarget, manifest, packMain, packPlatform, platformOf, root } from './package.mjs';
import { bun } from './bun.mjs';
import { node22Modules } from './node22.mjs';

const target = hostTarget();
const platform = platformOf(target);
const platformPackage = `${manifest.name}-${platform}`;
const NODE22 = process.argv[2] ?? join(root, 'node_modules', '.cache', 'mcpferry', 'node22', 'package', 'bin', 'node');
const TSC = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
const RUN_TIMEOUT_MS = 60_000;

const work = mkdtempSync(join(tmpdir(), 'mcpferry-install-'));
const app = join(work, 'app');
let tarballs;

/** The user's environment, without what `npm test` adds (npm_* config, NODE_PATH would reach the repo). */
function cleanEnv() {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(npm_|NODE_PATH$|NODE_OPTIONS$|INIT_CWD$)/i.test(k)));
  return { ...env, npm_config_update_notifier: 'false' };
}

function exec(command, args, cwd, env = {}) {
  const result = spawnSync(command, args, { cwd, env: { ...cleanEnv(), ...env }, encoding: 'utf8', timeout: RUN_TIMEOUT_MS });
  return { status: result.status, stdout: result.stdout ?? '', stderr: `${result.stderr ?? ''}${result.error ? String(result.error) : ''}` };
}

function ok(command, args, cwd) {
  const result = exec(command, args, cwd);
  assert.equal(result.status, 0, `${command} ${args.join(' ')} exited ${result.status}\n${result.stdout}\n${result.stderr}`);
  return result;
}

/** npm with no registry at all, as configuration (so a command can run exactly as a user types it). */
const offlineNpm = () => ({ npm_config_offline: 'true', npm_config_registry: 'http://127.0.0.1:9/', npm_config_cache: join(work, 'npm-cache'), npm_config_audit: 'false', npm_config_fund: 'false' });

/** A project that depends on nothing but the given tarballs, installed with no registry at all. */
function installProject(dir, files, npmFlags = []) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'app', private: true }));
  return exec('npm', ['install', ...npmFlags, ...files], dir, offlineNpm());
}


const USE_CJS = `const { join } = require('node:path');
const { mcpTools, McpInvalidArgumentsError } = require('mcpferry');
(async () => {
  const toolset = await mcpTools([{ name: 'weather', type: 'stdio', command: process.execPath, args: [join(__dirname, 'weather.mjs')] }]);
  try {
    const result = await toolset.tools.weather__forecast.execute({ city: 'lisbon' });
    const failure = await toolset.tools.weather__forecast.execute({ city: 'atlantis' }).catch((e) => e);
    console.log(JSON.stringify({ text: result.content[0].text, toolError: failure instanceof McpInvalidArgumentsError && failure.code, tools: Object.keys(toolset.tools).sort() }));
  } finally {
    await toolset.close();
  }
})().catch((e) => { console.error(e); process.exit(1); });
`;

const USE_MJS = `import { mcpTools, McpInvalidArgumentsError } from 'mcpferry';
const toolset = await mcpTools([{ name: 'weather', type: 'stdio', command: process.execPath, args: [new URL('./weather.mjs', import.meta.url).pathname] }]);
try {
  const result = await toolset.tools.weather__forecast.execute({ city: 'lisbon' });
  const failure = await toolset.tools.weather__forecast.execute({ city: 'atlantis' }).catch((e) => e);
  console.log(JSON.stringify({ text: result.content[0].text, toolError: failure instanceof McpInvalidArgumentsError && failure.code, tools: Object.keys(toolset.tools).sort() }));
} finally {
  await toolset.close();
}
`;

// Both entries, and what dist/ exports: lib/index.ts holds the public API only, so the package exposes exactly dist's.
const API_MJS = `import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import * as esm from 'mcpferry';
const require = createRequire(import.meta.url);
const cjs = require('mcpferry');
const dist = require(join(dirname(require.resolve('mcpferry/package.json')), 'dist', 'index.js'));
console.log(JSON.stringify({ esm: Object.keys(esm).sort(), cjs: Object.keys(cjs).sort(), dist: Object.keys(dist).sort(), sameClasses: esm.McpError === cjs.McpError, engine: cjs.engineVersion() }));
`;

// atlantis is not in the tool's enum: the engine refuses the call before sending it (validateArguments).
const EXPECTED = { text: 'lisbon: 19 °C tomorrow', toolError: 'mcp_invalid_arguments', tools: ['weather__forecast', 'weather__to_fahrenheit'] };

// `mcpferry/mayura` needs no framework: a declared tool whose client is the installed toolset's weather tool.
const MAYURA_USE = (load) => `${load}
// The declared tool validates its own input, so the server's enum is left to the server: its isError comes back.
const toolset = await mcpTools([{ name: 'weather', type: 'stdio', command: process.execPath, args: [weather] }], { validateArguments: false });
try {
  const client = { callTool: ({ name, arguments: args, signal }) => toolset.tools['weather__' + name].execute(args, { signal }) };
  const forecast = mayura.defineMcpTool({
    id: 'weather.forecast', version: '1', description: 'Tomorrow in a city.', remoteName: 'forecast', effects: 'read', client,
    input: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }, output: { type: 'object', required: ['celsius'] },
  });
  const failure = await forecast.execute({ city: 'atlantis' }).catch((e) => e);
  const result = await forecast.execute({ city: 'lisbon' });
  console.log(JSON.stringify({ exports: Object.keys(mayura).sort(), result, failure: [failure instanceof mayura.McpOutcomeUnknownError, failure.reason], permissions: forecast.permissions }));
} finally {
  await toolset.close();
}
`;
const MAYURA_MJS = MAYURA_USE(`import { mcpTools } from 'mcpferry';
import * as mayura from 'mcpferry/mayura';
const weather = new URL('./weather.mjs', import.meta.url).pathname;`);
const MAYURA_CJS = `(async () => {
${MAYURA_USE(`const { mcpTools } = require('mcpferry');
const mayura = require('mcpferry/mayura');
const weather = require('node:path').join(__dirname, 'weather.mjs');`)}
})().catch((e) => { console.error(e); process.exit(1); });
`;
const MAYURA_EXPECTED = {
  exports: ['DEFAULT_MCP_TOOL_TIMEOUT_MS', 'MAX_MCP_TOOL_RESULT_BYTES', 'McpOutcomeUnknownError', 'McpResultInvalidError', 'defineMcpTool'],
  result: { city: 'lisbon', celsius: 19 },
  failure: [true, 'mcp_tool_error'],
  permissions: ['tool:weather.forecast', 'effect:read'],
};

const TYPED = `import { mcpTools, McpError, estimateTokens, type McpServer, type McpToolset, type McpToolResult, type Diagnostic } from 'mcpferry';
// @ts-expect-error internal helpers are not part of the package's API
import { createMcpError } from 'mcpferry';
import { defineMcpTool, McpOutcomeUnknownError, type McpClient } from 'mcpferry/mayura';

const servers: McpServer[] = [{ name: 'weather', type: 'stdio', command: 'node', args: ['weather.mjs'] }];

export async function forecast(city: string, signal: AbortSignal): Promise<string> {
  const seen: Diagnostic[] = [];
  const toolset: McpToolset = await mcpTools(servers, { onDiagnostic: (d) => { seen.push(d); } });
  try {
    const result: McpToolResult = await toolset.tools.weather__forecast.execute({ city }, { signal });
    const first = result.content[0];
    // @ts-expect-error only a text block has \`text\`: narrow by \`type\` first
    first.text;
    return first.type === 'text' ? first.text : '';
  } catch (error) {
    if (error instanceof McpError) return error.code;
    throw error;
  } finally {
    await toolset.close();
  }
}

export const budget: number = estimateTokens('hello');
export const unused = createMcpError;

export function declared(client: McpClient) {
  const tool = defineMcpTool({ id: 'weather.forecast', version: '1', description: 'Tomorrow.', remoteName: 'forecast', input: { type: 'object' }, output: { type: 'object' }, effects: 'read', client });
  const permissions: readonly string[] = tool.permissions;
  // @ts-expect-error not any
  const notAny: number = tool.permissions;
  return { tool, permissions, notAny, unknown: McpOutcomeUnknownError };
}
`;

// The subpaths: what each exports, and one real use of each against the example server.
const SUBPATHS = {
  'mcpferry/ai': ['aiSdkTools', 'createMcpHandle'],
  'mcpferry/anthropic': ['anthropicTools', 'dispatchAnthropicToolUses'],
  'mcpferry/openai': ['dispatchOpenAiToolCall', 'openaiAgentsTools', 'openaiToolDefinitions'],
  'mcpferry/purra': ['McpAdapterError', 'discoverMcpTools'],
};
/** The frameworks the subpaths are for (optional peers), and `openai` for the Responses types. */
const FRAMEWORKS = ['ai', '@openai/agents', '@anthropic-ai/sdk', 'openai'];

const ADAPTERS_USE = (load) => `${load}
const toolset = await mcpTools([{ name: 'weather', type: 'stdio', command: process.execPath, args: [weather] }]);
try {
  const tools = ai.aiSdkTools(toolset);
  const output = await tools.weather__forecast.execute({ city: 'lisbon' }, { toolCallId: 'c1', messages: [] });
  const modelOutput = await tools.weather__forecast.toModelOutput({ toolCallId: 'c1', input: {}, output });
  const [definition] = openai.openaiToolDefinitions(toolset, { api: 'responses' }).filter((t) => t.name === 'weather__forecast');
  const responses = await openai.dispatchOpenAiToolCall(toolset, { type: 'function_call', call_id: 'c2', name: 'weather__forecast', arguments: '{"city":"oslo"}' });
  const agentsTool = openai.openaiAgentsTools(toolset).find((t) => t.name === 'weather__forecast');
  const anthropicResults = await anthropic.dispatchAnthropicToolUses(toolset, [{ type: 'tool_use', id: 'c3', name: 'weather__forecast', input: { city: 'atlantis' } }]);
  const client = await connectMcpServer({ name: 'weather', type: 'stdio', command: process.execPath, args: [weather] });
  const catalog = await purra.discoverMcpTools(client, 'weather', { forecast: { localName: 'forecast', policy: { mode: 'read', title: 'Forecast' }, scope: null } });
  const bound = await catalog.registrations[0].run({ city: 'lima' });
  await client.close();
  console.log(JSON.stringify({
    exports: { 'mcpferry/ai': Object.keys(ai).sort(), 'mcpferry/anthropic': Object.keys(anthropic).sort(), 'mcpferry/openai': Object.keys(openai).sort(), 'mcpferry/purra': Object.keys(purra).sort() },
    purra: bound.content,
    ai: [tools.weather__forecast.type, modelOutput],
    openai: [definition.strict, responses.output, agentsTool.type, agentsTool.strict],
    anthropic: anthropicResults[0],
  }));
} finally {
  await toolset.close();
}
`;
const ADAPTERS_MJS = ADAPTERS_USE(`import { mcpTools, connectMcpServer } from 'mcpferry';
import * as ai from 'mcpferry/ai';
import * as purra from 'mcpferry/purra';
import * as openai from 'mcpferry/openai';
import * as anthropic from 'mcpferry/anthropic';
const weather = new URL('./weather.mjs', import.meta.url).pathname;`);
const ADAPTERS_CJS = `(async () => {
${ADAPTERS_USE(`const { mcpTools, connectMcpServer } = require('mcpferry');
const ai = require('mcpferry/ai');
const purra = require('mcpferry/purra');
const openai = require('mcpferry/openai');
const anthropic = require('mcpferry/anthropic');
const weather = require('node:path').join(__dirname, 'weather.mjs');`)}
})().catch((e) => { console.error(e); process.exit(1); });
`;
const ADAPTERS_EXPECTED = {
  exports: SUBPATHS,
  ai: ['dynamic', { type: 'content', value: [{ type: 'text', text: 'lisbon: 19 °C tomorrow' }] }],
  openai: [true, 'oslo: -2 °C tomorrow', 'function', true],
  anthropic: {
    type: 'tool_result', tool_use_id: 'c3', is_error: true,
    content: 'the arguments of tool "weather__forecast" do not match its inputSchema, at /city: the value is not one of "lisbon", "oslo" or 2 other candidates; the call was not sent',
  },
  purra: { text: ['lima: 17 °C tomorrow'], structured: { city: 'lima', celsius: 17 } },
};

// Typed use of every subpath; the @ts-expect-error lines fail the build if a type resolved to \`any\`.
const TYPED_ADAPTERS = `import type { ToolSet } from 'ai' with { 'resolution-mode': 'import' };
import type { McpToolset } from 'mcpferry';
import { aiSdkTools } from 'mcpferry/ai';
import { openaiAgentsTools, openaiToolDefinitions, dispatchOpenAiToolCall, type AgentsFunctionTool } from 'mcpferry/openai';
import { anthropicTools, dispatchAnthropicToolUses } from 'mcpferry/anthropic';
import { discoverMcpTools, McpAdapterError, type McpToolCatalog } from 'mcpferry/purra';
import type { McpServerClient } from 'mcpferry';
import type Anthropic from '@anthropic-ai/sdk';
import type { FunctionTool, ResponseFunctionToolCall, ResponseInputItem } from 'openai/resources/responses/responses';

export function use(toolset: McpToolset) {
  const aiTools: ToolSet = aiSdkTools(toolset);
  const agentsTools: AgentsFunctionTool[] = openaiAgentsTools(toolset);
  const responsesTools: FunctionTool[] = openaiToolDefinitions(toolset, { api: 'responses' });
  const answer = (call: ResponseFunctionToolCall): Promise<ResponseInputItem> => dispatchOpenAiToolCall(toolset, call);
  const tools: Anthropic.Tool[] = anthropicTools(toolset);
  const results = (message: Anthropic.Message): Promise<Anthropic.ToolResultBlockParam[]> => dispatchAnthropicToolUses(toolset, message.content);
  // @ts-expect-error not any
  const notAny1: number = aiSdkTools(toolset);
  // @ts-expect-error not any
  const notAny2: number = anthropicTools(toolset);
  // @ts-expect-error not any
  const notAny3: number = openaiAgentsTools(toolset);
  return { aiTools, agentsTools, responsesTools, answer, tools, results, notAny1, notAny2, notAny3 };
}

export async function bound(client: McpServerClient): Promise<McpToolCatalog | string> {
  try {
    return await discoverMcpTools(client, 'weather', { forecast: { localName: 'forecast', policy: { mode: 'read', title: 'Forecast' }, scope: null } });
  } catch (error) {
    if (error instanceof McpAdapterError) return error.code;
    throw error;
  }
}
// @ts-expect-error not any
export const notAny4: number = discoverMcpTools;
`;

/** A project with the tarballs installed and the frameworks linked in, created on first use. */
let frameworksProject;
function withFrameworks() {
  if (frameworksProject) return frameworksProject;
  const dir = join(work, 'frameworks');
  const install = installProject(dir, tarballs);
  assert.equal(install.status, 0, `npm install of the tarballs failed:\n${install.stdout}\n${install.stderr}`);
  for (const name of FRAMEWORKS) {
    mkdirSync(dirname(join(dir, 'node_modules', name)), { recursive: true });
    // ai 7, @openai/agents and openai 7 need Node 22, so they are installed in scripts/node22 (node22.mjs).
    const installed = [node22Modules(), join(root, 'node_modules')].map((modules) => join(modules, name)).find((path) => existsSync(path));
    symlinkSync(installed, join(dir, 'node_modules', name), 'dir');
  }
  copyFileSync(join(root, 'examples', 'servers', 'weather.mjs'), join(dir, 'weather.mjs'));
  writeFileSync(join(dir, 'adapters.mjs'), ADAPTERS_MJS);
  writeFileSync(join(dir, 'adapters.cjs'), ADAPTERS_CJS);
  frameworksProject = dir;
  return dir;
}

before(() => {
  const debug = join(root, `${manifest.napi.binaryName}.${platform}.node`);
  assert.ok(existsSync(debug), `no engine at ${debug}: run \`npm run build\` first`);
  const binary = join(work, `${platform}.node`);
  if (spawnSync('strip', ['--strip-debug', '-o', binary, debug]).status !== 0) copyFileSync(debug, binary);
  tarballs = [packMain(work), packPlatform(target, binary, work)];
  const install = installProject(app, tarballs);
  assert.equal(install.status, 0, `npm install of the tarballs failed:\n${install.stdout}\n${install.stderr}`);
  copyFileSync(join(root, 'examples', 'servers', 'weather.mjs'), join(app, 'weather.mjs'));
  writeFileSync(join(app, 'use.cjs'), USE_CJS);
  writeFileSync(join(app, 'use.mjs'), USE_MJS);
  writeFileSync(join(app, 'api.mjs'), API_MJS);
  writeFileSync(join(app, 'mayura.mjs'), MAYURA_MJS);
  writeFileSync(join(app, 'mayura.cjs'), MAYURA_CJS);
});

after(() => rmSync(work, { recursive: true, force: true }));

/** "Node 22" as the binary reports it (CI passes its matrix Node as the second Node). */
function nodeLabel(binary, fallback) {
  const version = existsSync(binary) ? spawnSync(binary, ['-p', 'process.versions.node'], { encoding: 'utf8' }).stdout?.trim() : '';
  return version ? `Node ${version.split('.')[0]}` : fallback;
}

const runtimes = [
  [nodeLabel(process.execPath, 'Node'), () => process.execPath],
  [nodeLabel(NODE22, 'Node 22'), () => NODE22],
  ['Bun', bun],
];

test('the install holds mcpferry and its platform package and nothing else', () => {
  const installed = readdirSync(join(app, 'node_modules')).filter((n) => !n.startsWith('.')).sort();
  assert.deepEqual(installed, [manifest.name, platformPackage].sort());
  const pkg = JSON.parse(readFileSync(join(app, 'node_modules', manifest.name, 'package.json'), 'utf8'));
  assert.equal(pkg.optionalDependencies[platformPackage], manifest.version);
  assert.equal(pkg.dependencies, undefined, 'the package has no runtime dependencies');
  assert.equal(pkg.scripts.prepare, undefined, 'the packed manifest has no prepare (it builds git-URL installs only)');
  assert.equal(pkg.scripts.postinstall, 'node entry/postinstall.cjs', 'the one install script is the engine check');
  assert.ok(!readdirSync(join(app, 'node_modules', manifest.name)).some((f) => f.endsWith('.node')), 'the main package carries no engine');
});

test('the installed CLI (node_modules/.bin/mcpferry) calls a tool of the example server', () => {
  const config = join(app, 'cli-mcp.json');
  writeFileSync(config, JSON.stringify({ mcpServers: { weather: { command: process.execPath, args: [join(app, 'weather.mjs')] } } }));
  const { stdout } = ok(join(app, 'node_modules', '.bin', 'mcpferry'), ['--config', config, '--json', '--quiet', 'call', 'weather__forecast', '{"city":"lisbon"}'], app);
  assert.deepEqual(JSON.parse(stdout).structuredContent, { city: 'lisbon', celsius: 19 });
});

test('attw (node16 profile) and publint --strict find no problem in the packed main package', () => {
  ok(process.execPath, [join(root, 'scripts', 'package.mjs'), '--lint'], root);
});

for (const [runtime, binary] of runtimes) {
  for (const [system, file] of [['CommonJS', 'use.cjs'], ['ESM', 'use.mjs']]) {
    test(`${runtime}, ${system}: connects the example stdio server and calls its tool`, () => {
      assert.ok(existsSync(binary()), `${runtime} not found at ${binary()}`);
      const { stdout } = ok(binary(), [file], app);
      assert.deepEqual(JSON.parse(stdout.trim().split('\n').pop()), EXPECTED);
    });
  }
}

for (const [runtime, binary] of runtimes) {
  for (const [system, file] of [['CommonJS', 'mayura.cjs'], ['ESM', 'mayura.mjs']]) {
    test(`${runtime}, ${system}: mcpferry/mayura declares a tool over the example server`, () => {
      assert.ok(existsSync(binary()), `${runtime} not found at ${binary()}`);
      const { stdout } = ok(binary(), [file], app);
      assert.deepEqual(JSON.parse(stdout.trim().split('\n').pop()), MAYURA_EXPECTED);
    });
  }
}

test('require and import expose the same documented API: exactly what dist/index.js exports', () => {
  const { stdout } = ok(process.execPath, ['api.mjs'], app);
  const api = JSON.parse(stdout);
  assert.deepEqual(api.esm, api.cjs);
  assert.deepEqual(api.cjs, api.dist);
  assert.equal(api.sameClasses, true, 'one set of error classes for both module systems');
  assert.equal(api.engine, manifest.version);
});

const RESOLUTIONS = {
  node16: { module: 'node16', moduleResolution: 'node16', files: ['typed.mts', 'typed.cts'] },
  nodenext: { module: 'nodenext', moduleResolution: 'nodenext', files: ['typed.mts', 'typed.cts'] },
  bundler: { module: 'esnext', moduleResolution: 'bundler', files: ['typed.ts'] },
};

for (const [name, { module, moduleResolution, files }] of Object.entries(RESOLUTIONS)) {
  test(`TypeScript resolves the types with moduleResolution ${name} (tsc --noEmit)`, () => {
    const dir = join(app, `ts-${name}`);
    mkdirSync(dir, { recursive: true });
    for (const file of files) writeFileSync(join(dir, file), TYPED);
    const compilerOptions = { module, moduleResolution, target: 'ES2022', lib: ['ES2022', 'DOM'], types: [], strict: true, noEmit: true, skipLibCheck: false };
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files }));
    ok(process.execPath, [TSC, '-p', join(dir, 'tsconfig.json')], dir);
  });
}

for (const [runtime, binary] of runtimes) {
  for (const [system, file] of [['CommonJS', 'adapters.cjs'], ['ESM', 'adapters.mjs']]) {
    test(`${runtime}, ${system}: the framework subpaths load with their frameworks and work`, () => {
      assert.ok(existsSync(binary()), `${runtime} not found at ${binary()}`);
      const { stdout } = ok(binary(), [file], withFrameworks());
      assert.deepEqual(JSON.parse(stdout.trim().split('\n').pop()), ADAPTERS_EXPECTED);
    });
  }
}

test('the package does not depend on the frameworks: they are optional peers', () => {
  const pkg = JSON.parse(readFileSync(join(app, 'node_modules', manifest.name, 'package.json'), 'utf8'));
  for (const name of ['ai', '@openai/agents', '@anthropic-ai/sdk']) {
    assert.ok(pkg.peerDependencies[name], `${name} is a peer dependency`);
    assert.equal(pkg.peerDependenciesMeta[name]?.optional, true, `${name} is optional`);
  }
  // The core loads without any of them (the first install has none).
  const { stdout } = ok(process.execPath, ['-e', "require('mcpferry/anthropic'); require('mcpferry/openai'); console.log(Object.keys(require('mcpferry')).length)"], app);
  assert.ok(Number(stdout) > 0);
});

// Each framework subpath without its framework (the first install has none), from each module system and
// runtime: the error names the package to install, and an ESM host can catch it.
const PEERS_MISSING = `const results = {};
const report = (name, error) => { results[name] = { code: error.code, packageName: error.packageName, message: error.message.split('\\n')[0] }; };
await import('mcpferry/ai').then(() => { results.ai = 'loaded'; }, (error) => report('ai', error));
const openai = await import('mcpferry/openai');
try { openai.openaiAgentsTools({ tools: {}, close: async () => {}, reconciled: Promise.resolve() }); results.agents = 'loaded'; } catch (error) { report('agents', error); }
try { require('mcpferry/ai'); results.requireAi = 'loaded'; } catch (error) { report('requireAi', error); }
console.log(JSON.stringify(results));
`;
const peerMissing = (subpath, name) => ({
  code: 'MCPFERRY_PEER_MISSING',
  packageName: name,
  message: `${subpath} needs the package "${name}" (${{ ai: 'the Vercel AI SDK', '@openai/agents': 'the OpenAI Agents SDK' }[name]}, ${manifest.peerDependencies[name]}), an optional peer dependency of mcpferry that is not installed here. Install it: npm install ${name}`,
});

for (const [runtime, binary] of runtimes) {
  test(`${runtime}: a framework subpath without its framework names the package to install (ESM and CommonJS)`, () => {
    writeFileSync(join(app, 'peers.mjs'), `import { createRequire } from 'node:module';\nconst require = createRequire(import.meta.url);\n${PEERS_MISSING}`);
    const { stdout } = ok(binary(), ['peers.mjs'], app);
    assert.deepEqual(JSON.parse(stdout.trim().split('\n').pop()), {
      ai: peerMissing('mcpferry/ai', 'ai'),
      agents: peerMissing('mcpferry/openai (openaiAgentsTools)', '@openai/agents'),
      requireAi: peerMissing('mcpferry/ai', 'ai'),
    });
  });
}

for (const [name, { module, moduleResolution, files }] of Object.entries(RESOLUTIONS)) {
  test(`TypeScript resolves the framework subpaths' types with moduleResolution ${name} (tsc --noEmit)`, () => {
    const dir = join(withFrameworks(), `ts-${name}`);
    mkdirSync(dir, { recursive: true });
    for (const file of files) writeFileSync(join(dir, file), TYPED_ADAPTERS);
    // The frameworks' declarations are not checked (skipLibCheck): checking them takes minutes, and ai's need
    // @types/json-schema. The @ts-expect-error lines still fail if a subpath's types do not resolve.
    const compilerOptions = { module, moduleResolution, target: 'ES2022', lib: ['ES2022', 'DOM'], types: [], strict: true, noEmit: true, skipLibCheck: true };
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files }));
    ok(process.execPath, [TSC, '-p', join(dir, 'tsconfig.json')], dir);
  });
}

/** The main tarball installed alone (no engine), with npm showing install-script output; created on first use. */
let bareProject;
function bare() {
  if (bareProject) return bareProject;
  const dir = join(work, 'bare');
  // npm shows a dependency's install-script output only with --foreground-scripts (otherwise in its log).
  const install = installProject(dir, [tarballs[0]], ['--foreground-scripts']);
  assert.equal(install.status, 0, `npm install of the main tarball alone failed:\n${install.stderr}`);
  assert.ok(!existsSync(join(dir, 'node_modules', platformPackage)));
  copyFileSync(join(root, 'examples', 'servers', 'weather.mjs'), join(dir, 'weather.mjs'));
  writeFileSync(join(dir, 'use.mjs'), USE_MJS);
  // What a host that can run without mcpferry does: import it, and fall back when it can't load.
  writeFileSync(
    join(dir, 'fallback.mjs'),
    `const caught = {};
for (const name of ['mcpferry', 'mcpferry/purra', 'mcpferry/mayura']) {
  try { await import(name); caught[name] = 'loaded'; } catch (error) { caught[name] = { code: error.code, packageName: error.packageName, message: error.message }; }
}
console.log(JSON.stringify(caught));
`,
  );
  bareProject = { dir, install };
  return bareProject;
}

/** The command the engine-missing messages give: the platform tarball beside the main one (npm run package leaves both). */
const engineCommand = () => `npm install ${tarballs[1]}`;

test('installed without its platform package, the install check warns, naming the package and the command that works', () => {
  const { install } = bare();
  const output = `${install.stdout}\n${install.stderr}`;
  assert.ok(
    output.includes(`mcpferry: warning: the native engine for this platform ships in the package "${platformPackage}", which was not installed. mcpferry will fail to load until it is installed: ${engineCommand()}`),
    `no engine warning in the install output:\n${output}`,
  );
});

test('without its platform package, require names the package, the Rust target and the command that works', () => {
  const result = exec(process.execPath, ['-e', "require('mcpferry')"], bare().dir);
  assert.notEqual(result.status, 0);
  assert.match(result.stderr, new RegExp(`"${platformPackage}"`));
  assert.match(result.stderr, new RegExp(`Rust target ${target}`));
  assert.ok(result.stderr.includes(`Fix: ${engineCommand()}\n`), result.stderr);
  // The first lines are ours; napi's generic message survives only in the \`cause\` chain printed below.
  assert.doesNotMatch(result.stderr.split('\n    at ')[0], /npm has a bug/);
});

for (const [runtime, binary] of runtimes) {
  test(`${runtime}, ESM: without the engine, \`await import('mcpferry')\` rejects catchably with the command that works`, () => {
    const result = exec(binary(), ['fallback.mjs'], bare().dir);
    assert.equal(result.status, 0, `the host did not survive the caught load failure:\n${result.stdout}\n${result.stderr}`);
    const caught = JSON.parse(result.stdout.trim().split('\n').pop());
    for (const name of ['mcpferry', 'mcpferry/purra', 'mcpferry/mayura']) {
      assert.equal(caught[name].code, 'MCPFERRY_NATIVE_BINDING_MISSING', name);
      assert.equal(caught[name].packageName, platformPackage, name);
      assert.ok(caught[name].message.endsWith(`Fix: ${engineCommand()}`), caught[name].message);
    }
  });
}

test('the command the missing-engine messages give installs the engine, and mcpferry then works', () => {
  const { dir } = bare();
  const [command, ...args] = engineCommand().split(' ');
  const install = exec(command, args, dir, offlineNpm());
  assert.equal(install.status, 0, `${engineCommand()} failed:\n${install.stdout}\n${install.stderr}`);
  for (const [, binary] of runtimes) assert.deepEqual(JSON.parse(ok(binary(), ['use.mjs'], dir).stdout.trim().split('\n').pop()), EXPECTED);
});

/** The README's Install section, and the commands of its first block that install into a project. */
function readmeInstallCommands() {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('\n## Install\n'), readme.indexOf('\n## ', readme.indexOf('\n## Install\n') + 1));
  const block = section.match(/```sh\n([\s\S]*?)```/)?.[1] ?? '';
  return block.split('\n').map((line) => line.replace(/\s+#.*$/, '').trim()).filter((line) => line.startsWith('npm install ') && line.includes('.tgz'));
}

test("the README's Install commands, run as written in a fresh project beside a checkout's packages/, install a working mcpferry", () => {
  const commands = readmeInstallCommands();
  assert.ok(commands.length > 0, 'the README Install section shows an npm install command');
  // The layout the README describes: the checkout (`npm run package` left both tarballs in its packages/)
  // beside the user's project. The tarballs are packed the way `npm run package` packs them.
  const base = join(work, 'readme');
  const packages = join(base, 'mcpferry', 'packages');
  mkdirSync(packages, { recursive: true });
  for (const tarball of tarballs) copyFileSync(tarball, join(packages, basename(tarball)));
  const project = join(base, 'my-app');
  mkdirSync(project, { recursive: true });
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'my-app', private: true }));
  for (const command of commands) {
    // The README names the Linux x64 glibc package; another machine runs the same line with its own.
    const line = command.replaceAll('linux-x64-gnu', platform);
    const result = exec('sh', ['-c', line], project, { ...offlineNpm(), npm_config_foreground_scripts: 'true' });
    assert.equal(result.status, 0, `${line} failed:\n${result.stdout}\n${result.stderr}`);
    assert.doesNotMatch(`${result.stdout}${result.stderr}`, /mcpferry: warning/, 'with both tarballs the install check is silent');
  }
  copyFileSync(join(root, 'examples', 'servers', 'weather.mjs'), join(project, 'weather.mjs'));
  writeFileSync(join(project, 'use.mjs'), USE_MJS);
  assert.deepEqual(JSON.parse(ok(process.execPath, ['use.mjs'], project).stdout.trim().split('\n').pop()), EXPECTED);
});
