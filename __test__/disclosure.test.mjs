// The disclosure budget: tiers per server, mcp__describe_tool, mcp__search_tools, and
// composeMcpSystemPrompt — on catalogs of 10, 500 and 2 000 tools.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  composeMcpSystemPrompt,
  DEFAULT_DISCLOSURE_BUDGET_TOKENS,
  estimateTokens,
  MCP_DESCRIBE_TOOL,
  MCP_SEARCH_TOOLS,
  mcpTools,
} from '../dist/index.js';
import { makeCatalog } from './fixtures/catalog.mjs';
import { fixture, here } from './helpers.mjs';

const queries = JSON.parse(readFileSync(join(here, 'fixtures', 'search-queries.json'), 'utf8'));

async function open(count, opts = {}) {
  const server = fixture('cat', { FIXTURE_CATALOG: String(count) });
  const diagnostics = [];
  const toolset = await mcpTools([server.entry], { onDiagnostic: (d) => diagnostics.push(d), ...opts });
  return { ...toolset, diagnostics, server };
}

const remoteTools = (tools) => Object.values(tools).filter((t) => t.server !== 'mcpferry');
const schemaBulk = (tools) => remoteTools(tools).reduce((n, t) => n + estimateTokens(JSON.stringify(t.inputSchema)), 0);

test('exports: the estimate is four UTF-16 units per token, rounded up, and the constants are the spec names', () => {
  assert.equal(DEFAULT_DISCLOSURE_BUDGET_TOKENS, 20_000);
  assert.equal(MCP_DESCRIBE_TOOL, 'mcp__describe_tool');
  assert.equal(MCP_SEARCH_TOOLS, 'mcp__search_tools');
  assert.equal(estimateTokens(''), 0);
  assert.equal(estimateTokens('abcd'), 1);
  assert.equal(estimateTokens('abcde'), 2);
  assert.equal(estimateTokens('😀😀'), 1); // two surrogate pairs: four code units
});

test('10 tools fit: full schemas, no describe or search tool', async () => {
  const { tools, close } = await open(10);
  await close();
  const catalog = makeCatalog(10);
  assert.equal(remoteTools(tools).length, 10);
  assert.equal(tools[MCP_DESCRIBE_TOOL], undefined);
  for (const tool of catalog) assert.deepEqual(tools[`cat__${tool.name}`].inputSchema, tool.inputSchema);
});

test('a tool shows its fields in one order whether its texts are shared (full) or its own (deferred), its schema frozen', async () => {
  const full = await open(10);
  const deferred = await open(500);
  await Promise.all([full.close(), deferred.close()]);
  const order = ['name', 'description', 'inputSchema', 'server', 'remoteName', 'execute'];
  for (const tools of [full.tools, deferred.tools]) {
    for (const tool of remoteTools(tools)) {
      assert.deepEqual(Object.keys(tool), order, tool.name);
      assert.ok(Object.isFrozen(tool.inputSchema), tool.name);
      assert.ok(Object.values(tool.inputSchema.properties ?? {}).every(Object.isFrozen), tool.name);
    }
  }
  // The 500 tools' schemas were cut down (so their texts travelled inline, not shared): properties keep only `type`.
  const properties = remoteTools(deferred.tools).flatMap((t) => Object.values(t.inputSchema.properties ?? {}));
  assert.ok(properties.length > 0 && properties.every((p) => Object.keys(p).every((k) => k === 'type')));
});

test('500 tools: deferred schemas keep every parameter name within the budget; describe answers from cache', async () => {
  const { tools, close, diagnostics, server } = await open(500);
  const catalog = makeCatalog(500);
  assert.ok(tools[MCP_DESCRIBE_TOOL] && tools[MCP_SEARCH_TOOLS]);
  assert.ok(schemaBulk(tools) <= DEFAULT_DISCLOSURE_BUDGET_TOKENS, `bulk ${schemaBulk(tools)}`);
  for (const tool of catalog) {
    const projected = tools[`cat__${tool.name}`];
    assert.equal(projected.description, tool.description, 'the catalog floor stays');
    assert.deepEqual(Object.keys(projected.inputSchema.properties ?? {}).sort(), Object.keys(tool.inputSchema.properties ?? {}).sort());
    assert.deepEqual(projected.inputSchema.required ?? [], (tool.inputSchema.required ?? []).filter((n) => n in tool.inputSchema.properties));
    for (const property of Object.values(projected.inputSchema.properties ?? {})) {
      assert.deepEqual(Object.keys(property).filter((k) => k !== 'type'), [], 'descriptions, enums, formats and bodies shed');
    }
  }
  const sample = catalog.find((t) => Object.values(t.inputSchema.properties).some((p) => p.enum || p.description));
  const before = server.received().length;
  const described = await tools[MCP_DESCRIBE_TOOL].execute({ name: `cat__${sample.name}` });
  assert.deepEqual(described.structuredContent.inputSchema, sample.inputSchema);
  assert.equal(described.structuredContent.description, sample.description);
  assert.equal(server.received().length, before, 'no network round trip');
  await assert.rejects(tools[MCP_DESCRIBE_TOOL].execute({ name: 'cat__nope' }), { code: 'mcp_tool_error', message: /no MCP tool named/ });

  // A model-facing call built from the deferred schema carries every parameter name to the server.
  const target = catalog[3];
  // Values of the types (and enums) the full schema asks for: arguments are validated before they are sent.
  const valueFor = (p) => p.enum?.[0] ?? { integer: 1, number: 1, boolean: true, array: [], object: {} }[p.type] ?? 'v';
  const args = Object.fromEntries(Object.keys(tools[`cat__${target.name}`].inputSchema.properties).map((k) => [k, valueFor(target.inputSchema.properties[k])]));
  await tools[`cat__${target.name}`].execute(args);
  const call = server.received().find((m) => m.method === 'tools/call');
  assert.deepEqual(Object.keys(call.params.arguments).sort(), Object.keys(target.inputSchema.properties).sort());
  assert.deepEqual(diagnostics.filter((d) => d.code === 'disclosure-budget-exceeded'), []);
  await close();
});

