// loadMcpConfig: the mcpServers JSON shape (Claude Desktop, Claude Code, Cursor; VS Code's `servers`),
// Codex-style TOML, and objects; every bad input names the file, the entry and the field; loaded
// configurations connect real servers, with env headers read at connect time and per-server tool lists.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
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
  assert.deepEqual(object, { servers: [{ name: 'a', type: 'stdio', command: 'node' }], disabled: [], source: null });
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
    ['both.json', '{"mcpServers": {"a": {"command": "x", "url": "https://h.test/"}}}', /both\.json: mcpServers\.a has both command and url/],
    ['type.json', '{"mcpServers": {"a": {"type": "websocket", "url": "https://h.test/"}}}', /type\.json: mcpServers\.a\.type "websocket" is unknown/],
    ['env.json', '{"mcpServers": {"a": {"command": "x", "env": {"K": "${env:MCPFERRY_NOT_SET_ANYWHERE}"}}}}', /env\.json: mcpServers\.a\.env\.K: environment variable MCPFERRY_NOT_SET_ANYWHERE is not set/],
    ['input.json', '{"servers": {"a": {"command": "x", "args": ["${input:token}"]}}}', /input\.json: servers\.a\.args\[0\]: \$\{input:token\} is not an environment reference/],
    ['args.json', '{"mcpServers": {"a": {"command": "x", "args": "--verbose"}}}', /args\.json: servers\[0\] \("a"\)\.args must be an array of strings/],
    ['url.json', '{"mcpServers": {"a": {"url": "ftp://h.test/"}}}', /url\.json: servers\[0\] \("a"\)\.url must be an http/],
    ['broken.toml', '[mcp_servers.a\ncommand = "x"', /broken\.toml: not valid TOML \(line 1\)/],
    ['none.toml', 'model = "o3"', /none\.toml: no \[mcp_servers\.<name>\] tables/],
    ['key.toml', '[mcp_servers.a]\ncommand = "x"\ncomand = "y"', /key\.toml: \[mcp_servers\.a\] has an unknown key "comand"/],
    ['enabled.toml', '[mcp_servers.a]\ncommand = "x"\nenabled = "no"', /enabled\.toml: \[mcp_servers\.a\]\.enabled must be a boolean/],
    ['allow.toml', '[mcp_servers.a]\ncommand = "x"\nallow_tools = "read_*"', /allow\.toml: \[mcp_servers\.a\]\.allow_tools must be an array/],
    ['header.toml', '[mcp_servers.a]\nurl = "https://h.test/"\nheader_env = { "Bad Header" = "V" }', /header\.toml: .*\("a"\)\.headersFromEnv: "Bad Header" is not a valid header name/],
    ['stdioheader.toml', '[mcp_servers.a]\ncommand = "x"\nheader_env = { "X-K" = "V" }', /stdioheader\.toml: .*\("a"\) has an unknown field "headersFromEnv"/],
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
  ];
  for (const input of inputs) {
    const error = await loadMcpConfig(input).then(() => assert.fail('loaded'), (e) => e);
    assert.ok(error instanceof McpConfigError, String(error));
    assert.match(error.message, /a server name has a control character \(U\+(001B|202E|007F), character \d+\); names are shown to people and must be printable/);
    assert.doesNotMatch(error.message, /[\u0000-\u001f\u007f-\u009f\u202a-\u202e]|52;c/, 'the name is not echoed');
  }
  // mcpTools checks the same.
  await assert.rejects(mcpTools([{ name, type: 'streamable-http', url: 'https://h.test/mcp' }]), { code: 'mcp_config_invalid', message: /servers\[0\]\.name: a server name has a control character \(U\+001B, character 5\)/ });
});
