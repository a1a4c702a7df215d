// The tool map's entries: each tool the engine projected, as the object an agent framework holds, with
// its `execute`. Texts of catalogues shared between toolsets are one frozen copy.

import { engine } from './binding';
import type { CallChannel } from './call-channel';
import { createMcpError } from './errors';
import { deepFreeze } from './frozen';
import type { McpOptions, McpTool, McpToolCallContext, McpToolResult, PolicyRequest } from './types';

export type ProjectedTool = Omit<McpTool, 'execute'>;
/**
 * A tool as the engine sends it: with its texts inline, or, when they are a catalogue's shared with other
 * toolsets, as `textsId` and `texts` (their JSON, parsed only for an id not held yet).
 */
export type WireTool = Omit<ProjectedTool, 'description' | 'inputSchema'> & Partial<SharedTexts> & { textsId?: number; texts?: string };
type SharedTexts = Pick<McpTool, 'description' | 'inputSchema' | 'outputSchema' | 'annotations'>;
export interface ToolsChange {
  server: string;
  added: WireTool[];
  changed: WireTool[];
  removed: string[];
}


/**
 * Tool arguments as JSON. A value JSON cannot carry at the top (a function, a symbol, a Map or Set,
 * which would turn into nothing or `{}`) is refused; BigInt and cycles throw in JSON.stringify.
 * Inside the object, JSON's own rules apply (a function-valued property is left out, as by every
 * JSON-based client): checking every nested value costs ~3x the stringify on the hot path.
 */
function argumentsJson(args: unknown): string {
  if (args === undefined || args === null) return '{}';
  const type = typeof args;
  if (type === 'function' || type === 'symbol' || args instanceof Map || args instanceof Set) {
    throw new TypeError(`a ${args instanceof Map ? 'Map' : args instanceof Set ? 'Set' : type} is not a JSON object`);
  }
  return JSON.stringify(args) ?? '';
}

/** Anything that behaves as an AbortSignal: checked by shape, so signals of other realms (and Bun's) pass. */
function isAbortSignal(value: unknown): value is AbortSignal {
  const candidate = value as Partial<AbortSignal> | null;
  return (
    typeof candidate === 'object' &&
    candidate !== null &&
    typeof candidate.aborted === 'boolean' &&
    typeof candidate.addEventListener === 'function' &&
    typeof candidate.removeEventListener === 'function'
  );
}

/**
 * The members of the call context the engine reads (it forms and checks the idempotency key), as JSON;
 * empty when there are none, the common case. Passed as given: the engine names a wrong type.
 */
function callContextJson(ctx: McpToolCallContext | undefined): string {
  if (!ctx || (ctx.runId === undefined && ctx.toolCallId === undefined && ctx.idempotencyKey === undefined)) return '';
  const { runId, toolCallId, idempotencyKey } = ctx;
  // A value JSON cannot carry (a function, a BigInt) becomes a type the engine refuses, by name.
  const wire = (value: unknown) => (typeof value === 'function' || typeof value === 'bigint' || typeof value === 'symbol' ? [] : value);
  return JSON.stringify({ runId: wire(runId), toolCallId: wire(toolCallId), idempotencyKey: wire(idempotencyKey) });
}

/** Tells the policy how a call ended (`policy.record`, which guards such as mcpFirewall have). */
export type RecordOutcome = (tool: ProjectedTool, args: unknown, ctx: McpToolCallContext | undefined, outcome: { ok: boolean; error?: unknown }) => Promise<void>;

export function outcomeRecorder(options: McpOptions): RecordOutcome | undefined {
  const policy = options.policy;
  if (typeof policy?.record !== 'function') return undefined;
  const { session } = options;
  return async (tool, args, ctx, outcome) => {
    const request: PolicyRequest = { kind: 'tool', toolName: tool.name, server: tool.server, remoteName: tool.remoteName, args, session };
    if (ctx?.runId !== undefined) request.runId = ctx.runId;
    if (ctx?.toolCallId !== undefined) request.toolCallId = ctx.toolCallId;
    if (ctx?.idempotencyKey !== undefined) request.idempotencyKey = ctx.idempotencyKey;
    try {
      await policy.record?.(request, outcome);
    } catch {
      // The call's own outcome stands: a guard that cannot record must not turn a result into a failure.
    }
  };
}

/**
 * The texts (description, schemas, annotations) of shared catalogues, by the engine's id: every toolset
 * listing the same catalogue from the same server points at one frozen copy, held while a tool uses it.
 * A tool holds the texts' members, not the object they came in, so they are held through their
 * `inputSchema` (an object every such tool points at): a weak reference to the container alone was
 * cleared by any collection, and the next toolset on the same catalogue then got a copy of its own.
 */
const sharedSchemas = new Map<number, WeakRef<object>>();
const textsOfSchema = new WeakMap<object, SharedTexts>();
const sharedTextsCollected = new FinalizationRegistry<number>((id) => {
  if (sharedSchemas.get(id)?.deref() === undefined) sharedSchemas.delete(id);
});

