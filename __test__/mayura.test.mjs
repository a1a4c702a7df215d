// `mcpferry/mayura`: defineMcpTool (mayura-adapter-mcp) against real servers over stdio — the fixture
// (fixtures/mayura-server.mjs), server-everything and the official Python SDK (fixtures/mayura-py-server.py,
// in the venv eras-servers.mjs makes; skipped with the reason when it cannot be had) — through the official
// SDK's Client (the spec's one-line wrapper) and mcpferry's own client.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { existsSync, readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { z } from 'zod';
import { defineMcpTool, McpOutcomeUnknownError, McpResultInvalidError, MAX_MCP_TOOL_RESULT_BYTES } from '../dist/mayura.js';
import {
  connectMcpServer,
  McpAbortedError,
  McpConfigError,
  McpError,
  McpInvalidArgumentsError,
  McpPolicyDeniedError,
  McpProtocolError,
  McpResultTooLargeError,
  McpTimeoutError,
  McpToolError,
  McpToolUnavailableError,
} from '../dist/index.js';
import { EVERYTHING_BIN } from '../examples/servers/everything-http.mjs';
import { here, pythonSdk, scratchFile, until } from './helpers.mjs';

const SERVER = join(here, 'fixtures', 'mayura-server.mjs');
const PY_SERVER = join(here, 'fixtures', 'mayura-py-server.py');
/** What the fixture puts in its error texts, as a server echoing a credential would. */
const API_KEY = 'sk-live-4f9a8b7c6d5e';

/** The official SDK's Client on the fixture, and the spec's one-line wrapper around it. */
async function sdkFixture(t) {
  const record = scratchFile('mayura.jsonl');
  const mcp = new Client({ name: 'mayura-test', version: '1.0.0' });
  await mcp.connect(new StdioClientTransport({ command: process.execPath, args: [SERVER], env: { FIXTURE_RECORD: record, FIXTURE_API_KEY: API_KEY }, stderr: 'ignore' }));
  t.after(() => mcp.close());
  return {
    mcp,
    client: { callTool: ({ name, arguments: args, signal }) => mcp.callTool({ name, arguments: args }, undefined, { signal }) },
    /** What the server received: tools/call and notifications/cancelled, in order. */
    received: () => (existsSync(record) ? readFileSync(record, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)) : []),
  };
}

const Anything = z.object({}).passthrough();
const base = (client, extra = {}) => ({ id: 'test.tool', version: '1', description: 'A test tool.', remoteName: 'respond', input: Anything, output: Anything, effects: 'none', client, ...extra });

/** Collects diagnostics, telling defineMcpTool the key unless the client knows it already (mcpferry's own). */
function diagnosticsSink({ tellKey = true } = {}) {
  const seen = [];
  return { seen, onDiagnostic: (d) => seen.push(d), ...(tellKey && { secrets: [API_KEY] }) };
}

