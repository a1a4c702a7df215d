// loadMcpConfig: the mcpServers JSON shape (Claude Desktop, Claude Code, Cursor; VS Code's `servers`),
// Codex-style TOML, and objects; every bad input names the file, the entry and the field; loaded
// configurations connect real servers, with env headers read at connect time and per-server tool lists.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadMcpConfig, mcpTools, McpConfigError } from '../dist/index.js';
import { FIXTURE, scratchFile } from './helpers.mjs';
import { startStreamableFixture } from './fixtures/http-server.mjs';

function file(name, text) {
  const path = `${scratchFile('config')}-${name}`;
  writeFileSync(path, text);
  return path;
}

test('the mcpServers JSON shape: types inferred, http and sse, disabled, ${env:VAR} expanded', async () => {
  const path = file('mcp.json', JSON.stringify({
    mcpServers: {
      local: { command: process.execPath, args: ['${env:HOME}/server.mjs', '${HOME}'], env: { FIXTURE_MODE: '' } },
      remote: { url: 'https://mcp.example.com/mcp', headers: { 'X-Client': 'cursor' } },
      typed: { type: 'http', url: 'https://mcp.example.com/v2' },
      legacy: { type: 'sse', url: 'https://mcp.example.com/sse' },
      off: { command: '${env:MCPFERRY_NOT_SET_ANYWHERE}', disabled: true },
    },
  }));
  const config = await loadMcpConfig(path);
  assert.equal(config.source, path);
  const byName = Object.fromEntries(config.servers.map((s) => [s.name, s]));
  const home = process.env.HOME;
  assert.deepEqual(byName.local, { name: 'local', type: 'stdio', command: process.execPath, args: [`${home}/server.mjs`, home], env: { FIXTURE_MODE: '' } });
  assert.equal(byName.remote.type, 'streamable-http');
  assert.deepEqual(byName.remote.headers, { 'X-Client': 'cursor' });
  assert.equal(byName.typed.type, 'streamable-http');
  assert.equal(byName.legacy.type, 'sse');
  assert.equal(byName.off.enabled, false);
  assert.deepEqual(config.disabled, ['off']);
  // A file URL and an object read the same.
  assert.deepEqual((await loadMcpConfig(pathToFileURL(path))).servers, config.servers);
  const object = await loadMcpConfig({ mcpServers: { a: { command: 'node' } } });
  assert.deepEqual(object, { servers: [{ name: 'a', type: 'stdio', command: 'node' }], disabled: [], warnings: [], source: null });
  // VS Code's `servers` key.
  const vscode = await loadMcpConfig({ servers: { gh: { type: 'http', url: 'https://api.example.com/mcp' } }, inputs: [] });
  assert.equal(vscode.servers[0].type, 'streamable-http');
});

test('Codex-style TOML: header_env, bearer_token_env_var, enabled = false, allow_tools and deny_tools', async () => {
  const path = file('mcpferry.toml', `
[mcp_servers.docs]
url = "https://docs.example.com/mcp"
header_env = { "X-Api-Key" = "DOCS_API_KEY" }
bearer_token_env_var = "DOCS_TOKEN"
allow_tools = ["search_*", "read?"]
deny_tools = ["search_admin*"]

[mcp_servers.local]
command = "npx"
args = ["-y", "some-server"]
env = { LOG = "1" }
enabled = false
`);
  const config = await loadMcpConfig(path);
  assert.deepEqual(config.disabled, ['local']);
  const docs = config.servers.find((s) => s.name === 'docs');
  assert.deepEqual(docs, {
    name: 'docs',
    type: 'streamable-http',
    url: 'https://docs.example.com/mcp',
    headersFromEnv: { 'X-Api-Key': 'DOCS_API_KEY' },
    bearerTokenEnv: 'DOCS_TOKEN',
    tools: { allow: ['search_*', 'read?'], block: ['search_admin*'] },
  });
  assert.deepEqual(config.servers.find((s) => s.name === 'local').enabled, false);
});

