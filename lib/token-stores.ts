// Token stores: where OAuth credentials are kept between runs. Values are opaque JSON strings holding
// secrets (tokens, client secrets); keys name a server and its authorization server and are not secret.
// The built-ins live in the engine: memory (the default), the OS secret store, and an encrypted file
// that needs an explicit key. There is no plaintext store. Any object with the same three async
// methods works too (a vault, a database column the host encrypts itself).

import { binding, type NativeTokenStoreHandle } from './binding';
import { createMcpError, engineCall, typedEngine } from './errors';

/**
 * The token store interface. Implement it to keep credentials where your host keeps its secrets.
 *
 * Toolsets in one process given the same store object take turns spending a refresh token. A store
 * shared by several processes (a database, a vault) needs `compareAndSet` too: spending a refresh token
 * is claimed by replacing the stored tokens only if they are still what was read, so one holder wins
 * and the others wait for its tokens. Without it, a refresh token is presented once per process at most.
 */
export interface McpTokenStore {
  /** The value stored under `key`; null or undefined when there is none. */
  get(key: string): Promise<string | null | undefined>;
  /** Store `value` under `key`, replacing any earlier value. */
  set(key: string, value: string): Promise<void>;
  /** Forget `key`; a key that is not there is not an error. */
  delete(key: string): Promise<void>;
  /**
   * Optional: store `value` under `key` only if the value there is still `expected` (null: no value),
   * as one atomic step for every process sharing the store (a conditional UPDATE, a versioned write);
   * resolve true when stored, false when another value was there (and store nothing then).
   */
  compareAndSet?(key: string, expected: string | null, value: string): Promise<boolean>;
}

export interface KeyringTokenStoreOptions {
  /** The service name entries are filed under in the OS secret store (what its viewer shows). Default "mcpferry". */
  service?: string;
}

export interface EncryptedFileTokenStoreOptions {
  /** Required: a Buffer (or Uint8Array) of exactly 32 random bytes, or a passphrase of at least 12 characters. */
  key: Uint8Array | string;
}

const NATIVE = Symbol('mcpferry.nativeTokenStore');

class EngineTokenStore implements McpTokenStore {
  readonly [NATIVE]: NativeTokenStoreHandle;
  constructor(native: NativeTokenStoreHandle) {
    this[NATIVE] = native;
  }
  get(key: string) {
    return typedEngine(this[NATIVE].get(key));
  }
  set(key: string, value: string) {
    return typedEngine(this[NATIVE].set(key, value));
  }
  delete(key: string) {
    return typedEngine(this[NATIVE].delete(key));
  }
}

/** Tokens in this process's memory only: gone when it exits. What a toolset uses when given no store. */
export function createMemoryTokenStore(): McpTokenStore {
  return new EngineTokenStore(engineCall(() => binding.NativeTokenStore.memory()));
}

/**
 * Tokens in the operating system's secret store: Keychain on macOS, Credential Manager on Windows, the
 * Secret Service (GNOME Keyring, KWallet) on Linux. Returns at once; the OS store is contacted by the
 * first operation, which rejects with `McpStorageError` ("no OS secret store is available: …") where
 * there is none (a container, a server without a desktop session).
 */
export function createKeyringTokenStore(opts?: KeyringTokenStoreOptions): McpTokenStore {
  const service = opts?.service;
  if (service !== undefined && typeof service !== 'string') {
    throw createMcpError('mcp_config_invalid', 'createKeyringTokenStore: `service` must be a string');
  }
  return new EngineTokenStore(engineCall(() => binding.NativeTokenStore.keyring(service)));
}

/**
 * Tokens in one file, encrypted with AES-256-GCM under `opts.key` (required: 32 raw bytes, or a
 * passphrase stretched with PBKDF2). Written atomically with mode 0600. Returns at once; the file is
 * read by the first operation, which rejects with `McpStorageError` on a wrong key or an altered file.
 * Several processes may share the file: writes take a lock on `<path>.lock`.
 */
