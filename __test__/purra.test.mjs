// mcpferry/purra: explicit read-only bindings of one server's tools, against real servers: the purra
// fixture (every kind of result and schema, 2025-11-25 over stdio), server-everything, the
// TypeScript SDK 2.x fixture and the official Python SDK 2.x servers (2026-07-28).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { connectMcpServer } from '../dist/index.js';
import { discoverMcpTools, McpAdapterError } from '../entry/purra.cjs';
import { EVERYTHING_BIN } from '../examples/servers/everything-http.mjs';
import { fixture, here, pythonSdk, scratchFile, until } from './helpers.mjs';
import { PY2, TS2, startPy2Http } from './eras-servers.mjs';
import { existsSync, readFileSync } from 'node:fs';

const PURRA = join(here, 'fixtures', 'purra-server.mjs');
const PY2_PURRA = join(here, 'fixtures', 'py2-purra.py');
const DIALECT = 'https://json-schema.org/draft/2020-12/schema';
const read = (title) => ({ mode: 'read', title });
const bind = (localName, extra = {}) => ({ localName, policy: read(localName), scope: null, ...extra });
const adapter = (code) => (error) => error instanceof McpAdapterError && error.code === code && error.message === 'MCP tool boundary rejected the operation';

/** The purra fixture over stdio, and what it received. */
async function purraServer(env = {}, options = {}) {
  const record = scratchFile('purra.jsonl');
  const client = await connectMcpServer(
    { name: 'docs', type: 'stdio', command: process.execPath, args: [PURRA], env: { PURRA_RECORD: record, ...env } },
    { timeoutMs: 10_000, warnings: false, ...options },
  );
  const received = () => (existsSync(record) ? readFileSync(record, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)) : []);
  const calls = (name) => received().filter((m) => m.method === 'tools/call' && (name === undefined || m.params.name === name));
  return { client, received, calls };
}

/** `purra.json-identity/v1`, written here from its description, to check the engine's digest. */
function identityDigest(value) {
  const hex = (bytes) => Buffer.from(bytes).toString('hex');
  const encode = (v) => {
    if (v === null) return 'n';
    if (typeof v === 'boolean') return v ? 't' : 'f';
    if (typeof v === 'number') {
      const b = Buffer.alloc(8);
      b.writeDoubleBE(v === 0 ? 0 : v);
      return 'd' + hex(b);
    }
    if (typeof v === 'string') return `s${Buffer.byteLength(v)}:${hex(Buffer.from(v))}`;
    if (Array.isArray(v)) return `a${v.length}:` + v.map(encode).join('');
    const keys = Object.keys(v).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    return `o${keys.length}:` + keys.map((k) => encode(k) + encode(v[k])).join('');
  };
  return createHash('sha256').update('purra.json-identity/v1\n' + encode(value)).digest('hex');
}

function deepFrozen(value) {
  return value === null || typeof value !== 'object' || (Object.isFrozen(value) && Object.values(value).every(deepFrozen));
}

test('the Bindings guide\'s example, adapted: a host-asserted read binding with a scope check', async () => {
  const { client, calls } = await purraServer();
  try {
    const catalog = await discoverMcpTools(client, 'documents', {
      'remote.search': {
        localName: 'search_documents',
        policy: { mode: 'read', title: 'Search documents' },
        scope: (args, context) => (context.runId ? undefined : 'Missing Run'),
        concurrencySafe: false,
      },
    });
    // Pass catalog.registrations as the agent's tools while the client stays connected.
    const [search] = catalog.registrations;
    assert.equal(search.name, 'search_documents');
    assert.equal(catalog.snapshot.entries[0].remoteName, 'remote.search');
    assert.equal(catalog.stale, false);
    assert.deepEqual(await search.run({ q: 'tls' }, {}), { content: { text: [], structured: null }, effectState: 'not_started', errorCode: 'mcp_scope_denied' });
    assert.equal(calls().length, 0, 'a denied scope sends nothing');
    assert.deepEqual(await search.run({ q: 'tls' }, { runId: 'run-1' }), {
      content: { text: ['found 2'], structured: { hits: ['tls-1', 'tls-2'] } },
      effectState: 'not_started',
    });
    assert.equal(await search.scope({ q: 'tls' }, {}), 'Missing Run');
  } finally {
    await client.close();
  }
});

