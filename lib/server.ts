// createMcpServer: the host's own tools served over MCP by the engine (src/server/). The engine owns the
// wire, both protocol eras, the limits, sessions and exactly-once; this file turns each tool into the
// engine's declaration (its JSON Schema) and wraps `execute` so that argument validation with the tool's
// own schema (Standard Schema: zod, valibot, …) runs first and nothing it throws reaches the engine but
// its message.

import { binding, engine, type NativeServerHandle } from './binding';
import { createMcpError, engineCall, typedEngine } from './errors';
import { nativeJournal, type McpJournal } from './firewall';
import { otelRegistered, serveCall, servedRequest, type IncomingTrace } from './telemetry';
import type { ContentBlock, JsonSchema } from './types';
import { isStandardSchema, type StandardSchemaV1 } from './standard-schema';

export type { StandardSchemaV1 } from './standard-schema';

/** What a tool's `execute` is told besides its arguments. */
export interface McpServerToolContext {
  toolName: string;
  /** `params._meta.idempotencyKey` of the request (or `callTool`'s), when it carried one. */
  idempotencyKey?: string;
  /**
   * Aborted when the call runs past `callTimeoutMs` (the call then fails with `mcp_timeout` whatever
   * `execute` does later), when the server is closed (`mcp_connection_closed`), or when a keyed call's
   * journal lease is lost (`mcp_aborted`: another process may take the call over). Pass it on to the work `execute` does (fetch, a
   * database driver): an `execute` that ignores it runs on after its call has failed, and a retry of a
   * keyed call may then run it a second time.
   */
  signal: AbortSignal;
}

/**
 * A tool to publish. `inputSchema` is a JSON Schema (published as is, and checked by the engine's
 * validator before `execute`; one it cannot compile, such as a reference to another document, is not
 * checked), a Standard Schema object (published through its Standard JSON Schema, and checked with its
 * own `validate`, whose parsed value `execute` receives), or an AI SDK `jsonSchema(…)` schema (checked
 * with its `validate` when it has one). AI SDK `tool({...})` objects fit as they are.
 */
export interface McpServerTool {
  description?: string;
  title?: string;
  inputSchema?: JsonSchema | StandardSchemaV1 | { jsonSchema: JsonSchema; validate?: (value: unknown) => unknown };
  outputSchema?: JsonSchema | StandardSchemaV1 | { jsonSchema: JsonSchema };
  annotations?: Record<string, unknown>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  execute(args: any, context: McpServerToolContext): unknown;
}

export interface McpServerOptions {
  /** The tools by name (names: 1 to 128 of `A-Z a-z 0-9 _ - .`). */
  tools: Record<string, McpServerTool>;
  /** With a journal, calls carrying the same idempotency key run once; omit it and every call runs. */
  journal?: McpJournal;
  /** The server's name and version in `initialize` / `server/discover`. */
  name?: string;
  version?: string;
  instructions?: string;
  /** How long one `execute` may run before its signal is aborted and the call fails with `mcp_timeout`, in ms
   * (default 60 000, at most 3 600 000). */
  callTimeoutMs?: number;
}

export interface McpServerHttpOptions {
  /** Default 0: any free port (read it from the result). */
  port?: number;
  /** Default `127.0.0.1`. Binding elsewhere exposes the tools to the network: put authentication in front. */
  host?: string;
  /** Default `/mcp`. */
  path?: string;
  /** Browser origins allowed besides loopback ones (`https://app.example.com`). */
  allowedOrigins?: string[];
  /** `Host` names allowed besides loopback ones (needed when listening on a non-loopback name behind DNS). */
  allowedHosts?: string[];
}

export interface McpServerListenOptions {
  /** Serve on this process's stdin/stdout (nothing else may write to stdout meanwhile). */
  stdio?: boolean;
  http?: McpServerHttpOptions;
}

export interface McpServerListening {
  /** Where HTTP is served, when asked for. */
  http?: { host: string; port: number; path: string; url: string };
  /** Settles when this listen's serving ends: stdin ended, or `close()`. */
  closed: Promise<void>;
}

