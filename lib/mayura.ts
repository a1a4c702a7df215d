// `mcpferry/mayura`: `defineMcpTool`, one remote MCP tool declared by the application — its description,
// validators, effects, permissions, deadline and cost are ours, never the server's — and called through
// any client with a `callTool` method (mcpferry's `connectMcpServer`, the official SDK's `Client` through
// a one-line wrapper). The contract is `mayura-adapter-mcp`:
//
// - before the request: the arguments must be a JSON object that passes `input`; nothing is sent otherwise;
// - after it: the result must be an object with `structuredContent` (valid against `output`) and no
//   top-level key but `content`, `isError`, `_meta` (dropped) and a 2026-07-28 `resultType` of `complete`,
//   at most 1 MiB as JSON;
// - a failure after the request was sent ends `mcp_outcome_unknown` for a tool with effects (the server
//   may have acted), a plain typed failure for `effects: 'none'`;
// - the server's and the client's error text never reaches the error the agent sees: it goes to
//   `onDiagnostic`, quoted by the engine (bounded, `secrets` redacted).
//
// JSON Schema validators are compiled and run by the engine (lib/schema.ts); Standard Schema validators
// (zod, valibot, arktype, …) run as the application gave them.

import { binding } from './binding';
import { clientInternals } from './client';
import { createMcpError, McpError, type McpErrorCode, type McpOutcomeUnknownError } from './errors';
import { compileJsonSchema } from './schema';
import type { JsonSchema } from './types';
import { deepFreeze } from './frozen';
import { isStandardSchema, type StandardSchemaResult, type StandardSchemaV1 } from './standard-schema';

export { McpOutcomeUnknownError, McpResultInvalidError } from './errors';

/** What calling the tool can change: nothing, reads only, remote state, or the host itself. */
export type McpToolEffects = 'none' | 'read' | 'write' | 'host';

/** The request `defineMcpTool` hands to `client.callTool` (frozen, arguments too). */
export interface McpToolCallRequest {
  readonly name: string;
  readonly arguments: Readonly<Record<string, unknown>>;
  /** Aborts on the caller's signal and on the tool's timeout: stop the call (and cancel it on the server). */
  readonly signal: AbortSignal;
}

/** Any MCP client: `callTool` sends `tools/call` and resolves to the MCP tool result. */
export interface McpClient {
  callTool(request: McpToolCallRequest): unknown;
}

export type { StandardSchemaV1 } from './standard-schema';

/** A validator: a Standard Schema object, or a JSON Schema (2020-12) the engine validates against. */
export type McpToolValidator<T = unknown> = StandardSchemaV1<unknown, T> | JsonSchema | boolean;
type Validated<V> = V extends StandardSchemaV1<unknown, infer O> ? O : unknown;

export interface DefineMcpToolOptions<Input extends McpToolValidator, Output extends McpToolValidator> {
  /** The tool's id, as the agent and the permission `tool:<id>` name it. */
  id: string;
  version: string;
  /** What the model reads. Write your own: the server's description is not used. */
  description: string;
  /** The tool's name on the MCP server: letters, digits and `._/-`, up to 128 characters. */
  remoteName: string;
  /** Validates the arguments (which must be a JSON object) before anything is sent. */
  input: Input;
  /** Validates the result's `structuredContent`; what it returns is what `execute` resolves to. */
  output: Output;
  /**
   * The input schema the model sees. Default: `input` itself when it is a JSON Schema, or what a Standard
   * Schema validator says of itself (Standard JSON Schema: zod ≥ 4.2). Must describe an object.
   */
  inputJsonSchema?: JsonSchema;
  /** What a call can change. Anything but `none` makes a failure after sending `mcp_outcome_unknown`. */
  effects: McpToolEffects;
  /** Permissions the host must grant besides `tool:<id>` and `effect:<effects>`, such as `tracker:write`. */
  capabilities?: readonly string[];
  /** Deadline of one call in ms, from sending to the result (default 30 000). */
  timeoutMs?: number;
  /** The most one call may cost, in millionths of the host's currency unit (default 0). Declared, not measured. */
  costMicros?: number;
  client: McpClient;
  /** Why a call failed, with the server's or client's text quoted (bounded, `secrets` redacted). */
  onDiagnostic?: (diagnostic: McpToolCallDiagnostic) => void;
  /**
   * Values no diagnostic may show (the token your client sends, say): replaced by `[redacted]`. A
   * `connectMcpServer` client's own secrets (its entry's headers and credential-named env values, its
   * tokens) are redacted without being listed here.
   */
  secrets?: readonly string[];
}

