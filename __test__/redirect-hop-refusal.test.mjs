// A redirect hop refused by allowedHosts comes after the first request was delivered: the error says so
// (`redirected: true` on mcp_host_not_allowed), `exposeServerErrors: false` withholds the target the server
// chose, and mayura counts such a call as sent (outcome unknown for a tool with effects), not as refused.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { z } from 'zod';
import { connectMcpServer, mcpTools, McpHostNotAllowedError } from '../dist/index.js';
import { defineMcpTool, McpOutcomeUnknownError } from '../dist/mayura.js';
import { startStreamableFixture } from './fixtures/http-server.mjs';

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