export interface McpServerCallResult {
  content: ContentBlock[];
  structuredContent?: unknown;
  isError?: boolean;
}

export interface McpServerHandle {
  /** One call in process, through the same checks and journal as a call over the wire. */
  callTool(request: { name: string; arguments?: unknown; idempotencyKey?: string }): Promise<McpServerCallResult>;
  listen(options: McpServerListenOptions): Promise<McpServerListening>;
  /** Stops every listener and aborts the signal of every `execute` running. In-process `callTool` keeps working. */
  close(): Promise<void>;
}

const HELD_JOURNAL = Symbol('mcpferry.serverJournal');

type Check = (value: unknown) => Promise<{ value: unknown } | { invalid: string }>;

interface Prepared {
  declaration: {
    name: string;
    title?: string;
    description?: string;
    inputSchema?: JsonSchema;
    outputSchema?: JsonSchema;
    annotations?: unknown;
    /** The engine leaves the arguments to this file's check (a Standard Schema's own validate). */
    hostValidates: boolean;
  };
  check?: Check;
  execute: McpServerTool['execute'];
}

const JSON_SCHEMA_TARGET = 'draft-2020-12';

/** A schema as JSON Schema, and the check it brings when it is executable. */
function schemaOf(tool: string, schema: unknown, io: 'input' | 'output'): { json?: JsonSchema; check?: Check } {
  if (schema === undefined) return {};
  if (isStandardSchema(schema)) {
    const convert = schema['~standard'].jsonSchema?.[io];
    if (typeof convert !== 'function') {
      throw createMcpError('mcp_config_invalid', `createMcpServer: the ${io} schema of ${tool} (${schema['~standard'].vendor}) has no Standard JSON Schema converter; pass a JSON Schema`);
    }
    const json = convert.call(schema['~standard'].jsonSchema, { target: JSON_SCHEMA_TARGET }) as JsonSchema;
    const check: Check = async (value) => {
      const result = await schema['~standard'].validate(value);
      if (result.issues) return { invalid: result.issues.map(issueText).join('; ') };
      return { value: result.value };
    };
    return { json: io === 'input' && json.type === undefined ? { type: 'object', ...json } : json, check };
  }
  if (typeof schema === 'object' && schema !== null && typeof (schema as { jsonSchema?: unknown }).jsonSchema === 'object') {
    // The AI SDK's `jsonSchema(...)`: its validate, when it has one, is executable too.
    const wrapped = schema as { jsonSchema: JsonSchema; validate?: (value: unknown) => unknown };
    if (typeof (wrapped.jsonSchema as { then?: unknown }).then === 'function') {
      throw createMcpError('mcp_config_invalid', `createMcpServer: the ${io} schema of ${tool} is an AI SDK schema whose JSON Schema is a promise; pass the JSON Schema itself`);
    }
    const validate = wrapped.validate;
    const check: Check | undefined =
      typeof validate === 'function'
        ? async (value) => {
            const result = (await validate.call(wrapped, value)) as { success: boolean; value?: unknown; error?: unknown };
            return result.success ? { value: result.value } : { invalid: messageOf(result.error) };
          }
        : undefined;
    return { json: wrapped.jsonSchema, check };
  }
  if (typeof schema === 'object' && schema !== null && !Array.isArray(schema)) return { json: schema as JsonSchema };
  throw createMcpError('mcp_config_invalid', `createMcpServer: the ${io} schema of ${tool} must be a JSON Schema object or a Standard Schema`);
}

function issueText(issue: { message: string; path?: ReadonlyArray<PropertyKey | { key: PropertyKey }> }): string {
  const path = (issue.path ?? []).map((p) => String(typeof p === 'object' ? p.key : p)).join('.');
  return path ? `${path}: ${issue.message}` : issue.message;
}

/** What a thrown non-Error becomes: its content may be anything (internal state), so it is not sent. */
const NON_ERROR_THROWN = 'the tool failed (it threw a value that is not an Error)';

