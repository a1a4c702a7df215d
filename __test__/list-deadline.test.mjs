// connectMcpServer's listTools (and purra's discovery, which lists the same way): `timeoutMs` is one
// deadline for the whole listing, not one per page, and the caller's signal stops the engine's listing
// (no further page is asked for), not only the promise.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { connectMcpServer } from '../dist/index.js';
import { here } from './helpers.mjs';

const SERVER = join(here, 'fixtures', 'slow-pages-server.mjs');
const connect = (env) => connectMcpServer({ name: 'p', type: 'stdio', command: process.execPath, args: [SERVER], env });
const pagesAsked = async (client) => Number((await client.callTool({ name: 'count', arguments: {} })).content[0].text);

test('listTools timeoutMs bounds the whole listing: 5 pages of 300 ms each overrun 1 000 ms', async (t) => {
  const client = await connect({ PAGES: '5', PAGE_DELAY_MS: '300' });
  t.after(() => client.close());
  // Every page alone is well within the deadline; all of them together are not.
  await assert.rejects(client.listTools({ timeoutMs: 1000 }), (e) => e.code === 'mcp_timeout');
  assert.ok((await pagesAsked(client)) < 5, 'the listing stopped at its deadline');
  // Without a deadline it completes.
  assert.equal((await client.listTools()).length, 5);
});

test('listTools signal: the engine asks for no further page once it fires', async (t) => {
  const client = await connect({ PAGES: '10', PAGE_DELAY_MS: '200' });
  t.after(() => client.close());
  const controller = new AbortController();
  const listing = client.listTools({ signal: controller.signal });
  // Aborted while the first slow page is outstanding.
  setTimeout(() => controller.abort(), 100);
  await assert.rejects(listing, (e) => e.code === 'mcp_aborted');
  // Long enough for the 10 pages an abandoned listing would go on to ask for.
  await new Promise((resolve) => setTimeout(resolve, 2500));
  assert.equal(await pagesAsked(client), 1);
});