test('the spec example, adapted: a write tool declared with zod, called through the official SDK Client', async (t) => {
  const { mcp, received } = await sdkFixture(t);
  const IssueInput = z.object({ title: z.string().max(200), body: z.string().max(10_000) });
  const IssueOutput = z.object({ number: z.number().int(), url: z.string() });

  const createIssue = defineMcpTool({
    id: 'tracker.create_issue',
    version: '1',
    description: 'Create an issue in the team tracker.',
    remoteName: 'create_issue', // the tool's name on the MCP server
    input: IssueInput,
    output: IssueOutput,
    effects: 'write',
    capabilities: ['tracker:write'],
    timeoutMs: 15_000,
    client: {
      // `mcp` is a connected client from an MCP SDK, here the official TypeScript SDK's Client.
      callTool: ({ name, arguments: args, signal }) => mcp.callTool({ name, arguments: args }, undefined, { signal }),
    },
  });

  assert.equal(createIssue.description, 'Create an issue in the team tracker.');
  assert.deepEqual(createIssue.permissions, ['tool:tracker.create_issue', 'tracker:write', 'effect:write']);
  assert.equal(createIssue.costMicros, 0);
  assert.equal(createIssue.inputJsonSchema.type, 'object');
  assert.deepEqual(createIssue.inputJsonSchema.required, ['title', 'body']);
  assert.equal(createIssue.inputJsonSchema.properties.title.maxLength, 200);
  assert.ok(Object.isFrozen(createIssue) && Object.isFrozen(createIssue.inputJsonSchema));

  const issue = await createIssue.execute({ title: 'Crash on save', body: 'Steps: …' });
  assert.deepEqual(issue, { number: 1, url: 'https://tracker.example/issues/1' });
  assert.deepEqual(received(), [{ method: 'tools/call', params: { name: 'create_issue', arguments: { title: 'Crash on save', body: 'Steps: …' } } }]);
  // The server's description is never read: only ours exists on the tool.
  assert.ok(!JSON.stringify(createIssue).includes('SERVER DESCRIPTION'));

  // Unchanged tool, second call: the validator's output (zod strips unknown keys) is what is sent.
  assert.deepEqual(await createIssue.execute({ title: 't', body: 'b', stray: 'dropped by zod' }), { number: 2, url: 'https://tracker.example/issues/2' });
  assert.deepEqual(received()[1].params.arguments, { title: 't', body: 'b' });
});

test('remoteName: letters, digits and ._/- only, 1 to 128 characters', async () => {
  const client = { callTool: async () => ({ structuredContent: {} }) };
  for (const remoteName of ['', 'has space', 'x'.repeat(129), 'ünïcode', 'semi;colon', 'new\nline', 42, undefined]) {
    assert.throws(() => defineMcpTool(base(client, { remoteName })), (e) => e instanceof McpConfigError && e.code === 'mcp_config_invalid' && /remoteName/.test(e.message), String(remoteName));
  }
  for (const remoteName of ['a', 'files/read.v2_beta-1', 'x'.repeat(128)]) assert.equal(defineMcpTool(base(client, { remoteName })).remoteName, remoteName);
});

test('options are checked when the tool is declared', () => {
  const client = { callTool: async () => ({ structuredContent: {} }) };
  const bad = {
    'effects': { effects: 'delete' },
    'client': { client: { call: () => {} } },
    'input': { input: 'not a validator' },
    'output': { output: null },
    'timeoutMs': { timeoutMs: 0 },
    'costMicros': { costMicros: -1 },
    'capabilities': { capabilities: [''] },
    'capabilities must be an array': { capabilities: 'tracker:write' },
    'secrets': { secrets: 'sk-live-4f9a8b7c6d5e' },
    'id': { id: '' },
    'description': { description: 42 },
    'inputJsonSchema': { inputJsonSchema: { type: 'string' } },
  };
  for (const [field, extra] of Object.entries(bad)) {
    assert.throws(() => defineMcpTool(base(client, extra)), (e) => e instanceof McpConfigError && e.message.includes(field), field);
  }
  // A Standard Schema validator that cannot describe itself needs inputJsonSchema.
  const opaque = { '~standard': { version: 1, vendor: 'custom', validate: (value) => ({ value }) } };
  assert.throws(() => defineMcpTool(base(client, { input: opaque })), (e) => e instanceof McpConfigError && /inputJsonSchema is required/.test(e.message));
  // zod 4 cannot describe a Date in JSON Schema: the same.
  assert.throws(() => defineMcpTool(base(client, { input: z.object({ at: z.date() }) })), (e) => e instanceof McpConfigError && /inputJsonSchema is required/.test(e.message));
  const given = { type: 'object', properties: { q: { type: 'string' } } };
  assert.deepEqual(defineMcpTool(base(client, { input: opaque, inputJsonSchema: given })).inputJsonSchema, given);
  assert.deepEqual(defineMcpTool(base(client, { effects: 'none' })).permissions, ['tool:test.tool']);
});