/** An Error's message, never its stack; for anything else thrown, a fixed text. */
function messageOf(error: unknown): string {
  try {
    if (error instanceof Error) return error.message || error.name;
  } catch {
    // A getter that throws: fall through to the fixed text.
  }
  return NON_ERROR_THROWN;
}

function prepare(tools: unknown): Map<string, Prepared> {
  if (typeof tools !== 'object' || tools === null || Array.isArray(tools)) {
    throw createMcpError('mcp_config_invalid', 'createMcpServer: tools must be an object of tools by name');
  }
  const prepared = new Map<string, Prepared>();
  for (const [name, tool] of Object.entries(tools as Record<string, McpServerTool>)) {
    if (typeof tool?.execute !== 'function') throw createMcpError('mcp_config_invalid', `createMcpServer: the tool ${name} has no execute function`);
    const input = schemaOf(name, tool.inputSchema, 'input');
    const output = schemaOf(name, tool.outputSchema, 'output');
    prepared.set(name, {
      declaration: {
        name,
        title: tool.title,
        description: tool.description,
        inputSchema: input.json,
        outputSchema: output.json,
        annotations: tool.annotations,
        hostValidates: input.check !== undefined,
      },
      check: input.check,
      execute: tool.execute,
    });
  }
  return prepared;
}

