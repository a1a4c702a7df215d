// Tool texts shared between toolsets: sessions that list the same catalogue from the same server point at
// one frozen copy of every description and schema, and nothing one session does to it reaches another.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MCP_DESCRIBE_TOOL, mcpTools } from '../dist/index.js';
import { collectGarbage, fixture, until } from './helpers.mjs';

function isDeeplyFrozen(value) {
  if (value === null || typeof value !== 'object') return true;
  return Object.isFrozen(value) && Object.values(value).every(isDeeplyFrozen);
}

test('two sessions on the same catalogue share one frozen copy of each schema and description', async (t) => {
  const server = fixture('shared');
  const alice = await mcpTools([server.entry]);
  t.after(alice.close);
  const bob = await mcpTools([server.entry]);
  t.after(bob.close);

  const a = alice.tools.shared__echo;
  const b = bob.tools.shared__echo;
  assert.notEqual(a, b, 'each session has its own tool object');
  assert.equal(a.inputSchema, b.inputSchema, 'one schema object for both sessions');
  assert.equal(a.description, 'Echo the text back.');
  assert.deepEqual(a.inputSchema, { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] });
  assert.ok(isDeeplyFrozen(a.inputSchema), 'frozen all the way down');

  // A change by one session fails loudly instead of reaching the other's model.
  assert.throws(() => {
    a.inputSchema.properties.text.type = 'number';
  }, TypeError);
  assert.throws(() => {
    a.inputSchema.required.push('other');
  }, TypeError);
  assert.equal(b.inputSchema.properties.text.type, 'string');
  // The tool object itself stays the caller's: replacing a schema is that session's own business.
  a.inputSchema = { type: 'object' };
  assert.deepEqual(b.inputSchema.required, ['text']);

  assert.match((await b.execute({ text: 'from bob' })).content[0].text, /echo: from bob/);
});

test('a collection between two sessions starting on one catalogue does not cost them the sharing', async (t) => {
  // A tool holds its texts' members, not the object they were parsed into: the sessions' cache held that
  // object weakly, so a collection in between (any, under load or with other suites in the process) gave
  // the second session copies of its own while the first still used the originals.
  const server = fixture('shared');
  const first = await mcpTools([server.entry]);
  t.after(first.close);
  await collectGarbage();
  const second = await mcpTools([server.entry]);
  t.after(second.close);
  for (const name of ['shared__echo', 'shared__big']) {
    assert.equal(first.tools[name].inputSchema, second.tools[name].inputSchema, `${name}: one schema object for both sessions`);
  }
});

test('a session whose server lists a different catalogue gets texts of its own', async (t) => {
  const plain = fixture('shared');
  const other = fixture('shared', { FIXTURE_ECHO_DESCRIPTION: 'Echo, for this user only.' });
  const first = await mcpTools([plain.entry]);
  t.after(first.close);
  const second = await mcpTools([other.entry]);
  t.after(second.close);
  assert.equal(first.tools.shared__echo.description, 'Echo the text back.');
  assert.equal(second.tools.shared__echo.description, 'Echo, for this user only.');
  assert.notEqual(first.tools.shared__echo.inputSchema, second.tools.shared__echo.inputSchema);
  assert.deepEqual(first.tools.shared__echo.inputSchema, second.tools.shared__echo.inputSchema);
});

test('texts outlive a closed session for the sessions still using them, and come back after all are gone', async (t) => {
  const server = fixture('shared');
  const first = await mcpTools([server.entry]);
  const second = await mcpTools([server.entry]);
  t.after(second.close);
  const schema = second.tools.shared__echo.inputSchema;
  await first.close();
  await collectGarbage();
  assert.deepEqual(second.tools.shared__echo.inputSchema, schema);
  assert.match((await second.tools.shared__echo.execute({ text: 'still here' })).content[0].text, /still here/);

  await second.close();
  await collectGarbage();
  const third = await mcpTools([server.entry]);
  t.after(third.close);
  assert.deepEqual(third.tools.shared__echo.inputSchema, { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] });
  assert.ok(isDeeplyFrozen(third.tools.shared__echo.inputSchema));
});

test('a tool changed by its server gets the new texts; the unchanged keep theirs', async (t) => {
  const server = fixture('shared');
  const watcher = await mcpTools([server.entry]);
  t.after(watcher.close);
  const before = watcher.tools.shared__big.inputSchema;
  await watcher.tools.shared__mutate.execute({});
  await until(() => watcher.tools.shared__added_tool);
  assert.equal(watcher.tools.shared__echo.description, 'Echo, now with a changed description.');
  assert.ok(isDeeplyFrozen(watcher.tools.shared__echo.inputSchema));
  assert.deepEqual(watcher.tools.shared__big.inputSchema, before);
});

test('schemas cut down by the disclosure budget and local tools are frozen too', async (t) => {
  const server = fixture('shared', { FIXTURE_TOOLS: '10' });
  const small = await mcpTools([server.entry], { disclosure: { budget: 50 }, onDiagnostic: () => {} });
  t.after(small.close);
  const tools = Object.values(small.tools);
  assert.ok(small.tools[MCP_DESCRIBE_TOOL], 'the schemas are abbreviated: the describe tool is shown');
  for (const tool of tools) assert.ok(isDeeplyFrozen(tool.inputSchema), `${tool.name}'s schema is frozen`);
  // A session with room for full schemas next to it: each sees its own tier, not the other's.
  const roomy = await mcpTools([server.entry]);
  t.after(roomy.close);
  assert.deepEqual(small.tools.shared__echo.inputSchema, { type: 'object' });
  assert.deepEqual(roomy.tools.shared__echo.inputSchema.required, ['text']);
  assert.equal(small.tools.shared__echo.description, roomy.tools.shared__echo.description);
});