test('discovery: an immutable snapshot of the bound tools only, sorted, with the documented digest', async (t) => {
  const { client } = await purraServer();
  t.after(() => client.close());
  const bindings = {
    search: bind('zeta_search', { concurrencySafe: true, policy: { mode: 'read', title: '  Search  ', riskLevel: 'read' } }),
    lookup: bind('alpha_lookup'),
    optional_tasks: bind('mid_tasks'),
  };
  const catalog = await discoverMcpTools(client, 'docs-1', bindings);
  const { snapshot } = catalog;

  await t.test('fields, order and the kept root dialect', () => {
    assert.deepEqual(Object.keys(snapshot).sort(), ['entries', 'protocolVersion', 'revisionDigest', 'schemaVersion', 'serverId']);
    assert.equal(snapshot.schemaVersion, 1);
    assert.equal(snapshot.serverId, 'docs-1');
    assert.equal(snapshot.protocolVersion, client.protocolVersion);
    assert.deepEqual(snapshot.entries.map((e) => e.localName), ['alpha_lookup', 'mid_tasks', 'zeta_search']);
    const search = snapshot.entries[2];
    assert.deepEqual(search.policy, { mode: 'read', title: 'Search', riskLevel: 'read' });
    assert.equal(search.concurrencySafe, true);
    assert.equal(snapshot.entries[0].concurrencySafe, false);
    assert.equal(search.inputSchema.$schema, DIALECT, 'the root 2020-12 declaration is kept');
    assert.equal(search.outputSchema.required[0], 'hits');
    assert.equal(snapshot.entries[0].outputSchema, null);
    assert.equal(search.description, 'Search the documents.');
    assert.deepEqual(catalog.registrations.map((r) => [r.name, r.concurrencySafe, r.policy.mode]), [
      ['alpha_lookup', false, 'read'],
      ['mid_tasks', false, 'read'],
      ['zeta_search', true, 'read'],
    ]);
  });

  await t.test('the revision digest is purra.json-identity/v1 over everything but itself', () => {
    const { revisionDigest, ...identity } = snapshot;
    assert.match(revisionDigest, /^[0-9a-f]{64}$/);
    assert.equal(revisionDigest, identityDigest(JSON.parse(JSON.stringify(identity))));
  });

  await t.test('immutable: snapshot, entries, schemas and registrations are frozen', () => {
    assert.ok(deepFrozen(snapshot));
    assert.ok(Object.isFrozen(catalog) && Object.isFrozen(catalog.registrations) && catalog.registrations.every(Object.isFrozen));
    assert.throws(() => {
      snapshot.entries[0].inputSchema.type = 'array';
    }, TypeError);
    // The host's bindings object changing afterwards changes nothing.
    bindings.lookup.localName = 'renamed';
    bindings.lookup.policy.mode = 'write';
    assert.equal(catalog.registrations[0].name, 'alpha_lookup');
  });

  await t.test('the same discovery gives the same digest; another server id another', async () => {
    const again = await discoverMcpTools(client, 'docs-1', { search: bind('zeta_search', { concurrencySafe: true, policy: read('Search') }), lookup: bind('alpha_lookup'), optional_tasks: bind('mid_tasks') });
    assert.equal(again.snapshot.revisionDigest, snapshot.revisionDigest);
    const other = await discoverMcpTools(client, 'docs-2', { search: bind('zeta_search', { concurrencySafe: true, policy: read('Search') }), lookup: bind('alpha_lookup'), optional_tasks: bind('mid_tasks') });
    assert.notEqual(other.snapshot.revisionDigest, snapshot.revisionDigest);
  });

  await t.test('remote annotations grant nothing: an unbound "read-only" tool is not exposed', async () => {
    assert.ok(!catalog.registrations.some((r) => r.name.includes('delete')));
    const only = await discoverMcpTools(client, 'docs', { lookup: bind('lookup') });
    assert.deepEqual(only.registrations.map((r) => r.name), ['lookup']);
  });
});

