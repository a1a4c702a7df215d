// mcpferry/openai: OpenAI Agents SDK function tools in a real Agents run (a scripted `Model`, no
// network) calling a real stdio server (fixtures/adapters-server.mjs, which records the arguments its
// tools receive; skipped on Node 20, which the Agents SDK doesn't support); the strict-mode rule and its null stripping; and the Responses / Chat Completions
// definitions and dispatcher with hand-built tool calls.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dispatchOpenAiToolCall, openaiAgentsTools, openaiToolDefinitions } from '../entry/openai.mjs';
import { stripRewrittenNulls, toStrictSchema } from '../dist/adapters/strict-schema.js';
import { mcpTools } from '../dist/index.js';
import { BOOK_SCHEMA, LOOKUP_SCHEMA, PNG, adaptersToolset } from './adapters-fixture.mjs';
import { NEEDS_NODE22, fixture, importNode22, until } from './helpers.mjs';

// The Agents SDK needs openai 7, which needs Node 22: from scripts/node22, and its tests skip on Node 20.
const { Agent, Usage, run, setTracingDisabled } = (await importNode22('@openai/agents')) ?? {};
setTracingDisabled?.(true);

const functionCall = (callId, name, args) => ({ type: 'function_call', callId, name, arguments: typeof args === 'string' ? args : JSON.stringify(args), status: 'completed' });
const message = (text) => ({ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text }] });

/** An Agents SDK `Model` answering step by step from `steps` (each gets the request: input so far, tools). */
function scriptedModel(steps) {
  const seen = [];
  return {
    seen,
    async getResponse(request) {
      const step = steps[seen.length];
      seen.push(request);
      assert.ok(step, `the model was called ${seen.length} times, ${steps.length} scripted`);
      return { usage: new Usage(), output: await step(request) };
    },
    getStreamedResponse() {
      throw new Error('these tests run the agent unstreamed');
    },
  };
}

/** The tool outputs the model was given, by call id. */
const toolOutputs = (request) => Object.fromEntries(request.input.filter((item) => item.type === 'function_call_result').map((item) => [item.callId, item.output]));

test('Agents SDK run: strict tools, nulls for optional properties stripped, output and errors shown to the model', { skip: NEEDS_NODE22 }, async (t) => {
  const policy = { decide: (request) => (request.remoteName === 'echo' ? { kind: 'deny', reason: 'echo is off today' } : { kind: 'allow' }) };
  const { toolset, received } = await adaptersToolset(t, 'fx', { policy });
  const model = scriptedModel([
    (request) => {
      const offered = Object.fromEntries(request.tools.map((tool) => [tool.name, tool]));
      assert.equal(offered.fx__book.strict, true);
      assert.equal(offered.fx__lookup.strict, false, 'an open map cannot be strict');
      assert.deepEqual(offered.fx__lookup.parameters, toolset.tools.fx__lookup.inputSchema, 'a non-strict tool keeps its schema');
      assert.deepEqual(offered.fx__book.parameters.required.sort(), ['city', 'guest', 'nights', 'note', 'rooms']);
      assert.deepEqual(offered.fx__book.parameters.properties.nights.type, ['integer', 'null']);
      return [
        // What a strict model sends: every property, null for the ones it leaves out.
        functionCall('c1', 'fx__book', { city: 'Lisbon', nights: null, note: null, guest: { name: 'Ana', email: null }, rooms: [{ beds: 2, view: null }] }),
        functionCall('c2', 'fx__lookup', { query: 'q', limit: null }),
        functionCall('c3', 'fx__media', {}),
        functionCall('c4', 'fx__fail', {}),
        functionCall('c5', 'fx__echo', { text: 'x' }),
      ];
    },
    () => [message('done')],
  ]);
  const agent = new Agent({ name: 'booker', instructions: 'Book it.', tools: openaiAgentsTools(toolset), model });
  const result = await run(agent, 'go');
  assert.equal(result.finalOutput, 'done');

  const book = received().find((r) => r.tool === 'book');
  assert.deepEqual(book.args, { city: 'Lisbon', note: null, guest: { name: 'Ana' }, rooms: [{ beds: 2 }] }, 'rewritten nulls stripped; a null the schema accepts kept');
  assert.deepEqual(received().find((r) => r.tool === 'lookup'), undefined, 'a non-strict tool gets what the model sent: the null is refused against its schema, never sent');
  assert.deepEqual(received().filter((r) => r.tool === 'echo'), [], 'a denied call never reaches the server');

  const outputs = toolOutputs(model.seen[1]);
  assert.deepEqual(outputs.c1, { type: 'text', text: 'booked Lisbon' });
  assert.match(outputs.c2.text, /do not match its inputSchema, at \/limit/);
  assert.deepEqual(outputs.c3, [
    { type: 'input_text', text: 'here is everything' },
    { type: 'input_image', image: `data:image/png;base64,${PNG}` },
    { type: 'input_text', text: '[audio: audio/wav, 44 bytes]' },
    { type: 'input_text', text: '[resource file:///notes/readme.md (text/markdown)]\n# Notes' },
    { type: 'input_text', text: '[resource file:///docs/report.pdf: application/pdf, 19 bytes]' },
    { type: 'input_text', text: '[resource link: big.csv <file:///docs/big.csv> text/csv; The full table]' },
  ]);
  assert.deepEqual(outputs.c4, { type: 'text', text: 'MCP tool error: Invalid departure date: must be in the future.' });
  assert.match(outputs.c5.text, /echo is off today/);
});

