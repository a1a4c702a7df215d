// The toolset's life cycle under races a server or the host can provoke: a tool quarantined while a
// call waits at its policy gate, a list_changed flood, close() during a reconnection, a connection lost
// while its listing is being vetted.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { createMemoryMcpConnectionStore, mcpTools, rebuildMcpToolsFromStorage } from '../dist/index.js';
import { fixture, processState, scratchFile, until } from './helpers.mjs';

const calls = (server, tool) => server.received().filter((m) => m.method === 'tools/call' && m.params.name === tool);

test('a call waiting at policy.decide is not sent once its tool is quarantined meanwhile', async () => {
  const storage = createMemoryMcpConnectionStore();
  const server = fixture('racy');
  let release;
  const released = new Promise((r) => (release = r));
  const diagnostics = [];
  const { tools, close } = await mcpTools([server.entry], {
    storage,
    onDiagnostic: (d) => diagnostics.push(d),
    policy: {
      async decide(request) {
        if (request.remoteName === 'echo') await released;
        return { kind: 'allow' };
      },
    },
  });
  try {
    const waiting = tools.racy__echo.execute({ text: 'x' }).then(() => assert.fail('resolved'), (e) => e);
    // mutate changes echo's description and announces list_changed: drift from the baseline.
    await tools.racy__mutate.execute({});
    await until(() => diagnostics.some((d) => d.code === 'tool-quarantined' && d.tool === 'echo'));
    release();
    const error = await waiting;
    assert.equal(error.code, 'mcp_tool_quarantined');
    assert.deepEqual(calls(server, 'echo'), [], 'the server received nothing for the quarantined tool');
  } finally {
    await close();
  }
});

test('a call approved against one definition is not sent after the definition changed', async () => {
  const server = fixture('shifty');
  let release;
  const released = new Promise((r) => (release = r));
  const { tools, close } = await mcpTools([server.entry], {
    policy: {
      async decide(request) {
        if (request.remoteName === 'echo') await released;
        return { kind: 'allow' };
      },
    },
  });
  try {
    const waiting = tools.shifty__echo.execute({ text: 'x' }).then(() => assert.fail('resolved'), (e) => e);
    await tools.shifty__mutate.execute({});
    await until(() => tools.shifty__echo.description.includes('changed description'));
    release();
    assert.equal((await waiting).code, 'mcp_tool_unavailable');
    assert.deepEqual(calls(server, 'echo'), []);
    // Called again, against the definition now shown, it goes through.
    assert.match((await tools.shifty__echo.execute({ text: 'y' })).content[0].text, /echo: y/);
  } finally {
    await close();
  }
});

test('a list_changed flood costs a couple of listings, not one per notification', async () => {
  const server = fixture('floody');
  const { tools, close } = await mcpTools([server.entry], {});
  try {
    await tools.floody__flood_list_changed.execute({ count: 2000 });
    // Let every notification be read and any refresh finish.
    await tools.floody__echo.execute({ text: 'settle' });
    await new Promise((r) => setTimeout(r, 300));
    await tools.floody__echo.execute({ text: 'settle' });
    const listings = server.received().filter((m) => m.method === 'tools/list').length;
    assert.ok(listings >= 2, `a refresh ran (${listings} listings)`);
    assert.ok(listings <= 6, `${listings} listings for 2000 notifications`);
  } finally {
    await close();
  }
});

test('close() during a reconnection leaves no child behind once it resolves', async () => {
  const storage = createMemoryMcpConnectionStore();
  const first = await mcpTools([fixture('sleeper').entry], { storage });
  await first.close();
  const self = scratchFile('sleeper.pid');
  const grand = scratchFile('sleeper-child.pid');
  const entry = fixture('sleeper', { FIXTURE_INIT_DELAY_MS: '5000', FIXTURE_MODE: 'grandchild', FIXTURE_PIDFILE: grand, FIXTURE_SELF_PIDFILE: self }).entry;
  const rebuilt = await rebuildMcpToolsFromStorage([entry], { storage });
  await until(() => existsSync(self) && existsSync(grand));
  const started = Date.now();
  await rebuilt.close();
  assert.ok(Date.now() - started < 3000, `close took ${Date.now() - started} ms`);
  // Checked the moment close() resolves: the server was reaped, its group signalled.
  assert.equal(processState(Number(readFileSync(self, 'utf8'))), null, 'the server process is gone');
  const grandchild = processState(Number(readFileSync(grand, 'utf8')));
  assert.ok([null, 'Z'].includes(grandchild), `grandchild ${grandchild}`);
});

test('a server lost while its listing is vetted is reported degraded, not ready', async () => {
  const inner = createMemoryMcpConnectionStore();
  // A store slower than the server's death: the connection ends while the listing is being saved.
  const storage = {
    get: (id) => inner.get(id),
    list: () => inner.list(),
    remove: (id) => inner.remove(id),
    claimBaseline: (id, f) => inner.claimBaseline(id, f),
    async save(row) {
      await new Promise((r) => setTimeout(r, 300));
      return inner.save(row);
    },
  };
  const diagnostics = [];
  const { tools, close } = await mcpTools([fixture('fragile', { FIXTURE_MODE: 'exit-after-list' }).entry, fixture('steady').entry], {
    storage,
    onDiagnostic: (d) => diagnostics.push(d),
  });
  try {
    const degraded = diagnostics.find((d) => d.code === 'server-degraded' && d.server === 'fragile');
    assert.ok(degraded, `diagnostics: ${JSON.stringify(diagnostics.map((d) => d.code))}`);
    assert.match(degraded.message, /exited with code 5/);
    assert.equal(tools.fragile__echo, undefined, 'a dead server contributes no tools');
    assert.match((await tools.steady__echo.execute({ text: 'ok' })).content[0].text, /echo: ok/);
  } finally {
    await close();
  }
});