test('bindings, options and clients that are not valid are refused before any listing', async () => {
  const { client, received } = await purraServer();
  try {
    const listed = () => received().filter((m) => m.method === 'tools/list').length;
    const before = listed();
    const cases = [
      [client, 'bad id!', { lookup: bind('lookup') }],
      [client, 'docs', {}],
      [client, 'docs', null],
      [client, 'docs', { lookup: bind('1starts_with_digit') }],
      [client, 'docs', { lookup: bind('has-dash') }],
      [client, 'docs', { lookup: { localName: 'lookup', policy: read('x') } }],
      [client, 'docs', { lookup: bind('lookup', { policy: { mode: 'write', title: 'x' } }) }],
      [client, 'docs', { lookup: bind('lookup', { policy: { mode: 'read', title: 'x', riskLevel: 'write' } }) }],
      [client, 'docs', { lookup: bind('lookup', { policy: { mode: 'read', title: '  ' } }) }],
      [client, 'docs', { lookup: bind('lookup', { concurrencySafe: 'yes' }) }],
      [client, 'docs', { 'bad name!': bind('lookup') }],
      [{ callTool: async () => ({ content: [] }), protocolVersion: '2025-11-25' }, 'docs', { lookup: bind('lookup') }],
    ];
    for (const [c, id, bindings] of cases) await assert.rejects(discoverMcpTools(c, id, bindings), adapter('mcp_binding_invalid'), JSON.stringify([id, bindings]));
    await assert.rejects(discoverMcpTools(client, 'docs', { lookup: bind('same'), search: bind('same') }), adapter('mcp_name_conflict'));
    for (const limits of [{ maxTools: 257 }, { timeoutMs: 300_001 }, { maxPages: 0 }, { maxPagez: 3 }, { maxResultBytes: 1.5 }, { maxTools: '3' }]) {
      await assert.rejects(discoverMcpTools(client, 'docs', { lookup: bind('lookup') }, { limits }), adapter('mcp_binding_invalid'), JSON.stringify(limits));
    }
    assert.equal(listed(), before, 'nothing was listed for any of them');
    // Raising the timeout up to its cap is allowed.
    await discoverMcpTools(client, 'docs', { lookup: bind('lookup') }, { limits: { timeoutMs: 300_000 } });
    await assert.rejects(discoverMcpTools(client, 'docs', { lookup: bind('lookup'), nowhere: bind('nowhere') }), adapter('mcp_binding_missing'));
  } finally {
    await client.close();
  }
});

test('limits: pages, tools, catalogue bytes, descriptions and schema bytes fail discovery; pagination is checked', async (t) => {
  const lookup = { lookup: bind('lookup') };
  await t.test('within the defaults a paged listing is followed', async () => {
    const { client, received } = await purraServer({ PURRA_PAGE_SIZE: '4' });
    try {
      await discoverMcpTools(client, 'docs', lookup);
      const pages = received().filter((m) => m.method === 'tools/list');
      assert.ok(pages.some((m) => m.params?.cursor), 'cursors were followed');
      await assert.rejects(discoverMcpTools(client, 'docs', lookup, { limits: { maxPages: 2 } }), adapter('mcp_catalog_limit_exceeded'));
    } finally {
      await client.close();
    }
  });
  await t.test('tools, bytes, descriptions, schemas', async () => {
    const { client } = await purraServer({ PURRA_FILLER: '300', PURRA_DESCRIPTION: 'd'.repeat(9000) });
    try {
      // 325 tools: over the default maxTools of 256, bound or not.
      await assert.rejects(discoverMcpTools(client, 'docs', { search: bind('search') }), adapter('mcp_catalog_limit_exceeded'));
    } finally {
      await client.close();
    }
    const small = await purraServer({ PURRA_DESCRIPTION: 'd'.repeat(9000) });
    try {
      await assert.rejects(discoverMcpTools(small.client, 'docs', lookup), adapter('mcp_catalog_limit_exceeded'), 'a description over 8 KiB');
      await discoverMcpTools(small.client, 'docs', { search: bind('search') });
      await assert.rejects(discoverMcpTools(small.client, 'docs', { search: bind('search') }, { limits: { maxCatalogBytes: 2000 } }), adapter('mcp_catalog_limit_exceeded'));
      await assert.rejects(discoverMcpTools(small.client, 'docs', { search: bind('search') }, { limits: { maxTools: 10 } }), adapter('mcp_catalog_limit_exceeded'));
      await assert.rejects(discoverMcpTools(small.client, 'docs', { search: bind('search') }, { limits: { maxSchemaBytes: 100 } }), adapter('mcp_schema_unsupported'));
      await discoverMcpTools(small.client, 'docs', { search: bind('search') }, { limits: { maxDescriptionBytes: 100 } });
    } finally {
      await small.client.close();
    }
  });
  for (const [mode, code] of [['repeat-cursor', 'mcp_pagination_invalid'], ['duplicate', 'mcp_name_conflict'], ['no-tools', 'mcp_tools_unavailable']]) {
    await t.test(`${mode} → ${code}`, async () => {
      const { client } = await purraServer({ PURRA_MODE: mode });
      try {
        await assert.rejects(discoverMcpTools(client, 'docs', mode === 'repeat-cursor' ? { 'remote.search': bind('s') } : lookup), adapter(code));
      } finally {
        await client.close();
      }
    });
  }
});