test('Agents SDK run: aborting the run cancels the call on the server', { skip: NEEDS_NODE22 }, async (t) => {
  const { toolset, recorded } = await adaptersToolset(t);
  const model = scriptedModel([() => [functionCall('c1', 'fx__wait', { ms: 60_000 })], () => [message('never')]]);
  const agent = new Agent({ name: 'waiter', instructions: 'Wait.', tools: openaiAgentsTools(toolset), model });
  const controller = new AbortController();
  const running = run(agent, 'go', { signal: controller.signal });
  await recorded((r) => r.tool === 'wait' && r.started);
  controller.abort();
  await assert.rejects(running);
  assert.deepEqual(await recorded((r) => r.tool === 'wait' && 'cancelled' in r), { tool: 'wait', cancelled: true });
});

test('Responses API: definitions, and the dispatcher answers function_call items with function_call_output items', async (t) => {
  const { toolset, received, recorded } = await adaptersToolset(t);
  const tools = openaiToolDefinitions(toolset, { api: 'responses' });
  const book = tools.find((tool) => tool.name === 'fx__book');
  assert.deepEqual(Object.keys(book).sort(), ['description', 'name', 'parameters', 'strict', 'type']);
  assert.equal(book.type, 'function');
  assert.equal(book.strict, true);
  assert.equal(tools.find((tool) => tool.name === 'fx__lookup').strict, false);

  const call = (call_id, name, args) => ({ type: 'function_call', id: `fc_${call_id}`, call_id, name, arguments: args, status: 'completed' });
  assert.deepEqual(await dispatchOpenAiToolCall(toolset, call('a', 'fx__book', JSON.stringify({ city: 'Porto', nights: 2, note: null, guest: null, rooms: null }))), {
    type: 'function_call_output',
    call_id: 'a',
    output: 'booked Porto',
  });
  assert.deepEqual(received().find((r) => r.tool === 'book').args, { city: 'Porto', nights: 2, note: null });
  const media = await dispatchOpenAiToolCall(toolset, call('b', 'fx__media', '{}'));
  assert.deepEqual(media.output.slice(0, 2), [
    { type: 'input_text', text: 'here is everything' },
    { type: 'input_image', image_url: `data:image/png;base64,${PNG}` },
  ]);
  assert.deepEqual(await dispatchOpenAiToolCall(toolset, call('c', 'fx__fail', '')), {
    type: 'function_call_output',
    call_id: 'c',
    output: 'MCP tool error: Invalid departure date: must be in the future.',
  });
  assert.deepEqual(await dispatchOpenAiToolCall(toolset, call('d', 'fx__nope', '{}')), { type: 'function_call_output', call_id: 'd', output: 'There is no tool named "fx__nope".' });
  assert.match((await dispatchOpenAiToolCall(toolset, call('e', 'fx__echo', '{"text": '))).output, /not valid JSON/);

  const controller = new AbortController();
  const waiting = dispatchOpenAiToolCall(toolset, call('f', 'fx__wait', '{"ms": 60000}'), { signal: controller.signal });
  await recorded((r) => r.tool === 'wait' && r.started);
  controller.abort();
  await assert.rejects(waiting, { code: 'mcp_aborted' });
  assert.deepEqual(await recorded((r) => r.tool === 'wait' && 'cancelled' in r), { tool: 'wait', cancelled: true });
});

