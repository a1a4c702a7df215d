// mcpferry, through its public API: one mcpTools() call for all servers; tools keyed `${server}__${tool}`;
// resources read with the toolset's readResource(server, uri) (W11).
import { mcpTools } from '../../dist/index.js';
import { runClient } from '../lib/workloads.mjs';

await runClient({
  name: 'mcpferry',
  imports: [new URL('../../dist/index.js', import.meta.url).href],
  canSkipValidation: true,
  recovers: true,
  async connect(servers, { validation = true, reconnect, onDiagnostic } = {}) {
    const diagnostics = [];
    const toolset = await mcpTools(
      servers.map((s) =>
        s.kind === 'stdio'
          ? { name: s.name, type: 'stdio', command: s.command, args: s.args, env: s.env }
          : { name: s.name, type: 'streamable-http', url: s.url }),
      {
        onDiagnostic: (d) => {
          diagnostics.push(d);
          onDiagnostic?.(d);
        },
        ...(validation ? {} : { validateArguments: false, validateResults: false }),
        ...(reconnect === undefined ? {} : { reconnect }),
      },
    );
    const { tools, close, servers: states } = toolset;
    // mcp__describe_tool and mcp__search_tools (server 'mcpferry') are local, not the server's.
    const toolCount = Object.values(tools).filter((t) => t.server !== 'mcpferry').length;
    if (diagnostics.some((d) => d.code === 'server-degraded')) {
      await close();
      throw new Error(`server-degraded: ${JSON.stringify(diagnostics).slice(0, 1000)}`);
    }
    return {
      toolCount,
      tool(server, name) {
        const tool = tools[`${server}__${name}`];
        return (args) => tool.execute(args);
      },
      readResource: (server, uri) => toolset.readResource(server, uri),
      close,
      servers: states,
    };
  },
});