test('a negotiated version without structured results is refused: mcp_protocol_unsupported', async () => {
  const { entry } = fixture('old', { FIXTURE_VERSION: '2025-03-26' });
  const client = await connectMcpServer(entry);
  try {
    assert.equal(client.protocolVersion, '2025-03-26');
    await assert.rejects(discoverMcpTools(client, 'old', { echo: bind('echo') }), adapter('mcp_protocol_unsupported'));
  } finally {
    await client.close();
  }
});

test('the strict schema profile: unsupported schemas fail discovery of a selected tool, never stripped', async () => {
  const { client, calls } = await purraServer();
  try {
    for (const tool of ['defaulted', 'referenced', 'nested_dialect', 'draft7', 'vendor', 'format']) {
      await assert.rejects(discoverMcpTools(client, 'docs', { [tool]: bind('tool'), lookup: bind('lookup') }), adapter('mcp_schema_unsupported'), tool);
    }
    await assert.rejects(discoverMcpTools(client, 'docs', { tasks: bind('tasks') }), adapter('mcp_tool_unsupported'));
    // Unselected unsupported tools do not matter.
    const catalog = await discoverMcpTools(client, 'docs', { lookup: bind('lookup'), optional_tasks: bind('optional_tasks') });
    assert.equal(catalog.registrations.length, 2);
    assert.equal(calls().length, 0);
  } finally {
    await client.close();
  }
});

