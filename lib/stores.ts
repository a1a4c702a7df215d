// Connection stores: where a toolset persists its catalogue and drift baseline. The built-in stores
// live in the engine; any object with the same five async methods works too (a shared database for a
// fleet of workers, say).

import type { binding, NativeStoreHandle } from './binding';
import { createMcpError, engineCall, McpError, typedEngine } from './errors';

export interface StoredServer {
  id: string;
  name: string;
  type: 'stdio' | 'streamable-http' | 'sse';
  url: string | null;
  /** The catalogue as last listed: public metadata, refreshed on every reconcile. */
  tools: unknown[];
  /** The drift baseline (tool name → fingerprint): recorded once, never replaced by `save`. */
  toolFingerprints: Record<string, string> | null;
  /** When the catalogue was listed (ms since the epoch). Absent on rows written before caching hints. */
  listedAt?: number | null;
  /** The server's caching hint: the catalogue is fresh for this long after `listedAt` (absent: not cacheable). */
  ttlMs?: number | null;
  /** `private`: the catalogue may belong to one user's authorization, so a rebuild doesn't project it. */
  cacheScope?: 'public' | 'private' | null;
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

/** How the Postgres store reaches its database; see `createPostgresMcpConnectionStore`. */
export interface PostgresMcpConnectionStoreOptions {
  /**
   * Required: `postgres://user:password@host:5432/db?sslmode=require`, or the key=value form
   * (`host=… user=… password=… dbname=…`). Never echoed: errors and diagnostics name the store as
   * `user@host:port/db` and carry no password.
   */
  connectionString: string;
  /**
   * Connections this store keeps open at most. Default 4. A worker makes few store calls (a save and
   * a claim per server connection, a list per rebuild), so 2-4 is enough; keep workers × poolSize
   * under the server's `max_connections`.
   */
  poolSize?: number;
  /** How long opening a connection (TCP, TLS, authentication) may take. Default 5000. */
  connectTimeoutMs?: number;
  /** The server cancels a statement that runs longer (`statement_timeout`, set on each connection). Default 5000. */
  statementTimeoutMs?: number;
  /** How long an operation waits for a free connection when the pool's are all busy. Default 5000. */
  poolWaitTimeoutMs?: number;
  /**
   * Encryption, overriding the connection string's `sslmode`: `'disable'`, `'prefer'` (the default:
   * TLS when the server offers it) or `'require'`. Whenever TLS is used the server's certificate is
   * verified (rustls), against `caCertificatesPem` or the system's roots.
   */
  tls?: 'disable' | 'prefer' | 'require';
  /** PEM certificates to trust for the server's certificate instead of the system's roots (a private CA). */
  caCertificatesPem?: string;
}

/** The Postgres store: the store interface (with an atomic `clearBaseline`), and `close()`. */
export interface PostgresMcpConnectionStore extends McpConnectionStore {
  clearBaseline(id: string): Promise<void>;
  /** Closes the pooled connections now (rather than when the store is garbage-collected); later operations reject with `McpStorageError`. */
  close(): void;
}

type NativeStoreFactory = typeof binding.NativeStore;

const NATIVE = Symbol('mcpferry.nativeStore');

class EngineStore implements McpConnectionStore {
  readonly [NATIVE]: NativeStoreHandle;
  constructor(native: NativeStoreHandle) {
    this[NATIVE] = native;
  }
  async get(id: string) {
    const row = await typedEngine(this[NATIVE].get(id));
    return row === null ? null : (JSON.parse(row) as StoredServer);
  }
  async list() {
    return JSON.parse(await typedEngine(this[NATIVE].list())) as StoredServer[];
  }
  save(row: StoredServer) {
    return typedEngine(this[NATIVE].save(JSON.stringify(row)));
  }
  remove(id: string) {
    return typedEngine(this[NATIVE].remove(id));
  }
  async claimBaseline(id: string, fingerprints: Record<string, string>) {
    return JSON.parse(await typedEngine(this[NATIVE].claimBaseline(id, JSON.stringify(fingerprints))));
  }
  clearBaseline(id: string) {
    return typedEngine(this[NATIVE].clearBaseline(id));
  }
  /** `McpConnectionStore(postgres user@host:5432/db)`: what and where, never a credential. */
  toString() {
    return `McpConnectionStore(${this[NATIVE].label})`;
  }
  [Symbol.for('nodejs.util.inspect.custom')]() {
    return this.toString();
  }
}

class EnginePostgresStore extends EngineStore implements PostgresMcpConnectionStore {
  close() {
    engineCall(() => this[NATIVE].close());
  }
}

/**
 * The options as the JSON the engine validates (it names a wrong option; it never echoes a value), for
 * `factory` (the Postgres connection store or the Postgres firewall journal).
 */
export function postgresOptionsJson(connection: unknown, factory = 'createPostgresMcpConnectionStore'): string {
  const argument = `${factory} takes a connection string or an options object with \`connectionString\``;
  const options = typeof connection === 'string' ? { connectionString: connection } : connection;
  if (typeof options !== 'object' || options === null || Array.isArray(options)) throw createMcpError('mcp_config_invalid', argument);
  try {
    return JSON.stringify(options);
  } catch {
    throw createMcpError('mcp_config_invalid', `${argument} of plain values`);
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
    /** Documented where lib/index.ts exports it. */
    createPostgresMcpConnectionStore: (connection: string | PostgresMcpConnectionStoreOptions): PostgresMcpConnectionStore =>
      new EnginePostgresStore(engineCall(() => factory.postgres(postgresOptionsJson(connection)))),
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
  if (store instanceof EngineStore) return typedEngine(store[NATIVE].retrust(serverName));
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
