// Hostile servers over stdio (fixtures/hostile.mjs): malformed and oversized catalogs, nesting bombs,
// undecodable and stray responses, floods of server requests. Each case asserts a typed error or the
// correct result, and that the server stays usable afterwards.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { mcpTools, MCP_DESCRIBE_TOOL } from '../../dist/index.js';
import { fixture, here } from '../helpers.mjs';

const HOSTILE = join(here, 'fixtures', 'hostile.mjs');

function hostile(name, env = {}) {
  return { name, type: 'stdio', command: process.execPath, args: [HOSTILE], env };
}

async function open(entries, opts = {}) {
  const diagnostics = [];
  const toolset = await mcpTools(entries, { onDiagnostic: (d) => diagnostics.push(d), ...opts });
  return { ...toolset, diagnostics };
}

/** Connect to one server, run `body` with the toolset, close it whatever happens. */
async function withServer(entry, opts, body) {
  const toolset = await open([entry], opts);
  try {
    await body(toolset);
  } finally {
    await toolset.close();
  }
}

const serverTools = (tools, server) => Object.values(tools).filter((t) => t.server === server);

test('one malformed tool is rejected alone: null name, 2 000-deep schema, mistyped field', async () => {
  await withServer(hostile('bad', { HOSTILE_CATALOG: 'malformed' }), {}, async ({ tools, diagnostics }) => {
    assert.equal(diagnostics.find((d) => d.code === 'server-degraded'), undefined, JSON.stringify(diagnostics));
    assert.equal(serverTools(tools, 'bad').length, 9, 'every well-formed tool is kept');
    const rejected = diagnostics.filter((d) => d.code === 'tool-rejected');
    assert.deepEqual(rejected.map((d) => d.tool), ['tool #9', 'deep_schema', 'numeric_description']);
    assert.match(rejected[0].message, /malformed.*null/);
    assert.match(rejected[1].message, /nested deeper than 100 levels/);
    assert.equal((await tools.bad__echo.execute({ text: 'still here' })).content[0].text, 'echo: still here');
  });
});

test('a tool whose inputSchema is not an object schema ({"type": "string"} and kin) is left out with tool-rejected', async () => {
  // Model providers refuse a function whose parameters are not an object schema: shown one such tool,
  // every model request of the agent would fail.
  const shapes = { stringy: { type: 'string' }, untyped: { properties: { q: { type: 'string' } } }, nullable: { type: ['object', 'null'] }, constant: { const: 'x' } };
  const server = fixture('shapes', { FIXTURE_EXTRA_TOOLS: JSON.stringify(Object.entries(shapes).map(([name, inputSchema]) => ({ name, description: `Takes ${name}.`, inputSchema }))) });
  await withServer(server.entry, {}, async ({ tools, diagnostics }) => {
    for (const name of Object.keys(shapes)) assert.equal(tools[`shapes__${name}`], undefined, `${name} is left out`);
    const rejected = diagnostics.filter((d) => d.code === 'tool-rejected');
    assert.deepEqual(rejected.map((d) => d.tool), Object.keys(shapes));
    for (const d of rejected) assert.match(d.message, /inputSchema is not an object schema \("type": "object"\)/);
    assert.match(rejected[0].message, /tool "stringy" of server "shapes" was left out: .*its root has "type": "string"$/);
    assert.match(rejected[1].message, /its root has no "type"$/);
    assert.equal((await tools.shapes__echo.execute({ text: 'still here' })).content[0].text, 'echo: still here');
  });
});

test('nesting bombs fail only their own call: deep error.data, a million-deep result', async () => {
  await withServer(hostile('deep'), {}, async ({ tools }) => {
    await assert.rejects(tools.deep__deep_error.execute({}), (e) => e.code === 'mcp_protocol_error' && /deep failure/.test(e.message));
    await assert.rejects(tools.deep__deep_result.execute({}), { code: 'mcp_result_too_deep' });
    assert.equal((await tools.deep__echo.execute({ text: 'after' })).content[0].text, 'echo: after');
  });
});

test('an undecodable response whose id is readable fails only that call: invalid UTF-8, truncated JSON', async () => {
  await withServer(hostile('garbled'), {}, async ({ tools, diagnostics }) => {
    await assert.rejects(tools.garbled__invalid_utf8.execute({}), { code: 'mcp_protocol_error' });
    await assert.rejects(tools.garbled__malformed.execute({}), { code: 'mcp_protocol_error' });
    assert.equal((await tools.garbled__echo.execute({ text: 'after' })).content[0].text, 'echo: after');
    assert.equal(diagnostics.find((d) => d.code === 'server-degraded'), undefined);
  });
});

test('responses to unknown ids and duplicates are ignored; the call completes once with the first', async () => {
  await withServer(hostile('stray'), {}, async ({ tools }) => {
    const result = await tools.stray__stray_ids.execute({});
    assert.equal(result.content[0].text, 'first answer');
    assert.equal((await tools.stray__echo.execute({ text: 'next' })).content[0].text, 'echo: next');
  });
});

test('a response after cancellation is ignored', async () => {
  await withServer(hostile('late'), {}, async ({ tools }) => {
    const controller = new AbortController();
    const pending = tools.late__late.execute({ ms: 200 }, { signal: controller.signal });
    setTimeout(() => controller.abort(), 20);
    await assert.rejects(pending, { code: 'mcp_aborted' });
    await new Promise((r) => setTimeout(r, 400));
    assert.equal((await tools.late__echo.execute({ text: 'next' })).content[0].text, 'echo: next');
  });
});