test('Chat Completions: definitions, and the dispatcher answers tool calls with tool messages', async (t) => {
  const { toolset, received } = await adaptersToolset(t);
  const tools = openaiToolDefinitions(toolset, { api: 'chat' });
  const book = tools.find((tool) => tool.function.name === 'fx__book');
  assert.equal(book.type, 'function');
  assert.equal(book.function.strict, true);
  assert.equal(book.function.parameters.additionalProperties, false);

  const call = (id, name, args) => ({ id, type: 'function', function: { name, arguments: JSON.stringify(args) } });
  assert.deepEqual(await dispatchOpenAiToolCall(toolset, call('a', 'fx__book', { city: 'Faro', nights: null, note: 'late', guest: null, rooms: [] })), {
    role: 'tool',
    tool_call_id: 'a',
    content: 'booked Faro',
  });
  assert.deepEqual(received().find((r) => r.tool === 'book').args, { city: 'Faro', note: 'late', rooms: [] });
  const media = await dispatchOpenAiToolCall(toolset, call('b', 'fx__media', {}));
  assert.equal(media.content.split('\n')[1], '[image: image/png, 70 bytes]', 'chat tool messages carry text: an image is named');
  assert.deepEqual(await dispatchOpenAiToolCall(toolset, call('c', 'fx__fail', {})), {
    role: 'tool',
    tool_call_id: 'c',
    content: 'MCP tool error: Invalid departure date: must be in the future.',
  });
  assert.deepEqual(await dispatchOpenAiToolCall(toolset, { id: 'd', type: 'custom', custom: { name: 'grep', input: 'x' } }), {
    role: 'tool',
    tool_call_id: 'd',
    content: 'There is no custom tool named "grep".',
  });
  await assert.rejects(dispatchOpenAiToolCall(toolset, { foo: 1 }), TypeError);
  assert.throws(() => openaiToolDefinitions(toolset, { api: 'completions' }), /'responses' or 'chat'/);
});

