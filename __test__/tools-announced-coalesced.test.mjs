// The engine coalesces a server's list_changed flood into a few re-listings, and the announcements it
// reports to JavaScript (`tools-announced`, onToolsChanged) are coalesced the same way: once per
// re-listing cycle, not one per notification (an unbounded threadsafe-function queue, and one
// tools/list per notification from a listener that re-lists).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { connectMcpServer } from '../dist/index.js';
import { here } from './helpers.mjs';

test('a flood of list_changed reaches onToolsChanged coalesced', async (t) => {
  const client = await connectMcpServer({ name: 'f', type: 'stdio', command: process.execPath, args: [join(here, 'fixtures', 'announce-flood-server.mjs')] });
  t.after(() => client.close());
  let announced = 0;
  client.onToolsChanged(() => void announced++);
  const settle = () => new Promise((resolve) => setTimeout(resolve, 2000));
  await client.callTool({ name: 'flood', arguments: {} });
  await settle();
  assert.ok(announced >= 1 && announced <= 100, `200 000 notifications, ${announced} listener calls`);
  // Coalescing holds back repeats until the engine's next re-listing, not for good: a later flood is heard.
  const first = announced;
  await client.callTool({ name: 'flood', arguments: {} });
  await settle();
  assert.ok(announced > first && announced <= first + 100, `a second flood: ${announced - first} listener calls`);
});
