// createMcpServer: the engine serving the host's tools. In process (callTool), over Streamable HTTP and
// over stdio (fixtures/mcp-server.mjs, a real child process), in both protocol eras, to mcpferry's own
// client and to the official TypeScript SDK clients (1.x: 2025-11-25 with sessions; 2.x: 2026-07-28
// with `versionNegotiation: auto`, and legacy). Exactly-once with a journal: repeated and concurrent
// calls with one idempotency key run `execute` once; a SQLite journal keeps it across restarts.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { z } from 'zod';
import { Client as Client1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as Http1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport as Stdio1 } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Client as Client2, StreamableHTTPClientTransport as Http2 } from '@modelcontextprotocol/client';
import { StdioClientTransport as Stdio2 } from '@modelcontextprotocol/client/stdio';
import { createMcpServer, createMemoryMcpJournal, mcpTools } from '../dist/index.js';
import { here, memoryJsJournal, pythonSdk, scratchFile } from './helpers.mjs';

const SERVER = join(here, 'fixtures', 'mcp-server.mjs');
const PY_CLIENT = join(here, 'fixtures', 'py-client.py');
const MODERN = '2026-07-28';
const LEGACY = '2025-11-25';
/** How long the fixture may take to print its URL, in ms. */
const SERVER_START_TIMEOUT_MS = 20_000;
const MODERN_META = { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} };

const textOf = (result) => result.content.map((c) => c.text).join('\n');

/** A server whose `charge` tool counts its executions, waiting `ms` first. */
function chargingServer(journal, ms = 0) {
  const counter = { charges: 0 };
  const server = createMcpServer({
    journal,
    tools: {
      chargeCard: {
        description: 'Charge the card.',
        inputSchema: { type: 'object', properties: { amount: { type: 'number' } }, required: ['amount'] },
        execute: async ({ amount }) => {
          await new Promise((resolve) => setTimeout(resolve, ms));
          counter.charges += 1;
          return { charged: amount, charge: counter.charges };
        },
      },
      echo: { description: 'Echo.', inputSchema: { type: 'object', properties: { text: { type: 'string' } } }, execute: ({ text }) => `echo: ${text}` },
      add: { description: 'Add.', inputSchema: z.object({ a: z.number(), b: z.number() }), execute: ({ a, b }) => ({ sum: a + b }) },
    },
  });
  return { server, counter };
}

/** The fixture over HTTP in a child process: `{ url, stop }` once it listens. */
async function startFixtureHttp(journalPath) {
  const child = spawn(process.execPath, [SERVER, 'http', ...(journalPath ? [journalPath] : [])], { stdio: ['ignore', 'pipe', 'inherit'] });
  let timer;
  const line = await Promise.race([
    new Promise((resolve) => createInterface({ input: child.stdout }).once('line', resolve)),
    new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('the fixture did not start')), SERVER_START_TIMEOUT_MS))),
    new Promise((_, reject) => child.once('exit', (code) => reject(new Error(`the fixture exited (${code})`)))),
  ]).finally(() => clearTimeout(timer));
  const stop = () =>
    new Promise((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once('exit', resolve);
      child.kill('SIGTERM');
    });
  return { url: JSON.parse(line).url, stop };
}

/** One raw HTTP exchange, headers as given (`Host` included): `{ status, headers, body }`. */
function exchange(url, { method = 'POST', headers = {}, body } = {}) {
  const { hostname, port, pathname } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, path: pathname, method, headers, setHost: !('Host' in headers), agent: false }, (res) => {
      let text = '';
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: text ? JSON.parse(text) : undefined }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const jsonPost = (url, message, headers = {}) =>
  exchange(url, { headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }, body: JSON.stringify(message) });

test("the spec's example: the same idempotency key charges the card once; without a journal every call runs", async () => {
  const { server, counter } = chargingServer(createMemoryMcpJournal());
  const first = await server.callTool({ name: 'chargeCard', arguments: { amount: 5000 }, idempotencyKey: 'order-123:call-7' });
  const again = await server.callTool({ name: 'chargeCard', arguments: { amount: 5000 }, idempotencyKey: 'order-123:call-7' });
  assert.deepEqual(again, first, 'the recorded result');
  assert.deepEqual(first.structuredContent, { charged: 5000, charge: 1 });
  assert.equal(counter.charges, 1, 'the card is not charged twice');
  await server.callTool({ name: 'chargeCard', arguments: { amount: 5000 }, idempotencyKey: 'order-123:call-8' });
  assert.equal(counter.charges, 2, 'another key is another charge');

  const plain = chargingServer();
  for (let i = 0; i < 2; i++) await plain.server.callTool({ name: 'chargeCard', arguments: { amount: 1 }, idempotencyKey: 'order-123:call-7' });
  assert.equal(plain.counter.charges, 2, 'omit the journal and callTool is a plain call');
});