test('arguments that are not a JSON object, or fail the input validator, are refused before anything is sent', async (t) => {
  const { client, received } = await sdkFixture(t);
  const sink = diagnosticsSink();
  const tool = defineMcpTool(base(client, { remoteName: 'create_issue', input: z.object({ title: z.string().max(5) }), effects: 'write', ...sink }));
  for (const input of [null, [], 'text', 42, undefined]) {
    await assert.rejects(tool.execute(input), (e) => e instanceof McpInvalidArgumentsError && /must be a JSON object/.test(e.message), String(input));
  }
  await assert.rejects(tool.execute({ title: 'far too long' }), (e) => {
    assert.ok(e instanceof McpInvalidArgumentsError, e.message);
    assert.match(e.message, /arguments at \/title: Too big/);
    return true;
  });
  await assert.rejects(tool.execute({}), (e) => e instanceof McpInvalidArgumentsError && /\/title/.test(e.message));
  // A validator whose output is not an object (a transform) is refused too.
  const toString = defineMcpTool(base(client, { input: z.object({}).transform(() => 'not an object'), inputJsonSchema: { type: 'object' } }));
  await assert.rejects(toString.execute({}), (e) => e instanceof McpInvalidArgumentsError && /not a JSON object/.test(e.message));
  // A validator that throws fails the check, typed.
  const throwing = { '~standard': { version: 1, vendor: 'custom', validate: () => { throw new Error('validator bug'); } } };
  await assert.rejects(defineMcpTool(base(client, { input: throwing, inputJsonSchema: { type: 'object' } })).execute({}), (e) => e instanceof McpInvalidArgumentsError && /input validator threw: validator bug/.test(e.message));
  assert.deepEqual(received(), []);
  assert.ok(sink.seen.every((d) => d.outcome === 'failed' && d.errorCode === 'mcp_invalid_arguments'));
});

test('the output validator decides what the agent gets; a mismatch is mcp_result_invalid, or outcome_unknown with effects', async (t) => {
  const { client } = await sdkFixture(t);
  const output = z.object({ number: z.number().int() });
  const wrong = { result: { structuredContent: { number: 'seven' } } };
  const none = defineMcpTool(base(client, { output }));
  await assert.rejects(none.execute(wrong), (e) => e instanceof McpResultInvalidError && e.code === 'mcp_result_invalid' && /does not match the declared output/.test(e.message));
  const write = defineMcpTool(base(client, { output, effects: 'write' }));
  await assert.rejects(write.execute(wrong), (e) => e instanceof McpOutcomeUnknownError && e.code === 'mcp_outcome_unknown' && e.reason === 'mcp_result_invalid');
  // The validator's value is returned: zod strips keys it does not declare, and parses.
  const parsed = defineMcpTool(base(client, { output: z.object({ when: z.string().transform((s) => s.length) }) }));
  assert.deepEqual(await parsed.execute({ result: { structuredContent: { when: 'abcd', extra: 1 } } }), { when: 4 });
});