/** A failed call of a declared tool, as `onDiagnostic` receives it. */
export interface McpToolCallDiagnostic {
  code: 'tool-call-failed';
  /** The declared tool's id and its name on the server. */
  tool: string;
  remoteName: string;
  /** The failure, as the error's code (or, for `mcp_outcome_unknown`, its `reason`) names it. */
  errorCode: McpErrorCode;
  /** `unknown` when the server may have acted (a tool with effects, after sending), else `failed`. */
  outcome: 'failed' | 'unknown';
  /** What happened, with untrusted text quoted by the engine. Never shown to the model. */
  message: string;
}

export interface McpDeclaredTool<Output = unknown> {
  readonly id: string;
  readonly version: string;
  readonly description: string;
  readonly remoteName: string;
  /** The input schema for the model (a JSON object schema). */
  readonly inputJsonSchema: JsonSchema;
  readonly effects: McpToolEffects;
  readonly capabilities: readonly string[];
  readonly timeoutMs: number;
  readonly costMicros: number;
  /** Every permission a host must grant to call it: `tool:<id>`, each capability, `effect:<effects>` unless `none`. */
  readonly permissions: readonly string[];
  /** Validate, call, check the result: resolves to the validated `structuredContent`. */
  execute(input: unknown, ctx?: { signal?: AbortSignal }): Promise<Output>;
}

/** The default deadline of one call, in ms. */
export const DEFAULT_MCP_TOOL_TIMEOUT_MS = 30_000;
/** The largest result accepted, as UTF-8 JSON bytes. */
export const MAX_MCP_TOOL_RESULT_BYTES = 1024 * 1024;
const REMOTE_NAME = /^[A-Za-z0-9._/-]{1,128}$/;
/** The longest timer Node keeps (2^31 − 1 ms); a longer `timeoutMs` would fire at once. */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;
const EFFECTS: readonly McpToolEffects[] = ['none', 'read', 'write', 'host'];
/**
 * The top-level keys an MCP tool result may have here: the contract's four, and the 2026-07-28 revision's
 * `resultType`, which frames every result of that protocol and is accepted only as `complete` (a client
 * answers an `input_required` round itself before it hands a result on).
 */
const RESULT_KEYS = new Set(['structuredContent', 'content', 'isError', '_meta', 'resultType']);
/** Errors of mcpferry's own client that mean the server was sent nothing (a guard refused the call). */
const NOT_SENT: ReadonlySet<string> = new Set([
  'mcp_policy_denied',
  'mcp_approval_required',
  'mcp_host_not_allowed',
  'mcp_containment_violation',
  'mcp_tool_quarantined',
  'mcp_tool_unavailable',
  'mcp_config_invalid',
  'mcp_invalid_arguments',
  'mcp_server_unavailable',
]);

type Check = { ok: true; value: unknown } | { ok: false; path: string; message: string };
type Validate = (value: unknown) => Check | Promise<Check>;

