// @ai-sdk/mcp (Vercel AI SDK): createMCPClient per server (StdioMCPTransport from '@ai-sdk/mcp/mcp-stdio',
// or its built-in `{ type: 'http' }` Streamable HTTP transport), connected concurrently, then client.tools()
// (which follows every tools/list page) and calls through the returned tools' execute(), as an agent
// using the AI SDK would; resources read with the client's readResource({ uri }) (W11). Defaults are kept:
// the client first probes `server/discover`, which these initialize-first servers answer with "method not
// found" before it falls back to initialize.
// @ai-sdk/mcp needs Node 22, so it is installed with Node 22 in scripts/node22 (scripts/node22.mjs).
import { load, resolve } from '../../scripts/node22/load.mjs';
import { connectAll, runClient } from '../lib/workloads.mjs';

const { createMCPClient } = await load('@ai-sdk/mcp');
const { StdioMCPTransport } = await load('@ai-sdk/mcp/mcp-stdio');

async function connectOne(server) {
  const client = await createMCPClient({
    transport: server.kind === 'stdio'
      ? new StdioMCPTransport({ command: server.command, args: server.args, env: server.env })
      : { type: 'http', url: server.url },
  });
  try {
    return { server, client, tools: await client.tools() };
  } catch (error) {
    await client.close();
    throw error;
  }
}

// What the AI SDK passes as the second argument of a tool's execute() when a model calls it.
const callOptions = { toolCallId: 'bench', messages: [] };

await runClient({
  name: 'aisdk',
  imports: [resolve('@ai-sdk/mcp'), resolve('@ai-sdk/mcp/mcp-stdio')],
  async connect(servers) {
    const { connected, close } = await connectAll(servers, connectOne);
    const map = new Map();
    const byServer = new Map(connected.map(({ server, client }) => [server.name, client]));
    for (const { server, tools } of connected) {
      for (const [name, tool] of Object.entries(tools)) map.set(`${server.name}__${name}`, tool);
    }
    return {
      toolCount: map.size,
      tool(server, name) {
        const tool = map.get(`${server}__${name}`);
        return (args) => tool.execute(args, callOptions);
      },
      readResource(server, uri) {
        return byServer.get(server).readResource({ uri });
      },
      close,
    };
  },
});
