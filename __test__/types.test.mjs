// The package's types as a user compiles against them under `strict` (tsc, through the package's own
// `exports`, so dist/*.d.ts as built): fixtures/content-types/narrowing.mts narrows tool results by block
// type with no casts, and its @ts-expect-error lines fail the check if a wrong access compiles.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { here } from './helpers.mjs';

const root = join(here, '..');
const TSC = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
const TSC_TIMEOUT_MS = 180_000;

test('tool results narrow by content block type under strict, and a wrong access is a type error (tsc)', () => {
  const config = join(here, 'fixtures', 'content-types', 'tsconfig.json');
  const result = spawnSync(process.execPath, [TSC, '-p', config], { cwd: root, encoding: 'utf8', timeout: TSC_TIMEOUT_MS });
  assert.equal(result.status, 0, `tsc -p ${config} failed:\n${result.stdout}\n${result.stderr}`);
});