export function createEncryptedFileTokenStore(path: string, opts: EncryptedFileTokenStoreOptions): McpTokenStore {
  if (typeof path !== 'string' || path === '') {
    throw createMcpError('mcp_config_invalid', 'createEncryptedFileTokenStore needs a file path');
  }
  const key = opts?.key;
  if (key === undefined || key === null) {
    throw createMcpError(
      'mcp_config_invalid',
      'createEncryptedFileTokenStore needs { key }: a 32-byte Buffer or a passphrase of at least 12 characters (there is no plaintext token store)',
    );
  }
  if (typeof key !== 'string' && !(key instanceof Uint8Array)) {
    throw createMcpError('mcp_config_invalid', 'createEncryptedFileTokenStore: `key` must be a Buffer, a Uint8Array or a string');
  }
  const native = typeof key === 'string' ? key : Buffer.from(key.buffer, key.byteOffset, key.byteLength);
  return new EngineTokenStore(engineCall(() => binding.NativeTokenStore.encryptedFile(path, native)));
}

export function isTokenStore(value: unknown): value is McpTokenStore {
  return (
    typeof value === 'object' &&
    value !== null &&
    ['get', 'set', 'delete'].every((m) => typeof (value as Record<string, unknown>)[m] === 'function')
  );
}

/** The engine's handle for a built-in token store, or undefined for a store implemented in JavaScript. */
export function nativeTokenStoreId(store: McpTokenStore): number | undefined {
  return store instanceof EngineTokenStore ? store[NATIVE].id : undefined;
}

/** A number per JavaScript store object, so the engine knows toolsets given one object share it. */
const identities = new WeakMap<McpTokenStore, number>();
let nextIdentity = 1;

function identityOf(store: McpTokenStore): number {
  let identity = identities.get(store);
  if (identity === undefined) identities.set(store, (identity = nextIdentity++));
  return identity;
}

/**
 * The engine calls a JavaScript token store through this one function: op `get` (`[key]`, resolves to
 * the value as JSON, or `null`), `set` (`[key, value]`), `delete` (`[key]`), `identity` (`[]`, this
 * store object's number) or `compareAndSet` (`[key, expected, value]`, `true`/`false`, or `null` for
 * a store without it). Its failures become `mcp_storage_error` there.
 */
export function tokenStoreDispatcher(store: McpTokenStore) {
  return async (op: string, argsJson: string): Promise<string> => {
    if (op === 'identity') return JSON.stringify(String(identityOf(store)));
    if (op === 'compareAndSet') {
      if (typeof store.compareAndSet !== 'function') return 'null';
      const [key, expected, value] = JSON.parse(argsJson) as [string, string | null, string];
      const stored = await store.compareAndSet(key, expected, value);
      if (typeof stored !== 'boolean') throw new TypeError('token store compareAndSet() must resolve to true or false');
      return JSON.stringify(stored);
    }
    const [key, value] = JSON.parse(argsJson) as [string, string?];
    if (op === 'get') {
      const found = await store.get(key);
      if (found !== null && found !== undefined && typeof found !== 'string') {
        throw new TypeError('token store get() must resolve to a string, null or undefined');
      }
      return JSON.stringify(found ?? null);
    }
    if (op === 'set') await store.set(key, value as string);
    else if (op === 'delete') await store.delete(key);
    else throw new Error(`unknown token store operation ${op}`);
    return 'null';
  };
}

/** The engine's half of each JavaScript store handed to it, kept as long as the store object lives. */
const engineHalves = new WeakMap<McpTokenStore, NativeTokenStoreHandle>();

/**
 * The id under which the engine knows `store`: a built-in's own, or, for a store implemented in
 * JavaScript, the id of the engine's half of it (made once per store and kept with it), so a toolset
 * can be handed any token store as one number.
 */
export function engineTokenStoreId(store: McpTokenStore): number {
  const native = nativeTokenStoreId(store);
  if (native !== undefined) return native;
  let half = engineHalves.get(store);
  if (half === undefined) {
    half = engineCall(() => binding.NativeTokenStore.fromDispatcher(tokenStoreDispatcher(store)));
    engineHalves.set(store, half);
  }
  return half.id;
}
