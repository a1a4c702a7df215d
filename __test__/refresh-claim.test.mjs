// Spending a rotating refresh token is a claim one holder wins: toolsets sharing a token store whose tokens
// come due together, calling at once, present each refresh token to the authorization server once — in
// one process (a JavaScript store, the encrypted file store, two encrypted file stores on one file,
// JavaScript stores with compareAndSet over one backing store) and across two processes sharing an
// encrypted token file. The fixture rotates refresh tokens, records every one presented, and refuses a
// reused one by revoking its whole family, as a real authorization server does.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { createEncryptedFileTokenStore, mcpTools } from '../dist/index.js';
import { startOAuthFixture } from './fixtures/oauth-server.mjs';
import { here, scratchFile } from './helpers.mjs';

const TOOLSETS = 8;
/** The first token's lifetime (s): long enough for every toolset to load it before it is due. */
const FIRST_TOKEN_TTL_S = 4;
const entryFor = (as) => ({ name: 'notes', type: 'streamable-http', url: as.mcpUrl, oauth: true });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A store a network round trip away (a vault, a database): each operation takes a few milliseconds. */
function createRemoteStore(values = new Map(), { compareAndSet = false } = {}) {
  const roundTrip = () => sleep(3);
  const store = {
    values,
    async get(key) {
      await roundTrip();
      return values.get(key) ?? null;
    },
    async set(key, value) {
      await roundTrip();
      values.set(key, value);
    },
    async delete(key) {
      await roundTrip();
      values.delete(key);
    },
  };
  if (compareAndSet) {
    store.compareAndSet = async (key, expected, value) => {
      await roundTrip();
      if ((values.get(key) ?? null) !== expected) return false;
      values.set(key, value);
      return true;
    };
  }
  return store;
}

/** The person at the browser, for the one first login: follows the authorization URL. */
const person = { visits: 0, onAuthorizationUrl: (url) => void (person.visits++, fetch(url).catch(() => {})) };

/**
 * An authorization server whose first token lives FIRST_TOKEN_TTL_S, logged into once with `tokenStore`
 * (later tokens live an hour, so one refresh is all the toolsets need). `dueAt`: when every holder finds
 * the first token due (the client refreshes halfway through what is left when it loads a token, so by
 * its expiry at the latest).
 */
async function loggedIn(t, tokenStore, knobs = {}) {
  const as = await startOAuthFixture({ knobs: { accessTokenTtl: FIRST_TOKEN_TTL_S } });
  t.after(as.close);
  const first = await mcpTools([entryFor(as)], { tokenStore, onAuthorizationUrl: person.onAuthorizationUrl, authorizationTimeoutMs: 20_000 });
  assert.equal((await first.tools.notes__read_notes.execute({})).content[0].text, '(no notes)');
  await first.close();
  Object.assign(as.knobs, { accessTokenTtl: 3600, ...knobs });
  const issued = as.to('/token').find((r) => r.form?.grant_type === 'authorization_code');
  assert.ok(issued, 'the first login exchanged a code');
  return { as, dueAt: issued.at + FIRST_TOKEN_TTL_S * 1000 + 200 };
}

/** What the authorization server saw: each refresh token presented once, nothing refused or revoked. */
function assertEachRefreshTokenPresentedOnce(as) {
  const presented = as.presentedRefreshTokens();
  assert.ok(presented.length >= 1, 'the tokens were refreshed');
  assert.deepEqual(as.refreshTokensPresentedTwice(), [], `a refresh token was presented more than once (of ${presented.length} presented)`);
  assert.deepEqual(as.events.filter((e) => e.type === 'refresh-reuse'), []);
  assert.equal(as.revoked.size, 0, 'the token family is alive');
}

async function openAll(t, as, stores) {
  const toolsets = await Promise.all(stores.map((tokenStore) => mcpTools([entryFor(as)], { tokenStore })));
  for (const toolset of toolsets) t.after(toolset.close);
  return toolsets;
}

