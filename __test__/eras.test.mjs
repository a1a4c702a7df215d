// Dual-era interop: one mcpTools call over real servers of both protocol eras, over stdio and
// Streamable HTTP. 2026-07-28 (stateless): the official TypeScript SDK 2.x server
// (@modelcontextprotocol/server, fixtures/ts2-server.mjs) and the Python SDK 2.x (`mcp` 2.3.0 from
// PyPI, fixtures/py2-server.py, installed into a venv cached under node_modules/.cache/mcpferry/py;
// skipped with the reason when python3 or the install is unavailable). 2025-11-25 (sessions):
// server-everything, and a TypeScript 2.x instance wired by hand to stdio (legacy only).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mcpTools } from '../dist/index.js';
import { EVERYTHING_BIN, startEverythingHttp } from '../examples/servers/everything-http.mjs';
import { pythonSdk, until } from './helpers.mjs';
import { PY2, TS2, startPy2Http, startTs2Http } from './eras-servers.mjs';

const MODERN = '2026-07-28';
const stdioEntry = (name, command, args) => ({ name, type: 'stdio', command, args });
const httpEntry = (name, url) => ({ name, type: 'streamable-http', url });
function textOf(result) {
  assert.ok(Array.isArray(result?.content), `a result without content: ${JSON.stringify(result)?.slice(0, 300)}`);
  return result.content.map((c) => c.text).join('');
}

