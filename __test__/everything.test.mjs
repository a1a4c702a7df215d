// The published reference server, @modelcontextprotocol/server-everything, over stdio.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mcpTools } from '../dist/index.js';
import { EVERYTHING_BIN, startEverythingHttp } from '../examples/servers/everything-http.mjs';
const stdioEntry = { name: 'everything', type: 'stdio', command: process.execPath, args: [EVERYTHING_BIN, 'stdio'] };

const modes = [
  ['stdio', async () => ({ entry: stdioEntry, stop() {} })],
  ['streamable HTTP', async () => {
    const server = await startEverythingHttp('streamableHttp');
    return { entry: { name: 'everything', type: 'streamable-http', url: server.url }, stop: server.stop };
  }],
  ['legacy SSE', async () => {
    const server = await startEverythingHttp('sse');
    return { entry: { name: 'everything', type: 'sse', url: server.url }, stop: server.stop };
  }],
];

for (const [mode, start] of modes) test(`server-everything over ${mode}: list, call, progress, abort`, async (t) => {
  const server = await start();
  t.after(server.stop);
  const diagnostics = [];
  const { tools, close } = await mcpTools([server.entry], { timeoutMs: 1500, connectTimeoutMs: 30_000, onDiagnostic: (d) => diagnostics.push(d) });
  t.after(close);
  assert.deepEqual(diagnostics.filter((d) => d.code === 'server-degraded'), []);

  await t.test('lists its tools under projected names', () => {
    for (const name of ['echo', 'get-sum', 'trigger-long-running-operation']) {
      assert.equal(tools[`everything__${name}`]?.remoteName, name);
    }
    assert.equal(tools.everything__echo.inputSchema.properties.message.type, 'string');
  });

  await t.test('calls echo and get-sum', async () => {
    assert.equal((await tools.everything__echo.execute({ message: 'hi from mcpferry' })).content[0].text, 'Echo: hi from mcpferry');
    assert.match((await tools['everything__get-sum'].execute({ a: 2, b: 40 })).content[0].text, /42/);
  });

  await t.test('progress keeps a call alive past the idle timeout', async () => {
    // 3 s in all, a progress notification every 0.6 s, under a 1.5 s idle timeout.
    const result = await tools['everything__trigger-long-running-operation'].execute({ duration: 3, steps: 5 });
    assert.match(result.content[0].text, /completed/);
  });

  await t.test('a long-running operation can be aborted', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 200);
    const started = Date.now();
    await assert.rejects(
      tools['everything__trigger-long-running-operation'].execute({ duration: 20, steps: 20 }, { signal: controller.signal }),
      { code: 'mcp_aborted' },
    );
    assert.ok(Date.now() - started < 1000);
    // The session is still healthy afterwards.
    assert.equal((await tools.everything__echo.execute({ message: 'after' })).content[0].text, 'Echo: after');
  });

  await t.test('a schema violation is refused before it is sent (validateArguments), typed', async () => {
    await assert.rejects(tools['everything__get-sum'].execute({ a: 'not a number', b: 1 }), { code: 'mcp_invalid_arguments', message: /at \/a/ });
  });
});
