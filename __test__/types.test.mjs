// The package's types as a user compiles against them under `strict` (tsc, through the package's own
// `exports`, so dist/*.d.ts as built): fixtures/content-types/narrowing.mts narrows tool results by block
// type with no casts, and its @ts-expect-error lines fail the check if a wrong access compiles;
// fixtures/recovery-types/recovery.mts does the same for the recovery API (states, `reconnect`, diagnostics, errors).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { here } from './helpers.mjs';

const root = join(here, '..');
const TSC = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
const TSC_TIMEOUT_MS = 180_000;

/** `tsc -p` over the fixture directory `name`, as a user's project compiling against the package. */
function typeCheck(name) {
  const config = join(here, 'fixtures', name, 'tsconfig.json');
  const result = spawnSync(process.execPath, [TSC, '-p', config], { cwd: root, encoding: 'utf8', timeout: TSC_TIMEOUT_MS });
  assert.equal(result.status, 0, `tsc -p ${config} failed:\n${result.stdout}\n${result.stderr}`);
}

test('tool results narrow by content block type under strict, and a wrong access is a type error (tsc)', () => typeCheck('content-types'));

test('the recovery API type-checks from the package: servers() states, reconnect, the four diagnostics, McpServerUnavailableError, sent (tsc)', () => typeCheck('recovery-types'));