test('JSON Schema validators run in the engine: input before sending (path in the message), output after', async (t) => {
  const { client, received } = await sdkFixture(t);
  const input = { type: 'object', properties: { title: { type: 'string', maxLength: 5 }, body: { type: 'string' } }, required: ['title', 'body'] };
  const output = { type: 'object', properties: { number: { type: 'integer' }, url: { type: 'string' } }, required: ['number', 'url'] };
  const tool = defineMcpTool(base(client, { remoteName: 'create_issue', input, output, effects: 'write' }));
  assert.deepEqual(tool.inputJsonSchema, input, 'a JSON Schema input is what the model sees');
  await assert.rejects(tool.execute({ title: 'far too long', body: '' }), (e) => e instanceof McpInvalidArgumentsError && /arguments at \/title:/.test(e.message));
  // No coercion: the string "5" is not a number.
  const numbers = defineMcpTool(base(client, { input: { type: 'object', properties: { n: { type: 'number' } } } }));
  await assert.rejects(numbers.execute({ n: '5' }), (e) => e instanceof McpInvalidArgumentsError && /\/n/.test(e.message));
  assert.deepEqual(received(), []);
  assert.deepEqual(await tool.execute({ title: 'ok', body: 'b' }), { number: 1, url: 'https://tracker.example/issues/1' });

  const strict = { type: 'object', properties: { number: { type: 'string' } }, required: ['number'] };
  const none = defineMcpTool(base(client, { remoteName: 'create_issue', input, output: strict }));
  await assert.rejects(none.execute({ title: 'ok', body: 'b' }), (e) => e instanceof McpResultInvalidError && /does not match the declared output/.test(e.message));
  const write = defineMcpTool(base(client, { remoteName: 'create_issue', input, output: strict, effects: 'write' }));
  await assert.rejects(write.execute({ title: 'ok', body: 'b' }), (e) => e instanceof McpOutcomeUnknownError && e.reason === 'mcp_result_invalid');
  // `true` accepts any object; a schema that cannot compile (nothing is fetched) fails the declaration.
  assert.deepEqual(await defineMcpTool(base(client, { remoteName: 'create_issue', input, output: true })).execute({ title: 'ok', body: 'b' }), { number: 4, url: 'https://tracker.example/issues/4' });
  assert.throws(() => defineMcpTool(base(client, { output: { $ref: 'https://schemas.example/issue.json' } })), (e) => e instanceof McpConfigError && /output is not a usable JSON Schema/.test(e.message));
  assert.throws(() => defineMcpTool(base(client, { input: { type: 'array' } })), (e) => e instanceof McpConfigError && /inputJsonSchema must be/.test(e.message));
});

test('the result contract: structuredContent required, no other top-level keys, _meta dropped, at most 1 MiB', async (t) => {
  const { client } = await sdkFixture(t);
  const sink = diagnosticsSink();
  const tool = defineMcpTool(base(client, sink));
  const write = defineMcpTool(base(client, { effects: 'write', ...sink }));

  const meta = await tool.execute({ result: { structuredContent: { a: 1 }, content: [{ type: 'text', text: 'a=1' }], _meta: { 'x/trace': 't' } } });
  assert.deepEqual(meta, { a: 1 });

  const textOnly = { result: { content: [{ type: 'text', text: '{"a":1}' }] } };
  await assert.rejects(tool.execute(textOnly), (e) => e instanceof McpResultInvalidError && /no structuredContent/.test(e.message));
  await assert.rejects(write.execute(textOnly), (e) => e instanceof McpOutcomeUnknownError && e.reason === 'mcp_result_invalid');

  const extra = { result: { structuredContent: { a: 1 }, leaked: `key ${API_KEY}` } };
  await assert.rejects(tool.execute(extra), (e) => e instanceof McpResultInvalidError && !e.message.includes('leaked'));
  assert.match(sink.seen.at(-1).message, /unexpected top-level keys: leaked/);

  // Just under and just over the limit, as the JSON of the whole result.
  const overhead = JSON.stringify({ content: [], structuredContent: { text: '' } }).length;
  const bigNone = defineMcpTool(base(client, { remoteName: 'big' }));
  const bigWrite = defineMcpTool(base(client, { remoteName: 'big', effects: 'write' }));
  assert.equal((await bigNone.execute({ bytes: MAX_MCP_TOOL_RESULT_BYTES - overhead })).text.length, MAX_MCP_TOOL_RESULT_BYTES - overhead);
  await assert.rejects(bigNone.execute({ bytes: MAX_MCP_TOOL_RESULT_BYTES - overhead + 1 }), (e) => e instanceof McpResultTooLargeError && e.code === 'mcp_result_too_large');
  await assert.rejects(bigWrite.execute({ bytes: MAX_MCP_TOOL_RESULT_BYTES }), (e) => e instanceof McpOutcomeUnknownError && e.reason === 'mcp_result_too_large');
});