/** Declare one remote MCP tool: see {@link DefineMcpToolOptions}. Invalid options throw `McpConfigError`. */
export function defineMcpTool<Input extends McpToolValidator, Output extends McpToolValidator>(
  options: DefineMcpToolOptions<Input, Output>,
): McpDeclaredTool<Validated<Output>> {
  const o = (options ?? {}) as DefineMcpToolOptions<Input, Output>;
  const fail = (message: string): never => {
    throw createMcpError('mcp_config_invalid', `defineMcpTool: ${message}`);
  };
  const text = (key: 'id' | 'version' | 'description') => (typeof o[key] === 'string' && o[key].trim() !== '' ? o[key] : fail(`${key} must be a non-empty string`));
  const id = text('id');
  const where = `defineMcpTool(${JSON.stringify(id)})`;
  const version = text('version');
  const description = text('description');
  if (typeof o.remoteName !== 'string' || !REMOTE_NAME.test(o.remoteName)) {
    fail(`remoteName must be 1 to 128 letters, digits, '.', '_', '/' or '-' (got ${JSON.stringify(o.remoteName)})`);
  }
  const remoteName = o.remoteName;
  if (!EFFECTS.includes(o.effects)) fail(`effects must be one of ${EFFECTS.join(', ')} (got ${JSON.stringify(o.effects)})`);
  if (o.capabilities !== undefined && !Array.isArray(o.capabilities)) fail('capabilities must be an array of strings');
  const capabilities = Object.freeze(
    [...(o.capabilities ?? [])].map((c) => (typeof c === 'string' && c.trim() !== '' ? c : fail('capabilities must be non-empty strings'))),
  );
  const timeoutMs = o.timeoutMs ?? DEFAULT_MCP_TOOL_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs <= 0 || timeoutMs > MAX_TIMEOUT_MS) fail(`timeoutMs must be a whole number of ms from 1 to ${MAX_TIMEOUT_MS}`);
  const costMicros = o.costMicros ?? 0;
  if (!Number.isSafeInteger(costMicros) || costMicros < 0) fail('costMicros must be a whole number ≥ 0');
  const client = o.client;
  if (client === null || typeof client !== 'object' || typeof client.callTool !== 'function') fail('client must be an object with a callTool method');
  if (o.onDiagnostic !== undefined && typeof o.onDiagnostic !== 'function') fail('onDiagnostic must be a function');
  if (o.secrets !== undefined && !Array.isArray(o.secrets)) fail('secrets must be an array of strings');
  const secrets = [...(o.secrets ?? [])].map((s) => (typeof s === 'string' ? s : fail('secrets must be strings')));
  const validateInput = validator(o.input, 'input', fail);
  const validateOutput = validator(o.output, 'output', fail);
  const inputJsonSchema = modelSchema(o, fail);
  const effects = o.effects;
  const permissions = Object.freeze([`tool:${id}`, ...capabilities, ...(effects === 'none' ? [] : [`effect:${effects}`])]);

  /** Tell the application what failed (never throws), and give the agent an error without the details. */
  const failure = (errorCode: McpErrorCode, sent: boolean, detail: string, agentText: string): McpError => {
    const unknown = sent && effects !== 'none';
    if (o.onDiagnostic) {
      const diagnostic: McpToolCallDiagnostic = { code: 'tool-call-failed', tool: id, remoteName, errorCode, outcome: unknown ? 'unknown' : 'failed', message: `${where}: ${detail}` };
      try {
        o.onDiagnostic(diagnostic);
      } catch {
        // A failing diagnostic sink must not change the call's outcome.
      }
    }
    // An isError result reads like every other tool error in mcpferry (`MCP tool error: …`).
    if (!unknown) return createMcpError(errorCode, `${errorCode === 'mcp_tool_error' ? 'MCP tool error: ' : ''}${where}: ${agentText}`);
    const error = createMcpError(
      'mcp_outcome_unknown',
      `${where}: the call of ${remoteName} failed after it was sent (${agentText}); whether the server acted is unknown: check before calling again`,
    ) as McpOutcomeUnknownError;
    Object.defineProperty(error, 'reason', { value: errorCode, enumerable: true });
    return error;
  };
  // mcpferry's own client knows its server's secrets (headers, env, tokens): its quoting redacts them too.
  const ownClient = clientInternals(client);
  const quote = (untrusted: string) => (ownClient ? ownClient.quote(untrusted, secrets) : binding.quoteUntrustedText(untrusted, secrets));

  async function execute(input: unknown, ctx?: { signal?: AbortSignal }): Promise<unknown> {
    const signal = ctx?.signal;
    if (signal?.aborted) throw failure('mcp_aborted', false, 'aborted before sending', 'the call was aborted before it was sent');
    if (!isJsonObject(input)) {
      throw failure('mcp_invalid_arguments', false, 'arguments are not a JSON object', `arguments must be a JSON object (got ${kindOf(input)})`);
    }
    const checked = await validateInput(input);
    if (!checked.ok) {
      const at = checked.path === '' ? 'the arguments' : `arguments at ${checked.path}`;
      throw failure('mcp_invalid_arguments', false, `${at}: ${checked.message}`, `invalid ${at}: ${checked.message}`);
    }
    let args: Record<string, unknown>;
    try {
      args = deepFreeze(JSON.parse(JSON.stringify(checked.value)));
    } catch (error) {
      throw failure('mcp_invalid_arguments', false, `arguments are not JSON: ${(error as Error).message}`, 'the validated arguments are not JSON');
    }
    if (!isJsonObject(args)) throw failure('mcp_invalid_arguments', false, 'validated arguments are not an object', 'the validated arguments are not a JSON object');
    if (signal?.aborted) throw failure('mcp_aborted', false, 'aborted before sending', 'the call was aborted before it was sent');

    const result = await call(args, signal);
    return checkResult(result);
  }

  /** Send, and settle on the result, the deadline or the caller's abort, whichever comes first. */
  async function call(args: Record<string, unknown>, signal: AbortSignal | undefined): Promise<unknown> {
    const controller = new AbortController();
    const request: McpToolCallRequest = Object.freeze({ name: remoteName, arguments: args, signal: controller.signal });
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    let stop: McpError | undefined;
    const stopped = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        stop = failure('mcp_timeout', true, `no result within ${timeoutMs} ms`, `no result within ${timeoutMs} ms`);
        controller.abort();
        reject(stop);
      }, timeoutMs);
      if (signal) {
        onAbort = () => {
          stop = failure('mcp_aborted', true, 'aborted by the caller', 'the call was aborted');
          controller.abort(signal.reason);
          reject(stop);
        };
        signal.addEventListener('abort', onAbort, { once: true });
      }
    });
    const pending = Promise.resolve().then(() => client.callTool(request));
    try {
      return await Promise.race([pending, stopped]);
    } catch (error) {
      // The deadline or the abort came first; a client that rejects because of it adds nothing.
      throw stop ?? clientFailure(error);
    } finally {
      clearTimeout(timer);
      if (onAbort) signal?.removeEventListener('abort', onAbort);
      // A client that settles after the deadline or the abort is ignored, its rejection too.
      pending.catch(() => undefined);
    }
  }

  /** The client's own failure: its code kept when it names one, its text for the diagnostic only. */
  function clientFailure(error: unknown): McpError {
    const code = (error as { code?: unknown } | null)?.code;
    const detail = quote(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
    // A refused redirect hop (`redirected`), or an error that says the request went out (`sent`), comes after
    // the server received the call.
    const after = error instanceof McpError && (error.sent === true || (error as { redirected?: unknown }).redirected === true);
    if (error instanceof McpError && NOT_SENT.has(error.code) && !after) {
      return failure(error.code, false, `the client refused the call: ${detail}`, `the call was not sent (${error.code})`);
    }
    const errorCode: McpErrorCode =
      typeof code === 'string' && code.startsWith('mcp_') ? (code as McpErrorCode) : typeof code === 'number' ? 'mcp_protocol_error' : 'mcp_transport_error';
    return failure(errorCode, true, `the client failed: ${detail}`, `the MCP client failed (${errorCode}); details are withheld`);
  }

  async function checkResult(result: unknown): Promise<unknown> {
    const invalid = (detail: string, agentText = 'the result breaks the MCP tool result contract'): never => {
      throw failure('mcp_result_invalid', true, detail, agentText);
    };
    if (!isJsonObject(result)) invalid(`the result is ${kindOf(result)}, not an object`);
    let json: string;
    try {
      json = JSON.stringify(result);
    } catch (error) {
      return invalid(`the result is not JSON: ${(error as Error).message}`);
    }
    const bytes = Buffer.byteLength(json, 'utf8');
    if (bytes > MAX_MCP_TOOL_RESULT_BYTES) {
      throw failure('mcp_result_too_large', true, `the result is ${bytes} bytes`, `the result is larger than ${MAX_MCP_TOOL_RESULT_BYTES} bytes`);
    }
    const copy = JSON.parse(json) as Record<string, unknown>;
    const extra = Object.keys(copy).filter((key) => !RESULT_KEYS.has(key));
    if (extra.length > 0) invalid(`unexpected top-level keys: ${quote(extra.join(', '))}`, 'the result has top-level keys an MCP tool result may not have');
    if (copy.resultType !== undefined && copy.resultType !== 'complete') invalid(`resultType is ${quote(JSON.stringify(copy.resultType))}, not "complete"`);
    if (copy.isError !== undefined && typeof copy.isError !== 'boolean') invalid('isError is not a boolean');
    if (copy.content !== undefined && !Array.isArray(copy.content)) invalid('content is not an array');
    if (copy.isError === true) {
      const said = (Array.isArray(copy.content) ? copy.content : []).map((block) => (isJsonObject(block) && typeof block.text === 'string' ? block.text : '')).join(' ');
      throw failure('mcp_tool_error', true, `the tool reported an error: ${quote(said)}`, 'the tool reported an error; details are withheld');
    }
    if (!('structuredContent' in copy)) invalid('the result has no structuredContent', 'the result has no structuredContent');
    if (!isJsonObject(copy.structuredContent)) invalid(`structuredContent is ${kindOf(copy.structuredContent)}, not an object`);
    const checked = await validateOutput(copy.structuredContent);
    if (!checked.ok) {
      invalid(`structuredContent at ${checked.path === '' ? '(root)' : quote(checked.path)}: ${quote(checked.message)}`, 'the result does not match the declared output');
    }
    return (checked as { value: unknown }).value;
  }

  return Object.freeze({
    id,
    version,
    description,
    remoteName,
    inputJsonSchema,
    effects,
    capabilities,
    timeoutMs,
    costMicros,
    permissions,
    execute,
  }) as McpDeclaredTool<Validated<Output>>;
}

