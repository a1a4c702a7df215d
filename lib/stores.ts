// Connection stores: where a toolset persists its catalogue and drift baseline. The built-in stores
// live in the engine; any object with the same five async methods works too (a shared database for a
// fleet of workers, say).

import type { NativeStoreHandle } from './binding';
import { createMcpError, fromEngine, McpError } from './errors';

export interface StoredServer {
  id: string;
  name: string;
  type: 'stdio' | 'streamable-http' | 'sse';
  url: string | null;
  /** The catalogue as last listed: public metadata, refreshed on every reconcile. */
  tools: unknown[];
  /** The drift baseline (tool name → fingerprint): recorded once, never replaced by `save`. */
  toolFingerprints: Record<string, string> | null;
}

/** The store interface. Implement it to back toolsets with your own database. */
export interface McpConnectionStore {
  get(id: string): Promise<StoredServer | null | undefined>;
  list(): Promise<StoredServer[]>;
  /** Upsert the row's catalogue; must keep an existing baseline whatever `row.toolFingerprints` says. */
  save(row: StoredServer): Promise<void>;
  remove(id: string): Promise<void>;
  /** First writer wins: return the recorded baseline, or record `fingerprints` and return them. */
  claimBaseline(id: string, fingerprints: Record<string, string>): Promise<Record<string, string>>;
  /**
   * Drop the row's baseline (keeping its catalogue) so the next claim records a fresh one, atomically
   * with respect to `claimBaseline`. Optional: without it, mcpferry emulates it with `get`, `remove`
   * and `save`, and makes that atomic by running every operation it sends this store one at a time —
   * which only covers this process. A store shared by several processes must implement it.
   */
  clearBaseline?(id: string): Promise<void>;
}

interface NativeStoreFactory {
  memory(): NativeStoreHandle;
  sqlite(path: string): NativeStoreHandle;
}

const NATIVE = Symbol('mcpferry.nativeStore');

/** The engine's errors arrive with their code; as typed errors they are `McpStorageError` and kin. */
function typed<T>(pending: Promise<T>): Promise<T> {
  return pending.catch((error) => Promise.reject(fromEngine(error)));
}

class EngineStore implements McpConnectionStore {
  readonly [NATIVE]: NativeStoreHandle;
  constructor(native: NativeStoreHandle) {
    this[NATIVE] = native;
  }
  async get(id: string) {
    const row = await typed(this[NATIVE].get(id));
    return row === null ? null : (JSON.parse(row) as StoredServer);
  }
  async list() {
    return JSON.parse(await typed(this[NATIVE].list())) as StoredServer[];
  }
  save(row: StoredServer) {
    return typed(this[NATIVE].save(JSON.stringify(row)));
  }
  remove(id: string) {
    return typed(this[NATIVE].remove(id));
  }
  async claimBaseline(id: string, fingerprints: Record<string, string>) {
    return JSON.parse(await typed(this[NATIVE].claimBaseline(id, JSON.stringify(fingerprints))));
  }
  clearBaseline(id: string) {
    return typed(this[NATIVE].clearBaseline(id));
  }
}

function engineCall<T>(make: () => T): T {
  try {
    return make();
  } catch (error) {
    throw fromEngine(error);
  }
}

export function storeFactories(factory: NativeStoreFactory) {
  return {
    createMemoryMcpConnectionStore: (): McpConnectionStore => new EngineStore(engineCall(() => factory.memory())),
    /** Returns at once: the file is opened on the engine's blocking pool; a failure to open rejects the first operation. */
    createSqliteMcpConnectionStore: (path: string): McpConnectionStore => {
      if (typeof path !== 'string') throw createMcpError('mcp_config_invalid', 'createSqliteMcpConnectionStore needs a file path');
      return new EngineStore(engineCall(() => factory.sqlite(path)));
    },
  };
}

/** The engine's handle for a built-in store, or undefined for a store implemented in JavaScript. */
export function nativeStoreId(store: McpConnectionStore): number | undefined {
  return store instanceof EngineStore ? store[NATIVE].id : undefined;
}

const METHODS = ['get', 'list', 'save', 'remove', 'claimBaseline'] as const;

export function isStore(value: unknown): value is McpConnectionStore {
  return typeof value === 'object' && value !== null && METHODS.every((m) => typeof (value as Record<string, unknown>)[m] === 'function');
}

/** Operations on a JavaScript store without `clearBaseline`, chained so they run one at a time. */
const serializedStores = new WeakMap<McpConnectionStore, Promise<unknown>>();

/** Runs `work` on `store` exclusively when the clear-baseline emulation needs that, at once otherwise. */
function exclusive<T>(store: McpConnectionStore, work: () => Promise<T>): Promise<T> {
  if (typeof store.clearBaseline === 'function') return work();
  const previous = serializedStores.get(store) ?? Promise.resolve();
  const turn = previous.then(work, work);
  serializedStores.set(store, turn.catch(() => {}));
  return turn;
}

/** Drop a JS store's baseline: its own `clearBaseline`, or remove and save the row again (run exclusively). */
async function clearBaseline(store: McpConnectionStore, id: string): Promise<void> {
  if (typeof store.clearBaseline === 'function') return store.clearBaseline(id);
  const row = await store.get(id);
  if (!row) return;
  await store.remove(id);
  await store.save({ ...row, toolFingerprints: null });
}

/** The engine calls a JavaScript store through this one function. Its failures become `mcp_storage_error` there. */
export function storeDispatcher(store: McpConnectionStore) {
  return (op: string, argsJson: string): Promise<string> =>
    exclusive(store, async () => {
      const args = JSON.parse(argsJson);
      if (op === 'clearBaseline') return JSON.stringify((await clearBaseline(store, args[0])) ?? null);
      if (!(METHODS as readonly string[]).includes(op)) throw new Error(`unknown store operation ${op}`);
      const method = store[op as (typeof METHODS)[number]] as (...a: unknown[]) => Promise<unknown>;
      return JSON.stringify((await method.apply(store, args)) ?? null);
    });
}

/**
 * Trust a server's current tool definitions again after a legitimate change: clears its recorded
 * baseline so the next listing records a new one. Resolves to how many stored rows had that name.
 * A store's failure rejects with `McpStorageError`.
 */
export async function retrustMcpServer(store: McpConnectionStore, serverName: string): Promise<number> {
  if (store instanceof EngineStore) return typed(store[NATIVE].retrust(serverName));
  if (!isStore(store)) throw createMcpError('mcp_config_invalid', 'retrustMcpServer takes a connection store');
  try {
    const rows = (await exclusive(store, () => store.list())).filter((row) => row.name === serverName);
    for (const row of rows) await exclusive(store, () => clearBaseline(store, row.id));
    return rows.length;
  } catch (error) {
    if (error instanceof McpError) throw error;
    throw createMcpError('mcp_storage_error', `store: retrust failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}