test('two concurrent calls with one key run execute once: in process, and from two clients over HTTP', async () => {
  const { server, counter } = chargingServer(createMemoryMcpJournal(), 150);
  const call = () => server.callTool({ name: 'chargeCard', arguments: { amount: 7 }, idempotencyKey: 'run-1:call-1' });
  const [a, b] = await Promise.all([call(), call()]);
  assert.deepEqual(a, b);
  assert.equal(counter.charges, 1);

  const { http } = await server.listen({ http: {} });
  const clients = await Promise.all([0, 1].map(() => mcpTools([{ name: 'pay', type: 'streamable-http', url: http.url }])));
  try {
    const over = (toolset) => toolset.tools.pay__chargeCard.execute({ amount: 9 }, { runId: 'run-2', toolCallId: 'call-1' });
    const [c, d] = await Promise.all(clients.map(over));
    assert.deepEqual(c.structuredContent, d.structuredContent);
    assert.equal(counter.charges, 2, 'one more charge for the second key, however many requests carried it');
    const e = await over(clients[0]);
    assert.deepEqual(e.structuredContent, c.structuredContent, 'a retry gets the recorded result');
    assert.equal(counter.charges, 2);
  } finally {
    await Promise.all(clients.map((c) => c.close()));
    await server.close();
  }
});

test('a SQLite journal keeps recorded results across server processes', async () => {
  const journalPath = scratchFile('server-journal.db');
  const call = async (url, tool, args, ctx) => {
    const toolset = await mcpTools([{ name: 'pay', type: 'streamable-http', url }]);
    try {
      return await toolset.tools[`pay__${tool}`].execute(args, ctx);
    } finally {
      await toolset.close();
    }
  };
  const first = await startFixtureHttp(journalPath);
  const charged = await call(first.url, 'charge_card', { amount: 42 }, { idempotencyKey: 'order-9:call-1' });
  assert.deepEqual(charged.structuredContent, { charged: 42, charge: 1 });
  await first.stop();
  const second = await startFixtureHttp(journalPath);
  try {
    const again = await call(second.url, 'charge_card', { amount: 42 }, { idempotencyKey: 'order-9:call-1' });
    assert.deepEqual(again.structuredContent, charged.structuredContent, 'the first process recorded it');
    assert.deepEqual((await call(second.url, 'charges', {})).structuredContent, { charges: 0 }, 'nothing was charged in the second process');
  } finally {
    await second.stop();
  }
});

test('two server processes sharing a SQLite journal run one key once, even when both are asked at the same time', async () => {
  const journalPath = scratchFile('shared-journal.db');
  const servers = await Promise.all([startFixtureHttp(journalPath), startFixtureHttp(journalPath)]);
  const toolsets = await Promise.all(servers.map(({ url }) => mcpTools([{ name: 'pay', type: 'streamable-http', url }])));
  try {
    const charge = (toolset) => toolset.tools.pay__charge_card.execute({ amount: 11, ms: 300 }, { idempotencyKey: 'order-5:call-1' });
    const [a, b] = await Promise.all(toolsets.map(charge));
    assert.deepEqual(b.structuredContent, a.structuredContent, 'the second process waited for the first one\'s result');
    const counts = await Promise.all(toolsets.map(async (t) => (await t.tools.pay__charges.execute({})).structuredContent.charges));
    assert.equal(counts[0] + counts[1], 1, `charged once across both processes (${counts})`);
  } finally {
    await Promise.all(toolsets.map((t) => t.close()));
    await Promise.all(servers.map((s) => s.stop()));
  }
});