test('execution: validation without coercion, the envelope, fail-closed results, no remote text', async (t) => {
  const { client, calls, received } = await purraServer();
  t.after(() => client.close());
  const names = ['search', 'lookup', 'json_text', 'bad_structured', 'image', 'audio', 'resource', 'link', 'fail', 'rpc_error', 'many_blocks', 'big', 'slow'];
  const catalog = await discoverMcpTools(client, 'docs', Object.fromEntries(names.map((n) => [n, bind(n)])));
  const tool = Object.fromEntries(catalog.registrations.map((r) => [r.name, r]));
  const failedWith = (errorCode) => ({ content: { text: [], structured: null }, effectState: 'not_started', errorCode });

  await t.test('arguments are validated as given, and nothing is sent when they fail', async () => {
    const before = calls().length;
    for (const args of [{ q: 'x', limit: '2' }, { q: 'x', limit: 2.5 }, {}, { q: '' }, { q: 'x', extra: true }, [], null, 'q', { q: 'x', f: () => 1 }, { q: 'x', n: NaN }, { q: 'x', d: new Date() }]) {
      assert.deepEqual(await tool.search.run(args), failedWith('mcp_invalid_arguments'), String(JSON.stringify(args)));
    }
    assert.deepEqual(await tool.lookup.run({ key: 'k'.repeat(70_000) }), failedWith('mcp_invalid_arguments'), 'arguments over maxResultBytes');
    assert.equal(calls().length, before);
  });

  await t.test('success: text blocks and structured content', async () => {
    assert.deepEqual(await tool.search.run({ q: 'x', limit: 1 }), { content: { text: ['found 1'], structured: { hits: ['x-1'] } }, effectState: 'not_started' });
    assert.deepEqual(await tool.lookup.run({ key: 'k' }), { content: { text: ['value of k', 'second block'], structured: null }, effectState: 'not_started' });
  });

  await t.test('an output schema needs valid structuredContent: JSON-looking text does not count', async () => {
    assert.deepEqual(await tool.json_text.run({}), failedWith('mcp_result_invalid'));
    assert.deepEqual(await tool.bad_structured.run({}), failedWith('mcp_result_invalid'));
  });

  await t.test('media, resources and links fail closed', async () => {
    for (const name of ['image', 'audio', 'resource', 'link']) assert.deepEqual(await tool[name].run({}), failedWith('mcp_result_unsupported'), name);
  });

  await t.test('isError and JSON-RPC errors give a code only: no remote text reaches the model', async () => {
    for (const [name, code] of [['fail', 'mcp_tool_error'], ['rpc_error', 'mcp_protocol_error']]) {
      const result = await tool[name].run({});
      assert.deepEqual(result, failedWith(code), name);
      assert.doesNotMatch(JSON.stringify(result), /SECRET|abc123/);
    }
  });

  await t.test('no retries: one failed call is one request', async () => {
    assert.equal(calls('rpc_error').length, 1);
    assert.equal(calls('fail').length, 1);
  });

  await t.test('size: too many blocks, too many bytes', async () => {
    assert.deepEqual(await tool.many_blocks.run({}), failedWith('mcp_result_too_large'));
    assert.deepEqual(await tool.big.run({}), failedWith('mcp_result_too_large'));
    const tight = await discoverMcpTools(client, 'docs', { lookup: bind('lookup') }, { limits: { maxContentBlocks: 1 } });
    assert.deepEqual(await tight.registrations[0].run({ key: 'k' }), failedWith('mcp_result_too_large'));
  });

  await t.test('the timeout ends the wait with mcp_timeout; the server is told to cancel', async () => {
    const quick = await discoverMcpTools(client, 'docs', { slow: bind('slow') }, { limits: { timeoutMs: 200 } });
    assert.deepEqual(await quick.registrations[0].run({ ms: 10_000 }), failedWith('mcp_timeout'));
    const slowId = received().findLast((m) => m.method === 'tools/call' && m.params.name === 'slow').id;
    await until(() => received().some((m) => m.method === 'notifications/cancelled' && m.params.requestId === slowId));
  });

  await t.test("the caller's signal stops the wait (thrown, not an envelope)", async () => {
    const controller = new AbortController();
    const pending = tool.slow.run({ ms: 10_000 }, { signal: controller.signal });
    await until(() => calls('slow').length === 2);
    controller.abort();
    await assert.rejects(pending, adapter('mcp_aborted'));
    const aborted = new AbortController();
    aborted.abort();
    await assert.rejects(tool.lookup.run({ key: 'k' }, { signal: aborted.signal }), adapter('mcp_aborted'));
  });
});

