// The egress rules every outbound HTTP request follows: proxies only when configured (and then the
// proxy passes allowedHosts too), redirects that never carry an origin's credentials elsewhere (and a
// refused hop that says the request was delivered), the legacy SSE endpoint kept on its origin on every
// hop, deadlines on every request, a bounded close(), bounded notification/reply traffic, and error text
// that never carries a URL's query.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { z } from 'zod';
import { connectMcpServer, mcpTools, McpHostNotAllowedError } from '../dist/index.js';
import { defineMcpTool, McpOutcomeUnknownError } from '../dist/mayura.js';
import { startStreamableFixture } from './fixtures/http-server.mjs';
import { startMcpServer, startRedirectingLegacyServer, startProxy, sseEvent } from './fixtures/egress-servers.mjs';
import { here, until } from './helpers.mjs';

const session = { user: 'u-egress' };
/** `HTTP_CLOSE_GRACE_MS + HTTP_SESSION_DELETE_TIMEOUT_MS` in src/limits.rs: the most an HTTP transport's close takes. */
const HTTP_CLOSE_BOUND_MS = 2_500;
/** `MAX_CONCURRENT_SIDE_POSTS` in src/limits.rs. */
const MAX_CONCURRENT_SIDE_POSTS = 8;

async function open(entries, opts = {}) {
  const diagnostics = [];
  const toolset = await mcpTools(entries, { onDiagnostic: (d) => diagnostics.push(d), ...opts });
  return { ...toolset, diagnostics };
}

function runChild(input, env) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [join(here, 'fixtures', 'egress-child.mjs'), JSON.stringify(input)], { env, timeout: 20_000 }, (error, stdout, stderr) => {
      if (error) return reject(new Error(`child failed: ${error.message}\n${stderr}`));
      resolve(JSON.parse(stdout.trim().split('\n').at(-1)));
    });
  });
}

/** Settles with 'pending' if `promise` hasn't settled within `ms`, so a hang fails the test instead of stalling it. */
const within = (promise, ms) => Promise.race([promise.then(() => 'settled'), new Promise((r) => setTimeout(() => r('pending'), ms).unref())]);

async function closedPort() {
  const server = createServer();
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address();
  await new Promise((r) => server.close(r));
  return port;
}

test('proxy variables in the environment are ignored: the request never reaches the proxy', async (t) => {
  const upstream = await startMcpServer();
  t.after(upstream.close);
  const proxy = await startProxy({ upstream: `127.0.0.1:${upstream.port}` });
  t.after(proxy.close);
  const env = { ...process.env, HTTP_PROXY: proxy.url, http_proxy: proxy.url, HTTPS_PROXY: proxy.url, ALL_PROXY: proxy.url };
  const outcome = await runChild(
    { servers: [{ name: 'meta', type: 'streamable-http', url: 'http://internal-metadata.test/mcp' }], options: { allowedHosts: ['internal-metadata.test'] } },
    env,
  );
  assert.deepEqual(proxy.log, [], 'the proxy got nothing');
  assert.deepEqual(outcome.tools, []);
  assert.equal(outcome.diagnostics[0]?.code, 'server-degraded');
  assert.equal(upstream.log.length, 0);
});