test('each bad input names the file, the entry and the field', async () => {
  const cases = [
    ['missing.json', null, /missing\.json: cannot be read \(ENOENT\)/],
    ['broken.json', '{"mcpServers": {', /broken\.json: not valid JSON/],
    ['empty.json', '{"other": {}}', /empty\.json: no "mcpServers"/],
    ['neither.json', '{"mcpServers": {"a": {"args": []}}}', /neither\.json: mcpServers\.a needs a command/],
    ['typo.json', '{"mcpServers": {"a": {"comand": "npx", "args": []}}}', /typo\.json: mcpServers\.a needs a command \(a stdio server\) or a url \(an HTTP server\); it has an unknown key "comand" \(did you mean "command"\?\)/],
    ['both.json', '{"mcpServers": {"a": {"command": "x", "url": "https://h.test/"}}}', /both\.json: mcpServers\.a has both command and url/],
    ['type.json', '{"mcpServers": {"a": {"type": "websocket", "url": "https://h.test/"}}}', /type\.json: mcpServers\.a\.type "websocket" is unknown/],
    ['env.json', '{"mcpServers": {"a": {"command": "x", "env": {"K": "${env:MCPFERRY_NOT_SET_ANYWHERE}"}}}}', /env\.json: mcpServers\.a\.env\.K: environment variable MCPFERRY_NOT_SET_ANYWHERE is not set/],
    ['input.json', '{"servers": {"a": {"command": "x", "args": ["${input:token}"]}}}', /input\.json: servers\.a\.args\[0\]: not supported here: \$\{input:token\} \(VS Code asks for an input/],
    ['envfile.json', '{"servers": {"a": {"command": "x", "envFile": "${workspaceFolder}/missing.env"}}}', /envfile\.json: servers\.a\.envFile: "\$\{workspaceFolder\}\/missing\.env" cannot be read \(no such file\)/],
    ['args.json', '{"mcpServers": {"a": {"command": "x", "args": "--verbose"}}}', /args\.json: servers\[0\] \("a"\)\.args must be an array of strings/],
    ['url.json', '{"mcpServers": {"a": {"url": "ftp://h.test/"}}}', /url\.json: servers\[0\] \("a"\)\.url must be an http/],
    ['broken.toml', '[mcp_servers.a\ncommand = "x"', /broken\.toml: not valid TOML \(line 1\)/],
    ['none.toml', 'model = "o3"', /none\.toml: no \[mcp_servers\.<name>\] tables/],
    ['enabled.toml', '[mcp_servers.a]\ncommand = "x"\nenabled = "no"', /enabled\.toml: \[mcp_servers\.a\]\.enabled must be a boolean/],
    ['allow.toml', '[mcp_servers.a]\ncommand = "x"\nallow_tools = "read_*"', /allow\.toml: \[mcp_servers\.a\]\.allow_tools must be an array/],
    ['header.toml', '[mcp_servers.a]\nurl = "https://h.test/"\nheader_env = { "Bad Header" = "V" }', /header\.toml: .*\("a"\)\.headersFromEnv: "Bad Header" is not a valid header name/],
  ];
  for (const [name, text, expected] of cases) {
    const path = text === null ? `${scratchFile('config')}-${name}` : file(name, text);
    const error = await loadMcpConfig(path).then(() => assert.fail(`${name} loaded`), (e) => e);
    assert.ok(error instanceof McpConfigError, `${name}: ${error}`);
    assert.equal(error.code, 'mcp_config_invalid');
    assert.match(error.message, expected, name);
  }
  await assert.rejects(loadMcpConfig(42), { code: 'mcp_config_invalid', message: /a file path or a configuration object/ });
});

test('a loaded file connects a real server; a disabled entry starts nothing; allow and deny lists apply', async () => {
  const path = file('servers.toml', `
[mcp_servers.fx]
command = ${JSON.stringify(process.execPath)}
args = [${JSON.stringify(FIXTURE)}]
allow_tools = ["e*", "s?ow", "pid"]
deny_tools = ["env"]

[mcp_servers.off]
command = "surely-not-a-command-mcpferry"
enabled = false
`);
  const config = await loadMcpConfig(path);
  const diagnostics = [];
  const toolset = await mcpTools(config.servers, { onDiagnostic: (d) => diagnostics.push(d), onDegraded: 'throw' });
  try {
    assert.deepEqual(Object.keys(toolset.tools).sort(), ['fx__echo', 'fx__pid', 'fx__slow']);
    assert.equal((await toolset.tools.fx__echo.execute({ text: 'from a file' })).content[0].text, 'echo: from a file');
    // The disabled entry: no process, no diagnostic, no failure.
    assert.deepEqual(diagnostics, []);
  } finally {
    await toolset.close();
  }
});

// Bun's process.env assignments do not reach the C environment the engine reads (getenv), so this
// test, which sets variables between loading and connecting, runs on Node; the next one runs everywhere.
const BUN_ENV = typeof Bun !== 'undefined' && "Bun's process.env assignments do not reach the process environment the engine reads";

test('header_env is read from the environment at connect time, and is never in the loaded object', { skip: BUN_ENV }, async (t) => {
  const server = await startStreamableFixture();
  t.after(server.close);
  const path = file('headers.toml', `
[mcp_servers.web]
url = "${server.url}"
header_env = { "X-Api-Key" = "MCPFERRY_TEST_API_KEY" }
bearer_token_env_var = "MCPFERRY_TEST_BEARER"

[mcp_servers.idle]
url = "${server.url}"
header_env = { "X-Api-Key" = "MCPFERRY_TEST_NEVER_SET" }
enabled = false
`);
  delete process.env.MCPFERRY_TEST_API_KEY;
  const config = await loadMcpConfig(path);
  // Set only after loading: the loader kept the name, not a value.
  process.env.MCPFERRY_TEST_API_KEY = 'key-value-5150';
  process.env.MCPFERRY_TEST_BEARER = 'bearer-value-8080';
  assert.ok(!JSON.stringify(config).includes('key-value-5150'));
  const toolset = await mcpTools(config.servers, { onDegraded: 'throw' });
  try {
    assert.equal((await toolset.tools.web__echo.execute({ text: 'hi' })).content[0].text, 'echo: hi');
  } finally {
    await toolset.close();
  }
  const headers = server.log.map((r) => r.headers);
  assert.ok(headers.length > 0 && headers.every((h) => h['x-api-key'] === 'key-value-5150' && h.authorization === 'Bearer bearer-value-8080'));
  // Only the enabled entry was contacted: the disabled one resolved no header and sent nothing.
  assert.ok(server.log.every((r) => r.headers['x-api-key'] !== undefined));

  // A variable that is not set when connecting degrades that server, naming the variable, not a value.
  delete process.env.MCPFERRY_TEST_API_KEY;
  const error = await mcpTools(config.servers, { onDegraded: 'throw' }).then(() => assert.fail('connected'), (e) => e);
  assert.match(error.message, /"web".*header "x-api-key" comes from environment variable MCPFERRY_TEST_API_KEY, which is not set/);
  delete process.env.MCPFERRY_TEST_BEARER;
});

test('header_env from a variable set when the process started (every runtime)', async (t) => {
  const server = await startStreamableFixture();
  t.after(server.close);
  const config = await loadMcpConfig(file('home.toml', `[mcp_servers.web]\nurl = "${server.url}"\nheader_env = { "X-Home" = "HOME" }\n`));
  assert.deepEqual(config.servers[0].headersFromEnv, { 'X-Home': 'HOME' });
  const toolset = await mcpTools(config.servers, { onDegraded: 'throw' });
  await toolset.close();
  assert.ok(server.log.length > 0 && server.log.every((r) => r.headers['x-home'] === process.env.HOME));
});

/** What loadMcpConfig(path) rejects with (it must reject). */
const refusal = (path) => loadMcpConfig(path).then(() => assert.fail(`${path} loaded`), (e) => e);

test('a path that is not a regular file, or is over the size bound, is refused typed and never read without end', { timeout: 60_000 }, async () => {
  const link = (target) => {
    const path = `${scratchFile('config')}-link.json`;
    symlinkSync(target, path);
    return path;
  };
  const cases = [
    [link('/dev/zero'), /-link\.json: is a character device, not a regular file/],
    [link('/dev/urandom'), /-link\.json: is a character device, not a regular file/],
    ['/dev/zero', /\/dev\/zero: is a character device, not a regular file/],
    [mkdtempSync(`${scratchFile('config')}-dir`), /-dir\w*: is a directory, not a regular file/],
    // One byte over the bound, valid JSON otherwise: the bound, not the parser, refuses it.
    [file('big.json', `{"mcpServers": {}}${' '.repeat(1024 * 1024)}`), /big\.json: is larger than 1048576 bytes/],
  ];
  if (process.platform !== 'win32') {
    const fifo = `${scratchFile('config')}-fifo.json`;
    execFileSync('mkfifo', [fifo]);
    cases.push([fifo, /fifo\.json: is a FIFO \(named pipe\), not a regular file/], [link(fifo), /link\.json: is a FIFO/]);
  }
  for (const [path, expected] of process.platform === 'win32' ? cases.slice(3) : cases) {
    const error = await refusal(path);
    assert.ok(error instanceof McpConfigError, `${path}: ${error}`);
    assert.equal(error.code, 'mcp_config_invalid');
    assert.match(error.message, expected);
  }
  // Just under the bound is read, and a file URL is the same file.
  const fits = file('fits.json', `{"mcpServers": {"a": {"url": "https://h.test/"}}}`.padEnd(1024 * 1024));
  assert.deepEqual((await loadMcpConfig(pathToFileURL(fits))).servers.map((s) => s.name), ['a']);
});

/** A server name that writes to the clipboard (OSC 52), recolours (CSI) and clears the screen (C1 CSI). */
const ESCAPING_NAME = 'evil\u001b]52;c;aGFja2Vk\u0007\u001b[31m\u009b2J';

test('a server name with control characters is refused, in every format, without echoing it', async () => {
  const name = ESCAPING_NAME;
  const inputs = [
    file('esc.json', JSON.stringify({ mcpServers: { [name]: { url: 'https://h.test/mcp' } } })),
    file('esc-vscode.json', JSON.stringify({ servers: { [name]: { type: 'http', url: 'https://h.test/mcp' } } })),
    file('esc.toml', `[mcp_servers."evil\\u001b]52;c;aGFja2Vk\\u0007"]\nurl = "https://h.test/mcp"\n`),
    { mcpServers: { [name]: { command: 'x' } } },
    { mcpServers: { 'right\u202eto-left': { url: 'https://h.test/mcp' } } },
    { mcpServers: { 'del\u007f': { url: 'https://h.test/mcp' } } },
    // Invisible format characters: a zero-width space, a word joiner, a byte order mark, a tag character.
    { mcpServers: { 'git\u200bhub': { url: 'https://h.test/mcp' } } },
    { mcpServers: { 'a\u2060b': { url: 'https://h.test/mcp' } } },
    { mcpServers: { '\ufeffname': { url: 'https://h.test/mcp' } } },
    { mcpServers: { 'tag\u{e0041}': { url: 'https://h.test/mcp' } } },
  ];
  for (const input of inputs) {
    const error = await loadMcpConfig(input).then(() => assert.fail('loaded'), (e) => e);
    assert.ok(error instanceof McpConfigError, String(error));
    assert.match(error.message, /a server name has a control character \(U\+(001B|202E|007F|200B|2060|FEFF|E0041), character \d+\); names are shown to people and must be printable/);
    assert.doesNotMatch(error.message, /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u200b\u2060\ufeff]|\u{e0041}|52;c|github|tag/u, 'the name is not echoed');
  }
  // mcpTools checks the same.
  await assert.rejects(mcpTools([{ name, type: 'streamable-http', url: 'https://h.test/mcp' }]), { code: 'mcp_config_invalid', message: /servers\[0\]\.name: a server name has a control character \(U\+001B, character 5\)/ });
});

