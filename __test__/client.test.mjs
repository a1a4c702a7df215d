// connectMcpServer: one server as a client, against real servers of both eras: the raw fixture
// (stdio), server-everything (stdio, Streamable HTTP, SSE), the TypeScript SDK 2.x fixture and the
// official Python SDK 2.x server (2026-07-28).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { connectMcpServer, mcpTools, McpError } from '../dist/index.js';
import { EVERYTHING_BIN, startEverythingHttp } from '../examples/servers/everything-http.mjs';
import { fixture, here, pythonSdk, until } from './helpers.mjs';
import { PY2, TS2, startPy2Http, startTs2Http } from './eras-servers.mjs';

const MODERN = '2026-07-28';
const code = (expected) => (error) => error instanceof McpError && error.code === expected;
const calls = (server) => server.received().filter((m) => m.method === 'tools/call');

test('the fixture over stdio: session, raw listing, raw results, typed failures', async (t) => {
  const server = fixture('client');
  const client = await connectMcpServer(server.entry, { timeoutMs: 5000 });
  t.after(() => client.close());

  await t.test('protocolVersion and serverInfo are the negotiated ones', () => {
    assert.equal(client.protocolVersion, server.received().find((m) => m.method === 'initialize').params.protocolVersion);
    assert.deepEqual(client.serverInfo, { name: 'fixture', version: '1.0.0' });
    assert.equal(client.name, 'client');
  });

  await t.test('listTools returns the definitions as the server wrote them', async () => {
    const tools = await client.listTools();
    const echo = tools.find((tool) => tool.name === 'echo');
    assert.deepEqual(echo, {
      name: 'echo',
      description: 'Echo the text back.',
      inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    });
    assert.ok(tools.some((tool) => tool.name === 'to_remove'));
  });

  await t.test('callTool resolves to the CallToolResult as sent, isError included', async () => {
    assert.deepEqual(await client.callTool({ name: 'echo', arguments: { text: 'hi' } }), { content: [{ type: 'text', text: 'echo: hi' }] });
    assert.deepEqual(await client.callTool({ name: 'fail', arguments: {} }), {
      isError: true,
      content: [{ type: 'text', text: 'Invalid departure date: must be in the future.' }],
    });
  });

  await t.test('typed failures: JSON-RPC error, unknown tool, bad arguments', async () => {
    await assert.rejects(client.callTool({ name: 'protocol_error', arguments: {} }), code('mcp_protocol_error'));
    const before = calls(server).length;
    await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }), code('mcp_tool_unavailable'));
    await assert.rejects(client.callTool({ name: 'echo', arguments: [1] }), code('mcp_invalid_arguments'));
    await assert.rejects(client.callTool(null), code('mcp_invalid_arguments'));
    assert.equal(calls(server).length, before, 'the server received none of them');
  });

  await t.test('an idempotency key goes in params._meta, as for mcpTools', async () => {
    await client.callTool({ name: 'echo', arguments: { text: 'once' }, runId: 'run-1', toolCallId: 'call-1' });
    assert.equal(calls(server).at(-1).params._meta.idempotencyKey, 'run-1:call-1');
    await client.callTool({ name: 'echo', arguments: { text: 'once' }, idempotencyKey: 'explicit' });
    assert.equal(calls(server).at(-1).params._meta.idempotencyKey, 'explicit');
  });

  await t.test('an aborted call rejects with mcp_aborted and the server hears of it', async () => {
    const controller = new AbortController();
    const pending = client.callTool({ name: 'slow', arguments: { ms: 30_000 }, signal: controller.signal });
    await until(() => calls(server).some((m) => m.params.name === 'slow'));
    controller.abort();
    await assert.rejects(pending, code('mcp_aborted'));
    await until(() => server.received().some((m) => m.method === 'notifications/cancelled'));
  });

  await t.test('onToolsChanged hears a list change; the unsubscribe stops it', async () => {
    let heard = 0;
    let other = 0;
    const unsubscribe = client.onToolsChanged(() => heard++);
    const off = client.onToolsChanged(() => other++);
    off();
    await client.callTool({ name: 'mutate', arguments: {} });
    await until(() => heard > 0);
    assert.equal(other, 0);
    // The engine re-lists on the announcement: the new tool becomes callable.
    await until(async () => (await client.callTool({ name: 'added_tool', arguments: {} }).catch(() => null))?.content?.[0]?.text === 'called added_tool');
    const names = (await client.listTools()).map((tool) => tool.name);
    assert.ok(names.includes('added_tool') && !names.includes('to_remove'), names.join());
    await assert.rejects(client.callTool({ name: 'to_remove', arguments: {} }), code('mcp_tool_unavailable'));
    unsubscribe();
    assert.throws(() => client.onToolsChanged('nope'), code('mcp_config_invalid'));
  });

  await t.test('a listing stops waiting when its signal fires', async () => {
    const aborted = new AbortController();
    aborted.abort();
    await assert.rejects(client.listTools({ signal: aborted.signal }), code('mcp_aborted'));
    await assert.rejects(client.listTools({ timeoutMs: 0 }), code('mcp_config_invalid'));
  });

  await t.test('close is idempotent; calls and listings after it fail clearly', async () => {
    const closing = client.close();
    assert.equal(client.close(), closing);
    await closing;
    await assert.rejects(client.callTool({ name: 'echo', arguments: { text: 'late' } }), code('mcp_connection_closed'));
    await assert.rejects(client.listTools(), code('mcp_connection_closed'));
  });
});