test('isError, a JSON-RPC error and a crash: the agent sees no server text; diagnostics quote it, the key redacted', async (t) => {
  for (const effects of ['none', 'read', 'write', 'host']) {
    const { client } = await sdkFixture(t);
    const sink = diagnosticsSink();
    const errors = [];
    for (const remoteName of ['fail', 'rpc_error', 'crash']) {
      const tool = defineMcpTool(base(client, { remoteName, effects, ...sink }));
      errors.push(await tool.execute({}).then(() => assert.fail(`${remoteName} resolved`), (e) => e));
    }
    const [isError, rpc, crash] = errors;
    if (effects === 'none') {
      assert.ok(isError instanceof McpToolError && isError.message.startsWith('MCP tool error:'), isError.message);
      assert.ok(rpc instanceof McpProtocolError, rpc.message);
      assert.ok(crash instanceof McpError && !(crash instanceof McpOutcomeUnknownError), crash.message);
    } else {
      assert.deepEqual(errors.map((e) => [e.constructor, e.code]), Array(3).fill([McpOutcomeUnknownError, 'mcp_outcome_unknown']));
      assert.deepEqual([isError.reason, rpc.reason], ['mcp_tool_error', 'mcp_protocol_error']);
      assert.match(isError.message, /whether the server acted is unknown/);
    }
    for (const error of errors) {
      assert.ok(!error.message.includes(API_KEY) && !/upstream|database|password|fatal|Connection closed/i.test(error.message), error.message);
      assert.equal(error.cause, undefined);
    }
    const [said, rpcSaid, crashSaid] = sink.seen;
    assert.deepEqual(sink.seen.map((d) => [d.code, d.tool, d.remoteName, d.outcome]), [
      ['tool-call-failed', 'test.tool', 'fail', effects === 'none' ? 'failed' : 'unknown'],
      ['tool-call-failed', 'test.tool', 'rpc_error', effects === 'none' ? 'failed' : 'unknown'],
      ['tool-call-failed', 'test.tool', 'crash', effects === 'none' ? 'failed' : 'unknown'],
    ]);
    assert.match(said.message, /upstream refused the key \[redacted\] for this account/);
    assert.match(rpcSaid.message, /database error: password authentication failed, key \[redacted\]/);
    assert.match(crashSaid.message, /Connection closed/);
    assert.ok(sink.seen.every((d) => !d.message.includes(API_KEY)));
  }
});

test('the deadline: mcp_timeout for effects none, outcome_unknown otherwise; the client is told to stop', async (t) => {
  const { client, received } = await sdkFixture(t);
  const none = defineMcpTool(base(client, { remoteName: 'slow', timeoutMs: 100 }));
  await assert.rejects(none.execute({}), (e) => e instanceof McpTimeoutError && /no result within 100 ms/.test(e.message));
  const write = defineMcpTool(base(client, { remoteName: 'slow', timeoutMs: 100, effects: 'write' }));
  await assert.rejects(write.execute({}), (e) => e instanceof McpOutcomeUnknownError && e.reason === 'mcp_timeout');
  // The SDK client turned the aborted signal into notifications/cancelled, for both calls.
  await until(() => received().filter((m) => m.method === 'notifications/cancelled').length === 2);

  // A client that ignores the signal (and never settles) cannot hold the call past its deadline.
  const deaf = defineMcpTool(base({ callTool: () => new Promise(() => {}) }, { timeoutMs: 50, effects: 'host' }));
  await assert.rejects(deaf.execute({}), (e) => e instanceof McpOutcomeUnknownError && e.reason === 'mcp_timeout');
});

