// `mcpferry/ai`: a toolset as a Vercel AI SDK `ToolSet` (ai 6 and 7). The entries (entry/ai.cjs,
// entry/ai.mjs) bind it to the `ai` the user installed, each through its own module system (ai 7 is
// ESM only), so this file takes `dynamicTool` and `jsonSchema` as given and imports only types.

import type { JSONSchema7, Tool, ToolSet, dynamicTool, jsonSchema } from 'ai';
import type { ContentBlock, McpProgress, McpTool, McpToolResult, McpToolset } from '../types';
import { blockAsText, liveView, mediaOf, resourceFileName, resourceOf, resultBlocks } from './content';

/** What the adapter uses of the `ai` package. */
export interface AiSdk {
  dynamicTool: typeof dynamicTool;
  jsonSchema: typeof jsonSchema;
}

/** What `toModelOutput` returns (the `ai` package does not export its name). */
type ToolResultOutput = Awaited<ReturnType<NonNullable<Tool['toModelOutput']>>>;
type ContentOutput = Extract<ToolResultOutput, { type: 'content' }>['value'][number];

/** ai 7 took `file` parts with typed data and deprecated (with a warning each time) what ai 6 knows. */
const FILE_PARTS_SINCE_MAJOR = 7;

/**
 * One MCP block as AI SDK model output: text as text; an image, audio and an embedded binary resource
 * as file data with their media type (`file` parts on ai 7, `image-data`/`file-data` on ai 6); an
 * embedded text resource and a resource link as text that names them.
 */
function modelPart(block: ContentBlock, fileParts: boolean): ContentOutput {
  const media = mediaOf(block);
  let data = media?.data;
  let mediaType = media?.mimeType;
  let filename: string | undefined;
  if (block.type === 'resource') {
    const resource = resourceOf(block);
    data = typeof resource.blob === 'string' ? resource.blob : undefined;
    mediaType = typeof resource.mimeType === 'string' ? resource.mimeType : 'application/octet-stream';
    filename = resourceFileName(resource.uri);
  }
  if (data === undefined || mediaType === undefined) return { type: 'text', text: blockAsText(block) };
  if (fileParts) return { type: 'file', data: { type: 'data', data }, mediaType, ...(filename ? { filename } : {}) };
  if (block.type === 'image') return { type: 'image-data', data, mediaType };
  return { type: 'file-data', data, mediaType, ...(filename ? { filename } : {}) };
}

/** The model's view of a result: its content blocks mapped part by part. */
export function toAiModelOutput(result: McpToolResult, fileParts: boolean): ToolResultOutput {
  return { type: 'content', value: resultBlocks(result).map((block) => modelPart(block, fileParts)) };
}

/** Options of `aiSdkTools`. */
export interface AiSdkToolsOptions {
  /**
   * The durable run these tools serve: each call then carries the idempotency key
   * `${runId}:${toolCallId}` (the AI SDK's tool call id) to the server in `params._meta`. Without it,
   * calls carry no key.
   */
  runId?: string;
  /**
   * Stream each call's progress (`notifications/progress`) as AI SDK preliminary tool results: `execute`
   * becomes an async iterable that yields `{ type: 'progress', progress, total?, message? }` for each
   * update and the call's result last. The final result, and so what the model sees, is the same as
   * without it; `streamText` shows the updates as `tool-result` parts with `preliminary: true` (a UI
   * built with `useChat` renders them as the tool's output until the result arrives, which is why this
   * is opt-in). Updates that come faster than the stream reads them are coalesced (the latest wins).
   * If the stream stops after an update and before the result, the AI SDK may hand that update to the
   * model as the tool's output: `toModelOutput` turns it into `error-text` "the tool call did not
   * complete", never an empty success (the AI SDK's `ignoreIncompleteToolCalls` in `convertToModelMessages`
   * drops such calls from a UI history instead). Default false.
   */
  preliminaryProgress?: boolean;
}

/** A preliminary tool result (`preliminaryProgress`): one progress update of the call. */
export type AiToolProgress = { type: 'progress' } & McpProgress;

/**
 * Binds the adapter to an `ai` module of the given version. The tool set it returns reads
 * `toolset.tools` on every access, so tools a server adds, changes or removes (`list_changed`) show up
 * in the next step.
 */
export function bindAiSdkTools(ai: AiSdk, version: string): (toolset: McpToolset, options?: AiSdkToolsOptions) => ToolSet {
  const fileParts = Number.parseInt(version, 10) >= FILE_PARTS_SINCE_MAJOR;
  return (toolset, options = {}) => liveView(toolset, (tool) => aiSdkTool(ai, fileParts, tool, options.runId, options.preliminaryProgress === true));
}

/**
 * The call's progress updates, then its result (the AI SDK takes the last value an async iterable
 * `execute` yields as the result, and the ones before it as preliminary results). Only the newest update
 * not read yet is kept, so a flood of progress holds one object, not a queue.
 */
async function* withProgress(call: (onProgress: (progress: McpProgress) => void) => Promise<McpToolResult>): AsyncGenerator<AiToolProgress | McpToolResult> {
  let latest: McpProgress | undefined;
  let settled = false;
  let wake: (() => void) | undefined;
  const result = call((progress) => {
    latest = progress;
    wake?.();
  });
  result.then(
    () => ((settled = true), wake?.()),
    () => ((settled = true), wake?.()),
  );
  for (;;) {
    if (latest !== undefined) {
      const update = latest;
      latest = undefined;
      yield { type: 'progress', ...update };
      continue;
    }
    if (settled) break;
    await new Promise<void>((resolve) => (wake = resolve));
    wake = undefined;
  }
  yield await result;
}

const INCOMPLETE_OUTPUT: ToolResultOutput = { type: 'error-text', value: 'the tool call did not complete' };

/** A preliminary `{ type: 'progress' }` output (an MCP tool result has no `type`). */
function isProgressOutput(output: unknown): boolean {
  return typeof output === 'object' && output !== null && (output as { type?: unknown }).type === 'progress';
}

function aiSdkTool(ai: AiSdk, fileParts: boolean, tool: McpTool, runId: string | undefined, preliminaryProgress: boolean) {
  return ai.dynamicTool({
      description: tool.description,
      // ai 7 carries it to the tool call and result parts (`toolMetadata`), so a UI can tell where a tool
      // comes from; ai 6 has no such field and ignores it.
      metadata: { server: tool.server, remoteName: tool.remoteName },
      // MCP input schemas are JSON Schema objects; the AI SDK validates nothing itself here, the server does.
      inputSchema: ai.jsonSchema(tool.inputSchema as JSONSchema7),
      execute: preliminaryProgress
        ? (input, { abortSignal, toolCallId }) => withProgress((onProgress) => tool.execute(input, { abortSignal, toolCallId, runId, onProgress }))
        : (input, { abortSignal, toolCallId }) => tool.execute(input, { abortSignal, toolCallId, runId }),
      // A progress update as the output: the stream stopped before the result (the AI SDK may then send
      // the last preliminary result to the model). Not a success.
      toModelOutput: ({ output }) => (isProgressOutput(output) ? INCOMPLETE_OUTPUT : toAiModelOutput(output as McpToolResult, fileParts)),
    });
}
