// The public types of mcpferry.

export type McpServer =
  | {
      name: string;
      type: 'stdio';
      command: string;
      args?: string[];
      /** Variables for the child on top of the allowlist (PATH, HOME, USER, LOGNAME, SHELL, TERM, LANG, TMPDIR). */
      env?: Record<string, string>;
      cwd?: string;
      enabled?: boolean;
    }
  | {
      name: string;
      /** `streamable-http` (current) or `sse` (the legacy HTTP+SSE transport). */
      type: 'streamable-http' | 'sse';
      url: string;
      /** Extra request headers. Protocol-owned ones (Mcp-Session-Id, Content-Type, Accept, …) are refused. */
      headers?: Record<string, string>;
      enabled?: boolean;
    };

export interface McpOptions {
  /** Discovery filter on original tool names, with `*` and `?` globs. Either `allow` or `block`, never both. */
  tools?: { allow: readonly string[] } | { block: readonly string[] };
  /** Idle timeout of each request in ms (reset by progress notifications). Default 60 000. */
  timeoutMs?: number;
  /** Largest message accepted from a server, in bytes. Default 2 MiB. */
  maxResultBytes?: number;
  /** Receives everything the engine reports: degraded servers, name collisions, tool-list changes. */
  onDiagnostic?: (diagnostic: Diagnostic) => void;
}

export type JsonSchema = { [key: string]: unknown };

export interface ContentBlock {
  type: string;
  [key: string]: unknown;
}

export interface McpToolResult {
  content: ContentBlock[];
  structuredContent?: unknown;
  [key: string]: unknown;
}

export interface McpToolCallContext {
  signal?: AbortSignal;
  toolCallId?: string;
  runId?: string;
}

export interface McpTool {
  /** `${server}__${tool}`, provider-safe (`^[a-zA-Z0-9_-]{1,64}$`). */
  name: string;
  description: string;
  inputSchema: JsonSchema;
  /** The configured server name. */
  server: string;
  /** The tool's name on its server. */
  remoteName: string;
  title?: string;
  outputSchema?: JsonSchema;
  /** As published by the server. Informational only: nothing in mcpferry trusts them. */
  annotations?: Record<string, unknown>;
  execute(args: unknown, ctx?: McpToolCallContext): Promise<McpToolResult>;
}

export interface McpToolset {
  /** Every tool of every connected server, keyed by projected name. Updated in place on list changes. */
  tools: Record<string, McpTool>;
  /** Close every connection and reap every child process. Idempotent. */
  close(): Promise<void>;
  /** Settles when the tool map has been checked against the servers (immediately for `mcpTools`). */
  reconciled: Promise<void>;
}

interface DiagnosticBase {
  server: string;
  message: string;
}

export type Diagnostic =
  | (DiagnosticBase & { code: 'server-degraded'; errorCode: string; stderrTail: string | null })
  | (DiagnosticBase & { code: 'server-name-collision'; labels: string[] })
  | (DiagnosticBase & { code: 'tool-rejected'; tool: string })
  | (DiagnosticBase & { code: 'tool-name-rewritten'; tool: string; name: string })
  | (DiagnosticBase & { code: 'tools-changed'; added: string[]; changed: string[]; removed: string[] });
