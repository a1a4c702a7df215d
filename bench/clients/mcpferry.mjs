// mcpferry, through its public API: one mcpTools() call for all servers; tools keyed `${server}__${tool}`;
// resources read with the toolset's readResource(server, uri) (W11). `runMcpferry` is also the
// mcpferry-otel client's (the same with OpenTelemetry providers registered).
import { pathToFileURL } from 'node:url';
import { runClient } from '../lib/workloads.mjs';

const PACKAGE = new URL('../../dist/index.js', import.meta.url).href;

/** Runs the workload named on the command line as client `name`, with the mcpferry package at `packageUrl`. */
export async function runMcpferry(name, packageUrl = PACKAGE) {
  const { mcpTools } = await import(packageUrl);
  await runClient({
    name,
    // W7 imports what `import 'mcpferry'` loads: the package's ESM entry (it loads dist/index.js).
    imports: [new URL('../entry/index.mjs', packageUrl).href],
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
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) await runMcpferry('mcpferry');
