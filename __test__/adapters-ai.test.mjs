// mcpferry/ai in real AI SDK loops: generateText and streamText on ai 6 (the repo's `ai`) and ai 7 (which
// needs Node 22, so it comes from scripts/node22: skipped on Node 20), each driven by the SDK's own mock
// language model from `ai/test`, calling tools on a real stdio server (fixtures/adapters-server.mjs).
// ai 6 goes through the package entry (entry/ai.mjs); ai 7 binds the same adapter to the ai 7 module,
// as entry/ai.mjs does for whichever `ai` a project installed.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import * as ai6 from 'ai';
import * as ai6test from 'ai/test';
import { bindAiSdkTools } from '../dist/adapters/ai.js';
import { aiSdkTools } from '../entry/ai.mjs';
import { BLOB, PNG, WAV, adaptersToolset, call, say, scriptedModel } from './adapters-fixture.mjs';
import { NEEDS_NODE22, NODE22_MODULES, importNode22, until } from './helpers.mjs';

const require = createRequire(import.meta.url);
const ai7 = await importNode22('ai');
const ai7Version = NODE22_MODULES && JSON.parse(readFileSync(join(NODE22_MODULES, 'ai', 'package.json'), 'utf8')).version;
if (ai7) assert.match(ai7Version, /^7\./);
const ai7test = await importNode22('ai/test');
const majors = [
  { label: 'ai 7', ai: ai7, Mock: ai7test?.MockLanguageModelV4, adapt: ai7 && bindAiSdkTools(ai7, ai7Version), fileParts: true, skip: NEEDS_NODE22 },
  { label: 'ai 6', ai: ai6, Mock: ai6test.MockLanguageModelV3, adapt: aiSdkTools, fileParts: false, skip: false },
];
assert.match(require('ai/package.json').version, /^6\./);

/** The tool results the model was shown in its prompt, by tool call id (as JSON: streamText leaves `undefined` fields). */
function toolResults(options) {
  const results = {};
  for (const message of options.prompt) {
    if (message.role !== 'tool') continue;
    for (const part of message.content) if (part.type === 'tool-result') results[part.toolCallId] = JSON.parse(JSON.stringify(part.output));
  }
  return results;
}

/** Runs one loop with generateText or streamText; resolves to the final text. */
async function runLoop(ai, mode, settings) {
  const stopWhen = ai.stepCountIs(6);
  if (mode === 'generateText') return (await ai.generateText({ ...settings, stopWhen })).text;
  const result = ai.streamText({ ...settings, stopWhen, onError: () => {} });
  for await (const part of result.fullStream) if (part.type === 'error') throw part.error;
  return result.text;
}

const file = (data, mediaType, filename, fileParts) =>
  fileParts
    ? { type: 'file', data: { type: 'data', data }, mediaType, ...(filename ? { filename } : {}) }
    : { type: mediaType.startsWith('image/') ? 'image-data' : 'file-data', data, mediaType, ...(filename ? { filename } : {}) };