/** The shared texts of a tool whose texts travel as `textsId` and `texts`: one frozen copy per id held. */
function sharedTexts(id: number, text: string): SharedTexts {
  const held = sharedSchemas.get(id)?.deref();
  let texts = held && textsOfSchema.get(held);
  if (texts === undefined) {
    texts = deepFreeze(JSON.parse(text) as SharedTexts);
    // The engine sends an object schema only (src/catalog.rs).
    const anchor: object = texts.inputSchema;
    textsOfSchema.set(anchor, texts);
    sharedSchemas.set(id, new WeakRef(anchor));
    sharedTextsCollected.register(anchor, id);
  }
  return texts;
}

/**
 * The tool's fields, in the order the map has always shown them; the texts are shared and frozen. A tool whose
 * texts travel inline (this toolset's own: cut down by a disclosure tier, a quarantine notice) is the engine's
 * object itself, its fields already in that order: a big catalogue makes no second object per tool.
 */
function projectedTool(wire: WireTool): ProjectedTool {
  const id = wire.textsId;
  if (id === undefined) {
    deepFreeze(wire.inputSchema);
    deepFreeze(wire.outputSchema);
    deepFreeze(wire.annotations);
    deepFreeze(wire.ui);
    return wire as ProjectedTool;
  }
  const texts = sharedTexts(id, wire.texts!);
  const tool: ProjectedTool = { name: wire.name, description: texts.description, inputSchema: texts.inputSchema, server: wire.server, remoteName: wire.remoteName };
  if (wire.title !== undefined) tool.title = wire.title;
  if (wire.ui !== undefined) tool.ui = deepFreeze(wire.ui);
  if (texts.outputSchema !== undefined) tool.outputSchema = texts.outputSchema;
  if (texts.annotations !== undefined) tool.annotations = texts.annotations;
  return tool;
}

export function makeTool(calls: CallChannel, wire: WireTool, record?: RecordOutcome): McpTool {
  const projected = projectedTool(wire);
  const name = projected.name;
  // mcpferry's own tools (mcp__describe_tool, …) are no MCP request: no span.
  const remote = projected.server !== engine.localServer;
  // One object per tool: `execute` is set on the projection (the closure keeps it alive either way), with no
  // object made to copy it from (a big catalogue makes thousands of tools at connect).
  const execute = (args: unknown, ctx?: McpToolCallContext): Promise<McpToolResult> => {
    if (ctx !== undefined && ctx !== null && typeof ctx !== 'object') {
      return Promise.reject(createMcpError('mcp_invalid_arguments', 'the call context must be an object ({ signal?, abortSignal?, toolCallId?, runId?, idempotencyKey?, onProgress? })'));
    }
    // `abortSignal` is the AI SDK's name for it: a context passed through as is cancels all the same.
    const given = ctx?.signal ?? undefined;
    const alias = ctx?.abortSignal ?? undefined;
    if (given !== undefined && alias !== undefined && given !== alias) {
      return Promise.reject(createMcpError('mcp_invalid_arguments', 'ctx.signal and ctx.abortSignal are two different signals: give one'));
    }
    const signal = given ?? alias;
    if (signal !== undefined && !isAbortSignal(signal)) {
      return Promise.reject(createMcpError('mcp_invalid_arguments', `ctx.${given !== undefined ? 'signal' : 'abortSignal'} must be an AbortSignal`));
    }
    const onProgress = ctx?.onProgress ?? undefined;
    if (onProgress !== undefined && typeof onProgress !== 'function') {
      return Promise.reject(createMcpError('mcp_invalid_arguments', 'ctx.onProgress must be a function'));
    }
    if (signal?.aborted) return Promise.reject(createMcpError('mcp_aborted', 'MCP request aborted by the caller'));
    let json: string;
    try {
      json = argumentsJson(args);
    } catch (error) {
      // BigInt, cycles, functions: not JSON, so not arguments a server could receive.
      return Promise.reject(createMcpError('mcp_invalid_arguments', `tool arguments are not JSON: ${(error as Error).message}`));
    }
    // The context first: a getter that throws there must not leave a span started and never ended.
    const contextJson = callContextJson(ctx);
    const recording = remote ? calls.telemetry?.start({ method: 'tools/call', server: projected.server, target: projected.remoteName }) : undefined;
    const pending = calls.call(name, json, signal, contextJson, onProgress, recording);
    if (!record) return pending;
    // Settled only after the policy has heard: a next call's decide sees this one counted.
    return pending.then(
      async (result) => (await record(projected, args, ctx, { ok: true }), result),
      async (error) => {
        await record(projected, args, ctx, { ok: false, error });
        throw error;
      },
    );
  };
  const tool = projected as McpTool;
  tool.execute = execute;
  return tool;
}
