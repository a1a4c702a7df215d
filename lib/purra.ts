// mcpferry/purra: explicitly bound, read-only tools of one server (after purra-mcp). The host names
// each remote tool it exposes, under its own local name, with a read policy, a scope check and a
// concurrency declaration; nothing the server says (annotations, other tools) grants anything.
//
// This file holds the bindings and the host's callbacks, and wires them to the engine: the listing is
// the client's (bounded in the engine), and every judgement of what the server sent is the engine's
// (src/purra.rs: limits, the strict schema profile, result shaping, the identity digest; argument and
// output validation by src/schema/). The client feeds list changes and the negotiated version itself.

import { binding } from './binding';
import { clientInternals, type ClientInternals } from './client';
import { McpError } from './errors';
import { deepFreeze } from './frozen';
import { compileJsonSchema, type CompiledJsonSchema } from './schema';
import type {
  McpAdapterErrorCode,
  McpBindingContext,
  McpBindingErrorCode,
  McpBindingResult,
  McpDiscoveryOptions,
  McpServerClient,
  McpToolBinding,
  McpToolCatalog,
  McpToolEntry,
  McpToolLimits,
  McpToolRegistration,
  McpToolSnapshot,
} from './types';

/** The engine's purra entry points (src/napi/purra.rs): verdicts as JSON. */
const engine = binding;
type Verdict<T> = { ok: true; value: T } | { ok: false; code: string };

/** Discovery refused; the message is fixed, whatever the server said. */
export class McpAdapterError extends Error {
  readonly code: McpAdapterErrorCode;
  constructor(code: McpAdapterErrorCode) {
    super('MCP tool boundary rejected the operation');
    this.code = code;
    this.name = 'McpAdapterError';
  }
}

function fail(code: McpAdapterErrorCode): never {
  throw new McpAdapterError(code);
}

/** Negotiated versions whose tools carry output schemas and structured content. */
const SUPPORTED_PROTOCOL_VERSIONS: ReadonlySet<string> = new Set(['2025-06-18', '2025-11-25', '2026-07-28']);
const SERVER_ID = /^[A-Za-z0-9_.-]{1,128}$/;
const REMOTE_NAME = /^[A-Za-z0-9_.-]{1,128}$/;
const LOCAL_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
/** Longest `tools/list` cursor followed, in bytes. */
const MAX_CURSOR_BYTES = 512;
/** Deepest arguments accepted, in levels. */
const MAX_ARGUMENT_DEPTH = 64;


/** Whether `value` is JSON as it stands (nothing JSON.stringify would drop or change). */
function isJson(value: unknown, depth = 0, seen = new Set<object>()): boolean {
  if (depth > MAX_ARGUMENT_DEPTH) return false;
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return Number.isFinite(value);
    case 'object': {
      if (value === null) return true;
      if (seen.has(value)) return false;
      const proto = Object.getPrototypeOf(value);
      if (!Array.isArray(value) && proto !== Object.prototype && proto !== null) return false;
      seen.add(value);
      const ok = Object.values(value).every((item) => isJson(item, depth + 1, seen));
      seen.delete(value);
      return ok;
    }
    default:
      return false;
  }
}

/** The engine's code for a failed listing, as a discovery refusal. */
function discoveryCode(error: unknown): McpAdapterErrorCode {
  if (!(error instanceof McpError)) return 'mcp_protocol_error';
  switch (error.code) {
    case 'mcp_timeout':
    case 'mcp_connection_closed':
    case 'mcp_aborted':
      return error.code;
    case 'mcp_transport_error':
    case 'mcp_host_not_allowed':
    case 'mcp_auth_error':
      return 'mcp_transport_error';
    case 'mcp_result_too_large':
      return 'mcp_catalog_limit_exceeded';
    case 'mcp_result_too_deep':
      return 'mcp_result_invalid';
    default:
      return 'mcp_protocol_error';
  }
}