test('strict mode: which schemas are strict-compatible, and which nulls are stripped', () => {
  const strict = toStrictSchema(BOOK_SCHEMA);
  assert.equal(strict.strict, true);
  assert.deepEqual(strict.rewrites, {
    nullable: ['nights', 'guest', 'rooms'],
    properties: { guest: { nullable: ['email'] }, rooms: { items: { nullable: ['view'] } } },
  });
  assert.deepEqual(strict.schema.properties.note, { type: ['string', 'null'] }, 'a schema that accepts null is left as it is');
  assert.deepEqual(strict.schema.properties.rooms.items.properties.view, { anyOf: [{ type: 'string', enum: ['sea', 'city'] }, { type: 'null' }] });
  assert.deepEqual(
    stripRewrittenNulls({ city: null, nights: null, note: null, guest: { name: null, email: null }, rooms: [{ beds: 1, view: null }, null] }, strict.rewrites),
    { city: null, note: null, guest: { name: null }, rooms: [{ beds: 1 }, null] },
    'only the rewritten properties lose their nulls',
  );

  const object = (properties, extra = {}) => ({ type: 'object', properties, ...extra });
  const compatible = [
    ['no parameters', { type: 'object', properties: {} }],
    ['$schema on the root', { $schema: 'http://json-schema.org/draft-07/schema#', ...object({ a: { type: 'string' } }) }],
    ['closed already', object({ a: { type: 'number', minimum: 0 } }, { required: ['a'], additionalProperties: false })],
    ['anyOf of closed objects', object({ a: { anyOf: [object({ x: { type: 'string' } }, { required: ['x'] }), { type: 'integer' }] } })],
    ['supported formats', object({ when: { type: 'string', format: 'date-time' }, id: { type: 'string', format: 'uuid' } })],
  ];
  for (const [label, schema] of compatible) assert.equal(toStrictSchema(schema).strict, true, label);
  const incompatible = [
    ['a root that is not an object', { anyOf: [object({})] }, /root is not an object/],
    ['an open map', LOOKUP_SCHEMA, /\$\.filters allows additional properties/],
    ['additionalProperties: true', object({ a: { type: 'string' } }, { additionalProperties: true }), /allows additional properties/],
    ['a free-form nested object', object({ a: { type: 'object' } }), /\$\.a is a free-form object/],
    ['a bare root (no properties: the arguments are not known)', { type: 'object' }, /\$ is a free-form object/],
    ['a default', object({ a: { type: 'integer', default: 3 } }), /"default"/],
    ['oneOf', object({ a: { oneOf: [{ type: 'string' }, { type: 'integer' }] } }), /"oneOf"/],
    ['$ref', { ...object({ a: { $ref: '#/$defs/a' } }), $defs: { a: { type: 'string' } } }, /"\$defs"|"\$ref"/],
    ['minLength', object({ a: { type: 'string', minLength: 2 } }), /"minLength"/],
    ['an unsupported format', object({ a: { type: 'string', format: 'uri' } }), /format "uri"/],
    ['no type', object({ a: {} }), /names no type/],
    ['an optional property under anyOf', object({ a: { anyOf: [object({ x: { type: 'string' } }), { type: 'null' }] } }), /optional under an anyOf/],
    ['required names an undefined property', object({ a: { type: 'string' } }, { required: ['b'] }), /required names a property/],
    ['too deep', nest(11), /deeper than 10 levels/],
  ];
  for (const [label, schema, reason] of incompatible) {
    const conversion = toStrictSchema(schema);
    assert.equal(conversion.strict, false, label);
    assert.match(conversion.reason, reason, label);
  }
  assert.equal(toStrictSchema(nest(10)).strict, true, '10 levels are accepted');
});

/** An object schema `levels` objects deep. */
function nest(levels) {
  let schema = { type: 'string' };
  for (let i = 0; i < levels; i++) schema = { type: 'object', properties: { inner: schema }, required: ['inner'] };
  return schema;
}

/** A toolset over the plain fixture server (fixtures/server.mjs) publishing `extraTools` as well; `received()` reads what it got. */
async function fixtureToolset(t, extraTools) {
  const fx = fixture('fx', { FIXTURE_EXTRA_TOOLS: JSON.stringify(extraTools) });
  const toolset = await mcpTools([fx.entry], { timeoutMs: 30_000 });
  t.after(() => toolset.close());
  return { toolset, received: fx.received };
}

