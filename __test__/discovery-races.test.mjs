// The process-wide discovery memory under sessions opened together (src/protocol/era.rs,
// src/toolset/supervisor.rs). Against an in-process session-based (2025-11-25) Streamable HTTP server that
// answers a 2026-07-28 request as the TypeScript SDK 1.x does (HTTP 400, a JSON-RPC error without an id):
// no evidence of an era, so nothing is remembered of it and every connection probes.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { mcpTools } from '../dist/index.js';
import { listen, readBody } from './fixtures/http-server.mjs';
import { startCachingServer } from './fixtures/caching-server.mjs';

const MODERN = '2026-07-28';
/** How long the server holds the first tools/list for a second probe before it gives up waiting. Below
 *  FIRST_PROBE_WAIT_MS (5 s), the longest a connection waits for another's first probe. */
const HOLD_MS = 3_000;

/** A legacy server whose first tools/list is answered only once a second `server/discover` has arrived
 *  (or after HOLD_MS): `firstListReleasedBy` says which. */
async function startGatedLegacyServer() {
  const requests = [];
  let releaseFirstList;
  const secondProbe = new Promise((resolve) => (releaseFirstList = resolve));
  let firstListReleasedBy = null;
  let lists = 0;
  const discovers = () => requests.filter((r) => r.method === 'server/discover').length;
  const server = createServer(async (req, res) => {
    if (req.method !== 'POST') return void res.writeHead(405).end();
    const message = JSON.parse(await readBody(req));
    requests.push({ method: message.method, version: req.headers['mcp-protocol-version'] });
    const answer = (status, body, id = message.id) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id, ...body }));
    };
    if (req.headers['mcp-protocol-version'] === MODERN) {
      if (discovers() >= 2) releaseFirstList('a second probe');
      return answer(400, { error: { code: -32000, message: `Bad Request: Unsupported protocol version: ${MODERN}` } }, null);
    }
    if (message.id === undefined) return void res.writeHead(202).end();
    if (message.method === 'initialize') {
      return answer(200, { result: { protocolVersion: '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'gated-legacy', version: '1.0.0' } } });
    }
    if (message.method === 'tools/list') {
      if (++lists === 1) {
        const timer = setTimeout(() => releaseFirstList('the timeout'), HOLD_MS);
        firstListReleasedBy = await secondProbe;
        clearTimeout(timer);
      }
      return answer(200, { result: { tools: [{ name: 'echo', description: 'Echo.', inputSchema: { type: 'object' } }] } });
    }
    return answer(404, { error: { code: -32601, message: 'Method not found' } });
  });
  const port = await listen(server);
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    requests,
    firstListReleasedBy: () => firstListReleasedBy,
    close: () => new Promise((resolve) => {
      server.closeAllConnections?.();
      server.close(() => resolve());
    }),
  };
}

test('a first probe that found nothing to remember does not keep the connections waiting for it through its listing', async (t) => {
  const server = await startGatedLegacyServer();
  t.after(server.close);
  const entry = { name: 'legacy', type: 'streamable-http', url: server.url, headers: { 'X-Test-Run': randomUUID() } };
  // Opened together: neither waits for the other's probe (HTTP 400: no evidence, so initialize and nothing
  // remembered), although this server holds the first one's tools/list until the second probe arrives.
  const toolsets = await Promise.all([0, 1].map(() => mcpTools([entry])));
  t.after(() => Promise.all(toolsets.map((toolset) => toolset.close())));
  for (const toolset of toolsets) assert.ok(toolset.tools.legacy__echo, 'both connected');
  assert.equal(server.requests.filter((r) => r.method === 'server/discover').length, 2, 'each probed (nothing was remembered)');
  assert.equal(
    server.firstListReleasedBy(),
    'a second probe',
    `the waiting connection asked only once the first one's listing was over (released by ${server.firstListReleasedBy()}): ` +
      JSON.stringify(server.requests.map((r) => r.method)),
  );
});

test('one session refused for its token does not make every other session probe a session-based server again', async (t) => {
  const server = await startCachingServer({ era: 'legacy', legacyRefusal: 'unsupported-version', acceptBearers: ['token-a'] });
  t.after(server.close);
  const entry = { name: 'geo', type: 'streamable-http', url: server.url, headers: { 'X-Test-Run': randomUUID() } };
  const open = async (token, session) => {
    const toolset = await mcpTools([entry], { auth: () => ({ token }), session });
    t.after(toolset.close);
    return toolset;
  };
  // The first session finds the server session-based (-32022 naming only 2025-11-25): remembered for the process.
  assert.ok((await open('token-a', 'user-a')).tools.geo__echo);
  const before = server.requests.length;
  // Another user's token is refused (HTTP 401 on initialize): no evidence about the server, so the memory
  // stays for everyone (as after an abort, a closed toolset or a timeout).
  const refused = await open('token-b', 'user-b');
  assert.equal(refused.tools.geo__echo, undefined);
  assert.deepEqual(server.requests.slice(before).map((r) => r.method), ['initialize'], 'the refused session skipped the probe');
  const sinceRefusal = server.requests.length;
  assert.ok((await open('token-a', 'user-a')).tools.geo__echo);
  assert.equal(server.requests[sinceRefusal].method, 'initialize', 'the memory stands: no server/discover');
});

test('sessions that reused an answer the server no longer holds each probe at most once, and the next knows the new era', async (t) => {
  const server = await startCachingServer({ legacyRefusal: 'unsupported-version' });
  t.after(server.close);
  const entry = { name: 'geo', type: 'streamable-http', url: server.url, headers: { 'X-Test-Run': randomUUID() } };
  const open = async () => {
    const toolset = await mcpTools([entry]);
    t.after(toolset.close);
    return toolset;
  };
  await open(); // remembered: modern, its discovery answer reused from now on
  server.state.era = 'legacy'; // redeployed as a 2025-11-25 server on the same URL
  const sinceSwitch = server.requests.length;
  // Opened together after the switch: each reuses the remembered answer, its first request is refused
  // (-32022), and it probes once (no session waits on another's probe).
  const toolsets = await Promise.all([0, 1, 2, 3].map(() => open()));
  for (const toolset of toolsets) assert.ok(toolset.tools.geo__echo, 'each connected');
  const methods = server.requests.slice(sinceSwitch).map((r) => r.method);
  assert.ok(methods.filter((m) => m === 'server/discover').length <= 4, `at most one probe each: ${JSON.stringify(methods)}`);
  const sinceProbes = server.requests.length;
  assert.ok((await open()).tools.geo__echo);
  assert.equal(server.requests[sinceProbes].method, 'initialize', 'the new era is remembered: no probe');
});
