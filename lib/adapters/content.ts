// What the framework adapters share: a live view of a toolset's map, MCP content blocks described as
// text for the targets that cannot carry them natively, and which errors a tool loop shows the model.
// No framework is imported here: each adapter imports only its own.

import type { ContentBlock, McpBlobResourceContents, McpTextResourceContents, McpTool, McpToolResult, McpToolset } from '../types';

/**
 * A read-only view of `toolset.tools` in a framework's shape: every read goes to the map as it is now
 * (the engine updates it in place on `list_changed`), and each tool is converted once per McpTool
 * object (a changed tool is a new object, so it is converted again).
 */
export function liveView<T>(toolset: McpToolset, convert: (tool: McpTool) => T): Record<string, T> {
  const converted = new WeakMap<McpTool, T>();
  const current = (key: string | symbol): T | undefined => {
    if (typeof key !== 'string' || !Object.prototype.hasOwnProperty.call(toolset.tools, key)) return undefined;
    const tool = toolset.tools[key];
    let value = converted.get(tool);
    if (value === undefined) {
      value = convert(tool);
      converted.set(tool, value);
    }
    return value;
  };
  const readOnly = () => {
    throw new TypeError('this tool set follows the toolset: it cannot be changed (spread it into a new object to add tools)');
  };
  return new Proxy({} as Record<string, T>, {
    get: (target, key) => current(key) ?? Reflect.get(target, key),
    has: (_target, key) => current(key) !== undefined,
    ownKeys: () => Object.keys(toolset.tools),
    getOwnPropertyDescriptor: (_target, key) => {
      const value = current(key);
      return value === undefined ? undefined : { value, enumerable: true, configurable: true, writable: false };
    },
    set: readOnly,
    defineProperty: readOnly,
    deleteProperty: readOnly,
  });
}

/** The bytes a base64 string encodes (without decoding it). */
function base64Bytes(data: unknown): number {
  if (typeof data !== 'string') return 0;
  const padding = data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0;
  return Math.max(0, Math.floor((data.length * 3) / 4) - padding);
}

const str = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/**
 * An embedded resource's contents with every field optional: the blocks come from the server unchecked,
 * so a field its type promises may still be missing.
 */
export const resourceOf = (block: ContentBlock & { type: 'resource' }): Partial<McpTextResourceContents & McpBlobResourceContents> =>
  block.resource ?? {};

/** The base64 data and media type of an image or audio block, when the server sent both as strings. */
export function mediaOf(block: ContentBlock): { data: string; mimeType: string } | undefined {
  if (block.type !== 'image' && block.type !== 'audio') return undefined;
  return typeof block.data === 'string' && typeof block.mimeType === 'string' ? { data: block.data, mimeType: block.mimeType } : undefined;
}

/**
 * One MCP content block as text, for a target that cannot carry it as it is: binary data is named
 * (kind, media type, size), never inlined; an embedded text resource keeps its text under its URI;
 * a resource link names the resource; a block of an unknown type is shown as its JSON.
 */
export function blockAsText(block: ContentBlock): string {
  switch (block.type) {
    case 'text':
      return String(block.text ?? '');
    case 'image':
    case 'audio':
      return `[${block.type}: ${str(block.mimeType) ?? 'unknown type'}, ${base64Bytes(block.data)} bytes]`;
    case 'resource': {
      const resource = resourceOf(block);
      const uri = str(resource.uri) ?? 'unnamed';
      const mimeType = str(resource.mimeType);
      if (typeof resource.text === 'string') return `[resource ${uri}${mimeType ? ` (${mimeType})` : ''}]\n${resource.text}`;
      return `[resource ${uri}: ${mimeType ?? 'binary'}, ${base64Bytes(resource.blob)} bytes]`;
    }
    case 'resource_link': {
      const details = [str(block.mimeType), str(block.description)].filter(Boolean).join('; ');
      return `[resource link: ${str(block.name) ?? str(block.title) ?? 'unnamed'} <${str(block.uri) ?? ''}>${details ? ` ${details}` : ''}]`;
    }
    default:
      return JSON.stringify(block);
  }
}

/**
 * The blocks of a result for a model. A result with no content but `structuredContent` is that
 * JSON as one text block (the spec asks servers to send both; some send only the structure).
 */
export function resultBlocks(result: McpToolResult): ContentBlock[] {
  const content = Array.isArray(result?.content) ? result.content : [];
  if (content.length === 0 && result?.structuredContent !== undefined) {
    return [{ type: 'text', text: JSON.stringify(result.structuredContent) }];
  }
  return content;
}

/** A whole result as one text, for targets that take only text (Chat Completions tool messages). */
export function resultAsText(result: McpToolResult): string {
  return resultBlocks(result).map(blockAsText).join('\n');
}

/** The file name an embedded resource's URI suggests (its last path segment), for targets that want one. */
export function resourceFileName(uri: unknown): string {
  const text = typeof uri === 'string' ? uri : '';
  const last = text.split(/[/\\]/).filter(Boolean).pop();
  return last && last.length > 0 ? last : 'resource';
}

/** An error mcpferry raised for a call (typed, with an `mcp_…` code). */
export function isMcpError(error: unknown): error is Error & { code: string } {
  const code = error instanceof Error ? (error as { code?: unknown }).code : undefined;
  return typeof code === 'string' && code.startsWith('mcp_');
}

/**
 * Runs one call for a dispatcher (`serverArguments` turns the model's arguments into the server's) and
 * tells apart what the model should see from what ends the loop:
 * a tool failure (isError), a policy denial, an unknown tool, a timeout… become an error result the
 * model reads; an abort (the caller asked to stop) and anything that is not mcpferry's (a bug) throw.
 */
export async function dispatchCall(
  toolset: McpToolset,
  name: string,
  args: unknown,
  ctx: { signal?: AbortSignal; toolCallId?: string },
  serverArguments: (tool: McpTool, args: unknown) => unknown = (_tool, given) => given,
): Promise<{ result: McpToolResult; isError: false } | { error: string; isError: true }> {
  const tool = Object.prototype.hasOwnProperty.call(toolset.tools, name) ? toolset.tools[name] : undefined;
  if (!tool) return { error: `There is no tool named ${JSON.stringify(name)}.`, isError: true };
  try {
    return { result: await tool.execute(serverArguments(tool, args), ctx), isError: false };
  } catch (error) {
    if (!isMcpError(error) || error.code === 'mcp_aborted') throw error;
    return { error: error.message, isError: true };
  }
}

/** Tool-call arguments as the model sent them (a JSON string), parsed; a model's malformed JSON is its error to see. */
export function parseArguments(json: string): { args: unknown } | { error: string } {
  if (json.trim() === '') return { args: {} };
  try {
    return { args: JSON.parse(json) };
  } catch (error) {
    return { error: `The tool arguments are not valid JSON: ${(error as Error).message}` };
  }
}
