// mcpFirewall and its journal. The checks, the pin hashing and the journal's storage are the engine's
// (src/guard/firewall.rs, src/store/journal*.rs); this file wires options, JavaScript journals and
// guards together.

import { binding, type NativeFirewallHandle, type NativeJournalHandle } from './binding';
import { createMcpError, engineCall, typedEngine } from './errors';
import { postgresOptionsJson, type PostgresMcpConnectionStoreOptions } from './stores';
import type { Decision, JsonSchema, McpPolicy, PolicyRequest, ToolPolicyRequest } from './types';

/**
 * What the firewall remembers across calls, workers and resumes. Built-ins: `createMemoryMcpJournal()`,
 * `createSqliteMcpJournal(path)`; any object with these five methods works too (a fleet's database).
 */
export interface McpJournal {
  /** First writer wins, for ever: record `value` unless `key` holds one; resolve to the recorded value. */
  claim(key: string, value: string): Promise<string>;
  get(key: string): Promise<string | null | undefined>;
  /** Take one slot of `counter` in `runId` if fewer than `limit` are taken, atomically: the new count, or null at the ceiling. */
  reserve(runId: string, counter: string, limit: number): Promise<number | null>;
  /** Give one slot back (a call that did not succeed); never below zero. */
  release(runId: string, counter: string): Promise<void>;
  count(runId: string, counter: string): Promise<number>;
}

/** A tool as the firewall vets it: `describeTools()` of a handle gives these (with `server`/`remoteName`). */
export interface McpFirewallTool {
  name: string;
  description?: string;
  inputSchema?: JsonSchema;
  /** mcpferry's server name and the tool's remote name: how a call is matched to its description. */
  server?: string;
  remoteName?: string;
}

export interface McpFirewallOptions {
  /** Part of the pin key (`__mcp_pin__:<server>:<tool>`), so two servers' pins never collide. */
  server: string;
  journal: McpJournal;
  /**
   * The tools whose descriptions are pinned; a call to a tool not among them asks. Or a function giving
   * them (`() => handle.describeTools()`), called at the first decision: so the firewall can be the
   * `policy` of the very handle whose tools it vets.
   */
  tools: readonly McpFirewallTool[] | (() => readonly McpFirewallTool[] | Promise<readonly McpFirewallTool[]>);
  /** Fail-closed once given: a tool whose name matches none is denied. Strings match whole names, RegExps search. */
  allow?: readonly (string | RegExp)[];
  /** Evaluated after `allow`: a match denies even an allowed tool. */
  deny?: readonly (string | RegExp)[];
  /** Successful calls of one tool in one run (`ctx.runId`) before the next asks. */
  maxCallsPerRun?: number;
}

/** What became of a call a guard decided: `ok` when it returned a result. */
export interface McpCallOutcome {
  ok: boolean;
  error?: unknown;
}

/**
 * A `policy` for `mcpTools` (add `ask` to approve `ask` decisions). `record` is told how each call it
 * decided ended: mcpferry calls it when the call settles, before the call's promise does.
 */
export interface McpGuard extends McpPolicy {
  decide(request: PolicyRequest): Promise<Decision>;
  record?(request: PolicyRequest, outcome: McpCallOutcome): Promise<void>;
}

const NATIVE = Symbol('mcpferry.nativeJournal');

class EngineJournal implements McpJournal {
  readonly [NATIVE]: NativeJournalHandle;
  constructor(native: NativeJournalHandle) {
    this[NATIVE] = native;
  }
  claim(key: string, value: string) {
    return typedEngine(this[NATIVE].claim(key, value));
  }
  get(key: string) {
    return typedEngine(this[NATIVE].get(key));
  }
  reserve(runId: string, counter: string, limit: number) {
    return typedEngine(this[NATIVE].reserve(runId, counter, limit));
  }
  release(runId: string, counter: string) {
    return typedEngine(this[NATIVE].release(runId, counter));
  }
  count(runId: string, counter: string) {
    return typedEngine(this[NATIVE].count(runId, counter));
  }
}

/** `createMemoryMcpJournal`, the public API's (documented where lib/index.ts exports it, which loads this module on first use). */
export function createMemoryMcpJournal(): McpJournal {
  return new EngineJournal(engineCall(() => binding.NativeJournal.memory()));
}

/** `createSqliteMcpJournal`, the public API's (documented where lib/index.ts exports it, which loads this module on first use). */
export function createSqliteMcpJournal(path: string): McpJournal {
  if (typeof path !== 'string') throw createMcpError('mcp_config_invalid', 'createSqliteMcpJournal needs a file path');
  return new EngineJournal(engineCall(() => binding.NativeJournal.sqlite(path)));
}

/** A journal in Postgres: `close()` shuts its pool. */
export interface PostgresMcpJournal extends McpJournal {
  close(): void;
}

class EnginePostgresJournal extends EngineJournal implements PostgresMcpJournal {
  close() {
    engineCall(() => this[NATIVE].close());
  }
}

/** `createPostgresMcpJournal`, the public API's (documented where lib/index.ts exports it, which loads this module on first use). */
export function createPostgresMcpJournal(connection: string | PostgresMcpConnectionStoreOptions): PostgresMcpJournal {
  const optionsJson = postgresOptionsJson(connection, 'createPostgresMcpJournal');
  return new EnginePostgresJournal(engineCall(() => binding.NativeJournal.postgres(optionsJson)));
}

const JOURNAL_METHODS = ['claim', 'get', 'reserve', 'release', 'count'] as const;

