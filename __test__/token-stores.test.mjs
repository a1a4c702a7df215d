// Token stores: the built-ins (memory, encrypted file, OS keyring) over real files and a real Secret
// Service where one can be started, and a store implemented in JavaScript driven through the engine.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { inspect } from 'node:util';
import { pathToFileURL } from 'node:url';
import { binding } from '../dist/binding.js';
import { McpConfigError, McpStorageError } from '../dist/errors.js';
import {
  createEncryptedFileTokenStore,
  createMemoryTokenStore,
  engineTokenStoreId,
  isTokenStore,
  nativeTokenStoreId,
  tokenStoreDispatcher,
} from '../dist/token-stores.js';
import { here, scratchFile } from './helpers.mjs';

const TOKEN = JSON.stringify({ access_token: 'at-7f3a9c2e', refresh_token: 'rt-51d0b8aa' });
const PASSPHRASE = 'correct horse battery staple';

async function roundTrip(store) {
  assert.equal(await store.get('https://as.example|server'), null);
  await store.set('https://as.example|server', TOKEN);
  await store.set('other', 'at-other');
  assert.equal(await store.get('https://as.example|server'), TOKEN);
  await store.delete('other');
  await store.delete('never-set');
  assert.equal(await store.get('other'), null);
}

function assertNoPlaintext(bytes, ...secrets) {
  for (const secret of secrets) {
    assert.equal(bytes.indexOf(Buffer.from(secret)), -1, `plaintext ${inspect(secret)} found in the file`);
  }
}

async function rejectsTyped(pending, ErrorClass, pattern) {
  const error = await pending.then(
    () => assert.fail('expected a rejection'),
    (e) => e,
  );
  assert.ok(error instanceof ErrorClass, `${error?.name}: ${error?.message}`);
  assert.match(error.message, pattern);
  assert.doesNotMatch(error.message, /at-7f3a9c2e|rt-51d0b8aa|correct horse/);
  return error;
}

test('memory: round trip; each store is its own; inspection shows no value', async () => {
  const store = createMemoryTokenStore();
  assert.ok(isTokenStore(store));
  await roundTrip(store);
  assert.equal(await createMemoryTokenStore().get('https://as.example|server'), null);
  assert.equal(typeof nativeTokenStoreId(store), 'number');
  assert.doesNotMatch(inspect(store, { depth: 5, showHidden: true }), /at-7f3a9c2e/);
});

test('encrypted file, raw 32-byte key: round trip across stores, no plaintext on disk, mode 0600', async () => {
  const path = scratchFile('tokens-raw.bin');
  const key = randomBytes(32);
  await roundTrip(createEncryptedFileTokenStore(path, { key }));
  // Another store on the same file, as after a restart (a Uint8Array key works as well as a Buffer).
  const reopened = createEncryptedFileTokenStore(path, { key: new Uint8Array(key) });
  assert.equal(await reopened.get('https://as.example|server'), TOKEN);

  const bytes = readFileSync(path);
  assert.equal(bytes.subarray(0, 8).toString('latin1'), 'mcpftok\0');
  assertNoPlaintext(bytes, 'at-7f3a9c2e', 'rt-51d0b8aa', 'access_token', 'https://as.example', key);
  if (process.platform !== 'win32') {
    assert.equal(statSync(path).mode & 0o777, 0o600);
    assert.equal(statSync(`${path}.lock`).mode & 0o777, 0o600);
  }
  assert.deepEqual(readdirSync(dirname(path)).filter((name) => name.endsWith('.tmp')), [], 'temporary files left behind');
  assert.doesNotMatch(inspect(reopened, { depth: 5, showHidden: true }), /at-7f3a9c2e/);
});

test('encrypted file, passphrase: round trip across stores, neither value nor passphrase on disk', async () => {
  const path = scratchFile('tokens-pass.bin');
  await roundTrip(createEncryptedFileTokenStore(path, { key: PASSPHRASE }));
  assert.equal(await createEncryptedFileTokenStore(path, { key: PASSPHRASE }).get('https://as.example|server'), TOKEN);
  assertNoPlaintext(readFileSync(path), 'at-7f3a9c2e', 'access_token', PASSPHRASE);
});