test('10 000 tools and a 1 MiB description: bounded, the rest rejected with a diagnostic, the server usable', { timeout: 120_000 }, async () => {
  await withServer(hostile('many', { HOSTILE_CATALOG: 'many' }), { maxResultBytes: 8 * 1024 * 1024 }, async ({ tools, diagnostics }) => {
    assert.equal(diagnostics.find((d) => d.code === 'server-degraded'), undefined);
    const rejected = diagnostics.filter((d) => d.code === 'tool-rejected');
    assert.deepEqual(rejected.map((d) => d.tool), ['huge_description', 'generated_9990']);
    assert.match(rejected[0].message, /description is longer than 65536 bytes/);
    assert.match(rejected[1].message, /more than 10000 tools/);
    // 9 fixed tools + the huge one (rejected) + 9 990 generated ones make the 10 000 entries read.
    assert.equal(serverTools(tools, 'many').length, 9_999);
    assert.equal((await tools.many__echo.execute({ text: 'usable' })).content[0].text, 'echo: usable');
  });
});

/** Connect to one server and report the longest stall of the event loop while connecting. */
async function connectMeasuringStalls(entry, opts) {
  const delay = monitorEventLoopDelay({ resolution: 5 });
  delay.enable();
  try {
    const toolset = await open([entry], opts);
    // The histogram records a stall when its next timer runs: let it run, or a stall just before open()
    // resolved (making the tool map) would go unmeasured.
    await new Promise((resolve) => setTimeout(resolve, 20));
    return { toolset, stalledMs: delay.max / 1e6 };
  } finally {
    delay.disable();
  }
}

test('a 2 MiB schema of 100 000 required properties projects without stalling the event loop', { timeout: 120_000 }, async () => {
  const opts = { maxResultBytes: 8 * 1024 * 1024 };
  // A stall is the longest the event loop waited, which includes any time another process held the core: on a
  // busy machine one connect can lose 150 ms to that alone. So the pair is measured up to three times and the
  // best pair counts; a stall the client causes (checking the schema here would stall for seconds) is in every one.
  const tries = [];
  for (let attempt = 0; attempt < 3; attempt++) {
    // The same bytes with one required name: what reading and parsing a 2 MiB frame costs by itself (the
    // stdio reader parses frames on this thread; in a debug build that alone is ~60 ms).
    const baseline = await connectMeasuringStalls(hostile('same', { HOSTILE_CATALOG: 'huge-schema', HOSTILE_REQUIRED: '0' }), opts);
    await baseline.toolset.close();
    const { toolset, stalledMs } = await connectMeasuringStalls(hostile('wide', { HOSTILE_CATALOG: 'huge-schema' }), opts);
    try {
      assert.equal(toolset.diagnostics.find((d) => d.code === 'server-degraded'), undefined);
      assert.ok(toolset.tools.wide__huge_schema, 'the tool is projected');
    } finally {
      await toolset.close();
    }
    tries.push(`${stalledMs.toFixed(1)} ms against ${baseline.stalledMs.toFixed(1)} ms`);
    // Relative to the baseline, not by a fixed margin: both read and parse 2 MiB on this thread, work that
    // grows with the machine's load (the wide schema itself is shown cut down by its disclosure tier).
    if (stalledMs < 3 * baseline.stalledMs + 100) return;
  }
  assert.fail(`longest stall, against the same bytes with nothing to check, in every try: ${tries.join('; ')}`);
});

test('$ref cycles are passed through, never followed', async () => {
  await withServer(hostile('refs', { HOSTILE_CATALOG: 'ref-cycles' }), {}, async ({ tools }) => {
    const cyclic = tools.refs__cyclic;
    assert.equal(cyclic.inputSchema.properties.self.$ref, '#');
    assert.equal(cyclic.inputSchema.$defs.a.$ref, '#/$defs/b');
    if (tools[MCP_DESCRIBE_TOOL]) {
      const described = await tools[MCP_DESCRIBE_TOOL].execute({ name: 'refs__cyclic' });
      assert.equal(described.structuredContent.inputSchema.$defs.node.properties.next.$ref, '#/$defs/node');
    }
  });
});

test('names that collide after sanitizing get distinct projected names', async () => {
  await withServer(hostile('c', { HOSTILE_CATALOG: 'colliding' }), {}, async ({ tools }) => {
    const colliding = ['a.b', 'a,b', 'a b', 'a_b', 'a/b', 'a__b', 'é', 'è'];
    const projected = serverTools(tools, 'c').filter((t) => colliding.includes(t.remoteName));
    assert.deepEqual(projected.map((t) => t.remoteName).sort(), [...colliding].sort());
    assert.equal(new Set(projected.map((t) => t.name)).size, colliding.length, projected.map((t) => t.name).join(' '));
    for (const tool of projected) {
      assert.match(tool.name, /^[a-zA-Z0-9_-]{1,64}$/);
      assert.equal(tools[tool.name], tool);
    }
  });
});

test('a flood of server requests with megabyte ids and methods is answered inline with small answers', { timeout: 60_000 }, async () => {
  await withServer(hostile('flood'), { maxResultBytes: 4 * 1024 * 1024 }, async ({ tools }) => {
    const count = 160;
    const sentBefore = (await tools.flood__stdin_bytes.execute({})).structuredContent.bytes;
    const result = await tools.flood__flood.execute({ count });
    assert.equal(result.content[0].text, 'flood done');
    // The answers were queued before this call, so the server has read them all when it answers it.
    const answered = (await tools.flood__stdin_bytes.execute({})).structuredContent.bytes - sentBefore;
    // 160 MiB of requests came in; echoing their ids and methods would send as much back. Pings with an
    // id no JSON-RPC client should echo get no answer; unknown methods a short error each.
    assert.ok(answered < (count / 2) * 512, `the client answered the flood with ${answered} bytes`);
    assert.equal((await tools.flood__echo.execute({ text: 'after' })).content[0].text, 'echo: after');
  });
});
