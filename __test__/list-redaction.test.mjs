// connectMcpServer's listTools errors carry none of the server entry's secrets: a malformed page is
// described without quoting the server (serde's message quotes its strings whole), and any other
// error (a JSON-RPC error quoting the secret) is redacted with the entry's secrets.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { connectMcpServer } from '../dist/index.js';
import { here } from './helpers.mjs';

test('a listTools error never carries the server entry\u2019s own secrets', async (t) => {
  const secret = 'sk-live-0123456789abcdef';
  const client = await connectMcpServer({ name: 'e', type: 'stdio', command: process.execPath, args: [join(here, 'fixtures', 'echo-secret-list-server.mjs')], env: { API_TOKEN: secret } });
  t.after(() => client.close());
  const error = await client.listTools().then(() => undefined, (e) => e);
  assert.equal(error?.code, 'mcp_protocol_error');
  assert.ok(!error.message.includes(secret), error.message);
  const rpc = await client.listTools().then(() => undefined, (e) => e);
  assert.ok(rpc?.code, 'the server\u2019s JSON-RPC error rejects');
  assert.ok(rpc.message.includes('refused for') && !rpc.message.includes(secret), rpc.message);
});