test('encrypted file: a wrong key rejects with McpStorageError and the file is left as it was', async () => {
  const path = scratchFile('tokens-wrong.bin');
  const key = randomBytes(32);
  await createEncryptedFileTokenStore(path, { key }).set('k', TOKEN);
  const before = readFileSync(path);

  const wrong = createEncryptedFileTokenStore(path, { key: randomBytes(32) });
  const error = await rejectsTyped(wrong.get('k'), McpStorageError, /the key is wrong, or the file was altered/);
  assert.equal(error.code, 'mcp_storage_error');
  await rejectsTyped(wrong.set('k', 'at-overwrite'), McpStorageError, /the key is wrong/);
  assert.deepEqual(readFileSync(path), before, 'a failed set rewrote the file');

  await rejectsTyped(createEncryptedFileTokenStore(path, { key: PASSPHRASE }).get('k'), McpStorageError, /encrypted with a 32-byte key/);

  const passPath = scratchFile('tokens-wrong-pass.bin');
  await createEncryptedFileTokenStore(passPath, { key: PASSPHRASE }).set('k', TOKEN);
  await rejectsTyped(
    createEncryptedFileTokenStore(passPath, { key: 'incorrect horse battery staple' }).get('k'),
    McpStorageError,
    /the key is wrong, or the file was altered/,
  );
});

test('encrypted file: a flipped byte anywhere rejects with McpStorageError', async () => {
  const path = scratchFile('tokens-flip.bin');
  const key = randomBytes(32);
  await createEncryptedFileTokenStore(path, { key }).set('k', TOKEN);
  const good = readFileSync(path);
  for (const index of [9, 12, 30, good.length - 1]) {
    const bad = Buffer.from(good);
    bad[index] ^= 0x01;
    writeFileSync(path, bad);
    await rejectsTyped(createEncryptedFileTokenStore(path, { key }).get('k'), McpStorageError, /token store .*tokens-flip/);
  }
});

test('encrypted file: no key, or a key of the wrong shape, throws McpConfigError at once and writes nothing', () => {
  const path = scratchFile('tokens-nokey.bin');
  for (const make of [
    () => createEncryptedFileTokenStore(path),
    () => createEncryptedFileTokenStore(path, {}),
    () => createEncryptedFileTokenStore(path, { key: null }),
    () => createEncryptedFileTokenStore(path, { key: 42 }),
    () => createEncryptedFileTokenStore(path, { key: randomBytes(31) }),
    () => createEncryptedFileTokenStore(path, { key: 'short pass' }),
    () => createEncryptedFileTokenStore('', { key: PASSPHRASE }),
  ]) {
    assert.throws(make, (e) => e instanceof McpConfigError && e.code === 'mcp_config_invalid');
  }
  assert.throws(() => createEncryptedFileTokenStore(path), /needs \{ key \}/);
  assert.equal(existsSync(path), false);
});

test('encrypted file: concurrent writes from one process are all kept', async () => {
  const path = scratchFile('tokens-concurrent.bin');
  const key = randomBytes(32);
  const [a, b] = [createEncryptedFileTokenStore(path, { key }), createEncryptedFileTokenStore(path, { key })];
  await Promise.all(Array.from({ length: 30 }, (_, i) => (i % 2 ? a : b).set(`key-${i}`, `value-${i}`)));
  for (let i = 0; i < 30; i++) assert.equal(await a.get(`key-${i}`), `value-${i}`, `key-${i} lost`);
});

test('encrypted file: two processes writing one file at once lose nothing (the lock file orders them)', async () => {
  const path = scratchFile('tokens-two-processes.bin');
  const key = randomBytes(32);
  const writer = `
    const { createEncryptedFileTokenStore } = await import(${JSON.stringify(pathToFileURL(join(here, '..', 'dist', 'token-stores.js')).href)});
    const store = createEncryptedFileTokenStore(process.env.TOKEN_FILE, { key: Buffer.from(process.env.TOKEN_KEY, 'hex') });
    await Promise.all(Array.from({ length: 20 }, (_, i) => store.set(process.env.WRITER + '-' + i, 'value-' + i)));`;
  const run = (name) =>
    new Promise((resolve, reject) => {
      const child = spawn(process.execPath, ['--input-type=module', '-e', writer], {
        env: { ...process.env, TOKEN_FILE: path, TOKEN_KEY: key.toString('hex'), WRITER: name },
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      child.on('error', reject);
      child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`writer ${name} exited with ${code}`))));
    });
  await Promise.all([run('a'), run('b')]);
  const store = createEncryptedFileTokenStore(path, { key });
  for (const name of ['a', 'b']) {
    for (let i = 0; i < 20; i++) assert.equal(await store.get(`${name}-${i}`), `value-${i}`, `${name}-${i} lost`);
  }
});