test('an explicit proxy must pass allowedHosts itself, and the target host is still checked on every hop', async (t) => {
  const upstream = await startMcpServer({
    route(req, res) {
      if (req.headers.host !== 'redirecting.test') return false;
      res.writeHead(307, { location: 'http://elsewhere.test/mcp' }).end();
      return true;
    },
  });
  t.after(upstream.close);
  const proxy = await startProxy({ upstream: `127.0.0.1:${upstream.port}` });
  t.after(proxy.close);
  const entry = { name: 'meta', type: 'streamable-http', url: 'http://internal-metadata.test/mcp' };

  const unlistedProxy = await open([entry], { proxy: proxy.url, allowedHosts: ['internal-metadata.test'] });
  await unlistedProxy.close();
  assert.equal(unlistedProxy.diagnostics[0].errorCode, 'mcp_host_not_allowed');
  assert.match(unlistedProxy.diagnostics[0].message, /proxy/);
  assert.deepEqual(proxy.log, []);

  const unlistedTarget = await open([entry], { proxy: proxy.url, allowedHosts: ['127.0.0.1'] });
  await unlistedTarget.close();
  assert.equal(unlistedTarget.diagnostics[0].errorCode, 'mcp_host_not_allowed');
  assert.deepEqual(proxy.log, []);

  // The proxy's own name passes the DNS-answer check: `*` admits the name but never vouches for loopback.
  const byName = await open([entry], { proxy: proxy.url.replace('127.0.0.1', 'localhost'), allowedHosts: ['internal-metadata.test', '*'] });
  await byName.close();
  assert.equal(byName.diagnostics[0].errorCode, 'mcp_host_not_allowed');
  assert.match(byName.diagnostics[0].message, /localhost/);
  assert.deepEqual(proxy.log, []);

  const through = await open([entry], { proxy: proxy.url, allowedHosts: ['internal-metadata.test', '127.0.0.1'] });
  assert.deepEqual(through.diagnostics, []);
  assert.equal((await through.tools.meta__echo.execute({ text: 'via proxy' })).content[0].text, 'echo: via proxy');
  await through.close();
  assert.equal(proxy.log[0].url, 'http://internal-metadata.test/mcp');
  assert.ok(upstream.log.length > 0);

  // A redirect hop through the proxy is checked like any other: the proxy is never asked for it.
  const before = proxy.log.length;
  const hop = await open([{ ...entry, url: 'http://redirecting.test/mcp' }], { proxy: proxy.url, allowedHosts: ['redirecting.test', '127.0.0.1'] });
  await hop.close();
  assert.equal(hop.diagnostics[0].errorCode, 'mcp_host_not_allowed');
  assert.match(hop.diagnostics[0].message, /redirect refused: host elsewhere\.test/);
  assert.deepEqual(proxy.log.slice(before).map((r) => r.url), ['http://redirecting.test/mcp']);

  for (const bad of ['socks5://127.0.0.1:1080', 'http://user:pw@127.0.0.1:3128', 'not a url', 'http://127.0.0.1:3128/?token=x', 42]) {
    await assert.rejects(mcpTools([entry], { proxy: bad }), { code: 'mcp_config_invalid' }, String(bad));
  }
});

/** A server on 127.0.0.1 that answers `initialize` itself (issuing a session) and 307s everything else to `target`. */
async function redirector(target) {
  return startMcpServer({
    route(req, res, body) {
      if (body?.method === 'initialize') return false;
      res.writeHead(307, { location: target + req.url.replace(/^\/mcp/, '/mcp') }).end();
      return true;
    },
  });
}

test('a cross-origin redirect carries none of the configured headers, the session id or the bearer', async (t) => {
  const other = await startMcpServer({ host: '127.0.0.2' });
  t.after(other.close);
  const first = await redirector(other.origin);
  t.after(first.close);
  const entry = { name: 'web', type: 'streamable-http', url: first.url, headers: { 'X-Api-Key': 'key-stays-home-123' } };
  const auth = async () => ({ token: 'tok-stays-home-456' });

  // No allowedHosts: the redirect is followed, stripped of everything that belongs to the first origin.
  const followed = await open([entry], { session, auth });
  await followed.close();
  assert.equal(first.log[0].headers['x-api-key'], 'key-stays-home-123');
  assert.ok(other.log.length > 0, 'the redirect was followed');
  for (const request of other.log) {
    assert.equal(request.headers['x-api-key'], undefined, `${request.method} ${request.body?.method}`);
    assert.equal(request.headers.authorization, undefined);
    assert.equal(request.headers['mcp-session-id'], undefined);
  }

  // allowedHosts without the second origin: refused, and it sees nothing.
  const seen = other.log.length;
  const refused = await open([entry], { session, auth, allowedHosts: ['127.0.0.1'] });
  await refused.close();
  assert.equal(refused.diagnostics[0].errorCode, 'mcp_host_not_allowed');
  assert.equal(other.log.length, seen);

  // Both listed: followed, still stripped.
  const listed = await open([entry], { session, auth, allowedHosts: ['127.0.0.1', '127.0.0.2'] });
  await listed.close();
  assert.ok(other.log.length > seen);
  for (const request of other.log.slice(seen)) {
    assert.equal(request.headers['x-api-key'], undefined);
    assert.equal(request.headers.authorization, undefined);
    assert.equal(request.headers['mcp-session-id'], undefined);
  }
});

