// Progress to the host: `execute(args, { onProgress })` hears the server's `notifications/progress` for
// that call, validated, redacted and bounded, never after the call settles; a call without it is
// unchanged. Against the raw stdio fixture (every byte under the test's control), the published
// server-everything over stdio and Streamable HTTP (progress on the POST's SSE stream), the TypeScript
// SDK 2.x fixture in the 2026-07-28 era (stdio and HTTP), connectMcpServer's client, and the AI SDK
// adapter's preliminary results (ai 6; ai 7 on Node 22).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { join } from 'node:path';
import * as ai6 from 'ai';
import * as ai6test from 'ai/test';
import { connectMcpServer, mcpTools } from '../dist/index.js';
import { bindAiSdkTools } from '../dist/adapters/ai.js';
import { aiSdkTools, createMcpHandle } from '../entry/ai.mjs';
import { EVERYTHING_STDIO_AND_HTTP } from '../examples/servers/everything-http.mjs';
import { call, say, scriptedModel } from './adapters-fixture.mjs';
import { TS2, startTs2Http } from './eras-servers.mjs';
import { NEEDS_NODE22, NODE22_MODULES, fixture, importNode22, rerunWithEngineReader } from './helpers.mjs';

const SECRET = 'sk-fixture-progress-0123456789';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * `seen` is what a caller heard of the updates `sent`: in order, the last one always, and no other value —
 * but updates that reached the engine faster than the event loop collected them are coalesced (the latest
 * wins), so on a loaded machine one may be skipped.
 */
function assertHeard(seen, sent) {
  assert.ok(seen.length >= 1, 'at least the last update');
  assert.deepEqual(seen.at(-1), sent.at(-1), 'the last update always arrives');
  let at = 0;
  for (const update of seen) {
    while (at < sent.length && !isDeepStrictEqual(sent[at], update)) at++;
    assert.ok(at < sent.length, `${JSON.stringify(update)} is one of the updates sent, in order: ${JSON.stringify(seen)}`);
    at++;
  }
}

async function fixtureToolset(t, env = {}) {
  const { entry } = fixture('fx', { FIXTURE_API_KEY: SECRET, FIXTURE_NOTIFY_TOOLS: '1', ...env });
  const toolset = await mcpTools([entry], { timeoutMs: 10_000 });
  t.after(() => toolset.close());
  return toolset;
}

test('stdio fixture: updates arrive in order, validated, and none after the call settles', async (t) => {
  const { tools } = await fixtureToolset(t);
  const seen = [];
  let settled = false;
  const late = [];
  const result = await tools.fx__progress.execute(
    { steps: 4, intervalMs: 40, message: 'working', after: true },
    { onProgress: (p) => (settled ? late : seen).push(p) },
  );
  settled = true;
  assert.equal(result.content[0].text, 'progress done after 4 steps');
  assertHeard(seen, [1, 2, 3, 4].map((progress) => ({ progress, total: 4, message: 'working' })));
  // The server sends one more after its answer (progress 999): the call has settled, so nobody hears it.
  await sleep(150);
  assert.deepEqual(late, []);
  // The connection is fine afterwards.
  assert.equal((await tools.fx__echo.execute({ text: 'after' })).content[0].text, 'echo: after');
});

test('stdio fixture: malformed updates are dropped, messages redacted, cut and made terminal-safe', async (t) => {
  const { tools } = await fixtureToolset(t);
  const seen = [];
  const updates = [
    { progress: 'half' },
    { progress: 1, total: 'ten' },
    { progress: 2, message: { text: 'not a string' } },
    { progress: 3, total: 9.5, message: 'x'.repeat(5000) },
    { progress: 4.5, total: null, message: `key ${SECRET}\u001b[2J\u001b]8;;http://x\u0007 done\nnext\u202e` },
    { progress: 5, total: 'late and malformed' },
  ];
  await tools.fx__progress.execute({ updates, intervalMs: 40 }, { onProgress: (p) => seen.push(p) });
  // The last valid one always arrives; the one before it unless coalesced with it.
  assert.ok(seen.length === 1 || seen.length === 2, JSON.stringify(seen));
  assert.deepEqual(seen.at(-1), { progress: 4.5, message: 'key [redacted] [2J ]8;;http://x  done next ' });
  if (seen.length === 2) {
    assert.equal(seen[0].progress, 3);
    assert.equal(seen[0].total, 9.5);
    assert.ok(seen[0].message.length <= 1025 && seen[0].message.endsWith('…'), String(seen[0].message.length));
  }
});