test('a journal written in JavaScript is pluggable: results are kept as its claims', async () => {
  const { journal, claims } = memoryJsJournal();
  const { server, counter } = chargingServer(journal, 50);
  const call = () => server.callTool({ name: 'chargeCard', arguments: { amount: 3 }, idempotencyKey: 'k-1' });
  await Promise.all([call(), call()]);
  await call();
  assert.equal(counter.charges, 1);
  assert.deepEqual([...claims.keys()], ['__mcp_call__:chargeCard:k-1']);
  assert.throws(() => createMcpServer({ journal: { claim() {} }, tools: {} }), (e) => e.code === 'mcp_config_invalid' && /createMcpServer: journal must have/.test(e.message));
});

test('arguments are validated with the Standard Schema before execute, which gets the parsed value', async () => {
  const seen = [];
  const server = createMcpServer({
    tools: {
      order: {
        inputSchema: z.object({ item: z.string(), quantity: z.number().int().default(1) }),
        execute: (args) => {
          seen.push(args);
          return 'ordered';
        },
      },
    },
  });
  const refused = await server.callTool({ name: 'order', arguments: { item: 7 } });
  assert.equal(refused.isError, true);
  assert.match(textOf(refused), /^Invalid arguments for tool order: item: /);
  assert.deepEqual(seen, [], 'execute never ran');
  assert.equal(textOf(await server.callTool({ name: 'order', arguments: { item: 'tea' } })), 'ordered');
  assert.deepEqual(seen, [{ item: 'tea', quantity: 1 }], 'the default came from the schema');
});

test('an execute past callTimeoutMs has its signal aborted and its call fails with mcp_timeout; close() aborts what runs', async () => {
  const signals = [];
  const server = createMcpServer({
    callTimeoutMs: 100,
    journal: createMemoryMcpJournal(),
    tools: {
      wait: {
        execute: (_args, { signal }) => {
          signals.push(signal);
          // Settles only when aborted, as a fetch given the signal would.
          return new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
        },
      },
      hang: {
        // Ignores its signal: the call fails at the timeout all the same.
        execute: (_args, { signal }) => {
          signals.push(signal);
          return new Promise(() => {});
        },
      },
    },
  });
  for (const name of ['wait', 'hang']) {
    await assert.rejects(server.callTool({ name, idempotencyKey: `k-${name}` }), (e) => e.code === 'mcp_timeout');
  }
  assert.deepEqual(signals.map((s) => [s.aborted, s.reason?.code]), [[true, 'mcp_timeout'], [true, 'mcp_timeout']]);
  const long = createMcpServer({ tools: { wait: { execute: (_args, { signal }) => new Promise((resolve) => signal.addEventListener('abort', () => resolve(`aborted: ${signal.reason.code}`))) } } });
  const called = long.callTool({ name: 'wait' });
  await new Promise((resolve) => setTimeout(resolve, 50));
  await long.close();
  assert.equal(textOf(await called), 'aborted: mcp_connection_closed');
  assert.throws(() => createMcpServer({ callTimeoutMs: 0, tools: {} }), (e) => e.code === 'mcp_config_invalid');
});

test("a plain JSON Schema is checked by the engine's validator before execute; one it cannot compile is not checked", async () => {
  const ran = [];
  const server = createMcpServer({
    tools: {
      book: {
        inputSchema: { type: 'object', properties: { nights: { type: 'integer', minimum: 1 } }, required: ['nights'] },
        execute: (args) => ran.push(['book', args]) && 'booked',
      },
      remote: {
        inputSchema: { type: 'object', properties: { x: { $ref: 'https://schemas.example.com/x.json' } } },
        execute: (args) => ran.push(['remote', args]) && 'ran',
      },
    },
  });
  for (const [args, rule] of [
    [{ nights: 0 }, /at \/nights: .*minimum/],
    [{ nights: 'two' }, /at \/nights: /],
    [{}, /nights/],
  ]) {
    const refused = await server.callTool({ name: 'book', arguments: args });
    assert.equal(refused.isError, true);
    assert.match(textOf(refused), /^Invalid arguments for tool book: /);
    assert.match(textOf(refused), rule);
  }
  assert.deepEqual(ran, [], 'execute never ran');
  assert.equal(textOf(await server.callTool({ name: 'book', arguments: { nights: 2 } })), 'booked');
  assert.equal(textOf(await server.callTool({ name: 'remote', arguments: { x: 'anything' } })), 'ran', 'not refused for want of a validator');
});

