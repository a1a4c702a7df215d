// Bad input from the host (issue 10, "Hostile servers": the host's half). Every misuse of the public API
// is refused with a typed error (err.code), reaches no server, spawns nothing, and never crashes the
// process or leaves a call or a child behind.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mcpTools, composeMcpSystemPrompt } from '../../dist/index.js';
import {
  hostileStdio, open, assertFails, assertAnswers, assertAllGone, closeWithin, timed, loopHoldingTimers, exitWhenDone,
} from '../fixtures/hostile/harness.mjs';

exitWhenDone(after);

/** A refusal of bad input needs no I/O: it comes at once. */
const PROMPT_MS = 1000;
const CLOSE_MS = 2000;

async function withServer(opts, body) {
  const server = hostileStdio('h');
  const toolset = await open([server.entry], { timeoutMs: 5000, ...opts });
  try {
    await body(toolset, server);
  } finally {
    await closeWithin(toolset, CLOSE_MS);
    assertAllGone(server.pids());
  }
}

/**
 * Each of `cases` is refused with `code` at once. Every case is tried and every miss listed, so one
 * failure does not hide the rest; a toolset that was wrongly opened is closed again.
 */
async function refusedEach(cases, attempt, code) {
  const misses = [];
  for (const [what, input] of Object.entries(cases)) {
    const { value, error, ms } = await timed(() => attempt(input, what));
    if (value?.close) await value.close();
    if (!error) misses.push(`${what}: accepted`);
    else if (error.code !== code) misses.push(`${what}: ${error.code ?? error.constructor.name} ${String(error.message).split('\n')[0]}`);
    else if (ms >= PROMPT_MS) misses.push(`${what}: refused only after ${ms} ms`);
  }
  assert.deepEqual(misses, [], `expected ${code} for each of these`);
}

const calls = (server) => server.methods().filter((m) => m === 'tools/call').length;

test('arguments that are not a JSON object are refused before they reach the server', async () => {
  await withServer({}, async ({ tools }, server) => {
    const cyclic = { text: 'x' };
    cyclic.self = cyclic;
    const deepCycle = { a: { b: { c: [] } } };
    deepCycle.a.b.c.push(deepCycle);
    const badArgs = {
      'a string': 'text',
      'a number': 42,
      'a boolean': true,
      'an array': ['text'],
      'a function': () => 'x',
      'a symbol': Symbol('s'),
      'a BigInt': 10n,
      'a nested BigInt': { text: 'x', n: { deeper: [1n] } },
      'a circular object': cyclic,
      'a cycle through an array': deepCycle,
      'a throwing toJSON': { toJSON() { throw new Error('toJSON exploded'); } },
      'a toJSON returning a string': { toJSON: () => 'not an object' },
      'a throwing getter': Object.defineProperty({}, 'text', { enumerable: true, get() { throw new Error('getter exploded'); } }),
      'a proxy that throws': new Proxy({}, { ownKeys() { throw new Error('proxy exploded'); } }),
    };
    await refusedEach(badArgs, (args) => tools.h__echo.execute(args), 'mcp_invalid_arguments');
    assert.equal(calls(server), 0, 'the server received no call');
    assert.equal(await assertAnswers(() => tools.h__echo.execute({ text: 'fine' }), PROMPT_MS), 'echo: fine');
  });
});

test('unusual but valid arguments arrive intact', async () => {
  await withServer({}, async ({ tools }) => {
    const text = 'tab\tnewline\nnul\u0000 quote" backslash\\ emoji 🚀 lone surrogate \ud800 and more';
    assert.equal(await assertAnswers(() => tools.h__echo.execute({ text }), PROMPT_MS), `echo: ${text}`);
    const big = 'b'.repeat(1024 * 1024);
    assert.equal((await assertAnswers(() => tools.h__echo.execute({ text: big }), 5000)).length, big.length + 6);
    // undefined and null mean no arguments; a detached execute still knows its tool.
    const { execute } = tools.h__echo;
    assert.equal(await assertAnswers(() => execute(undefined), PROMPT_MS), 'echo: undefined');
    assert.equal(await assertAnswers(() => execute(null), PROMPT_MS), 'echo: undefined');
  });
});