/** The engine's code for a failed call, as a registration's `errorCode`. */
function callCode(error: McpError): McpBindingErrorCode {
  switch (error.code) {
    case 'mcp_timeout':
    case 'mcp_connection_closed':
    case 'mcp_result_too_large':
    case 'mcp_invalid_arguments':
      return error.code;
    case 'mcp_transport_error':
    case 'mcp_host_not_allowed':
    case 'mcp_auth_error':
      return 'mcp_transport_error';
    case 'mcp_result_too_deep':
      return 'mcp_result_invalid';
    case 'mcp_tool_unavailable':
    case 'mcp_tool_quarantined':
      return 'mcp_catalog_stale';
    case 'mcp_policy_denied':
    case 'mcp_approval_required':
      return 'mcp_scope_denied';
    default:
      return 'mcp_protocol_error';
  }
}

const EMPTY = deepFreeze({ text: [] as string[], structured: null });
const failed = (errorCode: McpBindingErrorCode): McpBindingResult => deepFreeze({ content: EMPTY, effectState: 'not_started', errorCode });

/** A binding checked and copied: what the host gave can no longer change it. */
interface Bound {
  localName: string;
  title: string;
  scope: McpToolBinding['scope'];
  concurrencySafe: boolean;
}

function checkBindings(bindings: unknown, maxTools: number): Map<string, Bound> {
  if (bindings === null || typeof bindings !== 'object' || Array.isArray(bindings)) fail('mcp_binding_invalid');
  const bound = new Map<string, Bound>();
  const localNames = new Set<string>();
  for (const [remote, given] of Object.entries(bindings as Record<string, McpToolBinding>)) {
    const policy = given?.policy;
    const valid =
      REMOTE_NAME.test(remote) &&
      typeof given === 'object' &&
      given !== null &&
      typeof given.localName === 'string' &&
      LOCAL_NAME.test(given.localName) &&
      typeof policy === 'object' &&
      policy !== null &&
      policy.mode === 'read' &&
      (policy.riskLevel === undefined || policy.riskLevel === 'read') &&
      typeof policy.title === 'string' &&
      policy.title.trim() !== '' &&
      (given.scope === null || typeof given.scope === 'function') &&
      (given.concurrencySafe === undefined || typeof given.concurrencySafe === 'boolean');
    if (!valid) fail('mcp_binding_invalid');
    if (localNames.has(given.localName)) fail('mcp_name_conflict');
    localNames.add(given.localName);
    bound.set(remote, { localName: given.localName, title: policy.title.trim(), scope: given.scope, concurrencySafe: given.concurrencySafe ?? false });
  }
  if (bound.size === 0 || bound.size > maxTools) fail('mcp_binding_invalid');
  return bound;
}

/**
 * Discover the bound tools of `client` (from `connectMcpServer`) under `serverId`: one bounded
 * listing, each bound tool vetted (limits, no required tasks, both schemas in the strict profile),
 * then an immutable snapshot and one registration per bound tool. Throws `McpAdapterError`.
 */
export async function discoverMcpTools(
  client: McpServerClient,
  serverId: string,
  bindings: Readonly<Record<string, McpToolBinding>>,
  options: McpDiscoveryOptions = {},
): Promise<McpToolCatalog> {
  if (options === null || typeof options !== 'object') fail('mcp_binding_invalid');
  const given = options.limits ?? {};
  if (given === null || typeof given !== 'object' || Array.isArray(given)) fail('mcp_binding_invalid');
  const checked = JSON.parse(engine.purraLimits(JSON.stringify(given))) as Verdict<McpToolLimits>;
  if (!checked.ok) fail('mcp_binding_invalid');
  const limits = deepFreeze(checked.value);
  const limitsJson = JSON.stringify(limits);
  const internals = clientInternals(client);
  if (!internals || typeof serverId !== 'string' || !SERVER_ID.test(serverId)) fail('mcp_binding_invalid');
  const bound = checkBindings(bindings, limits.maxTools);
  if (internals.closed()) fail('mcp_connection_closed');
  const protocolVersion = client.protocolVersion;
  if (!SUPPORTED_PROTOCOL_VERSIONS.has(protocolVersion)) fail('mcp_protocol_unsupported');
  if (!internals.capabilities.includes('tools')) fail('mcp_tools_unavailable');

  // Watching from before the listing: a change announced while it runs makes this discovery stale.
  let stale = false;
  const unwatch = internals.watch(() => {
    stale = true;
    unwatch();
  });
  // The connection discovered on, read from the engine without waiting for its diagnostics: a server that
  // is lost (not live) or came back since (a new process or session) makes the catalogue stale, so a
  // registration never waits for a recovery and is never sent to what came back.
  const connection = () => {
    const [server] = client.servers();
    return server?.state === 'live' ? server.restarts : -1;
  };
  const discoveredOn = connection();
  const isStale = () => stale || connection() !== discoveredOn;
  try {
    const catalog = await discover(internals, serverId, protocolVersion, bound, limits, limitsJson, options.signal, isStale);
    return catalog;
  } catch (error) {
    unwatch();
    throw error;
  }
}