test("AI SDK tools fit as they are: tool() with a zod schema, or jsonSchema() with its validate", async () => {
  const { tool, jsonSchema } = await import('ai');
  const server = createMcpServer({
    tools: {
      weather: tool({ description: 'Weather.', inputSchema: z.object({ city: z.string() }), execute: async ({ city }) => `sunny in ${city}` }),
      forecast: tool({
        description: 'Forecast.',
        inputSchema: jsonSchema(
          { type: 'object', properties: { days: { type: 'integer' } }, required: ['days'] },
          { validate: (v) => (Number.isInteger(v?.days) ? { success: true, value: v } : { success: false, error: new Error('days must be an integer') }) },
        ),
        execute: async ({ days }) => ({ days }),
      }),
    },
  });
  assert.equal(textOf(await server.callTool({ name: 'weather', arguments: { city: 'Lisbon' } })), 'sunny in Lisbon');
  assert.match(textOf(await server.callTool({ name: 'weather', arguments: {} })), /^Invalid arguments for tool weather: city: /);
  assert.deepEqual((await server.callTool({ name: 'forecast', arguments: { days: 3 } })).structuredContent, { days: 3 });
  const refused = await server.callTool({ name: 'forecast', arguments: { days: 'three' } });
  assert.deepEqual([refused.isError, textOf(refused)], [true, 'Invalid arguments for tool forecast: days must be an integer']);
});

test('whatever execute throws becomes an isError result with its message only, and the engine carries on', async () => {
  const server = createMcpServer({
    tools: {
      declined: {
        execute: () => {
          throw new Error('the card was declined');
        },
      },
      thrownString: {
        execute: () => {
          throw 'plain text';
        },
      },
      thrownObject: {
        execute: () => {
          throw { connection: 'postgres://app:hunter2@db/prod' };
        },
      },
      rejected: { execute: async () => Promise.reject(new TypeError('async failure')) },
      unserializable: { execute: () => ({ big: 10n }) },
      fine: { execute: () => 'still here' },
    },
  });
  const declined = await server.callTool({ name: 'declined' });
  assert.deepEqual(declined, { content: [{ type: 'text', text: 'the card was declined' }], isError: true });
  // Only an Error's message is the tool's to send; anything else thrown is a fixed text.
  for (const name of ['thrownString', 'thrownObject']) {
    assert.equal(textOf(await server.callTool({ name })), 'the tool failed (it threw a value that is not an Error)');
  }
  assert.equal(textOf(await server.callTool({ name: 'rejected' })), 'async failure');
  const unserializable = await server.callTool({ name: 'unserializable' });
  assert.equal(unserializable.isError, true);
  assert.match(textOf(unserializable), /BigInt/);
  for (const result of [declined, unserializable]) assert.doesNotMatch(textOf(result), /\n\s+at /, 'no stack');
  assert.equal(textOf(await server.callTool({ name: 'fine' })), 'still here');
});

test('bad declarations and bad calls are typed errors', async () => {
  const refused = (tools, pattern) => assert.throws(() => createMcpServer({ tools }), (e) => e.code === 'mcp_config_invalid' && pattern.test(e.message));
  refused({ 'has space': { execute() {} } }, /tool name "has space"/);
  refused({ a: {} }, /no execute/);
  refused({ a: { inputSchema: { type: 'string' }, execute() {} } }, /object schema/);
  refused({ a: { inputSchema: 5, execute() {} } }, /JSON Schema object or a Standard Schema/);
  refused({ a: { inputSchema: { jsonSchema: Promise.resolve({ type: 'object' }) }, execute() {} } }, /whose JSON Schema is a promise/);
  assert.throws(() => createMcpServer(), (e) => e.code === 'mcp_config_invalid');
  const { server } = chargingServer();
  await assert.rejects(server.callTool({ name: 'nope' }), (e) => e.code === 'mcp_tool_unavailable');
  await assert.rejects(server.callTool({ name: 'echo', arguments: [1] }), (e) => e.code === 'mcp_invalid_arguments');
  await assert.rejects(server.callTool({ name: 'echo', idempotencyKey: 5 }), (e) => e.code === 'mcp_invalid_arguments');
  await assert.rejects(server.listen({}), (e) => e.code === 'mcp_config_invalid');
  await assert.rejects(server.listen({ http: { path: 'no-slash' } }), (e) => e.code === 'mcp_config_invalid');
  await assert.rejects(server.listen({ http: { port: 'x' } }), (e) => e.code === 'mcp_config_invalid');
});