/** The environment the fixture server was started with, from its `env` tool. */
async function serverEnvironment(servers, name) {
  const toolset = await mcpTools(servers, { onDegraded: 'throw', warnings: false });
  try {
    return JSON.parse((await toolset.tools[`${name}__env`].execute({})).content[0].text);
  } finally {
    await toolset.close();
  }
}

test('a Codex config.toml as Codex writes it: env_vars pass TZ through to the server, per-tool approval tables load, what is not applied is named', { skip: BUN_ENV }, async () => {
  const path = file('config.toml', `
model = "gpt-5-codex"
approval_policy = "on-request"

[projects."/home/me/app"]
trust_level = "trusted"

[mcp_servers.time]
command = ${JSON.stringify(process.execPath)}
args = [${JSON.stringify(FIXTURE)}]
env = { FIXTURE_MODE = "" }
env_vars = ["TZ", { name = "MCPFERRY_TEST_LOCAL_VAR", source = "local" }]
startup_timeout_sec = 20
tool_timeout_sec = 60
enabled_tools = ["env", "echo"]

[mcp_servers.time.tools.env]
approval_mode = "approve"

[mcp_servers.time.tools.echo]
approval_mode = "prompt"
`);
  const saved = process.env.TZ;
  process.env.TZ = 'Pacific/Chatham';
  process.env.MCPFERRY_TEST_LOCAL_VAR = 'local-7';
  process.env.MCPFERRY_TEST_NOT_LISTED = 'not-passed';
  try {
    const config = await loadMcpConfig(path, { warnings: false });
    assert.deepEqual(config.warnings, [
      `${path}: [mcp_servers.time]: startup_timeout_sec, tool_timeout_sec are not applied (mcpferry's timeouts are per toolset: set connectTimeoutMs (start and listing) and timeoutMs (each call) on mcpTools)`,
      `${path}: [mcp_servers.time]: tools."echo".approval_mode = "prompt" is not applied (mcpferry asks no one before a call: give mcpTools a policy (decide, ask) to approve calls)`,
    ]);
    const env = await serverEnvironment(config.servers, 'time');
    assert.equal(env.TZ, 'Pacific/Chatham');
    assert.equal(env.MCPFERRY_TEST_LOCAL_VAR, 'local-7');
    // Only what the file names passes through the allowlist.
    assert.equal(env.MCPFERRY_TEST_NOT_LISTED, undefined);
  } finally {
    if (saved === undefined) delete process.env.TZ;
    else process.env.TZ = saved;
    delete process.env.MCPFERRY_TEST_LOCAL_VAR;
    delete process.env.MCPFERRY_TEST_NOT_LISTED;
  }
});