test("results are the server's own, not checked against the outputSchema (mcpTools checks them)", async () => {
  const entry = { name: 'raw', type: 'stdio', command: process.execPath, args: [join(here, 'fixtures', 'purra-server.mjs')] };
  const client = await connectMcpServer(entry);
  const toolset = await mcpTools([entry]);
  try {
    assert.deepEqual(await client.callTool({ name: 'bad_structured', arguments: {} }), { content: [{ type: 'text', text: 'bad' }], structuredContent: { hits: 5 } });
    await assert.rejects(toolset.tools.raw__bad_structured.execute({}), code('mcp_result_invalid'));
  } finally {
    await client.close();
    await toolset.close();
  }
});

// A listing's errors carry none of the entry's secrets: a malformed page is described without quoting the
// server (serde's message quotes its strings whole), and any other error (a JSON-RPC error quoting the
// secret) is redacted with the entry's secrets.
test('a listTools error never carries the server entry\u2019s own secrets', async (t) => {
  const secret = 'sk-live-0123456789abcdef';
  const client = await connectMcpServer({ name: 'e', type: 'stdio', command: process.execPath, args: [join(here, 'fixtures', 'echo-secret-list-server.mjs')], env: { API_TOKEN: secret } });
  t.after(() => client.close());
  const error = await client.listTools().then(() => undefined, (e) => e);
  assert.equal(error?.code, 'mcp_protocol_error');
  assert.ok(!error.message.includes(secret), error.message);
  const rpc = await client.listTools().then(() => undefined, (e) => e);
  assert.ok(rpc?.code, 'the server\u2019s JSON-RPC error rejects');
  assert.ok(rpc.message.includes('refused for') && !rpc.message.includes(secret), rpc.message);
});

// `timeoutMs` is one deadline for the whole listing, not one per page, and the caller's signal stops the
// engine's listing (no further page is asked for), not only the promise. purra's discovery lists the same way.
const SLOW_PAGES_SERVER = join(here, 'fixtures', 'slow-pages-server.mjs');
const connectSlowPages = (env) => connectMcpServer({ name: 'p', type: 'stdio', command: process.execPath, args: [SLOW_PAGES_SERVER], env });
const pagesAsked = async (client) => Number((await client.callTool({ name: 'count', arguments: {} })).content[0].text);

