// Types of `mcpferry/ai` (CommonJS).
import type { ToolSet } from 'ai';
import type { McpToolset } from '../dist/types.js';

/**
 * The toolset as an AI SDK `ToolSet` for `generateText`, `streamText` and agents (ai 6 and 7): each
 * tool a `dynamicTool` with its JSON Schema, `abortSignal` cancelling the call on the server, MCP
 * content mapped to model output, failures as tool errors the model sees. The set follows
 * `toolset.tools`: tools a server adds or removes later appear or disappear in the next step.
 */
export declare function aiSdkTools(toolset: McpToolset): ToolSet;