test('a VS Code .vscode/mcp.json: envFile is read and ${workspaceFolder} is the workspace, in the started server', async () => {
  const workspace = scratchFile('workspace');
  mkdirSync(join(workspace, '.vscode'), { recursive: true });
  writeFileSync(join(workspace, '.env'), '# the service\nexport SERVICE_URL=https://svc.example.com/v1\nSERVICE_TOKEN="tok en"\nSHADOWED=from-file\n');
  const path = join(workspace, '.vscode', 'mcp.json');
  writeFileSync(path, JSON.stringify({
    inputs: [{ type: 'promptString', id: 'unused', description: 'not referenced', password: true }],
    servers: {
      app: {
        type: 'stdio',
        command: process.execPath,
        args: [FIXTURE],
        envFile: '${workspaceFolder}/.env',
        env: { WORKSPACE: '${workspaceFolder}', NAME: '${workspaceFolderBasename}', HOME_DIR: '${userHome}', SHADOWED: 'from-env' },
      },
    },
  }));
  const config = await loadMcpConfig(path);
  assert.deepEqual(config.warnings, []);
  const env = await serverEnvironment(config.servers, 'app');
  assert.equal(env.SERVICE_URL, 'https://svc.example.com/v1');
  assert.equal(env.SERVICE_TOKEN, 'tok en');
  assert.equal(env.SHADOWED, 'from-env');
  assert.equal(env.WORKSPACE, workspace);
  assert.equal(env.NAME, basename(workspace));
  assert.equal(env.HOME_DIR, (await import('node:os')).homedir());
});

