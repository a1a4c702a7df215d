#!/usr/bin/env node
// `npm run demo`: connect the bundled example servers, show the tool map an agent would get, call a
// few tools, and close everything.

import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { composeMcpSystemPrompt, mcpTools } from '../dist/index.js';
import { startEverythingHttp } from './servers/everything-http.mjs';

const here = dirname(fileURLToPath(import.meta.url));
// The reference server, started here as a Streamable HTTP service on a loopback port.
const everything = await startEverythingHttp('streamableHttp');

const servers = [
  { name: 'weather', type: 'stdio', command: process.execPath, args: [join(here, 'servers', 'weather.mjs')] },
  { name: 'everything', type: 'streamable-http', url: everything.url },
];

console.log(`Servers: weather (stdio, ${servers[0].args[0]}), everything (Streamable HTTP, ${everything.url})`);
const started = performance.now();
const toolset = await mcpTools(servers, {
  tools: { block: ['*elicitation*', '*sampling*'] },
  onDiagnostic: (d) => console.log(`  [diagnostic] ${d.code}: ${d.message}`),
});
const { tools, close } = toolset;
console.log(`Connected ${servers.length} servers in ${(performance.now() - started).toFixed(0)} ms; ${Object.keys(tools).length} tools:`);
for (const tool of Object.values(tools)) console.log(`  ${tool.name.padEnd(48)} ${tool.description.slice(0, 60)}`);

console.log('\nThe MCP section of the agent\'s system prompt (composeMcpSystemPrompt):');
console.log(composeMcpSystemPrompt(toolset).replace(/^/gm, '  │ '));

const show = async (name, args, ctx) => {
  process.stdout.write(`\n> ${name}(${JSON.stringify(args)})\n`);
  try {
    const result = await tools[name].execute(args, ctx);
    for (const block of result.content) console.log(`  ${block.type === 'text' ? block.text : `[${block.type}]`}`);
  } catch (error) {
    console.log(`  rejected: ${error.code}: ${error.message}`);
  }
};

await show('weather__forecast', { city: 'lisbon' });
await show('weather__forecast', { city: 'atlantis' });
await show('everything__echo', { message: 'hello through a Rust engine' });
const controller = new AbortController();
setTimeout(() => controller.abort(), 300);
await show('everything__trigger-long-running-operation', { duration: 10, steps: 10 }, { signal: controller.signal });

await close();
everything.stop();
console.log('\nClosed every connection (stdio child reaped, HTTP session deleted).');
