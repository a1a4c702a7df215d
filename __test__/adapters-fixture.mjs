// Shared by the adapter suites: the adapters fixture server (fixtures/adapters-server.mjs) and what it recorded.

import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { mcpTools } from '../dist/index.js';
import { here, scratchFile, until } from './helpers.mjs';

export * from './fixtures/adapters-data.mjs';
export const ADAPTERS_SERVER = join(here, 'fixtures', 'adapters-server.mjs');

/**
 * A toolset over one adapters fixture server named `name`; `received()` reads what its tools recorded,
 * `started(tool)` waits until the server began a call of that tool.
 */
export async function adaptersToolset(t, name = 'fx', options = {}) {
  const record = scratchFile(`${name}.jsonl`);
  const entry = { name, type: 'stdio', command: process.execPath, args: [ADAPTERS_SERVER], env: { FIXTURE_RECORD: record } };
  const toolset = await mcpTools([entry], { timeoutMs: 30_000, ...options });
  t.after(() => toolset.close());
  const received = () => (existsSync(record) ? readFileSync(record, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)) : []);
  const recorded = (predicate) => until(() => received().find(predicate), { timeoutMs: 15_000 });
  return { toolset, received, recorded };
}

// ---- the AI SDK's mock language model (ai/test), scripted step by step ----

const USAGE = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
/** A mock model's tool call and text answer (ai/test content parts). */
export const call = (toolCallId, toolName, input) => ({ type: 'tool-call', toolCallId, toolName, input: JSON.stringify(input) });
export const say = (text) => [{ type: 'text', text }];

/**
 * The SDK's mock model answering step by step from `steps`: each gets the call options (the prompt
 * so far, the tools offered) and returns the step's content. Streams the same content when streamed.
 */
/** What the model was shown, at its `step`-th call, as the output of tool call `id` (undefined if nothing). */
export function toolOutput(seen, step, id) {
  for (const message of seen[step].prompt) {
    if (message.role !== 'tool') continue;
    for (const part of message.content) if (part.toolCallId === id) return part.output;
  }
  return undefined;
}

export function scriptedModel(Mock, steps) {
  const seen = [];
  const next = async (options) => {
    const step = steps[seen.length];
    seen.push(options);
    assert.ok(step, `the model was called ${seen.length} times, ${steps.length} scripted`);
    const content = await step(options);
    return { content, finishReason: { unified: content.some((c) => c.type === 'tool-call') ? 'tool-calls' : 'stop', raw: undefined } };
  };
  const model = new Mock({
    doGenerate: async (options) => ({ ...(await next(options)), usage: USAGE, warnings: [] }),
    doStream: async (options) => {
      const { content, finishReason } = await next(options);
      const parts = [{ type: 'stream-start', warnings: [] }];
      for (const part of content) {
        if (part.type === 'text') parts.push({ type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: part.text }, { type: 'text-end', id: 't' });
        else parts.push(part);
      }
      parts.push({ type: 'finish', finishReason, usage: USAGE });
      return { stream: new ReadableStream({ start: (c) => (parts.forEach((p) => c.enqueue(p)), c.close()) }) };
    },
  });
  return { model, seen };
}
