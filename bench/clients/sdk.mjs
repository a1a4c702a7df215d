// The reference: @modelcontextprotocol/sdk's Client with its stdio and Streamable HTTP transports, one
// Client per server, connected concurrently, every tools/list page fetched, then a tool map built the way
// an agent would (`${server}__${tool}` -> the client that serves it); resources read with client.readResource (W11).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { connectAll, runClient } from '../lib/workloads.mjs';

async function connectOne(server) {
  const client = new Client({ name: 'bench', version: '1.0.0' });
  const transport = server.kind === 'stdio'
    ? new StdioClientTransport({ command: server.command, args: server.args, env: server.env })
    : new StreamableHTTPClientTransport(new URL(server.url));
  await client.connect(transport);
  const tools = [];
  let cursor;
  do {
    const page = await client.listTools(cursor === undefined ? undefined : { cursor });
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return { server, client, tools };
}

await runClient({
  name: 'sdk',
  imports: [
    import.meta.resolve('@modelcontextprotocol/sdk/client/index.js'),
    import.meta.resolve('@modelcontextprotocol/sdk/client/stdio.js'),
    import.meta.resolve('@modelcontextprotocol/sdk/client/streamableHttp.js'),
  ],
  async connect(servers) {
    const { connected, close } = await connectAll(servers, connectOne);
    const map = new Map();
    const byServer = new Map(connected.map(({ server, client }) => [server.name, client]));
    for (const { server, client, tools } of connected) {
      for (const tool of tools) map.set(`${server.name}__${tool.name}`, { client, tool });
    }
    return {
      toolCount: map.size,
      tool(server, name) {
        const { client, tool } = map.get(`${server}__${name}`);
        return (args) => client.callTool({ name: tool.name, arguments: args });
      },
      readResource(server, uri) {
        return byServer.get(server).readResource({ uri });
      },
      close,
    };
  },
});