test("the caller's abort: before sending nothing is sent; after sending, outcome_unknown unless effects are none", async (t) => {
  const { client, received } = await sdkFixture(t);
  const write = defineMcpTool(base(client, { remoteName: 'slow', effects: 'write' }));
  const none = defineMcpTool(base(client, { remoteName: 'slow' }));

  await assert.rejects(write.execute({}, { signal: AbortSignal.abort() }), (e) => e instanceof McpAbortedError && !(e instanceof McpOutcomeUnknownError));
  assert.deepEqual(received(), []);

  for (const [tool, check] of [
    [write, (e) => e instanceof McpOutcomeUnknownError && e.reason === 'mcp_aborted'],
    [none, (e) => e instanceof McpAbortedError],
  ]) {
    const controller = new AbortController();
    const calls = received().filter((m) => m.method === 'tools/call').length;
    const pending = tool.execute({}, { signal: controller.signal });
    await until(() => received().filter((m) => m.method === 'tools/call').length === calls + 1);
    controller.abort();
    await assert.rejects(pending, check);
  }
  await until(() => received().filter((m) => m.method === 'notifications/cancelled').length === 2);
});

test('the request handed to the client is frozen, arguments included, with a signal', async () => {
  let seen;
  const tool = defineMcpTool(base({ callTool: (request) => ((seen = request), { structuredContent: { ok: true } }) }, { input: z.object({ nested: z.object({ a: z.number() }) }) }));
  assert.deepEqual(await tool.execute({ nested: { a: 1 } }), { ok: true });
  assert.ok(Object.isFrozen(seen) && Object.isFrozen(seen.arguments) && Object.isFrozen(seen.arguments.nested));
  assert.equal(seen.name, 'respond');
  assert.ok(seen.signal instanceof AbortSignal && !seen.signal.aborted);
});

test('a throwing onDiagnostic does not change the outcome', async (t) => {
  const { client } = await sdkFixture(t);
  const tool = defineMcpTool(base(client, { remoteName: 'fail', effects: 'write', onDiagnostic: () => { throw new Error('sink down'); } }));
  await assert.rejects(tool.execute({}), (e) => e instanceof McpOutcomeUnknownError && e.reason === 'mcp_tool_error');
});

test('server-everything: its structured tool through the SDK Client; a text-only tool fails closed', async (t) => {
  const mcp = new Client({ name: 'mayura-test', version: '1.0.0' });
  await mcp.connect(new StdioClientTransport({ command: process.execPath, args: [EVERYTHING_BIN, 'stdio'], stderr: 'ignore' }));
  t.after(() => mcp.close());
  const client = { callTool: ({ name, arguments: args, signal }) => mcp.callTool({ name, arguments: args }, undefined, { signal }) };
  const weather = defineMcpTool({
    id: 'weather.now',
    version: '1',
    description: 'Current weather in a city.',
    remoteName: 'get-structured-content',
    input: z.object({ location: z.enum(['New York', 'Chicago', 'Los Angeles']) }),
    output: z.object({ temperature: z.number(), conditions: z.string(), humidity: z.number() }),
    effects: 'read',
    client,
  });
  assert.deepEqual(await weather.execute({ location: 'Chicago' }), { temperature: 36, conditions: 'Light rain / drizzle', humidity: 82 });
  const echo = defineMcpTool({ ...base(client), remoteName: 'echo', input: z.object({ message: z.string() }), effects: 'none' });
  await assert.rejects(echo.execute({ message: 'hi' }), (e) => e instanceof McpResultInvalidError && /no structuredContent/.test(e.message));
  const echoRead = defineMcpTool({ ...base(client), remoteName: 'echo', input: z.object({ message: z.string() }), effects: 'read' });
  await assert.rejects(echoRead.execute({ message: 'hi' }), (e) => e instanceof McpOutcomeUnknownError && e.reason === 'mcp_result_invalid');
});