test('2 000 tools: the floor exceeds the budget; bare schemas, names and descriptions kept, a diagnostic says how to narrow', async () => {
  const { tools, close, diagnostics } = await open(2000);
  await close();
  assert.equal(remoteTools(tools).length, 2000);
  for (const tool of remoteTools(tools)) {
    assert.deepEqual(tool.inputSchema, { type: 'object' });
    assert.ok(tool.description.length > 0);
    assert.match(tool.name, /^cat__/);
  }
  const exceeded = diagnostics.find((d) => d.code === 'disclosure-budget-exceeded');
  assert.equal(exceeded.toolCount, 2000);
  assert.ok(exceeded.floorTokens > DEFAULT_DISCLOSURE_BUDGET_TOKENS);
  assert.match(exceeded.message, /tools filter/);
});

test('alwaysLoad and a larger budget keep full schemas; auto is 10% of the context window', async () => {
  const always = await open(500, { disclosure: { alwaysLoad: ['cat'] } });
  await always.close();
  assert.equal(always.tools[MCP_DESCRIBE_TOOL], undefined);
  assert.ok(Object.values(always.tools).some((t) => JSON.stringify(t.inputSchema).includes('"description"')));
  const auto = await open(500, { disclosure: { budget: 'auto' }, contextWindowTokens: 2_000_000 });
  await auto.close();
  assert.equal(auto.tools[MCP_DESCRIBE_TOOL], undefined, '200k tokens fit 500 full tools');
  const tight = await open(10, { disclosure: { budget: 50 } });
  await tight.close();
  assert.ok(tight.tools[MCP_DESCRIBE_TOOL], 'a tiny budget defers even 10 tools');
});

test('mcp__search_tools ranks the right tool in the top 5 for paraphrased queries over 2 000 tools', async () => {
  const { tools, close } = await open(2000);
  let top5 = 0;
  const misses = [];
  for (const { query, expected } of queries) {
    const result = await tools[MCP_SEARCH_TOOLS].execute({ query });
    const names = result.structuredContent.matches.map((m) => m.name);
    assert.ok(names.length <= 5);
    if (names.includes(`cat__${expected}`)) top5++;
    else misses.push(query);
  }
  await close();
  assert.ok(queries.length >= 20);
  // Lexical search (generic verb synonyms only): a paraphrase sharing no word with its tool can miss. 30 of 40 is the bar.
  assert.ok(top5 >= 30, `${top5}/${queries.length} in the top 5; missed: ${misses.join(' | ')}`);
});

test('composeMcpSystemPrompt names servers, deferred ones and the helper tools, never server instructions', async () => {
  const big = fixture('big', { FIXTURE_CATALOG: '500' });
  const small = fixture('small');
  const down = { name: 'down', type: 'stdio', command: 'no-such-binary-for-prompt' };
  const toolset = await mcpTools([big.entry, small.entry, down]);
  const prompt = composeMcpSystemPrompt(toolset);
  await toolset.close();
  assert.match(prompt, /`big`: 500 tools, schemas abbreviated/);
  assert.match(prompt, /`small`: 14 tools/);
  assert.match(prompt, /Unavailable: `down`/);
  assert.match(prompt, /mcp__describe_tool/);
  assert.match(prompt, /mcp__search_tools/);
  assert.doesNotMatch(prompt, /IGNORE ALL PREVIOUS/);
  assert.throws(() => composeMcpSystemPrompt({ tools: {} }), { code: 'mcp_config_invalid' });
});