test('stdio fixture: without onProgress a call is as before; a throwing or rejecting onProgress breaks nothing', async (t) => {
  const { tools } = await fixtureToolset(t);
  const plain = await tools.fx__progress.execute({ steps: 3, intervalMs: 5 });
  assert.deepEqual(plain, { content: [{ type: 'text', text: 'progress done after 3 steps' }] });
  const unhandled = [];
  const onUnhandled = (reason) => unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  t.after(() => process.off('unhandledRejection', onUnhandled));
  let thrown = 0;
  const throwing = await tools.fx__progress.execute({ steps: 3, intervalMs: 40 }, {
    onProgress: () => {
      thrown++;
      throw new Error('the host broke');
    },
  });
  assert.deepEqual(throwing, plain);
  assert.ok(thrown >= 1 && thrown <= 3, 'updates were still delivered after a throw');
  const rejecting = await tools.fx__progress.execute({ steps: 2, intervalMs: 5 }, { onProgress: async () => Promise.reject(new Error('async break')) });
  assert.deepEqual(rejecting.content[0].text, 'progress done after 2 steps');
  await sleep(50);
  assert.deepEqual(unhandled, []);
  await assert.rejects(tools.fx__echo.execute({ text: 'x' }, { onProgress: 'yes' }), { code: 'mcp_invalid_arguments', message: /onProgress must be a function/ });
});

test('stdio fixture: progress is paced per call, at most one update every 50 ms, the last one before the result', async (t) => {
  const { tools } = await fixtureToolset(t);
  const steps = 60;
  const seen = [];
  const started = performance.now();
  const result = await tools.fx__progress.execute({ steps, intervalMs: 5 }, { onProgress: (p) => seen.push([p.progress, performance.now()]) });
  const elapsed = performance.now() - started;
  assert.match(result.content[0].text, /./);
  assert.equal(seen.at(-1)[0], steps, 'the update held at the end is delivered before the result');
  assert.ok(seen.length <= elapsed / 50 + 3, `paced: ${seen.length} updates in ${Math.round(elapsed)} ms`);
  // Between deliveries of the interval (not the one flushed ahead of the outcome): 50 ms, less timer and event-loop slack.
  const gaps = seen.slice(1, -1).map(([, at], i) => at - seen[i][1]);
  assert.ok(gaps.every((gap) => gap >= 20), `gaps ${gaps.map(Math.round)}`);
});

test('stdio fixture: no progress reaches onProgress after the caller aborted', async (t) => {
  const { tools } = await fixtureToolset(t);
  const controller = new AbortController();
  let afterAbort = 0;
  const call = tools.fx__progress.execute({ steps: 40, intervalMs: 5 }, {
    abortSignal: controller.signal,
    // Aborted inside the first update's interval, while the engine holds a later one.
    onProgress: () => {
      if (controller.signal.aborted) afterAbort++;
      else setTimeout(() => controller.abort(), 20);
    },
  });
  await assert.rejects(call, { code: 'mcp_aborted' });
  await sleep(100);
  assert.equal(afterAbort, 0, 'the update held for the interval is not delivered after the abort');
});

test('stdio fixture: a flood of progress is coalesced, the last update still delivered before the result', async (t) => {
  const { tools } = await fixtureToolset(t);
  const count = 20_000;
  const seen = [];
  let resolvedAfter;
  const result = await tools.fx__flood_progress.execute({ count }, { onProgress: (p) => seen.push(p.progress) });
  resolvedAfter = seen.length;
  assert.equal(result.content[0].text, `flooded ${count}`);
  assert.ok(seen.length > 0 && seen.length < count / 2, `coalesced: ${seen.length} updates for ${count} sent`);
  assert.equal(seen.at(-1), count, 'the latest update wins');
  assert.ok(seen.every((v, i) => i === 0 || v > seen[i - 1]), 'in order');
  assert.equal(resolvedAfter, seen.length);
  // Two calls at once: each hears only its own.
  const a = [];
  const b = [];
  await Promise.all([
    tools.fx__progress.execute({ steps: 3, intervalMs: 40 }, { onProgress: (p) => a.push(p.progress) }),
    tools.fx__progress.execute({ steps: 5, intervalMs: 30 }, { onProgress: (p) => b.push(p.progress) }),
  ]);
  assertHeard(a, [1, 2, 3]);
  assertHeard(b, [1, 2, 3, 4, 5]);
});