test('the official Python SDK server, through both clients: a TypedDict result as structuredContent; a ToolError as outcome_unknown, its text withheld', async (t) => {
  const py = pythonSdk();
  if (py.skip) return t.skip(py.skip);
  const mcp = new Client({ name: 'mayura-test', version: '1.0.0' });
  await mcp.connect(new StdioClientTransport({ command: py.python, args: [PY_SERVER], env: { FIXTURE_API_KEY: API_KEY }, stderr: 'ignore' }));
  t.after(() => mcp.close());
  const own = await connectMcpServer({ name: 'py', type: 'stdio', command: py.python, args: [PY_SERVER], env: { FIXTURE_API_KEY: API_KEY } });
  t.after(() => own.close());
  const clients = {
    'the SDK Client': { callTool: ({ name, arguments: args, signal }) => mcp.callTool({ name, arguments: args }, undefined, { signal }) },
    'connectMcpServer': own,
  };
  for (const [label, client] of Object.entries(clients)) {
    const sink = diagnosticsSink({ tellKey: client !== own });
    const declare = (remoteName, input) =>
      defineMcpTool({
        id: `tracker.${remoteName}`, version: '1', description: 'Create an issue in the team tracker.', remoteName, input,
        output: { type: 'object', properties: { number: { type: 'integer' }, url: { type: 'string' } }, required: ['number', 'url'] },
        effects: 'write', client, ...sink,
      });
    const createIssue = declare('create_issue', z.object({ title: z.string(), body: z.string() }));
    const { number } = await createIssue.execute({ title: `From Python via ${label}`, body: '…' });
    assert.deepEqual(await createIssue.execute({ title: 'again', body: '…' }), { number: number + 1, url: `https://tracker.example/issues/${number + 1}` }, label);
    const fail = declare('fail', z.object({}));
    await assert.rejects(fail.execute({}), (e) => e instanceof McpOutcomeUnknownError && e.reason === 'mcp_tool_error' && !e.message.includes('upstream') && !e.message.includes(API_KEY), label);
    assert.match(sink.seen.at(-1).message, /upstream refused the key \[redacted\]/, label);
  }
});

/** mcpferry's own client on the fixture: `FIXTURE_API_KEY` is a credential-named env value, so the engine knows it. */
async function mcpferryFixture(t, opts = {}) {
  const record = scratchFile('mayura-own.jsonl');
  const client = await connectMcpServer({ name: 'tracker', type: 'stdio', command: process.execPath, args: [SERVER], env: { FIXTURE_RECORD: record, FIXTURE_API_KEY: API_KEY } }, opts);
  t.after(() => client.close());
  return { client, received: () => (existsSync(record) ? readFileSync(record, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)) : []) };
}