test('legacy SSE: a redirect of the endpoint POST to another origin is refused; nothing is posted there', async (t) => {
  const other = await startMcpServer({ host: '127.0.0.2' });
  t.after(other.close);
  const first = await startRedirectingLegacyServer(other.origin);
  t.after(first.close);
  for (const allowedHosts of [undefined, ['127.0.0.1', '127.0.0.2']]) {
    const { close, diagnostics, tools } = await open([{ name: 'legacy', type: 'sse', url: first.url, headers: { 'X-Api-Key': 'legacy-key-1234' } }], {
      allowedHosts,
      timeoutMs: 2000,
    });
    await close();
    assert.deepEqual(Object.keys(tools), []);
    assert.equal(diagnostics[0].errorCode, 'mcp_host_not_allowed', JSON.stringify(diagnostics));
    assert.equal(other.log.filter((r) => r.method === 'POST').length, 0, 'the other origin got no POST');
  }
});

// A redirect hop refused by allowedHosts comes after the first request was delivered: the error says so
// (`redirected: true` on mcp_host_not_allowed), `exposeServerErrors: false` withholds the target the server
// chose, and mayura counts such a call as sent (outcome unknown for a tool with effects), not as refused.
/** A server that answers everything but redirects tools/call to a host outside allowedHosts ['127.0.0.1']. */
async function redirectingCalls(t) {
  let target;
  const server = await startStreamableFixture({ redirectTo: (body) => (body?.method === 'tools/call' ? target : undefined) });
  t.after(server.close);
  target = `http://localhost:${new URL(server.url).port}/elsewhere-chosen-by-the-server`;
  return server;
}

test('exposeServerErrors: false withholds a refused redirect hop\u2019s target; the error says the request was delivered', async (t) => {
  const server = await redirectingCalls(t);
  const withheld = [];
  const toolset = await mcpTools([{ name: 'web', type: 'streamable-http', url: server.url }], {
    allowedHosts: ['127.0.0.1'],
    exposeServerErrors: false,
    onDiagnostic: (d) => d.code === 'server-error-withheld' && withheld.push(d),
  });
  t.after(() => toolset.close());
  const error = await toolset.tools.web__echo.execute({ text: 'hi' }).then(() => undefined, (e) => e);
  assert.ok(error instanceof McpHostNotAllowedError, String(error));
  assert.equal(error.redirected, true);
  assert.ok(!/localhost|elsewhere/.test(error.message), error.message);
  assert.ok(server.log.some((r) => r.body?.method === 'tools/call'), 'the call reached the server');
  assert.ok(withheld.some((d) => /localhost/.test(d.message ?? '')), `the host hears the withheld text: ${JSON.stringify(withheld)}`);
});

test('mayura: a call whose redirect hop is refused was sent, so a tool with effects ends outcome unknown', async (t) => {
  const server = await redirectingCalls(t);
  const client = await connectMcpServer({ name: 'web', type: 'streamable-http', url: server.url }, { allowedHosts: ['127.0.0.1'] });
  t.after(() => client.close());
  const Anything = z.object({}).passthrough();
  const write = defineMcpTool({ id: 'web.echo', version: '1', description: 'Echo.', remoteName: 'echo', input: Anything, output: Anything, effects: 'write', client });
  await assert.rejects(write.execute({ text: 'hi' }), (e) => e instanceof McpOutcomeUnknownError && e.reason === 'mcp_host_not_allowed');
});