test('a key no client documents is named with "did you mean", as a warning on stderr or an error with strict; known keys not applied are named too', async () => {
  const json = file('mcp.json', JSON.stringify({
    mcpServers: { a: { command: process.execPath, evnFile: '.env', dev: { watch: 'src/**' } }, web: { url: 'https://h.example.com/mcp', env: { A: 'b' } } },
  }));
  const expected = [
    `${json}: mcpServers.a has an unknown key "evnFile" (did you mean "envFile"?), which is ignored`,
    `${json}: mcpServers.a: dev is not applied (VS Code's development mode (watch and debug) belongs to the editor)`,
    `${json}: mcpServers.web: env is not applied (it is for stdio servers, and this is an HTTP server)`,
  ];
  // Printed to stderr by default, each as a warning; returned either way.
  const printed = [];
  const write = process.stderr.write;
  process.stderr.write = (chunk, ...rest) => (String(chunk).startsWith('mcpferry: warning:') ? (printed.push(String(chunk)), true) : write.call(process.stderr, chunk, ...rest));
  let config;
  try {
    config = await loadMcpConfig(json);
  } finally {
    process.stderr.write = write;
  }
  assert.deepEqual(config.warnings, expected);
  assert.deepEqual(printed, expected.map((w) => `mcpferry: warning: ${w}\n`));
  assert.deepEqual((await loadMcpConfig(json, { warnings: false })).warnings, expected);

  const toml = file('typo.toml', '[mcp_servers.a]\ncommand = "node"\ncomand = "nodee"\n');
  assert.deepEqual((await loadMcpConfig(toml, { warnings: false })).warnings, [`${toml}: [mcp_servers.a] has an unknown key "comand" (did you mean "command"?), which is ignored`]);
  await assert.rejects(loadMcpConfig(toml, { strict: true }), (e) => e instanceof McpConfigError && e.code === 'mcp_config_invalid' && e.message === `${toml}: [mcp_servers.a] has an unknown key "comand" (did you mean "command"?)`);
  await assert.rejects(loadMcpConfig(json, { strict: true }), { code: 'mcp_config_invalid', message: /mcpServers\.a has an unknown key "evnFile" \(did you mean "envFile"\?\)/ });
  // Strict refuses only unknown keys: a Codex timeout is known, so it loads, with its warning.
  const known = await loadMcpConfig(file('known.toml', '[mcp_servers.a]\ncommand = "node"\nstartup_timeout_sec = 30\n'), { strict: true, warnings: false });
  assert.equal(known.warnings.length, 1);
});