test('HTTP: mcpferry (2026-07-28), the SDK 1.x client (2025-11-25, a session) and the SDK 2.x client in both eras', async () => {
  const { server } = chargingServer();
  const { http } = await server.listen({ http: {} });
  assert.match(http.url, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
  try {
    const ours = await mcpTools([{ name: 's', type: 'streamable-http', url: http.url }], {
      onDiagnostic: () => {},
    });
    try {
      assert.deepEqual(Object.keys(ours.tools).sort(), ['s__add', 's__chargeCard', 's__echo']);
      assert.equal(textOf(await ours.tools.s__echo.execute({ text: 'ours' })), 'echo: ours');
      assert.equal(ours.servers?.[0]?.protocolVersion ?? MODERN, MODERN);
    } finally {
      await ours.close();
    }

    const one = new Client1({ name: 'sdk1', version: '1' });
    const transport1 = new Http1(new URL(http.url));
    await one.connect(transport1);
    assert.ok(transport1.sessionId, 'a 2025 session');
    assert.equal(transport1.protocolVersion, LEGACY);
    assert.deepEqual((await one.listTools()).tools.map((t) => t.name).sort(), ['add', 'chargeCard', 'echo']);
    assert.equal(textOf(await one.callTool({ name: 'echo', arguments: { text: 'sdk1' } })), 'echo: sdk1');
    await transport1.terminateSession();
    await one.close();

    for (const [mode, version] of [
      ['auto', MODERN],
      ['legacy', LEGACY],
    ]) {
      const two = new Client2({ name: 'sdk2', version: '2' }, { versionNegotiation: { mode } });
      await two.connect(new Http2(new URL(http.url)));
      assert.equal(two.getNegotiatedProtocolVersion(), version, mode);
      const added = await two.callTool({ name: 'add', arguments: { a: 2, b: 3 } });
      assert.deepEqual(added.structuredContent, { sum: 5 });
      const listed = await two.listTools();
      assert.equal(listed.tools.find((t) => t.name === 'add').inputSchema.type, 'object');
      await two.close();
    }
  } finally {
    await server.close();
  }
  await assert.rejects(fetch(http.url, { method: 'POST' }), 'closed: nothing listens');
});

test('stdio: a child process serving createMcpServer to mcpferry, the SDK 1.x client and the SDK 2.x client', async () => {
  const ours = await mcpTools([{ name: 'fx', type: 'stdio', command: process.execPath, args: [SERVER, 'stdio'] }]);
  try {
    assert.equal(textOf(await ours.tools.fx__echo.execute({ text: 'stdio' })), 'echo: stdio');
    const who = await ours.tools.fx__whoami.execute({}, { runId: 'run-5', toolCallId: 'call-2' });
    assert.deepEqual(who.structuredContent, { idempotencyKey: 'run-5:call-2' }, 'the key reaches execute');
    assert.deepEqual((await ours.tools.fx__whoami.execute({})).structuredContent, { idempotencyKey: null });
    await assert.rejects(ours.tools.fx__fail.execute({}), (e) => e.code === 'mcp_tool_error' && /the card was declined/.test(e.message));
  } finally {
    await ours.close();
  }

  const one = new Client1({ name: 'sdk1', version: '1' });
  await one.connect(new Stdio1({ command: process.execPath, args: [SERVER, 'stdio'] }));
  assert.deepEqual((await one.callTool({ name: 'add', arguments: { a: 1, b: 2 } })).structuredContent, { sum: 3 });
  await one.close();

  for (const [mode, version] of [
    ['auto', MODERN],
    ['legacy', LEGACY],
  ]) {
    const two = new Client2({ name: 'sdk2', version: '2' }, { versionNegotiation: { mode } });
    await two.connect(new Stdio2({ command: process.execPath, args: [SERVER, 'stdio'] }));
    assert.equal(two.getNegotiatedProtocolVersion(), version, mode);
    assert.equal(textOf(await two.callTool({ name: 'echo', arguments: { text: mode } })), `echo: ${mode}`);
    const refused = await two.callTool({ name: 'add', arguments: { a: 'one', b: 2 } });
    assert.equal(refused.isError, true, 'the zod schema refused it in the child');
    await two.close();
  }
});

test('stdio: after close(), a second listen reads stdin on from where the first stopped, losing no line', { timeout: 20_000 }, async () => {
  const script = `
    import { createMcpServer } from ${JSON.stringify(new URL('../dist/index.js', import.meta.url).href)};
    const server = createMcpServer({ tools: { echo: { execute: () => 'ok' } } });
    // close() right after listen() must find the serving, and the next listen() must find stdin free.
    for (let round = 0; round < 20; round++) {
      await server.listen({ stdio: true });
      await server.close();
    }
    const again = await server.listen({ stdio: true });
    process.stderr.write('listening again\\n');
    await again.closed;
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'pipe'] });
  try {
    await new Promise((resolve, reject) => {
      child.stderr.on('data', (chunk) => String(chunk).includes('listening again') && resolve());
      child.on('exit', (code) => reject(new Error(`the child exited (${code})`)));
    });
    const answered = new Promise((resolve) => createInterface({ input: child.stdout }).once('line', resolve));
    child.stdin.write('{"jsonrpc":"2.0","id":1,"method":"ping"}\n');
    assert.deepEqual(JSON.parse(await answered), { jsonrpc: '2.0', id: 1, result: {} });
  } finally {
    child.stdin.end();
    child.kill();
  }
});

test('stdio: a line over the limit is answered with an error, and the next one is served', async () => {
  const child = spawn(process.execPath, [SERVER, 'stdio'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout });
  const replies = [];
  lines.on('line', (line) => replies.push(JSON.parse(line)));
  const ping = (id) => `${JSON.stringify({ jsonrpc: '2.0', id, method: 'ping' })}\n`;
  child.stdin.write(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"${'x'.repeat(5 * 1024 * 1024)}"}}\n`);
  child.stdin.write(ping(2));
  child.stdin.end();
  await new Promise((resolve) => child.once('exit', resolve));
  assert.equal(child.exitCode, 0, 'the end of stdin ends serving, and the process');
  assert.equal(replies.length, 2, 'answered in any order');
  const refused = replies.find((r) => r.id === null);
  assert.match(refused.error.message, /over the \d+ bytes/);
  assert.deepEqual(replies.find((r) => r.id === 2), { jsonrpc: '2.0', id: 2, result: {} });
});

