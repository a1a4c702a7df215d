// Types of `mcpferry/ai` (CommonJS).
// ai 7 is an ES module: its types are imported as such from this CommonJS declaration (node16 requires it).
import type { ToolSet } from 'ai' with { 'resolution-mode': 'import' };
import type { McpToolset } from '../dist/types.js';

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
}
