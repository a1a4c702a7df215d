// createMcpHandle (mcpferry/ai): one server as a lazy handle. Shown against real servers:
// - creating it starts no process (the stdio fixture writes its pid file when it starts) and sends no
//   request (the HTTP fixture logs every request it gets);
// - concurrent first tools()/describeTools() share one connection (one initialize, one process);
// - close() is idempotent, a no-op before first use, and ends the process after it;
// - tools() is the AI SDK adapter's ToolSet under `${prefix}${tool}` names, whose calls reach the server;
// - the spec's first example adapted: the handle's tools in an AI SDK loop (the SDK's mock model), each
//   call carrying `${runId}:${toolCallId}` as params._meta.idempotencyKey to the server.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { createMcpHandle } from '../entry/ai.mjs';
import { generateText, stepCountIs } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { FIXTURE, fixture, processState, scratchFile, until } from './helpers.mjs';
import { startStreamableFixture } from './fixtures/http-server.mjs';

/** Generous bound for a closed stdio server to be gone on a loaded 2-core machine, in ms. */
const EXIT_WAIT_MS = 10_000;
/** How long "nothing happened" is watched for before first use, in ms. */
const QUIET_MS = 300;

const stdioTransport = (pidFile) => ({ kind: 'stdio', command: process.execPath, args: [FIXTURE], env: { FIXTURE_SELF_PIDFILE: pidFile } });
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

test('stdio: no process before first use; concurrent first calls share one; close ends it and is idempotent', async () => {
  const pidFile = scratchFile('pid');
  const handle = createMcpHandle({ transport: stdioTransport(pidFile), name: 'fx', prefix: 'fx_' });
  await pause(QUIET_MS);
  assert.equal(existsSync(pidFile), false, 'creating the handle started no process');

  const [tools, described, again] = await Promise.all([handle.tools(), handle.describeTools(), handle.tools()]);
  assert.equal(tools, again, 'one view for the handle');
  const pid = Number(readFileSync(pidFile, 'utf8'));
  assert.ok(pid > 0);
  assert.ok(Object.keys(tools).includes('fx_echo'), Object.keys(tools).join());
  assert.ok(!Object.keys(tools).some((name) => name.startsWith('fx__')));
  assert.equal(tools.fx_echo.type, 'dynamic', 'the AI SDK adapter made it');
  const echo = described.find((t) => t.name === 'fx_echo');
  assert.deepEqual(
    { ...echo, inputSchema: undefined },
    { name: 'fx_echo', description: 'Echo the text back.', inputSchema: undefined, server: 'fx', remoteName: 'echo' },
  );
  assert.equal(echo.inputSchema.type, 'object');
  const result = await tools.fx_echo.execute({ text: 'hi' }, { toolCallId: 'c1', messages: [] });
  assert.match(JSON.stringify(result), /hi/);
  assert.equal(Number(readFileSync(pidFile, 'utf8')), pid, 'still the one process');

  await handle.close();
  await handle.close();
  await until(() => processState(pid) === null || processState(pid) === 'Z', { timeoutMs: EXIT_WAIT_MS });
  await assert.rejects(handle.tools(), (e) => e.code === 'mcp_connection_closed');
});

test('http: no request before first use; concurrent first calls send one initialize', async (t) => {
  const server = await startStreamableFixture();
  t.after(() => server.close());
  const handle = createMcpHandle({ transport: { kind: 'http', url: server.url }, prefix: 'web_' });
  await pause(QUIET_MS);
  assert.equal(server.log.length, 0, 'creating the handle sent nothing');
  await Promise.all([handle.describeTools(), handle.tools(), handle.describeTools()]);
  const initializes = server.log.filter((r) => r.body?.method === 'initialize');
  assert.equal(initializes.length, 1);
  const tools = await handle.tools();
  assert.ok('web_echo' in tools);
  await handle.close();
});

test('close() before first use is a no-op, twice; without a prefix the names are mcpferry’s own', async () => {
  const pidFile = scratchFile('pid');
  const unused = createMcpHandle({ transport: stdioTransport(pidFile) });
  await unused.close();
  await unused.close();
  assert.equal(existsSync(pidFile), false);
  await assert.rejects(unused.describeTools(), (e) => e.code === 'mcp_connection_closed');

  const plain = createMcpHandle({ transport: stdioTransport(scratchFile('pid')), name: 'plain' });
  const names = (await plain.describeTools()).map((t) => t.name);
  assert.ok(names.includes('plain__echo'), names.join());
  await plain.close();
});

test('a prefix a provider would refuse is a config error at creation', () => {
  assert.throws(() => createMcpHandle({ transport: { kind: 'http', url: 'http://127.0.0.1:1/mcp' }, prefix: 'gh.' }), (e) => e.code === 'mcp_config_invalid');
});

test('the spec example: a prefixed handle in an AI SDK run, its calls carrying the run\'s idempotency keys', async () => {
  const server = fixture('github');
  const { command, args, env } = server.entry;
  const github = createMcpHandle({ transport: { kind: 'stdio', command, args, env }, name: 'github', prefix: 'github_', runId: 'issue-42' });
  const USAGE = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
  const steps = [
    [{ type: 'tool-call', toolCallId: 'call-7', toolName: 'github_echo', input: JSON.stringify({ text: 'newest issue' }) }],
    [{ type: 'text', text: 'triaged' }],
  ];
  let step = 0;
  const model = new MockLanguageModelV3({
    doGenerate: async () => {
      const content = steps[step++];
      const finishReason = { unified: content[0].type === 'tool-call' ? 'tool-calls' : 'stop', raw: undefined };
      return { content, finishReason, usage: USAGE, warnings: [] };
    },
  });
  try {
    const { text, steps: ran } = await generateText({ model, tools: { ...(await github.tools()) }, stopWhen: stepCountIs(3), prompt: 'Triage the newest issue' });
    assert.equal(text, 'triaged');
    assert.match(JSON.stringify(ran[0].toolResults[0].output), /newest issue/);
  } finally {
    await github.close();
  }
  const calls = server.received().filter((m) => m.method === 'tools/call');
  assert.deepEqual(calls.map((m) => [m.params.name, m.params._meta.idempotencyKey]), [['echo', 'issue-42:call-7']]);
});
