// `mcpferry/openai`: a toolset for OpenAI: OpenAI Agents SDK function tools (`openaiAgentsTools`), and,
// for code that calls the Responses or Chat Completions API itself, plain tool definitions
// (`openaiToolDefinitions`) with a dispatcher from the model's tool calls to the items to send back
// (`dispatchOpenAiToolCall`). Tools are strict whenever their schema allows it (strict-schema.ts holds
// the rule), and the nulls strict mode makes the model send for optional properties are removed
// before the server sees the arguments. Only the Agents part loads `@openai/agents`, when called.

import type * as Agents from '@openai/agents';
import type { ContentBlock, McpTool, McpToolResult, McpToolset } from '../types';
import { blockAsText, dispatchCall, isMcpError, mediaOf, parseArguments, resultAsText, resultBlocks } from './content';
import { requirePeer } from './peer';
import { stripRewrittenNulls, toStrictSchema, type StrictConversion } from './strict-schema';

// Types @openai/agents does not export by name.
type ToolCallDetails = Parameters<Agents.FunctionTool['invoke']>[2];
type StrictParameters = Extract<Agents.FunctionTool['parameters'], { additionalProperties: false }>;
type NonStrictParameters = Exclude<Agents.FunctionTool['parameters'], StrictParameters>;
/** A function tool for agents of run context `Context` (what `new Agent<Context>({ tools })` takes). */
export type AgentsFunctionTool<Context = unknown> = Agents.FunctionTool<Context, any, unknown>;
type AgentsOutput = string | Agents.ToolCallOutputContent[];

const conversions = new WeakMap<McpTool, StrictConversion>();

/** The tool's strict conversion, worked out once per McpTool object. */
function strictFor(tool: McpTool): StrictConversion {
  let conversion = conversions.get(tool);
  if (!conversion) {
    conversion = toStrictSchema(tool.inputSchema);
    conversions.set(tool, conversion);
  }
  return conversion;
}

/** The arguments the server receives for the model's: rewritten nulls removed when the tool is strict. */
function serverArguments(tool: McpTool, args: unknown): unknown {
  const conversion = strictFor(tool);
  return conversion.strict ? stripRewrittenNulls(args, conversion.rewrites) : args;
}

/** What the model is shown of a tool: its parameters (strict form when it has one) and whether strict. */
function definition(tool: McpTool): { name: string; description: string; parameters: Record<string, unknown>; strict: boolean } {
  const conversion = strictFor(tool);
  return { name: tool.name, description: tool.description, parameters: conversion.strict ? conversion.schema : tool.inputSchema, strict: conversion.strict };
}

const dataUrl = (block: ContentBlock): string | undefined => {
  const media = mediaOf(block);
  return media ? `data:${media.mimeType};base64,${media.data}` : undefined;
};

/** The Agents SDK's tool output: text alone as a string; with images, a list of text and image items. */
function agentsOutput(result: McpToolResult): AgentsOutput {
  const blocks = resultBlocks(result);
  if (!blocks.some((block) => block.type === 'image' && dataUrl(block))) return resultAsText(result);
  return blocks.map((block): Agents.ToolCallOutputContent => {
    const image = block.type === 'image' ? mediaOf(block) : undefined;
    return image ? { type: 'image', image: { data: image.data, mediaType: image.mimeType } } : { type: 'text', text: blockAsText(block) };
  });
}

/**
 * The toolset as OpenAI Agents SDK function tools (`new Agent({ tools: openaiAgentsTools(toolset) })`).
 * Each tool is strict when its schema allows it; the run's abort signal cancels the call on the server;
 * a failed call (isError, a policy denial, a timeout…) is shown to the model as the tool's output,
 * while an abort ends the run. The list is the toolset's tools now: after a `tools-changed` diagnostic,
 * assign a new list to `agent.tools`.
 *
 * The SDK turns every character but letters and digits into `_`, so two tools (`a__x-y`, `a__x_y`) may
 * get one name: the first of them by projected name (in code-unit order) is kept, each other one is left
 * out and passed to `options.onSkipped(name, reason)`, or, without it, named in one process warning.
 */