/** `createMcpServer`, the public API's (documented where lib/index.ts exports it, which loads this module on first use). */
export function createMcpServer(options: McpServerOptions): McpServerHandle {
  if (typeof options !== 'object' || options === null) throw createMcpError('mcp_config_invalid', 'createMcpServer takes an options object');
  const prepared = prepare(options.tools);
  const journal = options.journal === undefined ? undefined : nativeJournal(options.journal, 'createMcpServer');
  const spec = JSON.stringify({
    name: options.name,
    version: options.version,
    instructions: options.instructions,
    callTimeoutMs: options.callTimeoutMs,
    tools: [...prepared.values()].map((p) => p.declaration),
    // With no tracer or meter provider registered now, the engine reports none of the requests it answers
    // itself (a callback into JavaScript each, for nothing); calls that reach `execute` are still recorded
    // if one is registered later.
    telemetry: otelRegistered(),
  });
  // The engine checks the bound; the same value (or its default) times each execute out here.
  const callTimeoutMs = options.callTimeoutMs ?? engine.defaultServerCallTimeoutMs;
  const running = new Map<number, AbortController>();
  // The engine's only way into the tools: every outcome is a reply, never a rejection.
  const execute = async (toolName: string, requestJson: string): Promise<string> => {
    try {
      if (toolName === engine.serverAbortCall) {
        // The engine stopped waiting for a call (its journal lease was lost): its execute is told.
        const { callId } = JSON.parse(requestJson) as { callId: number };
        running.get(callId)?.abort(createMcpError('mcp_aborted', 'the server stopped the call: its outcome is unknown and it will not be recorded'));
        return '{}';
      }
      if (toolName === engine.serverServedReport) {
        // A request the engine answered itself (initialize, tools/list, …): recorded when telemetry is on.
        servedRequest(requestJson);
        return '{}';
      }
      const tool = prepared.get(toolName);
      if (!tool) return JSON.stringify({ error: `no tool named ${toolName}` });
      // With the caller's trace context when the request carried one (src/telemetry/incoming.rs).
      const request = JSON.parse(requestJson) as { callId: number; arguments: unknown; idempotencyKey: string | null } & IncomingTrace;
      let args = request.arguments;
      if (tool.check) {
        const checked = await tool.check(args);
        if ('invalid' in checked) return JSON.stringify({ invalid: checked.invalid });
        args = checked.value;
      }
      const controller = new AbortController();
      running.set(request.callId, controller);
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timedOut = new Promise<string>((resolve) => {
        timer = setTimeout(() => {
          controller.abort(createMcpError('mcp_timeout', `the call to ${toolName} ran past callTimeoutMs (${callTimeoutMs} ms)`));
          resolve(JSON.stringify({ timeout: true }));
        }, callTimeoutMs);
      });
      const context: McpServerToolContext = {
        toolName,
        ...(request.idempotencyKey != null && { idempotencyKey: request.idempotencyKey }),
        signal: controller.signal,
      };
      let executed: Promise<string> | undefined;
      let isError = false;
      // `execute` runs with the server span active (when a tracer is registered): the host's spans nest under it.
      const run = () => {
        executed = (async () => {
          const value = await tool.execute(args, context);
          isError = (value as { isError?: unknown } | null)?.isError === true;
          return JSON.stringify({ value: value === undefined ? null : value });
        })();
        return Promise.race([executed, timedOut]);
      };
      const failure = (outcome: string) => (outcome.startsWith('{"timeout"') ? 'mcp_timeout' : isError ? 'tool_error' : undefined);
      try {
        return await serveCall(toolName, request, run, failure);
      } finally {
        clearTimeout(timer);
        running.delete(request.callId);
        executed?.catch(() => {});
      }
    } catch (error) {
      return JSON.stringify({ error: messageOf(error) });
    }
  };
  const native: NativeServerHandle = engineCall(() => binding.NativeServer.create(spec, journal?.id, execute));
  // The engine holds `execute` weakly, so an idle server never keeps the process alive; a listening one
  // does, through this timer, until its serving ends.
  const serving = new Set<Promise<void>>();
  let keepAlive: ReturnType<typeof setInterval> | undefined;
  const hold = (until: Promise<void>) => {
    serving.add(until);
    keepAlive ??= setInterval(() => {}, 1 << 30);
    void until
      .catch(() => {})
      .finally(() => {
        serving.delete(until);
        if (serving.size === 0 && keepAlive) {
          clearInterval(keepAlive);
          keepAlive = undefined;
        }
      });
  };
  let closeAll: (() => void)[] = [];

  const handle: McpServerHandle & { [HELD_JOURNAL]: unknown } = {
    // Held here: the engine's registry keeps the journal only weakly.
    [HELD_JOURNAL]: journal,
    async callTool(request) {
      if (typeof request !== 'object' || request === null || typeof request.name !== 'string') {
        throw createMcpError('mcp_invalid_arguments', 'callTool takes { name, arguments?, idempotencyKey? }');
      }
      const { name, arguments: args, idempotencyKey } = request;
      if (idempotencyKey !== undefined && typeof idempotencyKey !== 'string') throw createMcpError('mcp_invalid_arguments', 'idempotencyKey must be a string');
      const argsJson = args === undefined ? undefined : JSON.stringify(args);
      return JSON.parse(await typedEngine(native.callTool(name, argsJson, idempotencyKey))) as McpServerCallResult;
    },
    async listen(listenOptions) {
      if (typeof listenOptions !== 'object' || listenOptions === null || (!listenOptions.stdio && !listenOptions.http)) {
        throw createMcpError('mcp_config_invalid', 'listen takes { stdio: true } and/or { http: { port?, host?, path? } }');
      }
      const ended: Promise<void>[] = [];
      const listening: Partial<McpServerListening> = {};
      if (listenOptions.http) {
        const address = JSON.parse(await typedEngine(native.listenHttp(JSON.stringify(listenOptions.http)))) as { host: string; port: number; path: string };
        const host = address.host.includes(':') ? `[${address.host}]` : address.host;
        listening.http = { ...address, url: `http://${host}:${address.port}${address.path}` };
        // HTTP serves until close().
        ended.push(new Promise<void>((resolve) => closeAll.push(resolve)));
      }
      if (listenOptions.stdio) ended.push(typedEngine(native.serveStdio()));
      const closed = Promise.all(ended).then(() => undefined);
      hold(closed);
      return { ...listening, closed } as McpServerListening;
    },
    async close() {
      const resolvers = closeAll;
      closeAll = [];
      await typedEngine(native.close());
      for (const controller of running.values()) controller.abort(createMcpError('mcp_connection_closed', 'the server was closed'));
      for (const resolve of resolvers) resolve();
    },
  };
  return handle;
}
