// The README's framework recipes (examples/recipes/*.mjs, pasted into the README verbatim) and what
// users write with each adapter (fixtures/adapters-types/typed.mts) type-check against the frameworks'
// own types through the package's subpath exports: on ai 7, and again with `ai` resolved to ai 6.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { here } from './helpers.mjs';

const root = join(here, '..');
const TSC = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
const TYPES = join(here, 'fixtures', 'adapters-types');
const RECIPES = join(root, 'examples', 'recipes');
const TSC_TIMEOUT_MS = 180_000;

function tsc(config, ...extra) {
  const result = spawnSync(process.execPath, [TSC, '-p', join(TYPES, config), ...extra], { cwd: root, encoding: 'utf8', timeout: TSC_TIMEOUT_MS, maxBuffer: 256 * 1024 * 1024 });
  assert.equal(result.status, 0, `tsc -p ${config} failed:\n${result.stdout}\n${result.stderr}`);
  return result.stdout;
}

test('the recipes and typed adapter usage type-check with ai 7, @openai/agents, openai and @anthropic-ai/sdk', () => {
  tsc('tsconfig.json');
});

test('the AI SDK recipe and typed usage type-check with `ai` resolved to ai 6', () => {
  const trace = tsc('tsconfig.ai6.json', '--traceResolution');
  const resolved = [...trace.matchAll(/Module name 'ai' was successfully resolved to '([^']+)'/g)].map((m) => m[1]);
  assert.ok(resolved.length >= 2, 'the recipe and mcpferry/ai both import ai');
  assert.ok(resolved.every((path) => path.endsWith('/ai6/dist/index.d.ts')), `every import of ai is ai 6: ${resolved.join(', ')}`);
});

test('the README shows each recipe as it is type-checked', () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const recipes = readdirSync(RECIPES).filter((file) => file.endsWith('.mjs'));
  assert.deepEqual(recipes.sort(), ['ai-sdk.mjs', 'anthropic.mjs', 'openai-agents.mjs', 'openai-responses.mjs']);
  for (const file of recipes) {
    assert.ok(readme.includes('```js\n' + readFileSync(join(RECIPES, file), 'utf8') + '```'), `README.md shows examples/recipes/${file} verbatim`);
  }
});