async function discover(
  internals: ClientInternals,
  serverId: string,
  protocolVersion: string,
  bound: Map<string, Bound>,
  limits: McpToolLimits,
  limitsJson: string,
  signal: AbortSignal | undefined,
  isStale: () => boolean,
): Promise<McpToolCatalog> {
  let listing;
  try {
    listing = await internals.list(
      { maxPages: limits.maxPages, maxTools: limits.maxTools, maxBytes: limits.maxCatalogBytes, maxCursorBytes: MAX_CURSOR_BYTES, timeoutMs: limits.timeoutMs },
      signal,
    );
  } catch (error) {
    fail(discoveryCode(error));
  }
  if (listing.stopped) fail(listing.stopped === 'cursor' ? 'mcp_pagination_invalid' : 'mcp_catalog_limit_exceeded');
  if (isStale()) fail('mcp_catalog_stale');

  const seen = new Set<string>();
  const found = new Map<string, { entry: McpToolEntry; bound: Bound }>();
  for (const tool of listing.tools) {
    const name = (tool as { name?: unknown })?.name;
    if (typeof name !== 'string') fail('mcp_protocol_error');
    if (seen.has(name)) fail('mcp_name_conflict');
    seen.add(name);
    const binding = bound.get(name);
    if (!binding) continue;
    const vetted = JSON.parse(engine.purraVetTool(JSON.stringify(tool), limitsJson)) as Verdict<{
      remoteName: string;
      description: string;
      inputSchema: Record<string, unknown>;
      outputSchema: Record<string, unknown> | null;
    }>;
    if (!vetted.ok) fail(vetted.code as McpAdapterErrorCode);
    const { remoteName, description, inputSchema, outputSchema } = vetted.value;
    const entry: McpToolEntry = deepFreeze({
      remoteName,
      localName: binding.localName,
      description,
      inputSchema,
      outputSchema,
      policy: { mode: 'read', title: binding.title, riskLevel: 'read' },
      concurrencySafe: binding.concurrencySafe,
    });
    found.set(name, { entry, bound: binding });
  }
  if (found.size !== bound.size) fail('mcp_binding_missing');

  const ordered = [...found.values()].sort((a, b) => (a.entry.localName < b.entry.localName ? -1 : 1));
  const identity = { schemaVersion: 1 as const, serverId, protocolVersion, entries: ordered.map((row) => row.entry) };
  const revisionDigest = engine.purraIdentityDigest(JSON.stringify(identity)) ?? fail('mcp_catalog_limit_exceeded');
  const snapshot: McpToolSnapshot = deepFreeze({ ...identity, entries: [...identity.entries], revisionDigest });

  const registrations = ordered.map(({ entry, bound: binding }) => {
    let input: CompiledJsonSchema;
    let output: CompiledJsonSchema | undefined;
    try {
      input = compileJsonSchema(entry.inputSchema);
      output = entry.outputSchema === null ? undefined : compileJsonSchema(entry.outputSchema);
    } catch {
      fail('mcp_schema_unsupported');
    }
    return registration(internals, entry, binding, input, output, limits, limitsJson, isStale);
  });
  if (isStale()) fail('mcp_catalog_stale');
  return Object.freeze({
    snapshot,
    registrations: Object.freeze(registrations),
    get stale() {
      return internals.closed() || isStale();
    },
  });
}