test('after a list change old registrations answer mcp_catalog_stale without I/O; no implicit rediscovery', async () => {
  const { client, received, calls } = await purraServer();
  try {
    const catalog = await discoverMcpTools(client, 'docs', { lookup: bind('lookup') });
    const [lookup] = catalog.registrations;
    assert.equal((await lookup.run({ key: 'k' })).content.text[0], 'value of k');
    // The host (not a registration) calls a tool that changes the list and announces it.
    await client.callTool({ name: 'mutate', arguments: {} });
    await until(() => catalog.stale);
    // Let the engine's own refresh (a tools/list after the announcement) land before counting.
    const mutateAt = received().findIndex((m) => m.method === 'tools/call' && m.params.name === 'mutate');
    await until(() => received().slice(mutateAt).some((m) => m.method === 'tools/list'));
    const before = received().length;
    const stale = await lookup.run({ key: 'k' });
    assert.deepEqual(stale, { content: { text: [], structured: null }, effectState: 'not_started', errorCode: 'mcp_catalog_stale' });
    await assert.rejects(lookup.scope({ key: 'k' }, {}), adapter('mcp_catalog_stale'));
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(received().length, before, 'the server received nothing');
    assert.equal(calls('lookup').length, 1);
    // No implicit rediscovery: the old catalog stays what it was; a new discovery sees the change.
    assert.equal(catalog.snapshot.entries[0].description, 'Look a key up.');
    const fresh = await discoverMcpTools(client, 'docs', { lookup: bind('lookup') });
    assert.equal(fresh.snapshot.entries[0].description, 'Look a key up (changed).');
    assert.notEqual(fresh.snapshot.revisionDigest, catalog.snapshot.revisionDigest);
    assert.equal((await fresh.registrations[0].run({ key: 'k' })).content.text[0], 'value of k');
    // A closed client: registrations answer mcp_connection_closed, discovery refuses.
    await client.close();
    assert.equal(fresh.stale, true);
    assert.equal((await fresh.registrations[0].run({ key: 'k' })).errorCode, 'mcp_connection_closed');
    await assert.rejects(discoverMcpTools(client, 'docs', { lookup: bind('lookup') }), adapter('mcp_connection_closed'));
  } finally {
    await client.close();
  }
});

/** The client's one server, once `predicate` holds of its `servers()` entry. */
const untilServer = (client, predicate) => until(() => predicate(client.servers()[0]) && client.servers()[0], { timeoutMs: 15_000 });

test('a server that dies mid-call: mcp_transport_error, then the catalogue is stale: no call waits for the recovery or reaches what came back', async () => {
  const { client, calls } = await purraServer({}, { reconnect: { initialDelayMs: 100 } });
  try {
    const catalog = await discoverMcpTools(client, 'docs', { crash: bind('crash'), lookup: bind('lookup') });
    const [crash, lookup] = catalog.registrations;
    assert.equal((await crash.run({})).errorCode, 'mcp_transport_error');
    // Made at once: refused without waiting for the recovery (stale once the engine has seen the loss;
    // before that, it fails on the dead connection like the call in flight).
    const during = (await lookup.run({ key: 'k' })).errorCode;
    assert.ok(['mcp_catalog_stale', 'mcp_transport_error'].includes(during), during);
    await until(() => catalog.stale);
    await untilServer(client, (s) => s.state === 'live' && s.restarts === 1);
    assert.equal((await lookup.run({ key: 'k' })).errorCode, 'mcp_catalog_stale');
    assert.deepEqual(calls('lookup'), [], 'no lookup reached either process');
  } finally {
    await client.close();
  }
});

test('a server killed by pid and started again: the catalogue bound before is stale, and nothing reaches the new process for it', async () => {
  const pids = scratchFile('purra.pids');
  const { client, received, calls } = await purraServer({ PURRA_PIDS: pids }, { reconnect: { initialDelayMs: 100 } });
  const started = () => readFileSync(pids, 'utf8').split('\n').filter(Boolean).map(Number);
  try {
    const catalog = await discoverMcpTools(client, 'docs', { lookup: bind('lookup') });
    const [lookup] = catalog.registrations;
    assert.equal((await lookup.run({ key: 'k' })).content.text[0], 'value of k');
    const [first] = started();
    process.kill(first, 'SIGKILL');
    await untilServer(client, (s) => s.state === 'live' && s.restarts === 1);
    const [, second, ...more] = started();
    assert.ok(second && second !== first && more.length === 0, `started once more: ${started()}`);
    assert.equal(catalog.stale, true);
    assert.deepEqual(await lookup.run({ key: 'k' }), { content: { text: [], structured: null }, effectState: 'not_started', errorCode: 'mcp_catalog_stale' });
    await assert.rejects(lookup.scope({ key: 'k' }, {}), adapter('mcp_catalog_stale'));
    // The killed process never writes again: what follows its successor's initialize is the new process's.
    const fromNew = () => received().slice(received().findLastIndex((m) => m.method === 'initialize'));
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(fromNew().filter((m) => m.method === 'tools/call'), [], 'nothing reached the new process');
    assert.equal(calls('lookup').length, 1, 'the one call, made before the kill');
    // Discovering again binds what came back (listed and vetted like a first connect).
    const fresh = await discoverMcpTools(client, 'docs', { lookup: bind('lookup') });
    assert.equal(fresh.stale, false);
    assert.equal((await fresh.registrations[0].run({ key: 'k' })).content.text[0], 'value of k');
    assert.equal(fromNew().filter((m) => m.method === 'tools/call').length, 1);
  } finally {
    await client.close();
  }
});

