// Types of `mcpferry/ai` (CommonJS).
// ai 7 is an ES module: its types are imported as such from this CommonJS declaration (node16 requires it).
import type { ToolSet } from 'ai' with { 'resolution-mode': 'import' };
import type { McpToolset } from '../dist/types.js';
import type { McpHandle, McpHandleOptions } from '../dist/handle.js';

export type { McpHandle, McpHandleOptions, McpHandleTransport, McpToolDescription } from '../dist/handle.js';

/**
 * The toolset as an AI SDK `ToolSet` for `generateText`, `streamText` and agents (ai 6 and 7): each
 * tool a `dynamicTool` with its JSON Schema, `abortSignal` cancelling the call on the server, MCP
 * content mapped to model output, failures as tool errors the model sees. The set follows
 * `toolset.tools`: tools a server adds or removes later appear or disappear in the next step.
 */
export declare function aiSdkTools(toolset: McpToolset, options?: AiSdkToolsOptions): ToolSet;

export interface AiSdkToolsOptions {
  /**
   * The durable run these tools serve: each call then carries `params._meta.idempotencyKey =
   * \`${runId}:${toolCallId}\`` (the AI SDK's tool call id). Without it, calls carry no key.
   */
  runId?: string;
  /**
   * Stream each call's progress as AI SDK preliminary tool results: `execute` yields
   * `{ type: 'progress', progress, total?, message? }` per update (coalesced, the latest wins) and the
   * call's result last, so the final result and what the model sees stay the same. `streamText` shows
   * the updates as `tool-result` parts with `preliminary: true`. Default false.
   */
  preliminaryProgress?: boolean;
}

/**
 * One MCP server as a lazy handle: creating it performs no I/O; the first `tools()` or `describeTools()`
 * connects and lists (once, shared by concurrent first calls); `close()` is idempotent and a no-op if it
 * never connected. `tools()` is `aiSdkTools` of that server, named `${prefix}${tool}` when `prefix` is given.
 */
export declare function createMcpHandle(options: McpHandleOptions): McpHandle<ToolSet>;
