// Shared by the adapter suites: the adapters fixture server (fixtures/adapters-server.mjs) and what it recorded.

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { mcpTools } from '../dist/index.js';
import { here, scratchFile, until } from './helpers.mjs';

export * from './fixtures/adapters-data.mjs';
export const ADAPTERS_SERVER = join(here, 'fixtures', 'adapters-server.mjs');

/**
 * A toolset over one adapters fixture server named `name`; `received()` reads what its tools recorded,
 * `started(tool)` waits until the server began a call of that tool.
 */
export async function adaptersToolset(t, name = 'fx', options = {}) {
  const record = scratchFile(`${name}.jsonl`);
  const entry = { name, type: 'stdio', command: process.execPath, args: [ADAPTERS_SERVER], env: { FIXTURE_RECORD: record } };
  const toolset = await mcpTools([entry], { timeoutMs: 30_000, ...options });
  t.after(() => toolset.close());
  const received = () => (existsSync(record) ? readFileSync(record, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)) : []);
  const recorded = (predicate) => until(() => received().find(predicate), { timeoutMs: 15_000 });
  return { toolset, received, recorded };
}