test('a call context of the wrong type is refused with a typed error or ignored, never a crash', async () => {
  const timersBefore = loopHoldingTimers();
  const misses = [];
  await withServer({}, async ({ tools }) => {
    for (const ctx of ['ctx', 42, { signal: 'nope' }, { signal: {} }, { signal: { aborted: false } }, { toolCallId: 5 }]) {
      const { value, error } = await timed(() => tools.h__echo.execute({ text: 'c' }, ctx));
      if (error ? !String(error.code).startsWith('mcp_') : value.content[0].text !== 'echo: c') {
        misses.push(`ctx ${JSON.stringify(ctx)}: ${error ? `${error.constructor.name} ${error.message}` : JSON.stringify(value)}`);
      }
    }
  });
  assert.deepEqual(misses, []);
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(loopHoldingTimers(), timersBefore, 'a refused call left a timer holding the process open');
});

test('malformed server entries are refused with mcp_config_invalid, and nothing is spawned', async () => {
  const witness = hostileStdio('witness');
  const stdio = { name: 'x', type: 'stdio', command: process.execPath };
  const http = { name: 'x', type: 'streamable-http', url: 'http://127.0.0.1:9/mcp' };
  const entries = {
    'null': null,
    'a number': 42,
    'a string': 'stdio',
    'an array': [stdio],
    'no name': { type: 'stdio', command: 'node' },
    'an empty name': { ...stdio, name: '' },
    'a numeric name': { ...stdio, name: 7 },
    'an unknown type': { ...stdio, type: 'ftp' },
    'no type': { name: 'x', command: 'node' },
    'a numeric command': { ...stdio, command: 42 },
    'an empty command': { ...stdio, command: '' },
    'args not an array': { ...stdio, args: '--flag' },
    'args of numbers': { ...stdio, args: [1, 2] },
    'env not an object': { ...stdio, env: 'A=1' },
    'env with a numeric value': { ...stdio, env: { A: 1 } },
    'env with a NUL': { ...stdio, env: { A: 'x\u0000y' } },
    'cwd a number': { ...stdio, cwd: 5 },
    'enabled a string': { ...stdio, enabled: 'yes' },
    'a numeric url': { ...http, url: 42 },
    'a url that is not one': { ...http, url: 'not a url' },
    'a file url': { ...http, url: 'file:///etc/passwd' },
    'headers a string': { ...http, headers: 'X-A: 1' },
    'a numeric header value': { ...http, headers: { 'X-A': 1 } },
    'a header value with a newline': { ...http, headers: { 'X-A': 'a\r\nX-Injected: 1' } },
    'a circular entry': (() => {
      const entry = { ...stdio, env: {} };
      entry.env.self = entry;
      return entry;
    })(),
    'a BigInt in an entry': { ...stdio, args: [1n] },
  };
  const lists = { 'servers null': null, 'servers a string': 'servers', 'servers a number': 42, 'servers an object': { a: stdio } };
  await refusedEach({ ...entries, ...lists }, (entry, what) => mcpTools(what in lists ? entry : [witness.entry, entry]), 'mcp_config_invalid');
  assert.deepEqual(witness.pids(), [], 'no server was started for a refused configuration');
});

