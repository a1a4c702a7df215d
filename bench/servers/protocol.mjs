// The MCP server side shared by echo-stdio.mjs and echo-http.mjs, written by hand (no SDK) so that the
// server costs as little as possible and the same for every client: the benchmark measures clients.
//
// Environment:
//   ECHO_TOOLS  number of tools published (default 10). The first is `echo`, the rest `tool_0001`...;
//               every tool echoes its arguments back as one text block.
//   ECHO_PAGE   tools per tools/list page (default 0 = all in one page); the cursor is the next offset.
//   ECHO_STRUCTURED  1: every tool also has an outputSchema (its input's shape) and returns its arguments as
//               structuredContent too (W1V/W2V, where clients validate what they validate by default).
//   ECHO_MODERN 1: `server/discover` is answered too (2026-07-28), and a request handled with `modern` set gets
//               its result with `resultType: "complete"`, as that revision requires (echo-http.mjs).
//   ECHO_RESOURCES  1: the server also declares `resources` and answers resources/list and resources/read (W11):
//               `bench://text` (text/markdown, ECHO_RESOURCE_BYTES of ASCII text in lines) and `bench://blob`
//               (application/octet-stream, ECHO_RESOURCE_BYTES bytes, base64 on the wire). Unset, the server
//               declares only `tools`, as W1–W10 were measured.
//   ECHO_RESOURCE_BYTES  size of each resource's content in bytes (default 4096).

import { resourceText } from './resource-text.mjs';

const PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'];

const toolCount = Math.max(1, Number.parseInt(process.env.ECHO_TOOLS ?? '10', 10) || 10);
const pageSize = Math.max(0, Number.parseInt(process.env.ECHO_PAGE ?? '0', 10) || 0);
const structured = process.env.ECHO_STRUCTURED === '1';
const MODERN_VERSION = '2026-07-28';
export const modernEnabled = process.env.ECHO_MODERN === '1';
const resourcesEnabled = process.env.ECHO_RESOURCES === '1';
const resourceBytes = Math.max(1, Number.parseInt(process.env.ECHO_RESOURCE_BYTES ?? '4096', 10) || 4096);

function makeTool(index) {
  const name = index === 0 ? 'echo' : `tool_${String(index).padStart(4, '0')}`;
  const tool = {
    name,
    description: `Echoes its arguments back as JSON text (benchmark tool #${index}); it has no side effects.`,
    inputSchema: {
      type: 'object',
      properties: {
        message: { type: 'string', description: 'Text to echo back' },
        count: { type: 'integer', minimum: 0, description: 'An optional number' },
        tags: { type: 'array', items: { type: 'string' } },
      },
    },
  };
  if (structured) {
    const { properties } = tool.inputSchema;
    tool.outputSchema = { type: 'object', properties: { message: properties.message, count: properties.count, tags: properties.tags } };
  }
  return tool;
}

const tools = Array.from({ length: toolCount }, (_, i) => makeTool(i));
const toolNames = new Set(tools.map((t) => t.name));

// tools/list pages are serialized once: with 2 000 tools, re-serializing them on every request would make
// the server, not the client, the slow side of W5.
const pages = new Map(); // cursor ('' for the first page) -> serialized result
{
  const size = pageSize || toolCount;
  for (let offset = 0; offset < toolCount; offset += size) {
    const next = offset + size < toolCount ? String(offset + size) : undefined;
    const result = { tools: tools.slice(offset, offset + size) };
    if (next !== undefined) result.nextCursor = next;
    pages.set(offset === 0 ? '' : String(offset), JSON.stringify(result));
  }
}

const serverInfo = { name: 'bench-echo', version: '1.0.0' };
const capabilities = resourcesEnabled ? { tools: { listChanged: false }, resources: {} } : { tools: { listChanged: false } };