test("mcpferry's connectMcpServer plugs in as is: the spec example, the result contract, failures by effects", async (t) => {
  const { client, received } = await mcpferryFixture(t);
  const createIssue = defineMcpTool({
    id: 'tracker.create_issue', version: '1', description: 'Create an issue in the team tracker.', remoteName: 'create_issue',
    input: z.object({ title: z.string().max(200), body: z.string().max(10_000) }),
    output: z.object({ number: z.number().int(), url: z.string() }),
    effects: 'write', capabilities: ['tracker:write'], timeoutMs: 15_000,
    client,
  });
  assert.deepEqual(await createIssue.execute({ title: 'Crash on save', body: 'Steps: …' }), { number: 1, url: 'https://tracker.example/issues/1' });

  // The engine hands results through as the server sent them, so every contract check is ours.
  const sink = diagnosticsSink();
  const tool = defineMcpTool(base(client, sink));
  for (const structuredContent of [[1, 2], 'text', null]) {
    await assert.rejects(tool.execute({ result: { structuredContent } }), (e) => e instanceof McpResultInvalidError, JSON.stringify(structuredContent));
  }
  await assert.rejects(tool.execute({ result: { structuredContent: {}, extra: true } }), (e) => e instanceof McpResultInvalidError);
  await assert.rejects(tool.execute({ result: { structuredContent: {}, isError: 'yes' } }), (e) => e instanceof McpResultInvalidError);
  // 2026-07-28 frames every result with resultType: only `complete` is a result.
  assert.deepEqual(await tool.execute({ result: { structuredContent: { a: 2 }, resultType: 'complete' } }), { a: 2 });
  await assert.rejects(tool.execute({ result: { structuredContent: {}, resultType: 'partial' } }), (e) => e instanceof McpResultInvalidError);
  assert.deepEqual(await tool.execute({ result: { structuredContent: { a: 1 }, _meta: { 'x/y': 1 } } }), { a: 1 });

  for (const effects of ['none', 'write']) {
    const seen = diagnosticsSink();
    const declare = (remoteName, extra = {}) => defineMcpTool(base(client, { remoteName, effects, onDiagnostic: seen.onDiagnostic, ...extra }));
    // No `secrets`: the key is a credential-named env value of the entry, so the engine knows it, for
    // its own errors (the JSON-RPC error) and for the result text it hands through (isError).
    const isError = await declare('fail').execute({}).catch((e) => e);
    const rpc = await declare('rpc_error').execute({}).catch((e) => e);
    const timeout = await declare('slow', { timeoutMs: 100 }).execute({}).catch((e) => e);
    if (effects === 'none') {
      assert.deepEqual([isError, rpc, timeout].map((e) => e.constructor), [McpToolError, McpProtocolError, McpTimeoutError]);
    } else {
      assert.deepEqual([isError, rpc, timeout].map((e) => [e.constructor, e.reason]), [
        [McpOutcomeUnknownError, 'mcp_tool_error'],
        [McpOutcomeUnknownError, 'mcp_protocol_error'],
        [McpOutcomeUnknownError, 'mcp_timeout'],
      ]);
    }
    for (const error of [isError, rpc]) assert.ok(!error.message.includes(API_KEY) && !/upstream|database/.test(error.message), error.message);
    assert.match(seen.seen[0].message, /upstream refused the key \[redacted\]/);
    assert.match(seen.seen[1].message, /database error: password authentication failed, key \[redacted\]/);
    assert.ok(seen.seen.every((d) => !d.message.includes(API_KEY)));
  }
  // The engine sent notifications/cancelled for both timed-out calls.
  await until(() => received().filter((m) => m.method === 'notifications/cancelled').length === 2);
});

test("a call mcpferry's client refuses before sending (policy, unknown tool) is a plain failure, whatever the effects", async (t) => {
  const { client, received } = await mcpferryFixture(t, { policy: { decide: (req) => (req.remoteName === 'create_issue' ? { kind: 'deny', reason: 'read-only today' } : { kind: 'allow' }) } });
  const sink = diagnosticsSink();
  const denied = defineMcpTool(base(client, { remoteName: 'create_issue', effects: 'write', ...sink }));
  await assert.rejects(denied.execute({ title: 't', body: 'b' }), (e) => e instanceof McpPolicyDeniedError && e.code === 'mcp_policy_denied');
  const unknown = defineMcpTool(base(client, { remoteName: 'no_such_tool', effects: 'host', ...sink }));
  await assert.rejects(unknown.execute({}), (e) => e instanceof McpToolUnavailableError);
  assert.deepEqual(received(), []);
  assert.deepEqual(sink.seen.map((d) => [d.errorCode, d.outcome]), [['mcp_policy_denied', 'failed'], ['mcp_tool_unavailable', 'failed']]);
  // A crash mid-call, after sending, is not such a refusal.
  const crash = defineMcpTool(base(client, { remoteName: 'crash', effects: 'write' }));
  await assert.rejects(crash.execute({}), (e) => e instanceof McpOutcomeUnknownError && e.reason === 'mcp_transport_error');
});