export function openaiAgentsTools<Context = unknown>(
  toolset: McpToolset,
  options: { onSkipped?: (name: string, reason: string) => void } = {},
): AgentsFunctionTool<Context>[] {
  // Loaded here, not at the top: the Responses and Chat helpers below do not need the Agents SDK.
  const { tool: functionTool } = requirePeer('mcpferry/openai (openaiAgentsTools)', '@openai/agents', () => require('@openai/agents') as typeof Agents);
  const tools = Object.values(toolset.tools);
  // Which of two tools sharing an SDK name is kept must not depend on the order servers answered in.
  const byName = [...tools].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const kept = new Map<McpTool, AgentsFunctionTool<Context>>();
  const holders = new Map<string, string>();
  const skipped: Array<{ name: string; reason: string }> = [];
  for (const tool of byName) {
    const created = agentsTool<Context>(functionTool, tool);
    const holder = holders.get(created.name);
    if (holder !== undefined) {
      skipped.push({ name: tool.name, reason: `${JSON.stringify(holder)} and ${JSON.stringify(tool.name)} are both ${JSON.stringify(created.name)} in the Agents SDK; ${JSON.stringify(holder)} is kept` });
      continue;
    }
    holders.set(created.name, tool.name);
    kept.set(tool, created);
  }
  if (skipped.length > 0) {
    if (options.onSkipped) {
      for (const { name, reason } of skipped) options.onSkipped(name, reason);
    } else {
      process.emitWarning(`openaiAgentsTools left out ${skipped.map((s) => `${JSON.stringify(s.name)} (${s.reason})`).join(', ')}`, { code: SKIPPED_TOOLS_WARNING });
    }
  }
  return tools.flatMap((tool) => kept.get(tool) ?? []);
}

/** The code of the process warning naming the tools openaiAgentsTools left out. */
const SKIPPED_TOOLS_WARNING = 'MCPFERRY_AGENTS_NAME_COLLISION';

/** One MCP tool as an Agents SDK function tool (the SDK's own `tool()`), strict when its schema allows it. */
function agentsTool<Context>(functionTool: typeof Agents.tool, tool: McpTool): AgentsFunctionTool<Context> {
  const conversion = strictFor(tool);
  const common = {
    name: tool.name,
    description: tool.description,
    execute: async (input: unknown, _context?: unknown, details?: ToolCallDetails) =>
      agentsOutput(await tool.execute(serverArguments(tool, input), { signal: details?.signal, toolCallId: details?.toolCall?.callId })),
    // The model sees what failed; an abort and a bug are not the model's to handle.
    errorFunction: (_context: unknown, error: unknown) => {
      if (isMcpError(error) && error.code !== 'mcp_aborted') return error.message;
      throw error;
    },
  };
  return conversion.strict
    ? functionTool<StrictParameters, Context, AgentsOutput>({ ...common, strict: true, parameters: conversion.schema as StrictParameters })
    : functionTool<NonStrictParameters, Context, AgentsOutput>({ ...common, strict: false, parameters: tool.inputSchema as NonStrictParameters });
}

/** A function tool for the Responses API (`client.responses.create({ tools })`). */
export interface OpenAiResponsesTool {
  type: 'function';
  name: string;
  description: string;
  parameters: { [key: string]: unknown };
  strict: boolean;
}

/** A function tool for the Chat Completions API (`client.chat.completions.create({ tools })`). */
export interface OpenAiChatTool {
  type: 'function';
  function: { name: string; description: string; parameters: { [key: string]: unknown }; strict: boolean };
}

/** A `function_call` output item of a Response. */
export interface OpenAiResponsesFunctionCall {
  type: 'function_call';
  call_id: string;
  name: string;
  arguments: string;
}

/** One of `message.tool_calls` of a chat completion (custom tool calls are answered as unknown tools). */
export type OpenAiChatToolCall =
  | { id: string; type: 'function'; function: { name: string; arguments: string } }
  | { id: string; type: 'custom'; custom: { name: string; input: string } };