// W11's resources, serialized once like the tools/list pages: the text of resource-text.mjs, the blob bytes
// 0..255 repeated.
const resources = new Map(); // uri -> serialized resources/read result
let resourceList = '{"resources":[]}';
if (resourcesEnabled) {
  const text = resourceText(resourceBytes);
  const blob = Buffer.alloc(resourceBytes);
  for (let i = 0; i < resourceBytes; i++) blob[i] = i & 0xff;
  const entries = [
    { uri: 'bench://text', name: 'text', mimeType: 'text/markdown', size: resourceBytes, contents: { text } },
    { uri: 'bench://blob', name: 'blob', mimeType: 'application/octet-stream', size: resourceBytes, contents: { blob: blob.toString('base64') } },
  ];
  for (const { uri, mimeType, contents } of entries) resources.set(uri, JSON.stringify({ contents: [{ uri, mimeType, ...contents }] }));
  resourceList = JSON.stringify({ resources: entries.map(({ contents, ...listed }) => listed) });
}

function reply(id, resultJson) {
  return `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${resultJson}}`;
}

/** A result of the 2026-07-28 revision: the same object with `resultType` first. */
function complete(resultJson) {
  return resultJson === '{}' ? '{"resultType":"complete"}' : `{"resultType":"complete",${resultJson.slice(1)}`;
}

/** `reply`, in the revision the request was handled in. */
function result(id, resultJson, modern) {
  return reply(id, modern ? complete(resultJson) : resultJson);
}

function replyError(id, code, message) {
  return JSON.stringify({ jsonrpc: '2.0', id: id ?? null, error: { code, message } });
}

/**
 * Handle one parsed JSON-RPC message. Returns the serialized response, or null for notifications and
 * responses (nothing to answer). Unknown methods get -32601, which is also how `server/discover` (sent
 * first by @ai-sdk/mcp) is answered unless ECHO_MODERN is set: then this is a plain initialize-first
 * server. `modern`: the request is of the 2026-07-28 revision (its result carries `resultType`).
 */
export function handleMessage(msg, modern = false) {
  if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) return replyError(null, -32600, 'Invalid Request');
  const { id, method, params } = msg;
  if (id === undefined || id === null) return null; // a notification (e.g. notifications/initialized)
  if (typeof method !== 'string') return null; // a response to a server request: we never send any
  switch (method) {
    case 'server/discover':
      if (!modernEnabled) return replyError(id, -32601, `Method not found: ${method}`);
      return result(id, JSON.stringify({
        supportedVersions: [MODERN_VERSION],
        capabilities: { tools: {} },
        _meta: { 'io.modelcontextprotocol/serverInfo': serverInfo },
      }), modern);
    case 'initialize': {
      const asked = params?.protocolVersion;
      const protocolVersion = PROTOCOL_VERSIONS.includes(asked) ? asked : PROTOCOL_VERSIONS[0];
      return result(id, JSON.stringify({ protocolVersion, capabilities, serverInfo }), modern);
    }
    case 'ping':
      return result(id, '{}', modern);
    case 'tools/list': {
      const cursor = params?.cursor ?? '';
      const page = pages.get(cursor);
      return page === undefined ? replyError(id, -32602, 'Invalid cursor') : result(id, page, modern);
    }
    case 'tools/call': {
      const name = params?.name;
      if (!toolNames.has(name)) return replyError(id, -32602, `Unknown tool: ${name}`);
      const text = JSON.stringify(params.arguments ?? {});
      if (structured) return result(id, `{"content":[{"type":"text","text":${JSON.stringify(text)}}],"structuredContent":${text}}`, modern);
      return result(id, JSON.stringify({ content: [{ type: 'text', text }] }), modern);
    }
    case 'resources/list':
      if (!resourcesEnabled) return replyError(id, -32601, `Method not found: ${method}`);
      return result(id, resourceList, modern);
    case 'resources/read': {
      if (!resourcesEnabled) return replyError(id, -32601, `Method not found: ${method}`);
      const read = resources.get(params?.uri);
      return read === undefined ? replyError(id, -32002, `Resource not found: ${params?.uri}`) : result(id, read, modern);
    }
    default:
      return replyError(id, -32601, `Method not found: ${method}`);
  }
}

/** Parse one message (or a JSON-RPC batch) and return the serialized answers. */
export function handleText(text) {
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch {
    return [replyError(null, -32700, 'Parse error')];
  }
  const answers = [];
  for (const msg of Array.isArray(parsed) ? parsed : [parsed]) {
    const answer = handleMessage(msg);
    if (answer !== null) answers.push(answer);
  }
  return answers;
}
