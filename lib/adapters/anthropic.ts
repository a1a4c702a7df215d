// `mcpferry/anthropic`: a toolset for the Anthropic Messages API: tool definitions for `tools`, and a
// dispatcher from the `tool_use` blocks of an assistant message to the `tool_result` blocks of the next
// user message. Typed against @anthropic-ai/sdk; nothing of it is loaded at run time.

import type Anthropic from '@anthropic-ai/sdk';
import type { ContentBlock, McpTool, McpToolResult, McpToolset } from '../types';
import { blockAsText, dispatchCall, mediaOf, resultBlocks } from './content';

type ToolResultBlock = Anthropic.Messages.ToolResultBlockParam;
type ToolResultContent = Exclude<ToolResultBlock['content'], string | undefined>[number];
type ImageMediaType = Anthropic.Messages.Base64ImageSource['media_type'];

/** The image types the Messages API accepts as base64 sources; others are named in text. */
const IMAGE_MEDIA_TYPES: readonly string[] = ['image/jpeg', 'image/png', 'image/gif', 'image/webp'] satisfies ImageMediaType[];

/** The toolset's tools as Messages API tool definitions (`anthropic.messages.create({ tools })`). */
export function anthropicTools(toolset: McpToolset): Anthropic.Messages.Tool[] {
  return Object.values(toolset.tools).map((tool: McpTool) => ({
    name: tool.name,
    description: tool.description,
    input_schema: { ...tool.inputSchema, type: 'object' },
  }));
}

/** One MCP block in a tool result: text as text, an image of a type the API takes as an image, the rest as text. */
function resultPart(block: ContentBlock): ToolResultContent {
  const image = block.type === 'image' ? mediaOf(block) : undefined;
  if (image && IMAGE_MEDIA_TYPES.includes(image.mimeType)) {
    return { type: 'image', source: { type: 'base64', media_type: image.mimeType as ImageMediaType, data: image.data } };
  }
  return { type: 'text', text: blockAsText(block) };
}

function toolResult(toolUseId: string, result: McpToolResult): ToolResultBlock {
  const content = resultBlocks(result).map(resultPart);
  return content.length > 0 ? { type: 'tool_result', tool_use_id: toolUseId, content } : { type: 'tool_result', tool_use_id: toolUseId };
}

/** A tool_use block as it comes in a response (`message.content`) or in the conversation history. */
export type AnthropicToolUse = Anthropic.Messages.ToolUseBlock | Anthropic.Messages.ToolUseBlockParam;

/**
 * Runs every `tool_use` block of an assistant message's content (concurrently) and returns the
 * `tool_result` blocks to send back, in the same order, as the content of the next user message. A
 * failed call (isError, a policy denial, an unknown tool…) is a result with `is_error: true` and the
 * error text; `signal` cancels the calls on the server and rejects (an abort ends the loop).
 */
export function dispatchAnthropicToolUses(
  toolset: McpToolset,
  content: ReadonlyArray<Anthropic.Messages.ContentBlock | Anthropic.Messages.ContentBlockParam>,
  options: { signal?: AbortSignal } = {},
): Promise<ToolResultBlock[]> {
  const uses = content.filter((block): block is AnthropicToolUse => block.type === 'tool_use');
  return Promise.all(
    uses.map(async (use) => {
      const outcome = await dispatchCall(toolset, use.name, use.input, { signal: options.signal, toolCallId: use.id });
      return outcome.isError ? { type: 'tool_result' as const, tool_use_id: use.id, is_error: true, content: outcome.error } : toolResult(use.id, outcome.result);
    }),
  );
}