test('listTools timeoutMs bounds the whole listing: 5 pages of 300 ms each overrun 1 000 ms', async (t) => {
  const client = await connectSlowPages({ PAGES: '5', PAGE_DELAY_MS: '300' });
  t.after(() => client.close());
  // Every page alone is well within the deadline; all of them together are not.
  await assert.rejects(client.listTools({ timeoutMs: 1000 }), (e) => e.code === 'mcp_timeout');
  assert.ok((await pagesAsked(client)) < 5, 'the listing stopped at its deadline');
  // Without a deadline it completes.
  assert.equal((await client.listTools()).length, 5);
});

test('listTools signal: the engine asks for no further page once it fires', async (t) => {
  const client = await connectSlowPages({ PAGES: '10', PAGE_DELAY_MS: '200' });
  t.after(() => client.close());
  const controller = new AbortController();
  const listing = client.listTools({ signal: controller.signal });
  // Aborted while the first slow page is outstanding.
  setTimeout(() => controller.abort(), 100);
  await assert.rejects(listing, (e) => e.code === 'mcp_aborted');
  // Long enough for the 10 pages an abandoned listing would go on to ask for.
  await new Promise((resolve) => setTimeout(resolve, 2500));
  assert.equal(await pagesAsked(client), 1);
});

test('a server that crashes mid-call fails that call with a typed error; with reconnect: false later calls too', async () => {
  const server = fixture('crashing');
  const client = await connectMcpServer(server.entry, { timeoutMs: 5000, warnings: false, reconnect: false });
  try {
    await assert.rejects(client.callTool({ name: 'crash', arguments: {} }), code('mcp_transport_error'));
    // Sent before the loss is handled, a call meets the dead pipe; after it, the server is failed.
    await assert.rejects(client.callTool({ name: 'echo', arguments: { text: 'after' } }), (e) => e instanceof McpError && ['mcp_server_unavailable', 'mcp_transport_error'].includes(e.code));
    await until(() => client.servers()[0].state === 'failed');
    await assert.rejects(client.callTool({ name: 'echo', arguments: { text: 'later' } }), code('mcp_server_unavailable'));
    await assert.rejects(client.listTools(), code('mcp_server_unavailable'));
  } finally {
    await client.close();
  }
});

test('bad entries and options reject with mcp_config_invalid before anything starts', async () => {
  const { entry } = fixture('bad');
  for (const [given, options] of [
    [null, {}],
    [[entry], {}],
    ['stdio', {}],
    [{ name: 'x', type: 'carrier-pigeon' }, {}],
    [{ ...entry, enabled: false }, {}],
    [{ ...entry, command: '' }, {}],
    [entry, null],
    [entry, { onDegraded: 'warn' }],
    [entry, { disclosure: { budget: 10 } }],
    // A client returns results as sent: it would check none and withhold no isError text.
    [entry, { validateResults: true }],
    [entry, { exposeServerErrors: false }],
    [entry, { timeoutMs: -1 }],
    [entry, { notAnOption: true }],
  ]) {
    await assert.rejects(connectMcpServer(given, options), code('mcp_config_invalid'), JSON.stringify([given, options]));
  }
});

test('a server that cannot start rejects connectMcpServer with its typed error', async () => {
  const { entry } = fixture('dead', { FIXTURE_MODE: 'exit-on-start' });
  await assert.rejects(connectMcpServer(entry, { warnings: false }), code('mcp_transport_error'));
});

test('guards: policy denies before anything is sent; allowedHosts refuses a host before connecting', async () => {
  const server = fixture('guarded');
  const decided = [];
  const client = await connectMcpServer(server.entry, {
    policy: { decide: (request) => (decided.push(request), request.remoteName === 'echo' ? { kind: 'allow' } : { kind: 'deny', reason: 'not this one' }) },
  });
  try {
    assert.equal((await client.callTool({ name: 'echo', arguments: { text: 'ok' } })).content[0].text, 'echo: ok');
    await assert.rejects(client.callTool({ name: 'pid', arguments: {} }), code('mcp_policy_denied'));
    assert.deepEqual(calls(server).map((m) => m.params.name), ['echo']);
    assert.deepEqual(decided.map((d) => [d.server, d.remoteName]), [['guarded', 'echo'], ['guarded', 'pid']]);
  } finally {
    await client.close();
  }
  await assert.rejects(
    connectMcpServer({ name: 'far', type: 'streamable-http', url: 'http://example.invalid/mcp' }, { allowedHosts: ['localhost'] }),
    code('mcp_host_not_allowed'),
  );
});