async function callAtOnce(toolsets, dueAt) {
  await sleep(Math.max(0, dueAt - Date.now()));
  const results = await Promise.allSettled(toolsets.map((t) => t.tools.notes__read_notes.execute({})));
  return results.map((r) => (r.status === 'fulfilled' ? r.value.content[0].text : `${r.reason?.code}: ${r.reason?.message}`));
}

const sharedStores = {
  'one JavaScript store': () => Array(TOOLSETS).fill(createRemoteStore()),
  'one encrypted file store': () => Array(TOOLSETS).fill(createEncryptedFileTokenStore(scratchFile('tokens.bin'), { key: randomBytes(32) })),
  'two encrypted file stores on one file': () => {
    const [path, key] = [scratchFile('tokens.bin'), randomBytes(32)];
    const stores = [createEncryptedFileTokenStore(path, { key }), createEncryptedFileTokenStore(path, { key })];
    return Array.from({ length: TOOLSETS }, (_, i) => stores[i % 2]);
  },
  // Separate store objects over one backing store stand for separate processes: the engine sees
  // different stores, and only compareAndSet stands between their refreshes.
  'JavaScript stores with compareAndSet over one backing store': () => {
    const backing = new Map();
    return Array.from({ length: TOOLSETS }, () => createRemoteStore(backing, { compareAndSet: true }));
  },
};

for (const [kind, make] of Object.entries(sharedStores)) {
  test(`${TOOLSETS} toolsets sharing ${kind}, tokens due together, calling at once: each refresh token presented once, every call succeeds`, async (t) => {
    const stores = make();
    const { as, dueAt } = await loggedIn(t, stores[0]);
    const toolsets = await openAll(t, as, stores);
    const results = await callAtOnce(toolsets, dueAt);
    assert.deepEqual(results, Array(TOOLSETS).fill('(no notes)'));
    assertEachRefreshTokenPresentedOnce(as);
    assert.equal(as.toolCalls.length, 1 + TOOLSETS, 'every call reached the tool once');
    assert.equal(as.to('/authorize').length, 1, 'one login, no other');
  });
}

/** A child process (fixtures/refresh-child.mjs) with `count` toolsets on the token file. */
function child(t, as, path, key, count) {
  const proc = spawn(process.execPath, [join(here, 'fixtures', 'refresh-child.mjs')], {
    env: { ...process.env, REFRESH_MCP_URL: as.mcpUrl, REFRESH_TOKEN_FILE: path, REFRESH_TOKEN_KEY: key.toString('hex'), REFRESH_TOOLSETS: String(count) },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  t.after(() => proc.kill());
  const lines = createInterface({ input: proc.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    assert.ok(!done, 'the child exited early');
    return JSON.parse(value);
  };
  const exited = new Promise((resolve) => proc.on('exit', resolve));
  return { next, go: () => proc.stdin.end('go\n'), exited };
}

test('two processes sharing one encrypted token file, tokens due together, calling at once: each refresh token presented once', async (t) => {
  const [path, key] = [scratchFile('tokens-two-processes.bin'), randomBytes(32)];
  // A refresh takes a while at the server: the other process finds it in flight and waits for its tokens.
  const { as, dueAt } = await loggedIn(t, createEncryptedFileTokenStore(path, { key }), { refreshDelayMs: 200 });
  const children = [child(t, as, path, key, 4), child(t, as, path, key, 4)];
  for (const c of children) assert.deepEqual((await c.next()).diagnostics, []);
  await sleep(Math.max(0, dueAt - Date.now()));
  for (const c of children) c.go();
  const outcomes = await Promise.all(children.map((c) => c.next()));
  assert.deepEqual(outcomes.map((o) => o.results), [Array(4).fill('ok'), Array(4).fill('ok')]);
  assertEachRefreshTokenPresentedOnce(as);
  assert.equal(as.toolCalls.length, 1 + 8);
  assert.deepEqual(await Promise.all(children.map((c) => c.exited)), [0, 0]);
});