test('close() is bounded while a re-initialize POST stalls (GET 404, second initialize never answered)', async (t) => {
  const server = await startMcpServer({
    route(req, res, body, ctx) {
      if (req.method === 'GET' && req.headers['mcp-session-id']) return void res.writeHead(404).end(), true;
      if (body?.method === 'initialize' && ctx.initializeCount > 1) return true; // never answered
      if (req.method === 'DELETE') return true; // never answered either
      return false;
    },
  });
  t.after(server.close);
  const { close, diagnostics } = await open([{ name: 'web', type: 'streamable-http', url: server.url }], { timeoutMs: 3000 });
  assert.deepEqual(diagnostics, []);
  await until(() => server.ctx.initializeCount === 2);
  const started = Date.now();
  const state = await within(close(), 10_000);
  const took = Date.now() - started;
  assert.equal(state, 'settled', 'close() never completed');
  assert.ok(took < HTTP_CLOSE_BOUND_MS + 1_000, `close took ${took} ms`);
});

test('a ping flood on the GET stream: reply POSTs stay bounded and close() cancels them promptly', async (t) => {
  const FLOOD = 2_000;
  let openReplies = 0;
  let maxOpenReplies = 0;
  let replies = 0;
  const server = await startMcpServer({
    route(req, res, body) {
      if (req.method === 'GET' && req.headers['mcp-session-id']) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        for (let i = 0; i < FLOOD; i++) res.write(sseEvent({ jsonrpc: '2.0', id: `ping-${i}`, method: 'ping' }));
        return true;
      }
      if (body && body.method === undefined && String(body.id).startsWith('ping-')) {
        // Hold every reply open: a client without bounds keeps opening more.
        replies++;
        openReplies++;
        maxOpenReplies = Math.max(maxOpenReplies, openReplies);
        res.on('close', () => openReplies--);
        return true;
      }
      return false;
    },
  });
  t.after(server.close);
  const { close } = await open([{ name: 'web', type: 'streamable-http', url: server.url }], { timeoutMs: 60_000 });
  await until(() => replies >= MAX_CONCURRENT_SIDE_POSTS);
  await new Promise((r) => setTimeout(r, 1000));
  assert.ok(maxOpenReplies <= MAX_CONCURRENT_SIDE_POSTS, `${maxOpenReplies} reply POSTs open at once`);
  const started = Date.now();
  assert.equal(await within(close(), 10_000), 'settled');
  assert.ok(Date.now() - started < HTTP_CLOSE_BOUND_MS + 1_000, `close took ${Date.now() - started} ms`);
  await until(() => openReplies === 0, { timeoutMs: 2000 });
});

test('a URL query carrying a credential appears in no error or diagnostic', async (t) => {
  const port = await closedPort();
  const refused = await open([{ name: 'down', type: 'streamable-http', url: `http://127.0.0.1:${port}/mcp?token=sk-query-secret-1` }]);
  await refused.close();
  assert.equal(refused.diagnostics[0].errorCode, 'mcp_transport_error');
  assert.doesNotMatch(JSON.stringify(refused.diagnostics), /sk-query-secret/);

  // A server that echoes the request line (query included) in its error bodies.
  const echoing = await startMcpServer({
    route(req, res, body) {
      const fail = body?.method === 'tools/call' || new URL(req.url, 'http://x').searchParams.get('fail') === 'all';
      if (!fail) return false;
      res.writeHead(500, { 'content-type': 'text/plain' }).end(`cannot serve ${req.method} ${req.url}`);
      return true;
    },
  });
  t.after(echoing.close);
  const atStart = await open([{ name: 'web', type: 'streamable-http', url: `${echoing.url}?fail=all&api_key=sk-query-secret-2` }]);
  await atStart.close();
  assert.equal(atStart.diagnostics[0].errorCode, 'mcp_transport_error');
  assert.match(atStart.diagnostics[0].message, /500/);
  assert.doesNotMatch(JSON.stringify(atStart.diagnostics), /sk-query-secret/);

  const atCall = await open([{ name: 'web', type: 'streamable-http', url: `${echoing.url}?token=sk-query-secret-3` }]);
  const error = await atCall.tools.web__echo.execute({ text: 'x' }).catch((e) => e);
  await atCall.close();
  assert.equal(error.code, 'mcp_transport_error');
  assert.match(error.message, /500/);
  assert.doesNotMatch(`${error.message}\n${error.stack}`, /sk-query-secret/);
});