/** The input item that answers a `function_call`: text, or text and images (as data URLs). */
export interface OpenAiResponsesFunctionCallOutput {
  type: 'function_call_output';
  call_id: string;
  output: string | Array<{ type: 'input_text'; text: string } | { type: 'input_image'; image_url: string }>;
}

/** The `tool` message that answers a chat tool call (Chat Completions tool messages carry text only). */
export interface OpenAiChatToolMessage {
  role: 'tool';
  tool_call_id: string;
  content: string;
}

/** The toolset's tools as Responses API function tools. */
export function openaiToolDefinitions(toolset: McpToolset, options: { api: 'responses' }): OpenAiResponsesTool[];
/** The toolset's tools as Chat Completions function tools. */
export function openaiToolDefinitions(toolset: McpToolset, options: { api: 'chat' }): OpenAiChatTool[];
export function openaiToolDefinitions(toolset: McpToolset, options: { api: 'responses' | 'chat' }): OpenAiResponsesTool[] | OpenAiChatTool[] {
  const definitions = Object.values(toolset.tools).map(definition);
  if (options?.api === 'chat') return definitions.map((fn) => ({ type: 'function', function: fn }));
  if (options?.api === 'responses') return definitions.map((fn) => ({ type: 'function', ...fn }));
  throw new TypeError(`openaiToolDefinitions: options.api must be 'responses' or 'chat', not ${JSON.stringify(options?.api)}`);
}

async function run(toolset: McpToolset, name: string, argumentsJson: string, signal: AbortSignal | undefined, callId: string) {
  const parsed = parseArguments(argumentsJson);
  if ('error' in parsed) return { error: parsed.error, isError: true as const };
  return dispatchCall(toolset, name, parsed.args, { signal, toolCallId: callId }, serverArguments);
}

function responsesOutput(result: McpToolResult): OpenAiResponsesFunctionCallOutput['output'] {
  const blocks = resultBlocks(result);
  if (!blocks.some((block) => block.type === 'image' && dataUrl(block))) return resultAsText(result);
  return blocks.map((block) => {
    const url = block.type === 'image' ? dataUrl(block) : undefined;
    return url ? { type: 'input_image' as const, image_url: url } : { type: 'input_text' as const, text: blockAsText(block) };
  });
}

/**
 * Runs one tool call the model made and returns what to append to the conversation: for a Responses
 * `function_call`, its `function_call_output` item; for a chat tool call, its `tool` message. A failed
 * call is answered with the error text for the model to read. `signal` cancels the call on the server
 * (and rejects: an abort ends the loop).
 */
export function dispatchOpenAiToolCall(toolset: McpToolset, call: OpenAiResponsesFunctionCall, options?: { signal?: AbortSignal }): Promise<OpenAiResponsesFunctionCallOutput>;
export function dispatchOpenAiToolCall(toolset: McpToolset, call: OpenAiChatToolCall, options?: { signal?: AbortSignal }): Promise<OpenAiChatToolMessage>;
export async function dispatchOpenAiToolCall(
  toolset: McpToolset,
  call: OpenAiResponsesFunctionCall | OpenAiChatToolCall,
  options: { signal?: AbortSignal } = {},
): Promise<OpenAiResponsesFunctionCallOutput | OpenAiChatToolMessage> {
  if (call?.type === 'function_call') {
    const outcome = await run(toolset, call.name, call.arguments, options.signal, call.call_id);
    return { type: 'function_call_output', call_id: call.call_id, output: outcome.isError ? outcome.error : responsesOutput(outcome.result) };
  }
  if (call?.type === 'function') {
    const outcome = await run(toolset, call.function.name, call.function.arguments, options.signal, call.id);
    return { role: 'tool', tool_call_id: call.id, content: outcome.isError ? outcome.error : resultAsText(outcome.result) };
  }
  if (call?.type === 'custom') return { role: 'tool', tool_call_id: call.id, content: `There is no custom tool named ${JSON.stringify(call.custom?.name)}.` };
  throw new TypeError('dispatchOpenAiToolCall takes a Responses function_call item or a chat completion tool call');
}