for (const [mode, start] of EVERYTHING_STDIO_AND_HTTP) {
  test(`server-everything over ${mode}: trigger-long-running-operation reports each step`, async (t) => {
    const server = await start();
    t.after(server.stop);
    const { tools, close } = await mcpTools([server.entry], { timeoutMs: 5000, connectTimeoutMs: 30_000 });
    t.after(close);
    const seen = [];
    const result = await tools['everything__trigger-long-running-operation'].execute({ duration: 1, steps: 4 }, { onProgress: (p) => seen.push(p) });
    assert.match(result.content[0].text, /completed/);
    assert.deepEqual(seen, [1, 2, 3, 4].map((progress) => ({ progress, total: 4 })));
  });
}

const modern = [
  ['stdio', async () => ({ entry: { name: 'ts2', type: 'stdio', command: process.execPath, args: [TS2, 'stdio'] }, stop() {} })],
  ['HTTP', async () => {
    const server = await startTs2Http();
    return { entry: { name: 'ts2', type: 'streamable-http', url: server.url }, stop: server.stop };
  }],
];

for (const [mode, start] of modern) {
  test(`2026-07-28 (TypeScript SDK 2.x over ${mode}): progress reaches onProgress, through connectMcpServer too`, async (t) => {
    const server = await start();
    t.after(server.stop);
    const client = await connectMcpServer(server.entry, { timeoutMs: 5000 });
    t.after(() => client.close());
    assert.equal(client.protocolVersion, '2026-07-28');
    const seen = [];
    const result = await client.callTool({ name: 'work', arguments: { steps: 3 }, onProgress: (p) => seen.push(p) });
    assert.equal(result.content[0].text, 'worked 3 steps');
    assertHeard(seen, [1, 2, 3].map((progress) => ({ progress, total: 3, message: `step ${progress} of 3` })));
  });
}

// ---- the AI SDK adapter ----

const ai7 = await importNode22('ai');
const ai7test = await importNode22('ai/test');
const ai7Version = NODE22_MODULES && ai7 && JSON.parse(readFileSync(join(NODE22_MODULES, 'ai', 'package.json'), 'utf8')).version;
const majors = [
  { label: 'ai 6', ai: ai6, Mock: ai6test.MockLanguageModelV3, adapt: aiSdkTools, skip: false },
  { label: 'ai 7', ai: ai7, Mock: ai7test?.MockLanguageModelV4, adapt: ai7 && bindAiSdkTools(ai7, ai7Version), skip: NEEDS_NODE22 },
];
/** Runs a streamText loop; the tool-result parts it streamed and the tool result the model was shown. */
/** A mock model that calls `fx__progress` once, then answers; `seen` holds what it was called with. */
const scripted = (Mock) => scriptedModel(Mock, [() => [call('c1', 'fx__progress', { steps: 3, intervalMs: 40 })], () => say('done')]);

async function streamLoop(ai, Mock, tools) {
  const { model, seen } = scripted(Mock);
  const result = ai.streamText({ model, tools, prompt: 'go', stopWhen: ai.stepCountIs(3), onError: () => {} });
  const results = [];
  for await (const part of result.fullStream) {
    if (part.type === 'error') throw part.error;
    if (part.type === 'tool-result') results.push({ preliminary: part.preliminary === true, output: part.output });
  }
  assert.equal(await result.text, 'done');
  return { results, shown: shownResult(seen[1]) };
}

/** The tool result the model was shown in its prompt (as JSON: streamText leaves `undefined` fields). */
function shownResult(options) {
  const shown = options.prompt.flatMap((m) => (m.role === 'tool' ? m.content : [])).find((p) => p.type === 'tool-result');
  return JSON.parse(JSON.stringify(shown.output));
}