test('Agents SDK names: `-` becomes `_`; of two tools that would share a name, the first by name is kept and the other reported', { skip: NEEDS_NODE22 }, async (t) => {
  const plain = { description: 'Shares its Agents SDK name.', inputSchema: { type: 'object', properties: {} } };
  // Published with the underscore first: which one is kept must not depend on the server's order.
  const { toolset } = await fixtureToolset(t, [{ name: 'x_y', ...plain }, { name: 'x-y', ...plain }]);
  assert.ok(toolset.tools['fx__x-y'] && toolset.tools.fx__x_y, 'the server publishes both names');

  const skipped = [];
  const tools = openaiAgentsTools(toolset, { onSkipped: (name, reason) => skipped.push([name, reason]) });
  assert.equal(tools.length, Object.keys(toolset.tools).length - 1, 'every other tool is kept');
  assert.equal(tools.filter((tool) => tool.name === 'fx__x_y').length, 1);
  assert.deepEqual(skipped.map(([name]) => name), ['fx__x_y']);
  assert.match(skipped[0][1], /"fx__x-y" and "fx__x_y" are both "fx__x_y" in the Agents SDK; "fx__x-y" is kept/);
  // The kept tool calls the server's `x-y`.
  const kept = tools.find((tool) => tool.name === 'fx__x_y');
  assert.equal(await kept.invoke({}, '{}', { toolCall: { callId: 'k' } }), 'called x-y');

  // Without onSkipped: one process warning naming the tool left out.
  const warnings = [];
  const onWarning = (warning) => warnings.push(warning);
  process.on('warning', onWarning);
  t.after(() => process.off('warning', onWarning));
  assert.equal(openaiAgentsTools(toolset).length, tools.length);
  await until(() => warnings.length > 0);
  assert.equal(warnings.length, 1);
  assert.equal(warnings[0].code, 'MCPFERRY_AGENTS_NAME_COLLISION');
  assert.match(warnings[0].message, /left out "fx__x_y"/);
});

test('a property named __proto__ survives the strict rewrite and the null stripping, and reaches the server', async (t) => {
  // As servers' JSON arrives: JSON.parse makes `__proto__` an own property.
  const schema = JSON.parse('{"type":"object","properties":{"__proto__":{"type":"string"},"note":{"type":"string"}},"required":["__proto__"]}');
  const conversion = toStrictSchema(schema);
  assert.equal(conversion.strict, true, conversion.reason);
  assert.ok(Object.hasOwn(conversion.schema.properties, '__proto__'), 'the property is kept');
  assert.equal(JSON.stringify(conversion.schema.properties), '{"__proto__":{"type":"string"},"note":{"type":["string","null"]}}');
  assert.deepEqual(conversion.schema.required, ['__proto__', 'note']);
  const stripped = stripRewrittenNulls(JSON.parse('{"__proto__":"x","note":null}'), conversion.rewrites);
  assert.equal(JSON.stringify(stripped), '{"__proto__":"x"}');
  assert.equal(Object.getPrototypeOf(stripped), Object.prototype, 'the argument did not become the prototype');

  const { toolset, received } = await fixtureToolset(t, [{ name: 'proto', description: 'Takes __proto__.', inputSchema: schema }]);
  const definition = openaiToolDefinitions(toolset, { api: 'responses' }).find((tool) => tool.name === 'fx__proto');
  assert.equal(definition.strict, true);
  assert.ok(Object.hasOwn(definition.parameters.properties, '__proto__'));
  const answer = await dispatchOpenAiToolCall(toolset, { type: 'function_call', call_id: 'p', name: 'fx__proto', arguments: '{"__proto__": "x", "note": null}' });
  assert.equal(answer.output, 'called proto');
  const call = received().find((m) => m.method === 'tools/call' && m.params.name === 'proto');
  assert.equal(JSON.stringify(call.params.arguments), '{"__proto__":"x"}');
});

test('a tool the disclosure budget left bare is not strict (its arguments are not known), so its arguments pass as sent', async (t) => {
  const { toolset, received } = await adaptersToolset(t, 'fx', { disclosure: { budget: 1 } });
  assert.deepEqual(toolset.tools.fx__book.inputSchema, { type: 'object' });
  const definitions = Object.fromEntries(openaiToolDefinitions(toolset, { api: 'responses' }).map((tool) => [tool.name, tool]));
  assert.equal(definitions.fx__book.strict, false);
  assert.deepEqual(definitions.fx__book.parameters, { type: 'object' });
  assert.equal(definitions.mcp__describe_tool.strict, true, 'the describe tool has a full schema');
  const answer = await dispatchOpenAiToolCall(toolset, { type: 'function_call', call_id: 'a', name: 'fx__book', arguments: JSON.stringify({ city: 'Braga', nights: 3 }) });
  assert.equal(answer.output, 'booked Braga');
  assert.deepEqual(received().find((r) => r.tool === 'book').args, { city: 'Braga', nights: 3 });
});