test('one mcpTools call over both eras: TypeScript 2.x, Python 2.x, server-everything, stdio and HTTP', async (t) => {
  const py = pythonSdk();
  if (py.skip) console.log(`# skipped the Python SDK servers: ${py.skip}`);
  // The toolset closes first, then the servers stop (they would otherwise wait on its open streams).
  const stops = [];
  let closeToolset = async () => {};
  t.after(async () => {
    await closeToolset();
    for (const stop of stops) stop();
  });
  const ts2Http = await startTs2Http();
  stops.push(ts2Http.stop);
  const everythingHttp = await startEverythingHttp('streamableHttp');
  stops.push(everythingHttp.stop);
  const py2Http = py.python ? await startPy2Http(py.python) : null;
  if (py2Http) stops.push(py2Http.stop);

  /** name → era the server speaks. */
  const eras = {
    ts2s: 'modern',
    ts2h: 'modern',
    ts2legacy: 'legacy',
    evs: 'legacy',
    evh: 'legacy',
    ...(py.python && { py2s: 'modern', py2h: 'modern' }),
  };
  const servers = [
    stdioEntry('ts2s', process.execPath, [TS2, 'stdio']),
    httpEntry('ts2h', ts2Http.url),
    stdioEntry('ts2legacy', process.execPath, [TS2, 'stdio-legacy']),
    stdioEntry('evs', process.execPath, [EVERYTHING_BIN, 'stdio']),
    httpEntry('evh', everythingHttp.url),
    ...(py.python ? [stdioEntry('py2s', py.python, [PY2, 'stdio']), httpEntry('py2h', py2Http.url)] : []),
  ];
  const diagnostics = [];
  const elicitations = [];
  const { tools, close } = await mcpTools(servers, {
    timeoutMs: 10_000,
    // Seven servers starting together (Python's among them) on a loaded machine: the whole handshake's bound.
    connectTimeoutMs: 60_000,
    onDiagnostic: (d) => diagnostics.push(d),
    onElicitation: (request, { server }) => {
      elicitations.push({ server, request });
      return { action: 'accept', content: { confirmed: true } };
    },
  });
  closeToolset = close;

  await t.test('every server connects, in its own era', () => {
    assert.deepEqual(diagnostics.filter((d) => d.code === 'server-degraded'), []);
    for (const name of Object.keys(eras)) assert.equal(tools[`${name}__echo`]?.remoteName, 'echo', `${name} (${eras[name]}) lists echo`);
  });

  await t.test('tools are called in each era', async () => {
    assert.equal(textOf(await tools.evs__echo.execute({ message: 'legacy stdio' })), 'Echo: legacy stdio');
    assert.equal(textOf(await tools.evh__echo.execute({ message: 'legacy http' })), 'Echo: legacy http');
    for (const name of ['ts2s', 'ts2h', 'ts2legacy']) assert.equal(textOf(await tools[`${name}__echo`].execute({ text: name })), `echo: ${name}`);
    if (py.python) for (const name of ['py2s', 'py2h']) assert.equal(textOf(await tools[`${name}__echo`].execute({ text: name })), `echo: ${name}`);
  });

  await t.test('TypeScript 2.x servers saw the era and the per-request _meta they were meant to', async () => {
    for (const name of ['ts2s', 'ts2h']) {
      const seen = JSON.parse(textOf(await tools[`${name}__whoami`].execute({})));
      assert.equal(seen.era, 'modern', name);
      assert.equal(seen.envelope['io.modelcontextprotocol/protocolVersion'], MODERN, name);
      assert.equal(typeof seen.envelope['io.modelcontextprotocol/clientCapabilities'], 'object', name);
      assert.equal(seen.envelope['io.modelcontextprotocol/clientInfo']?.name, 'mcpferry', name);
      // The host answers elicitations, so the capability is declared, as an object.
      assert.equal(typeof seen.envelope['io.modelcontextprotocol/clientCapabilities'].elicitation, 'object', name);
    }
    const legacy = JSON.parse(textOf(await tools.ts2legacy__whoami.execute({})));
    assert.equal(legacy.era, 'legacy');
  });

  await t.test('modern Streamable HTTP: the headers and bodies that reached the TypeScript 2.x server', async () => {
    const seen = await ts2Http.seen();
    assert.deepEqual(seen.filter((r) => r.method !== 'POST').map((r) => r.method), [], 'no GET stream, no DELETE');
    const posts = seen.filter((r) => r.method === 'POST');
    assert.equal(posts[0].body.method, 'server/discover', 'the era probe comes first');
    for (const method of ['tools/list', 'subscriptions/listen', 'tools/call']) assert.ok(posts.some((r) => r.body.method === method), method);
    // Nothing of the session era: no initialize, notifications/initialized, ping or logging/setLevel.
    const modernMethods = new Set(['server/discover', 'tools/list', 'subscriptions/listen', 'tools/call']);
    assert.deepEqual(posts.map((r) => r.body.method).filter((m) => !modernMethods.has(m)), []);
    for (const { headers, body } of posts) {
      const what = JSON.stringify(body).slice(0, 200);
      assert.notEqual(body.method, 'initialize', what);
      assert.equal(headers['mcp-session-id'], undefined, what);
      assert.equal(headers['mcp-protocol-version'], MODERN, what);
      assert.equal(headers['mcp-method'], body.method, what);
      if ('id' in body) assert.equal(body.params?._meta?.['io.modelcontextprotocol/protocolVersion'], MODERN, what);
      if (body.method === 'tools/call') assert.equal(headers['mcp-name'], body.params.name, what);
      if (body.method === 'tools/call') assert.deepEqual(Object.keys(headers).filter((h) => h.startsWith('mcp-param-')), [], what);
    }
  });

  await t.test('modern Streamable HTTP: an x-mcp-header parameter goes out as its Mcp-Param header', async () => {
    // The server itself rejects (-32020) a call whose Mcp-Param-Region header is missing or differs.
    assert.equal(textOf(await tools.ts2h__region.execute({ region: 'eu-west1' })), 'region eu-west1');
    const posts = (await ts2Http.seen()).filter((r) => r.method === 'POST');
    const region = posts.find((r) => r.body.method === 'tools/call' && r.body.params.name === 'region');
    assert.equal(region.headers['mcp-param-region'], 'eu-west1');
    // stdio carries no headers: the same tool works there unchanged.
    assert.equal(textOf(await tools.ts2s__region.execute({ region: 'eu-west1' })), 'region eu-west1');
  });

  await t.test('modern: the Python 2.x server saw the protocol version, capabilities and (HTTP) headers', { skip: py.skip }, async () => {
    for (const name of ['py2s', 'py2h']) {
      const seen = JSON.parse(textOf(await tools[`${name}__whoami`].execute({})));
      assert.equal(seen.protocolVersion, MODERN, name);
      assert.equal(typeof seen.clientCapabilities?.elicitation, 'object', name);
      if (name === 'py2h') {
        assert.equal(seen.headers['mcp-protocol-version'], MODERN);
        assert.equal(seen.headers['mcp-method'], 'tools/call');
        assert.equal(seen.headers['mcp-name'], 'whoami');
        assert.equal(seen.headers['mcp-session-id'], undefined);
      }
    }
  });

  await t.test('modern: a multi round-trip confirmation goes through the host and the call completes', async () => {
    for (const name of ['ts2s', 'ts2h']) {
      const before = elicitations.length;
      assert.equal(textOf(await tools[`${name}__confirm`].execute({})), 'confirmed', name);
      assert.equal(elicitations.length, before + 1, name);
      assert.equal(elicitations.at(-1).request.message, 'Go ahead?');
    }
  });

  await t.test('an aborted call is cancelled on the server, by the closed stream on HTTP, with notifications/cancelled on stdio', async () => {
    for (const name of ['ts2s', 'ts2h']) {
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 200);
      await assert.rejects(tools[`${name}__slow`].execute({ ms: 20_000 }, { signal: controller.signal }), { code: 'mcp_aborted' });
      assert.equal(await until(async () => textOf(await tools[`${name}__slow_cancelled`].execute({})) === '1' && '1', { timeoutMs: 5000, stepMs: 100 }), '1', name);
    }
    const posts = (await ts2Http.seen()).filter((r) => r.method === 'POST');
    assert.deepEqual(posts.filter((r) => r.body?.method === 'notifications/cancelled'), [], 'HTTP cancels by closing the stream, without a notification');
  });

  for (const name of ['ts2s', 'ts2h', 'ts2legacy', ...(py.python ? ['py2s', 'py2h'] : [])]) {
    await t.test(`list_changed from ${name} (${eras[name]}) updates the tool map in place`, async () => {
      const map = tools;
      assert.equal(tools[`${name}__added`], undefined);
      assert.equal(textOf(await tools[`${name}__add_tool`].execute({})), 'added');
      const changed = await until(() => diagnostics.find((d) => d.code === 'tools-changed' && d.server === name), { timeoutMs: 10_000 });
      assert.deepEqual(changed.added, [`${name}__added`]);
      assert.equal(map, tools);
      assert.equal(textOf(await tools[`${name}__added`].execute({})), 'called added');
    });
  }
});

test('modern: onElicitation gets a signal that aborts when its round is withdrawn (the call aborted, the toolset closed)', async () => {
  const asked = [];
  const { tools, close } = await mcpTools([stdioEntry('ts2', process.execPath, [TS2, 'stdio'])], {
    timeoutMs: 10_000,
    // Never answers: only the withdrawal ends the question.
    onElicitation: (request, { signal }) => {
      asked.push(signal);
      return new Promise(() => {});
    },
  });
  try {
    const controller = new AbortController();
    const calling = tools.ts2__confirm.execute({}, { signal: controller.signal });
    await until(() => asked.length === 1, { timeoutMs: 10_000 });
    assert.equal(asked[0].aborted, false, 'open while the person is asked');
    controller.abort();
    await assert.rejects(calling, { code: 'mcp_aborted' });
    await until(() => asked[0].aborted);

    // A question still open when the toolset closes is withdrawn too.
    const orphaned = tools.ts2__confirm.execute({}).then(() => null, (error) => error);
    await until(() => asked.length === 2, { timeoutMs: 10_000 });
    await close();
    assert.equal((await orphaned)?.code, 'mcp_connection_closed');
    await until(() => asked[1].aborted);
  } finally {
    await close();
  }
});