/** A validator as one function: Standard Schema as given, JSON Schema compiled by the engine once. */
function validator(given: unknown, which: 'input' | 'output', fail: (message: string) => never): Validate {
  if (isStandardSchema(given)) {
    const standard = given['~standard'];
    return async (value) => {
      let result: StandardSchemaResult<unknown>;
      try {
        result = await standard.validate(value);
      } catch (error) {
        // A validator that throws is a failed check, not an untyped rejection of the call.
        return { ok: false, path: '', message: `the ${which} validator threw: ${(error as Error)?.message ?? String(error)}` };
      }
      if (result.issues === undefined) return { ok: true, value: (result as { value: unknown }).value };
      const [issue] = result.issues;
      return { ok: false, path: pointer(issue?.path ?? []), message: issue?.message ?? 'invalid' };
    };
  }
  if (typeof given === 'boolean' || isJsonObject(given)) {
    let compiled: ReturnType<typeof compileJsonSchema>;
    try {
      compiled = compileJsonSchema(given);
    } catch (error) {
      return fail(`${which} is not a usable JSON Schema: ${(error as Error).message}`);
    }
    return (value) => {
      const result = compiled.validate(value);
      return result.ok ? { ok: true, value } : { ok: false, path: result.path, message: result.message };
    };
  }
  return fail(`${which} must be a Standard Schema validator (zod, valibot, …) or a JSON Schema (an object or a boolean)`);
}