function registration(
  internals: ClientInternals,
  entry: McpToolEntry,
  binding: Bound,
  input: CompiledJsonSchema,
  output: CompiledJsonSchema | undefined,
  limits: McpToolLimits,
  limitsJson: string,
  isStale: () => boolean,
): McpToolRegistration {
  /** Why nothing may be sent now, checked without any I/O. */
  const blocked = (): McpBindingErrorCode | undefined => (internals.closed() ? 'mcp_connection_closed' : isStale() ? 'mcp_catalog_stale' : undefined);
  const cancelled = (context: McpBindingContext | undefined) => {
    if (context?.signal?.aborted) throw new McpAdapterError('mcp_aborted');
  };
  const scope = async (args: Record<string, unknown>, context: McpBindingContext = {}): Promise<unknown> => {
    const why = blocked();
    if (why) throw new McpAdapterError(why as McpAdapterErrorCode);
    cancelled(context);
    return binding.scope?.(args, context);
  };
  const client = internals.client;
  return Object.freeze({
    name: entry.localName,
    description: entry.description || entry.policy.title,
    inputSchema: entry.inputSchema,
    policy: entry.policy,
    concurrencySafe: entry.concurrencySafe,
    scope,
    async run(args: unknown, context: McpBindingContext = {}): Promise<McpBindingResult> {
      const before = blocked();
      if (before) return failed(before);
      // Validated as given (no coercion), then sent as this copy: the host cannot change it afterwards.
      if (args === null || typeof args !== 'object' || Array.isArray(args) || !isJson(args)) return failed('mcp_invalid_arguments');
      const text = JSON.stringify(args);
      if (new TextEncoder().encode(text).length > limits.maxResultBytes) return failed('mcp_invalid_arguments');
      const value = JSON.parse(text) as Record<string, unknown>;
      if (!input.validate(value).ok) return failed('mcp_invalid_arguments');
      let decision: unknown;
      try {
        decision = await scope(value, context);
      } catch (error) {
        if (error instanceof McpAdapterError && error.code !== 'mcp_aborted') return failed(error.code as McpBindingErrorCode);
        throw error;
      }
      if (!(decision === undefined || decision === true)) return failed('mcp_scope_denied');
      const between = blocked();
      if (between) return failed(between);
      cancelled(context);

      const timer = new AbortController();
      const timeout = setTimeout(() => timer.abort(), limits.timeoutMs);
      const signal = context.signal ? AbortSignal.any([context.signal, timer.signal]) : timer.signal;
      let result: unknown;
      try {
        result = await client.callTool({ name: entry.remoteName, arguments: JSON.parse(text), signal });
      } catch (error) {
        if (!(error instanceof McpError)) throw error;
        if (error.code === 'mcp_aborted') {
          if (context.signal?.aborted) throw new McpAdapterError('mcp_aborted');
          return failed('mcp_timeout');
        }
        return failed(callCode(error));
      } finally {
        clearTimeout(timeout);
      }
      // A result that arrives after a change, or after close, is discarded.
      const after = blocked();
      if (after) return failed(after);
      const shaped = JSON.parse(engine.purraShapeResult(JSON.stringify(result), limitsJson)) as Verdict<{
        text: string[];
        structured: Record<string, unknown> | null;
      }>;
      if (!shaped.ok) return failed(shaped.code as McpBindingErrorCode);
      // An output schema needs structuredContent that passes it; text that looks like JSON does not count.
      if (output && (shaped.value.structured === null || !output.validate(shaped.value.structured).ok)) return failed('mcp_result_invalid');
      return deepFreeze({ content: shaped.value, effectState: 'not_started' });
    },
  });
}