test('options of the wrong type are refused with mcp_config_invalid, and nothing is spawned', async () => {
  const witness = hostileStdio('witness');
  const cyclic = {};
  cyclic.self = cyclic;
  const options = {
    'null options': null,
    'string options': 'fast',
    'numeric options': 5,
    'array options': [],
    'timeoutMs a string': { timeoutMs: '1000' },
    'timeoutMs negative': { timeoutMs: -1 },
    'timeoutMs NaN': { timeoutMs: NaN },
    'timeoutMs Infinity': { timeoutMs: Infinity },
    'timeoutMs a BigInt': { timeoutMs: 1000n },
    'maxResultBytes a string': { maxResultBytes: 'big' },
    'maxResultBytes negative': { maxResultBytes: -5 },
    'tools a string': { tools: 'all' },
    'tools.allow a string': { tools: { allow: 'echo' } },
    'tools.allow of numbers': { tools: { allow: [1] } },
    'tools with allow and block': { tools: { allow: ['a'], block: ['b'] } },
    'disclosure a number': { disclosure: 5 },
    'disclosure.budget negative': { disclosure: { budget: -1 } },
    'disclosure.alwaysLoad a string': { disclosure: { alwaysLoad: 'echo' } },
    'contextWindowTokens a string': { contextWindowTokens: 'many' },
    'onDiagnostic a number': { onDiagnostic: 5 },
    'policy without decide': { policy: {} },
    'policy.decide a string': { policy: { decide: 'allow' } },
    'auth a string': { auth: 'token', session: 's' },
    'allowedHosts a string': { allowedHosts: 'example.com' },
    'allowedHosts of numbers': { allowedHosts: [1] },
    'storage a string': { storage: 'memory' },
    'a circular option': { tools: cyclic },
    'a throwing getter': Object.defineProperty({}, 'timeoutMs', { enumerable: true, get() { throw new Error('getter exploded'); } }),
  };
  await refusedEach(options, (opts) => mcpTools([witness.entry], opts), 'mcp_config_invalid');
  assert.deepEqual(witness.pids(), [], 'no server was started for refused options');
});

test('composeMcpSystemPrompt refuses anything but a toolset', async () => {
  for (const bad of [undefined, null, {}, { tools: {}, close() {} }, 'toolset']) {
    assert.throws(() => composeMcpSystemPrompt(bad), { code: 'mcp_config_invalid' });
  }
});

test('a throwing onDiagnostic and a policy that answers garbage break nothing', async () => {
  const decisions = [
    () => 42,
    () => 'allow',
    () => ({ kind: 'bogus' }),
    () => null,
    () => Promise.reject(new Error('policy exploded')),
    () => {
      throw new Error('policy threw');
    },
    () => ({ kind: 'allow' }),
  ];
  let next = 0;
  const policy = { decide: () => decisions[next++]() };
  const server = hostileStdio('h');
  const toolset = await mcpTools([server.entry], {
    policy,
    onDiagnostic: () => {
      throw new Error('onDiagnostic exploded');
    },
  });
  try {
    for (let i = 0; i < decisions.length - 1; i++) {
      await assertFails(() => toolset.tools.h__echo.execute({ text: 'x' }), ['mcp_policy_denied'], PROMPT_MS);
    }
    assert.equal(calls(server), 0, 'no call passed a garbage decision');
    assert.equal(await assertAnswers(() => toolset.tools.h__echo.execute({ text: 'ok' }), PROMPT_MS), 'echo: ok');
  } finally {
    await closeWithin(toolset, CLOSE_MS);
    assertAllGone(server.pids());
  }
});

test('a call parked in a policy that never decides is settled by close(), within its bound', async () => {
  const server = hostileStdio('h');
  const timersBefore = loopHoldingTimers();
  const toolset = await mcpTools([server.entry], { policy: { decide: () => new Promise(() => {}) } });
  const parked = timed(() => toolset.tools.h__echo.execute({ text: 'x' }));
  await new Promise((r) => setTimeout(r, 50));
  await closeWithin(toolset, CLOSE_MS);
  const { error, ms } = await parked;
  assert.equal(loopHoldingTimers(), timersBefore, 'a timer still holds the process open after close()');
  assert.equal(error?.code, 'mcp_connection_closed');
  assert.ok(ms < CLOSE_MS + 500, `the parked call settled after ${ms} ms`);
  assert.equal(calls(server), 0);
  assertAllGone(server.pids());
});