test('HTTP: Origin and Host are checked (DNS rebinding), sessions are required in the 2025 era, 2026 headers must match the body', async () => {
  const { server } = chargingServer();
  const { http } = await server.listen({ http: { path: '/tools' } });
  const url = http.url;
  const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };
  const list = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
  try {
    assert.equal((await jsonPost(url, list, { origin: 'http://evil.example' })).status, 403);
    assert.equal((await jsonPost(url, list, { Host: 'evil.example:80' })).status, 403, 'a rebound name');
    assert.equal((await jsonPost(url, initialize, { origin: `http://localhost:${http.port}` })).status, 200, 'a loopback origin');
    assert.equal((await exchange(url, { method: 'GET' })).status, 405);
    assert.equal((await jsonPost(url.replace('/tools', '/other'), list)).status, 404);
    assert.equal((await exchange(url, { headers: { 'content-type': 'text/plain' }, body: '{}' })).status, 415);
    const huge = await exchange(url, { headers: { 'content-type': 'application/json' }, body: `{"pad":"${'x'.repeat(5 * 1024 * 1024)}"}` }).catch((e) => ({ status: e.code }));
    assert.ok([413, 'EPIPE', 'ECONNRESET'].includes(huge.status), `413 for a body over the limit (${huge.status})`);

    const opened = await jsonPost(url, initialize);
    const session = opened.headers['mcp-session-id'];
    assert.match(session, /^[0-9a-f]{32}$/);
    assert.equal(opened.body.result.protocolVersion, LEGACY);
    assert.equal((await jsonPost(url, list)).status, 400, 'no session');
    assert.equal((await jsonPost(url, list, { 'mcp-session-id': 'f'.repeat(32) })).status, 404, 'an unknown session');
    const listed = await jsonPost(url, list, { 'mcp-session-id': session, 'mcp-protocol-version': LEGACY });
    assert.equal(listed.body.result.tools.length, 3);
    assert.equal((await exchange(url, { method: 'DELETE', headers: { 'mcp-session-id': session } })).status, 200);
    assert.equal((await jsonPost(url, list, { 'mcp-session-id': session })).status, 404, 'ended');

    const modern = { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'echo', arguments: { text: 'hi' }, _meta: MODERN_META } };
    const headers = { 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': 'echo' };
    const answered = await jsonPost(url, modern, headers);
    assert.equal(answered.status, 200);
    assert.equal(answered.body.result.resultType, 'complete');
    assert.equal(answered.headers['mcp-session-id'], undefined, 'no session in 2026-07-28');
    for (const [name, value] of [
      ['mcp-method', 'tools/list'],
      ['mcp-name', 'add'],
      ['mcp-protocol-version', '2099-01-01'],
    ]) {
      const mismatched = await jsonPost(url, modern, { ...headers, [name]: value });
      assert.equal(mismatched.status, 400, name);
      assert.equal(mismatched.body.error.code, -32020, name);
    }
    const { 'mcp-name': _omitted, ...nameless } = headers;
    assert.equal((await jsonPost(url, modern, nameless)).body.error.code, -32020, 'Mcp-Name is required for a call');
    const future = { ...modern, params: { ...modern.params, _meta: { ...MODERN_META, 'io.modelcontextprotocol/protocolVersion': '2099-01-01' } } };
    const unsupported = await jsonPost(url, future, { ...headers, 'mcp-protocol-version': '2099-01-01' });
    assert.equal(unsupported.status, 400);
    assert.equal(unsupported.body.error.code, -32022);
    assert.deepEqual(unsupported.body.error.data.supported, [MODERN], 'what server/discover lists');
    assert.equal((await jsonPost(url, future, headers)).body.error.code, -32020, 'the header is checked against the body first');
    const discovered = await jsonPost(url, { jsonrpc: '2.0', id: 4, method: 'server/discover', params: { _meta: MODERN_META } }, { 'mcp-protocol-version': MODERN, 'mcp-method': 'server/discover' });
    assert.deepEqual(discovered.body.result.supportedVersions, [MODERN]);
    const removed = await jsonPost(url, { jsonrpc: '2.0', id: 5, method: 'ping', params: { _meta: MODERN_META } }, { 'mcp-protocol-version': MODERN, 'mcp-method': 'ping' });
    assert.deepEqual([removed.status, removed.body.error.code, removed.body.id], [404, -32601, 5], '2026-07-28 has no ping');
  } finally {
    await server.close();
  }
});