test('real servers: server-everything, TypeScript SDK 2.x and Python SDK 2.x (stdio and Streamable HTTP; both eras)', async (t) => {
  await t.test('server-everything (2025-11-25) declares draft-07 schemas: another dialect, refused', async () => {
    const client = await connectMcpServer({ name: 'everything', type: 'stdio', command: process.execPath, args: [EVERYTHING_BIN, 'stdio'] });
    try {
      await assert.rejects(discoverMcpTools(client, 'everything', { echo: bind('echo') }), adapter('mcp_schema_unsupported'));
      await assert.rejects(discoverMcpTools(client, 'everything', { 'get-structured-content': bind('weather') }), adapter('mcp_schema_unsupported'));
    } finally {
      await client.close();
    }
  });

  await t.test('TypeScript SDK 2.x (2026-07-28): a plain tool binds; an x-mcp-header keyword is outside the profile', async () => {
    const client = await connectMcpServer({ name: 'ts2', type: 'stdio', command: process.execPath, args: [TS2, 'stdio'] });
    try {
      const catalog = await discoverMcpTools(client, 'ts2', { echo: bind('echo') });
      assert.equal(catalog.snapshot.protocolVersion, '2026-07-28');
      assert.deepEqual(await catalog.registrations[0].run({ text: 'modern' }), { content: { text: ['echo: modern'], structured: null }, effectState: 'not_started' });
      assert.equal((await catalog.registrations[0].run({ text: 5 })).errorCode, 'mcp_invalid_arguments');
      await assert.rejects(discoverMcpTools(client, 'ts2', { region: bind('region') }), adapter('mcp_schema_unsupported'));
      // The 2026-07-28 list change (a subscription) makes the catalog stale too.
      await client.callTool({ name: 'add_tool', arguments: {} });
      await until(() => catalog.stale, { timeoutMs: 10_000 });
      assert.equal((await catalog.registrations[0].run({ text: 'x' })).errorCode, 'mcp_catalog_stale');
    } finally {
      await client.close();
    }
  });

  const py = pythonSdk();
  await t.test('Python SDK 2.x: generated output schemas bind and validate; a default is refused; errors stay remote', { skip: py.skip }, async () => {
    const http = await startPy2Http(py.python);
    t.after(() => http.stop());
    for (const [entry, era] of [
      [{ name: 'py', type: 'stdio', command: py.python, args: [PY2_PURRA, 'stdio'] }, '2026-07-28'],
      [{ name: 'py2', type: 'stdio', command: py.python, args: [PY2, 'stdio'] }, '2026-07-28'],
      [{ name: 'py2h', type: 'streamable-http', url: http.url }, '2026-07-28'],
    ]) {
      const client = await connectMcpServer(entry, { timeoutMs: 15_000 });
      try {
        const catalog = await discoverMcpTools(client, 'py', { echo: bind('echo') });
        assert.equal(catalog.snapshot.protocolVersion, era);
        assert.equal(catalog.snapshot.entries[0].outputSchema.properties.result.type, 'string');
        assert.deepEqual(await catalog.registrations[0].run({ text: 'hi' }), {
          content: { text: ['echo: hi'], structured: { result: 'echo: hi' } },
          effectState: 'not_started',
        });
        if (entry.name === 'py') {
          await assert.rejects(discoverMcpTools(client, 'py', { search: bind('search') }), adapter('mcp_schema_unsupported'));
          const explode = (await discoverMcpTools(client, 'py', { explode: bind('explode') })).registrations[0];
          const result = await explode.run({});
          assert.equal(result.errorCode, 'mcp_tool_error');
          assert.doesNotMatch(JSON.stringify(result), /SECRET|hunter2/);
        }
      } finally {
        await client.close();
      }
    }
  });
});