/** The input schema the model sees: given, the JSON Schema validator itself, or the validator's own description. */
function modelSchema(o: DefineMcpToolOptions<McpToolValidator, McpToolValidator>, fail: (message: string) => never): JsonSchema {
  let schema: unknown = o.inputJsonSchema;
  if (schema === undefined && isStandardSchema(o.input)) {
    const describe = o.input['~standard'].jsonSchema?.input;
    if (typeof describe !== 'function') return fail('inputJsonSchema is required: the input validator cannot describe itself as JSON Schema');
    try {
      schema = describe({ target: 'draft-2020-12' });
    } catch (error) {
      return fail(`inputJsonSchema is required: the input validator cannot describe itself (${(error as Error).message})`);
    }
  } else if (schema === undefined) {
    schema = o.input;
  }
  if (!isJsonObject(schema) || schema.type !== 'object') return fail('inputJsonSchema must be a JSON Schema object with type "object"');
  try {
    return deepFreeze(JSON.parse(JSON.stringify(schema)));
  } catch (error) {
    return fail(`inputJsonSchema is not JSON: ${(error as Error).message}`);
  }
}

function isJsonObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function kindOf(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value;
}

/** A Standard Schema issue path as a JSON Pointer (`/items/0/name`). */
function pointer(path: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }>): string {
  return path.map((segment) => `/${String(typeof segment === 'object' && segment !== null ? segment.key : segment).replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');
}