for (const { label, ai, Mock, adapt, fileParts, skip } of majors) {
  for (const mode of ['generateText', 'streamText']) {
    test(`${label}, ${mode}: tools run on the server and their output reaches the model's next prompt, mapped`, { skip }, async (t) => {
      const { toolset, received } = await adaptersToolset(t);
      const calls = [];
      const { model, seen } = scriptedModel(Mock, [
        (options) => {
          const offered = options.tools.map((tool) => tool.name).sort();
          assert.deepEqual(offered, Object.keys(toolset.tools).sort());
          const book = options.tools.find((tool) => tool.name === 'fx__book');
          assert.equal(book.inputSchema.properties.city.type, 'string');
          return [call('c1', 'fx__echo', { text: 'hi' }), call('c2', 'fx__media', {})];
        },
        () => say('done'),
      ]);
      const onStepFinish = (step) => calls.push(...step.toolCalls);
      assert.equal(await runLoop(ai, mode, { model, tools: adapt(toolset), prompt: 'go', onStepFinish }), 'done');
      assert.deepEqual(calls.map((c) => [c.toolName, c.dynamic]), [['fx__echo', true], ['fx__media', true]]);
      if (label === 'ai 7') assert.deepEqual(calls[0].toolMetadata, { server: 'fx', remoteName: 'echo' }, 'ai 7 tells where a tool comes from');
      assert.deepEqual(
        received().filter((r) => r.tool === 'echo'),
        [{ tool: 'echo', args: { text: 'hi' } }],
      );
      const results = toolResults(seen[1]);
      assert.deepEqual(results.c1, { type: 'content', value: [{ type: 'text', text: 'echo: hi' }] });
      assert.deepEqual(results.c2, {
        type: 'content',
        value: [
          { type: 'text', text: 'here is everything' },
          file(PNG, 'image/png', undefined, fileParts),
          file(WAV, 'audio/wav', undefined, fileParts),
          { type: 'text', text: '[resource file:///notes/readme.md (text/markdown)]\n# Notes' },
          file(BLOB, 'application/pdf', 'report.pdf', fileParts),
          { type: 'text', text: '[resource link: big.csv <file:///docs/big.csv> text/csv; The full table]' },
        ],
      });
    });

    test(`${label}, ${mode}: an isError result and a thrown McpError reach the model as tool errors`, { skip }, async (t) => {
      const policy = { decide: (request) => (request.remoteName === 'echo' ? { kind: 'deny', reason: 'echo is off today' } : { kind: 'allow' }) };
      const { toolset, received } = await adaptersToolset(t, 'fx', { policy });
      const { model, seen } = scriptedModel(Mock, [() => [call('c1', 'fx__fail', {}), call('c2', 'fx__echo', { text: 'x' })], () => say('recovered')]);
      assert.equal(await runLoop(ai, mode, { model, tools: adapt(toolset), prompt: 'go' }), 'recovered');
      const results = toolResults(seen[1]);
      assert.equal(results.c1.type, 'error-text');
      assert.match(results.c1.value, /MCP tool error: Invalid departure date: must be in the future\./);
      assert.equal(results.c2.type, 'error-text');
      assert.match(results.c2.value, /echo is off today/);
      assert.deepEqual(received().filter((r) => r.tool === 'echo'), [], 'a denied call never reaches the server');
    });

    test(`${label}, ${mode}: aborting the loop cancels the call on the server (abortSignal)`, { skip }, async (t) => {
      const { toolset, recorded } = await adaptersToolset(t);
      const { model } = scriptedModel(Mock, [() => [call('c1', 'fx__wait', { ms: 60_000 })], () => say('never')]);
      const controller = new AbortController();
      const loop = runLoop(ai, mode, { model, tools: adapt(toolset), prompt: 'go', abortSignal: controller.signal });
      await recorded((r) => r.tool === 'wait' && r.started);
      controller.abort();
      await assert.rejects(loop);
      assert.deepEqual(await recorded((r) => r.tool === 'wait' && 'cancelled' in r), { tool: 'wait', cancelled: true });
    });

    test(`${label}, ${mode}: a tool added by list_changed joins the returned set`, { skip }, async (t) => {
      const { toolset } = await adaptersToolset(t);
      const tools = adapt(toolset);
      assert.equal('fx__added' in tools, false);
      const first = scriptedModel(Mock, [() => [call('c1', 'fx__add_tool', {})], () => say('asked')]);
      await runLoop(ai, mode, { model: first.model, tools, prompt: 'go' });
      await until(() => 'fx__added' in tools, { timeoutMs: 15_000 });
      assert.ok(Object.keys(tools).includes('fx__added'));
      const second = scriptedModel(Mock, [
        (options) => {
          assert.ok(options.tools.some((tool) => tool.name === 'fx__added'), 'the next loop offers the new tool');
          return [call('c1', 'fx__added', {})];
        },
        () => say('used it'),
      ]);
      assert.equal(await runLoop(ai, mode, { model: second.model, tools, prompt: 'again' }), 'used it');
      assert.deepEqual(toolResults(second.seen[1]).c1, { type: 'content', value: [{ type: 'text', text: 'called added' }] });
    });
  }
}

test('the tool set follows the toolset and cannot be changed in place', async (t) => {
  const { toolset } = await adaptersToolset(t);
  const tools = aiSdkTools(toolset);
  assert.equal(tools.fx__echo, tools.fx__echo, 'each tool is converted once');
  assert.equal(tools.fx__echo.type, 'dynamic');
  assert.deepEqual({ ...tools }.fx__echo, tools.fx__echo);
  assert.throws(() => {
    tools.mine = {};
  }, TypeError);
  delete toolset.tools.fx__echo;
  assert.equal('fx__echo' in tools, false);
  assert.equal(tools.fx__echo, undefined);
});

test('McpTool.execute takes the AI SDK\'s abortSignal as it takes signal: aborting cancels the call on the server', async (t) => {
  const { toolset, recorded } = await adaptersToolset(t);
  const controller = new AbortController();
  const pending = toolset.tools.fx__wait.execute({ ms: 60_000 }, { abortSignal: controller.signal, toolCallId: 'c1' });
  await recorded((r) => r.tool === 'wait' && r.started);
  controller.abort();
  await assert.rejects(pending, { code: 'mcp_aborted' });
  assert.deepEqual(await recorded((r) => r.tool === 'wait' && 'cancelled' in r), { tool: 'wait', cancelled: true });
  await assert.rejects(toolset.tools.fx__echo.execute({ text: 'x' }, { abortSignal: controller.signal }), { code: 'mcp_aborted' });
  await assert.rejects(toolset.tools.fx__echo.execute({ text: 'x' }, { abortSignal: 'soon' }), { code: 'mcp_invalid_arguments', message: /ctx\.abortSignal must be an AbortSignal/ });
  await assert.rejects(toolset.tools.fx__echo.execute({ text: 'x' }, { signal: new AbortController().signal, abortSignal: new AbortController().signal }), {
    code: 'mcp_invalid_arguments',
  });
  const both = new AbortController().signal;
  assert.equal((await toolset.tools.fx__echo.execute({ text: 'same' }, { signal: both, abortSignal: both })).content[0].text, 'echo: same');
});