const py = pythonSdk();
test('the official Python SDK 2.x client over HTTP and stdio, in both eras, with one idempotency key charging once', { skip: py.skip }, async () => {
  const http = await startFixtureHttp(scratchFile('py-http-journal.db'));
  try {
    const runs = [];
    for (const mode of ['auto', 'legacy']) {
      runs.push([mode, 'http', [mode, 'http', http.url]]);
      runs.push([mode, 'stdio', [mode, 'stdio', process.execPath, SERVER, 'stdio', scratchFile(`py-stdio-${mode}.db`)]]);
    }
    for (const [mode, transport, args] of runs) {
      const ran = spawnSync(py.python, [PY_CLIENT, ...args], { encoding: 'utf8', timeout: SERVER_START_TIMEOUT_MS });
      assert.equal(ran.status, 0, `${mode} ${transport}: ${ran.stderr}`);
      const seen = JSON.parse(ran.stdout.trim().split('\n').pop());
      assert.equal(seen.protocolVersion, mode === 'auto' ? MODERN : LEGACY, `${mode} ${transport}`);
      assert.deepEqual(seen.tools, ['add', 'charge_card', 'charges', 'echo', 'fail', 'whoami']);
      assert.equal(seen.echo, 'echo: python');
      assert.deepEqual(seen.add, { sum: 42 });
      assert.equal(seen.refused.isError, true);
      assert.match(seen.refused.text, /^Invalid arguments for tool add: a: /);
      assert.deepEqual(seen.charged[1], seen.charged[0], `${mode} ${transport}: the recorded result`);
      if (transport === 'stdio') assert.deepEqual(seen.charges, { charges: 1 }, 'charged once in this server process');
    }
    const toolset = await mcpTools([{ name: 'pay', type: 'streamable-http', url: http.url }]);
    try {
      assert.deepEqual((await toolset.tools.pay__charges.execute({})).structuredContent, { charges: 2 }, 'one charge per key over HTTP');
    } finally {
      await toolset.close();
    }
  } finally {
    await http.stop();
  }
});
