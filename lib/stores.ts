// Connection stores: where a toolset persists its catalogue and drift baseline. The built-in stores
// live in the engine; any object with the same five async methods works too (a shared database for a
// fleet of workers, say).

import { createMcpError } from './errors';

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
}

interface NativeStoreHandle {
  readonly id: number;
  get(id: string): Promise<string | null>;
  list(): Promise<string>;
  save(rowJson: string): Promise<void>;
  remove(id: string): Promise<void>;
  claimBaseline(id: string, fingerprintsJson: string): Promise<string>;
  retrust(serverName: string): Promise<number>;
}

interface NativeStoreFactory {
  memory(): NativeStoreHandle;
  sqlite(path: string): NativeStoreHandle;
}

const NATIVE = Symbol('mcpferry.nativeStore');

class EngineStore implements McpConnectionStore {
  readonly [NATIVE]: NativeStoreHandle;
  constructor(native: NativeStoreHandle) {
    this[NATIVE] = native;
  }
  async get(id: string) {
    const row = await this[NATIVE].get(id);
    return row === null ? null : (JSON.parse(row) as StoredServer);
  }
  async list() {
    return JSON.parse(await this[NATIVE].list()) as StoredServer[];
  }
  save(row: StoredServer) {
    return this[NATIVE].save(JSON.stringify(row));
  }
  remove(id: string) {
    return this[NATIVE].remove(id);
  }
  async claimBaseline(id: string, fingerprints: Record<string, string>) {
    return JSON.parse(await this[NATIVE].claimBaseline(id, JSON.stringify(fingerprints)));
  }
}

export function storeFactories(factory: NativeStoreFactory) {
  return {
    createMemoryMcpConnectionStore: (): McpConnectionStore => new EngineStore(factory.memory()),
    createSqliteMcpConnectionStore: (path: string): McpConnectionStore => {
      if (typeof path !== 'string' || path.length === 0) throw createMcpError('mcp_config_invalid', 'createSqliteMcpConnectionStore needs a file path');
      return new EngineStore(factory.sqlite(path));
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

/** Drop a JS store's baseline: a baseline can't be replaced by save, so remove the row and save it again. */
async function clearBaseline(store: McpConnectionStore, id: string) {
  const row = await store.get(id);
  if (!row) return;
  await store.remove(id);
  await store.save({ ...row, toolFingerprints: null });
}

/** The engine calls a JavaScript store through this one function. */
export function storeDispatcher(store: McpConnectionStore) {
  return async (op: string, argsJson: string): Promise<string> => {
    const args = JSON.parse(argsJson);
    if (op === 'clearBaseline') return JSON.stringify((await clearBaseline(store, args[0])) ?? null);
    if (!(METHODS as readonly string[]).includes(op)) throw new Error(`unknown store operation ${op}`);
    const method = store[op as (typeof METHODS)[number]] as (...a: unknown[]) => Promise<unknown>;
    return JSON.stringify((await method.apply(store, args)) ?? null);
  };
}

/**
 * Trust a server's current tool definitions again after a legitimate change: clears its recorded
 * baseline so the next listing records a new one. Resolves to how many stored rows had that name.
 */
export async function retrustMcpServer(store: McpConnectionStore, serverName: string): Promise<number> {
  if (store instanceof EngineStore) return store[NATIVE].retrust(serverName);
  const rows = (await store.list()).filter((row) => row.name === serverName);
  for (const row of rows) await clearBaseline(store, row.id);
  return rows.length;
}
