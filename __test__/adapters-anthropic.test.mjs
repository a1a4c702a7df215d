// mcpferry/anthropic: a Messages API tool loop with the assistant turns built by hand (no network),
// each turn's tool_use blocks dispatched to a real stdio server (fixtures/adapters-server.mjs) and its
// tool_result blocks sent back as the next user message. The same shapes are type-checked against
// @anthropic-ai/sdk in examples/recipes (adapters-recipes.test.mjs).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { anthropicTools, dispatchAnthropicToolUses } from '../entry/anthropic.mjs';
import { PNG, adaptersToolset } from './adapters-fixture.mjs';

const toolUse = (id, name, input) => ({ type: 'tool_use', id, name, input, caller: { type: 'direct' } });
/** An assistant message as the API returns it. */
const assistant = (id, content) => ({ id, type: 'message', role: 'assistant', model: 'claude-test', content, stop_reason: 'tool_use', stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } });

test('Messages tool loop: tool_use blocks run on the server, their tool_result blocks carry mapped content and errors', async (t) => {
  const policy = { decide: (request) => (request.args?.text === 'forbidden' ? { kind: 'deny', reason: 'not that word' } : { kind: 'allow' }) };
  const { toolset, received } = await adaptersToolset(t, 'fx', { policy });
  const tools = anthropicTools(toolset);
  const book = tools.find((tool) => tool.name === 'fx__book');
  assert.deepEqual(book, { name: 'fx__book', description: 'Book a stay.', input_schema: toolset.tools.fx__book.inputSchema });

  const messages = [{ role: 'user', content: 'Echo hi, show the media, then book what the echo said.' }];
  const first = assistant('msg_1', [
    { type: 'text', text: 'Let me do that.', citations: null },
    toolUse('tu_1', 'fx__echo', { text: 'hi' }),
    toolUse('tu_2', 'fx__media', {}),
    toolUse('tu_3', 'fx__fail', {}),
    toolUse('tu_4', 'fx__nope', {}),
    toolUse('tu_5', 'fx__echo', { text: 'forbidden' }),
  ]);
  messages.push({ role: first.role, content: first.content });
  const results = await dispatchAnthropicToolUses(toolset, first.content);
  messages.push({ role: 'user', content: results });

  assert.deepEqual(results.map((r) => r.tool_use_id), ['tu_1', 'tu_2', 'tu_3', 'tu_4', 'tu_5'], 'one result per tool_use, in order');
  assert.deepEqual(results[0], { type: 'tool_result', tool_use_id: 'tu_1', content: [{ type: 'text', text: 'echo: hi' }] });
  assert.deepEqual(results[1].content, [
    { type: 'text', text: 'here is everything' },
    { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } },
    { type: 'text', text: '[audio: audio/wav, 44 bytes]' },
    { type: 'text', text: '[resource file:///notes/readme.md (text/markdown)]\n# Notes' },
    { type: 'text', text: '[resource file:///docs/report.pdf: application/pdf, 19 bytes]' },
    { type: 'text', text: '[resource link: big.csv <file:///docs/big.csv> text/csv; The full table]' },
  ]);
  assert.equal(results[1].is_error, undefined);
  assert.deepEqual(results[2], { type: 'tool_result', tool_use_id: 'tu_3', is_error: true, content: 'MCP tool error: Invalid departure date: must be in the future.' });
  assert.deepEqual(results[3], { type: 'tool_result', tool_use_id: 'tu_4', is_error: true, content: 'There is no tool named "fx__nope".' });
  assert.equal(results[4].is_error, true);
  assert.match(results[4].content, /not that word/);

  // The next turn uses what the last one returned, as a model reading the results would.
  const echoed = results[0].content[0].text.replace('echo: ', '');
  const second = assistant('msg_2', [toolUse('tu_6', 'fx__book', { city: echoed, guest: { name: 'Ana' } })]);
  messages.push({ role: second.role, content: second.content });
  messages.push({ role: 'user', content: await dispatchAnthropicToolUses(toolset, second.content) });
  assert.deepEqual(messages.at(-1).content, [{ type: 'tool_result', tool_use_id: 'tu_6', content: [{ type: 'text', text: 'booked hi' }] }]);
  assert.deepEqual(received().filter((r) => r.tool !== 'wait'), [
    { tool: 'echo', args: { text: 'hi' } },
    { tool: 'book', args: { city: 'hi', guest: { name: 'Ana' } } },
  ]);
  // Blocks that are not tool_use (text, thinking, the history's tool_result) are not dispatched.
  assert.deepEqual(await dispatchAnthropicToolUses(toolset, [{ type: 'text', text: 'done' }, ...results]), []);
});

test('Messages tool loop: the signal cancels the calls on the server and rejects', async (t) => {
  const { toolset, recorded } = await adaptersToolset(t);
  const controller = new AbortController();
  const pending = dispatchAnthropicToolUses(toolset, [toolUse('tu_1', 'fx__wait', { ms: 60_000 })], { signal: controller.signal });
  await recorded((r) => r.tool === 'wait' && r.started);
  controller.abort();
  await assert.rejects(pending, { code: 'mcp_aborted' });
  assert.deepEqual(await recorded((r) => r.tool === 'wait' && 'cancelled' in r), { tool: 'wait', cancelled: true });
});