for (const { label, ai, Mock, adapt, skip } of majors) {
  test(`${label}: preliminaryProgress streams progress as preliminary results; the model sees the same result`, { skip }, async (t) => {
    const toolset = await fixtureToolset(t);
    const plain = await streamLoop(ai, Mock, adapt(toolset));
    const text = { type: 'content', value: [{ type: 'text', text: 'progress done after 3 steps' }] };
    assert.deepEqual(plain.shown, text);
    assert.deepEqual(plain.results.map((r) => r.preliminary), [false], 'no preliminary results unless asked');
    const streamed = await streamLoop(ai, Mock, adapt(toolset, { preliminaryProgress: true }));
    assert.deepEqual(streamed.shown, text, 'what the model sees is unchanged');
    const result = { content: [{ type: 'text', text: 'progress done after 3 steps' }] };
    // The AI SDK streams every value an iterable `execute` yields as preliminary, the last (the result) too,
    // then that last one as the final result.
    const preliminary = streamed.results.filter((r) => r.preliminary).map((r) => r.output);
    assert.deepEqual(preliminary.at(-1), result);
    assertHeard(preliminary.slice(0, -1), [1, 2, 3].map((progress) => ({ type: 'progress', progress, total: 3 })));
    const final = streamed.results.filter((r) => !r.preliminary);
    assert.deepEqual(final.map((r) => r.output), [result]);
  });
}

test('ai 6: a progress update handed to toModelOutput (the stream stopped before the result) is an error, not an empty success', async (t) => {
  const toolset = await fixtureToolset(t);
  const tools = aiSdkTools(toolset, { preliminaryProgress: true });
  const output = await tools.fx__progress.toModelOutput({ toolCallId: 'x', input: {}, output: { type: 'progress', progress: 1, total: 3 } });
  assert.deepEqual(output, { type: 'error-text', value: 'the tool call did not complete' });
  const done = await tools.fx__progress.toModelOutput({ toolCallId: 'x', input: {}, output: { content: [{ type: 'text', text: 'ok' }] } });
  assert.deepEqual(done, { type: 'content', value: [{ type: 'text', text: 'ok' }] });
});

test('ai 6: with preliminaryProgress a failing call still fails as a tool error, and generateText is unchanged', async (t) => {
  const toolset = await fixtureToolset(t);
  const tools = aiSdkTools(toolset, { preliminaryProgress: true });
  const iterable = tools.fx__fail.execute({}, { toolCallId: 'x', messages: [] });
  assert.equal(typeof iterable[Symbol.asyncIterator], 'function');
  await assert.rejects(async () => {
    for await (const _ of iterable);
  }, { code: 'mcp_tool_error' });
  const { model, seen } = scripted(ai6test.MockLanguageModelV3);
  const { text } = await ai6.generateText({ model, tools, prompt: 'go', stopWhen: ai6.stepCountIs(3) });
  assert.equal(text, 'done');
  assert.deepEqual(shownResult(seen[1]), { type: 'content', value: [{ type: 'text', text: 'progress done after 3 steps' }] });
});

test('createMcpHandle passes preliminaryProgress to the adapter; without it execute returns the result', async (t) => {
  const { entry } = fixture('fx');
  const { name, type, ...transport } = entry;
  for (const preliminaryProgress of [true, false]) {
    const handle = createMcpHandle({ transport: { kind: 'stdio', ...transport }, name: 'fx', preliminaryProgress });
    t.after(() => handle.close());
    const tools = await handle.tools();
    const running = tools.fx__progress.execute({ steps: 2, intervalMs: 40 }, { toolCallId: 'h', messages: [] });
    if (!preliminaryProgress) {
      assert.equal(typeof running.then, 'function');
      assert.equal((await running).content[0].text, 'progress done after 2 steps');
      continue;
    }
    const yielded = [];
    for await (const value of running) yielded.push(value);
    assert.deepEqual(yielded.at(-1), { content: [{ type: 'text', text: 'progress done after 2 steps' }] });
    assertHeard(yielded.slice(0, -1), [1, 2].map((progress) => ({ type: 'progress', progress, total: 2 })));
  }
});

rerunWithEngineReader(test, import.meta.url);
