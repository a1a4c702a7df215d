#!/usr/bin/env node
// The client under test for the official MCP conformance suite:
//   npx @modelcontextprotocol/conformance client --command "node examples/conformance-client.mjs" --scenario <name>
// The suite appends the server URL as the last argument and names the scenario in
// MCP_CONFORMANCE_SCENARIO. Everything runs through the public mcpTools API.

import { mcpTools } from '../dist/index.js';

const url = process.argv.at(-1);
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? '';
const log = (...a) => console.error('[conformance-client]', ...a);

// What each scenario asks of the client once connected.
const scenarios = {
  initialize: async () => {},
  tools_call: async (tools) => {
    const result = await tools.server__add_numbers.execute({ a: 5, b: 3 });
    log('add_numbers →', JSON.stringify(result.content));
  },
  'sse-retry': async (tools) => {
    const result = await tools.server__test_reconnection.execute({});
    log('test_reconnection →', JSON.stringify(result.content));
  },
};

const run = scenarios[scenario];
if (!run) {
  log(`scenario ${JSON.stringify(scenario)} is not implemented by this client`);
  process.exit(2);
}
const diagnostics = [];
const { tools, close } = await mcpTools([{ name: 'server', type: 'streamable-http', url }], {
  timeoutMs: 20_000,
  onDiagnostic: (d) => diagnostics.push(d),
});
try {
  const degraded = diagnostics.find((d) => d.code === 'server-degraded');
  if (degraded) throw new Error(degraded.message);
  log(`connected; tools: ${Object.keys(tools).join(', ') || '(none)'}`);
  await run(tools);
} finally {
  await close();
}