// The engine's Secret Service client in a child process whose session bus is `busAddress`.
const KEYRING_CHILD = `
  const { createKeyringTokenStore } = await import(${JSON.stringify(pathToFileURL(join(here, '..', 'dist', 'token-stores.js')).href)});
  const store = createKeyringTokenStore({ service: 'mcpferry-test' });
  try {
    const seen = [];
    await store.set('issuer|server', 'at-first');
    seen.push(await store.get('issuer|server'));
    await store.set('issuer|server', 'at-second');
    seen.push(await store.get('issuer|server'));
    await store.delete('issuer|server');
    seen.push(await store.get('issuer|server'));
    console.log(JSON.stringify({ seen }));
  } catch (e) {
    console.log(JSON.stringify({ name: e.name, code: e.code, message: e.message }));
  }`;

function runKeyringChild(command, args, env) {
  const run = spawnSync(command, args, { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 60_000 });
  const line = run.stdout.trim().split('\n').pop();
  assert.ok(line, `no output from the child: ${run.stderr}`);
  return JSON.parse(line);
}

test('keyring: without a Secret Service the first operation rejects with McpStorageError', { skip: process.platform !== 'linux' && 'the Secret Service is the Linux store' }, () => {
  const outcome = runKeyringChild(process.execPath, ['--input-type=module', '-e', KEYRING_CHILD], {
    DBUS_SESSION_BUS_ADDRESS: `unix:path=${scratchFile('no-session-bus')}`,
  });
  assert.equal(outcome.name, 'McpStorageError', JSON.stringify(outcome));
  assert.equal(outcome.code, 'mcp_storage_error');
  assert.match(outcome.message, /no OS secret store is available: /);
});

function onPath(program) {
  return spawnSync('sh', ['-c', `command -v ${program}`]).status === 0;
}

test('keyring: a real round trip through a Secret Service (gnome-keyring on a private session bus)', (t) => {
  if (process.platform !== 'linux') return t.skip('the Secret Service is the Linux store');
  const missing = ['dbus-run-session', 'gnome-keyring-daemon'].filter((program) => !onPath(program));
  if (missing.length) return t.skip(`${missing.join(' and ')} not installed (apt-get install dbus-daemon gnome-keyring)`);
  // A fresh keyring in a scratch directory, unlocked with a throwaway password, on a bus of its own.
  const data = scratchFile('keyring-data');
  const script = 'printf throwaway-password | gnome-keyring-daemon --unlock --components=secrets >/dev/null 2>&1 && exec "$0" --input-type=module -e "$1"';
  const outcome = runKeyringChild('dbus-run-session', ['--', 'sh', '-c', script, process.execPath, KEYRING_CHILD], {
    XDG_DATA_HOME: data,
    XDG_RUNTIME_DIR: data,
  });
  assert.deepEqual(outcome, { seen: ['at-first', 'at-second', null] });
});

/** A store written in JavaScript against the documented interface, as a host's vault client would be. */
function createMapStore() {
  const entries = new Map();
  return {
    entries,
    async get(key) {
      return entries.get(key);
    },
    async set(key, value) {
      entries.set(key, value);
    },
    async delete(key) {
      entries.delete(key);
    },
  };
}

test('a JavaScript store, driven through the engine: round trip, and its failures as McpStorageError', async () => {
  const js = createMapStore();
  assert.equal(nativeTokenStoreId(js), undefined);
  const viaEngine = binding.NativeTokenStore.fromDispatcher(tokenStoreDispatcher(js));
  await roundTrip(viaEngine);
  assert.deepEqual([...js.entries], [['https://as.example|server', TOKEN]]);

  const failing = { ...js, set: async () => Promise.reject(new Error('vault is sealed')) };
  const error = await binding.NativeTokenStore.fromDispatcher(tokenStoreDispatcher(failing)).set('k', 'at-7f3a9c2e').catch((e) => e);
  assert.equal(error.code, 'mcp_storage_error');
  assert.match(error.message, /token store: set failed: .*vault is sealed/);
  assert.doesNotMatch(error.message, /at-7f3a9c2e/);

  const malformed = { ...js, get: async () => ({ access_token: 'at-7f3a9c2e' }) };
  const bad = await binding.NativeTokenStore.fromDispatcher(tokenStoreDispatcher(malformed)).get('k').catch((e) => e);
  assert.equal(bad.code, 'mcp_storage_error');
  assert.doesNotMatch(bad.message, /at-7f3a9c2e/);
});

test('engineTokenStoreId: a built-in has its own id; a JavaScript store gets one id, kept with it', () => {
  const memory = createMemoryTokenStore();
  assert.equal(engineTokenStoreId(memory), nativeTokenStoreId(memory));
  const [one, other] = [createMapStore(), createMapStore()];
  assert.equal(typeof engineTokenStoreId(one), 'number');
  assert.equal(engineTokenStoreId(one), engineTokenStoreId(one));
  assert.notEqual(engineTokenStoreId(one), engineTokenStoreId(other));
  assert.notEqual(engineTokenStoreId(one), nativeTokenStoreId(memory));
});