test('server-everything (2025-11-25) over stdio, Streamable HTTP and SSE', async (t) => {
  const http = await startEverythingHttp('streamableHttp');
  const sse = await startEverythingHttp('sse');
  t.after(() => (http.stop(), sse.stop()));
  for (const entry of [
    { name: 'everything', type: 'stdio', command: process.execPath, args: [EVERYTHING_BIN, 'stdio'] },
    { name: 'everything', type: 'streamable-http', url: http.url },
    { name: 'everything', type: 'sse', url: sse.url },
  ]) {
    await t.test(entry.type, async () => {
      const client = await connectMcpServer(entry, { timeoutMs: 10_000 });
      try {
        assert.equal(client.protocolVersion, '2025-11-25');
        assert.match(client.serverInfo.name, /everything/);
        const tools = await client.listTools();
        const sum = tools.find((tool) => tool.name === 'get-sum');
        assert.equal(sum.inputSchema.properties.a.type, 'number');
        assert.deepEqual((await client.callTool({ name: 'echo', arguments: { message: 'hi' } })).content, [{ type: 'text', text: 'Echo: hi' }]);
        const structured = tools.find((tool) => tool.name === 'get-structured-content');
        assert.equal(structured.outputSchema.type, 'object');
        const result = await client.callTool({ name: 'get-structured-content', arguments: { location: 'New York' } });
        assert.equal(typeof result.structuredContent, 'object', JSON.stringify(result));
        // Arguments are checked against the tool's inputSchema before sending (validateArguments, as for mcpTools).
        await assert.rejects(client.callTool({ name: 'get-sum', arguments: { a: 'x' } }), code('mcp_invalid_arguments'));
      } finally {
        await client.close();
      }
    });
  }
});

test('2026-07-28: the TypeScript SDK 2.x fixture (stdio, HTTP) and the Python SDK 2.x server', async (t) => {
  const ts2 = await startTs2Http();
  t.after(() => ts2.stop());
  const entries = [
    { name: 'ts2s', type: 'stdio', command: process.execPath, args: [TS2, 'stdio'] },
    { name: 'ts2h', type: 'streamable-http', url: ts2.url },
  ];
  const py = pythonSdk();
  if (py.python) {
    const py2 = await startPy2Http(py.python);
    t.after(() => py2.stop());
    entries.push({ name: 'py2s', type: 'stdio', command: py.python, args: [PY2, 'stdio'] }, { name: 'py2h', type: 'streamable-http', url: py2.url });
  } else console.log(`# skipped the Python SDK servers: ${py.skip}`);
  for (const entry of entries) {
    await t.test(entry.name, async () => {
      // A Python server imports pydantic and the SDK before it reads its first line: seconds on a loaded
      // machine (a run with four suites and builds beside it took over 10 s). The bound is for a hang only.
      const client = await connectMcpServer(entry, { timeoutMs: entry.name.startsWith('py') ? 30_000 : 10_000 });
      try {
        assert.equal(client.protocolVersion, MODERN);
        const names = (await client.listTools()).map((tool) => tool.name);
        assert.ok(names.includes('echo') && names.includes('add_tool'), names.join());
        const echoed = await client.callTool({ name: 'echo', arguments: { text: entry.name } });
        assert.equal(echoed.content[0].text, `echo: ${entry.name}`);
        let changed = 0;
        client.onToolsChanged(() => changed++);
        await client.callTool({ name: 'add_tool', arguments: {} });
        await until(() => changed > 0, { timeoutMs: 10_000 });
        await until(async () => (await client.listTools()).some((tool) => tool.name === 'added'), { timeoutMs: 10_000 });
      } finally {
        await client.close();
      }
    });
  }
});
