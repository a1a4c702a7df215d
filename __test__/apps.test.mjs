// MCP Apps (issue 28): the `io.modelcontextprotocol/ui` extension, against fixtures/apps-server.mjs,
// a server written with the official Apps SDK (@modelcontextprotocol/ext-apps) — over stdio in both
// eras and over Streamable HTTP. The capability is declared only with `apps: true`; a tool's app reaches
// `tool.ui`; an app-only tool stays out of the model's tools and is callable through the client; the
// app's `ui://` resource reads with its MIME type and its `_meta` (CSP, permissions) as sent.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { connectMcpServer, mcpTools, createMemoryMcpConnectionStore } from '../dist/index.js';
import { here, startHttpFixture } from './helpers.mjs';

const APPS = join(here, 'fixtures', 'apps-server.mjs');
const VIEW = 'ui://weather/view.html';
const APP_MIME = 'text/html;profile=mcp-app';
const VIEW_META = {
  ui: {
    csp: { connectDomains: ['https://api.weather.example'], resourceDomains: ['https://cdn.weather.example'] },
    permissions: { geolocation: {} },
    prefersBorder: true,
  },
};
const options = { timeoutMs: 10_000, connectTimeoutMs: 30_000 };
const stdioEntry = (mode, env = {}) => ({ name: 'apps', type: 'stdio', command: process.execPath, args: [APPS, mode], env });

async function startAppsHttp() {
  const server = await startHttpFixture(APPS);
  return { ...server, entry: { name: 'apps', type: 'streamable-http', url: server.url } };
}

const modes = [
  ['stdio, 2026-07-28', async () => ({ entry: stdioEntry('stdio'), stop() {} })],
  ['stdio, 2025-11-25', async () => ({ entry: stdioEntry('stdio-legacy'), stop() {} })],
  ['Streamable HTTP', startAppsHttp],
];

for (const [mode, start] of modes) {
  test(`apps over ${mode}: tool.ui, app-only tools, the ui:// resource`, async (t) => {
    const server = await start();
    t.after(server.stop);
    const toolset = await mcpTools([server.entry], { ...options, apps: true });
    t.after(() => toolset.close());

    await t.test("a tool's app reaches tool.ui, frozen; a tool without one has none", () => {
      const weather = toolset.tools.apps__weather;
      assert.deepEqual(weather.ui, { resourceUri: VIEW });
      assert.ok(Object.isFrozen(weather.ui));
      assert.equal(toolset.tools.apps__plain.ui, undefined);
      assert.equal('ui' in toolset.tools.apps__plain, false);
    });

    await t.test('an app-only tool is not offered to the model', async () => {
      assert.equal(toolset.tools['apps__refresh-view'], undefined);
      assert.deepEqual(Object.keys(toolset.tools).sort(), ['apps__plain', 'apps__ui-capability', 'apps__weather']);
      const result = await toolset.tools.apps__weather.execute({});
      assert.deepEqual(result.structuredContent, { sky: 'sunny' });
    });

    await t.test("the app's resource is listed and read with its MIME type and _meta as sent", async () => {
      const listed = await toolset.listResources({ server: 'apps' });
      assert.deepEqual(listed.map((r) => [r.uri, r.mimeType]), [[VIEW, APP_MIME]]);
      const read = await toolset.readResource('apps', VIEW);
      assert.equal(read.contents.length, 1);
      assert.equal(read.contents[0].mimeType, APP_MIME);
      assert.match(read.contents[0].text, /<p>weather<\/p>/);
      assert.deepEqual(read.contents[0]._meta, VIEW_META);
    });

    await t.test("the host's app calls the app-only tool through connectMcpServer's client", async () => {
      const client = await connectMcpServer(server.entry, { ...options, apps: true });
      try {
        const listed = await client.listTools();
        const refresh = listed.find((tool) => tool.name === 'refresh-view');
        assert.deepEqual(refresh._meta.ui, { resourceUri: VIEW, visibility: ['app'] }, 'the listing is the server\'s, as sent');
        const result = await client.callTool({ name: 'refresh-view', arguments: {} });
        assert.equal(result.content[0].text, 'refreshed');
      } finally {
        await client.close();
      }
    });
  });
}

test('the extension is declared only when the host renders apps (the Apps SDK reads it back)', async () => {
  for (const apps of [true, false, undefined]) {
    const toolset = await mcpTools([stdioEntry('stdio-legacy')], { ...options, ...(apps === undefined ? {} : { apps }) });
    try {
      const text = (await toolset.tools['apps__ui-capability'].execute({})).content[0].text;
      assert.deepEqual(JSON.parse(text), apps ? { mimeTypes: [APP_MIME] } : null, `apps: ${apps}`);
      // Without the capability the tool still names its app: a server may publish it either way.
      assert.deepEqual(toolset.tools.apps__weather.ui, { resourceUri: VIEW });
      assert.equal(toolset.tools['apps__refresh-view'], undefined);
    } finally {
      await toolset.close();
    }
  }
});

test('over Streamable HTTP in 2026-07-28 every request carries the extension in its _meta, only with apps: true', async (t) => {
  for (const apps of [true, false]) {
    const server = await startAppsHttp();
    t.after(server.stop);
    const toolset = await mcpTools([server.entry], { ...options, apps });
    await toolset.tools.apps__plain.execute({});
    await toolset.close();
    const calls = (await server.seen()).filter((m) => m?.method === 'tools/call');
    assert.equal(calls.length, 1);
    const declared = calls[0].params._meta['io.modelcontextprotocol/clientCapabilities'];
    assert.deepEqual(declared.extensions?.['io.modelcontextprotocol/ui'], apps ? { mimeTypes: [APP_MIME] } : undefined, `apps: ${apps}`);
  }
});

test('an app-only tool later offered to the model is drift: quarantined until re-trusted', async () => {
  const storage = createMemoryMcpConnectionStore();
  const first = await mcpTools([stdioEntry('stdio-legacy')], { ...options, storage });
  assert.equal(first.tools['apps__refresh-view'], undefined);
  await first.close();
  const diagnostics = [];
  const widened = await mcpTools([stdioEntry('stdio-legacy', { APPS_REFRESH_VISIBILITY: 'model,app' })], { ...options, storage, onDiagnostic: (d) => diagnostics.push(d) });
  try {
    const refresh = widened.tools['apps__refresh-view'];
    assert.ok(refresh, 'the tool keeps its name');
    assert.match(refresh.description, /changed since it was first trusted/);
    assert.equal(refresh.ui, undefined, 'nothing the server now says of it is shown');
    await assert.rejects(refresh.execute({}), { code: 'mcp_tool_quarantined' });
    assert.ok(diagnostics.some((d) => d.code === 'tool-quarantined' && d.tool === 'refresh-view'));
    // The app's metadata on a model-visible tool is no drift: `weather` is as it was.
    assert.equal((await widened.tools.apps__weather.execute({})).content[0].text, 'sunny');
  } finally {
    await widened.close();
  }
});

test('a bad apps option is a typed config error', async () => {
  await assert.rejects(mcpTools([stdioEntry('stdio')], { apps: 'yes' }), { code: 'mcp_config_invalid', message: /options\.apps must be a boolean/ });
});