/** The engine's handle for a journal: a built-in's own, or a dispatcher to a JavaScript one. */
export function nativeJournal(journal: McpJournal, caller = 'mcpFirewall'): NativeJournalHandle {
  if (journal instanceof EngineJournal) return journal[NATIVE];
  const complete = typeof journal === 'object' && journal !== null && JOURNAL_METHODS.every((m) => typeof journal[m] === 'function');
  if (!complete) throw createMcpError('mcp_config_invalid', `${caller}: journal must have ${JOURNAL_METHODS.join(', ')}`);
  // The engine calls it with `(op, argsJson)`; its failures become mcp_storage_error there.
  const dispatcher = async (op: string, argsJson: string): Promise<string> => {
    if (!(JOURNAL_METHODS as readonly string[]).includes(op)) throw new Error(`unknown journal operation ${op}`);
    const method = journal[op as (typeof JOURNAL_METHODS)[number]] as (...args: unknown[]) => Promise<unknown>;
    return JSON.stringify((await method.apply(journal, JSON.parse(argsJson))) ?? null);
  };
  return engineCall(() => binding.NativeJournal.fromDispatcher(dispatcher));
}

/** A string or RegExp as the engine compiles it; anything else is named. */
function patternJson(pattern: unknown, option: string): { kind: 'string'; value: string } | { kind: 'regexp'; source: string; flags: string } {
  if (typeof pattern === 'string') return { kind: 'string', value: pattern };
  if (pattern instanceof RegExp) return { kind: 'regexp', source: pattern.source, flags: pattern.flags };
  throw createMcpError('mcp_config_invalid', `mcpFirewall: ${option} takes strings and RegExps`);
}

function patterns(given: unknown, option: string) {
  if (given === undefined) return undefined;
  if (!Array.isArray(given)) throw createMcpError('mcp_config_invalid', `mcpFirewall: ${option} must be an array`);
  return given.map((pattern) => patternJson(pattern, option));
}

/** The request as the engine reads it: no arguments, no session. */
function requestJson(request: ToolPolicyRequest): string {
  const { toolName, server, remoteName, runId, toolCallId, idempotencyKey } = request;
  return JSON.stringify({ toolName, server, remoteName, runId, toolCallId, idempotencyKey });
}

/** `mcpFirewall`, the public API's (documented where lib/index.ts exports it, which loads this module on first use). */
export function mcpFirewall(options: McpFirewallOptions): McpGuard {
  if (typeof options !== 'object' || options === null) throw createMcpError('mcp_config_invalid', 'mcpFirewall takes an options object');
  const { server, journal, tools, allow, deny, maxCallsPerRun } = options;
  const journalHandle = nativeJournal(journal);
  const checked = { server, allow: patterns(allow, 'allow'), deny: patterns(deny, 'deny'), maxCallsPerRun };
  const create = (described: unknown) =>
    engineCall(() => binding.NativeFirewall.create(JSON.stringify({ ...checked, tools: describedTools(described) }), journalHandle.id));
  let native: Promise<NativeFirewallHandle> | undefined;
  if (typeof tools === 'function') {
    // Checked now, with no tools yet; the firewall itself is made from the first listing of the tools.
    create([]);
  } else {
    native = Promise.resolve(create(tools));
  }
  /** The firewall, made once (a failure to list the tools denies this call and is tried again on the next). */
  const firewall = (): Promise<NativeFirewallHandle> => {
    if (!native) {
      native = Promise.resolve()
        .then(() => (tools as () => unknown)())
        .then(create);
      native.catch(() => (native = undefined));
    }
    return native;
  };
  return {
    // The journal handle is held here: the engine's registry keeps it only weakly.
    [NATIVE]: journalHandle,
    async decide(request: PolicyRequest): Promise<Decision> {
      // A resource read or subscription, a prompt get, a completion: not a tool call. Another server's
      // is left to the next guard, as its tools are; this server's is refused once an allowlist is given
      // (it names tools, so nothing else is on it: fail closed), and otherwise allowed (the denylist,
      // pinning and ceilings are about tools).
      if (request.kind !== undefined && request.kind !== 'tool') {
        if (request.server !== server || allow === undefined) return { kind: 'allow' };
        return { kind: 'deny', reason: `mcpFirewall's allowlist names tools; a ${request.kind} request to ${server} is not on it` };
      }
      return JSON.parse(await typedEngine((await firewall()).decide(requestJson(request as ToolPolicyRequest)))) as Decision;
    },
    async record(request: PolicyRequest, outcome: McpCallOutcome): Promise<void> {
      if (request.kind !== undefined && request.kind !== 'tool') return;
      return typedEngine((await firewall()).record(requestJson(request as ToolPolicyRequest), outcome?.ok === true));
    },
  } as McpGuard;
}

/** The described tools as the engine reads them (a handle's `describeTools()` entries pass as they are). */
function describedTools(tools: unknown): unknown {
  if (!Array.isArray(tools)) return tools;
  return tools.map(({ name, description, inputSchema, server, remoteName }) => ({ name, description, inputSchema, server, remoteName }));
}

/** `composeGuards`, the public API's (documented where lib/index.ts exports it, which loads this module on first use). */
export function composeGuards(...guards: McpPolicy[]): McpGuard {
  for (const guard of guards) {
    if (typeof guard?.decide !== 'function') throw createMcpError('mcp_config_invalid', 'composeGuards takes guards (objects with decide)');
  }
  return {
    async decide(request: PolicyRequest): Promise<Decision> {
      for (const guard of guards) {
        const decision = await guard.decide(request);
        if (decision?.kind !== 'allow') return decision;
      }
      return { kind: 'allow' };
    },
    async record(request: PolicyRequest, outcome: McpCallOutcome): Promise<void> {
      for (const guard of guards) await (guard as McpGuard).record?.(request, outcome);
    },
  };
}
