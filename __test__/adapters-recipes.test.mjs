// The framework recipes of docs/frameworks.md (examples/recipes/*.mjs, pasted into the guide verbatim) and what
// users write with each adapter (fixtures/adapters-types/typed.mts) type-check against the frameworks'
// own types through the package's subpath exports: on ai 7, and again with `ai` resolved to ai 6. The
// OpenAI and Anthropic recipes also run as pasted against server-everything (`npx -y`, found in this
// repo's node_modules), with the provider's base URL pointed at a local stand-in (fixtures/fake-providers.mjs).
// ai 7, openai 7 and the Agents SDK need Node 22, so they come from scripts/node22 (helpers.mjs: NODE22_MODULES):
// npm run build:ts installs them (and links @openai/agents and openai into node_modules), so the type checks
// use them on every runtime (ai 7 through tsconfig paths), and the OpenAI recipes, which run them, skip on Node 20.
// The AI SDK recipe's model is the AI Gateway, whose address cannot be redirected: the AI SDK loops are
// run with the SDK's mock model in adapters-ai.test.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { NEEDS_NODE22, here } from './helpers.mjs';
import { startFakeProviders } from './fixtures/fake-providers.mjs';

const root = join(here, '..');
const TSC = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
const TYPES = join(here, 'fixtures', 'adapters-types');
const RECIPES = join(root, 'examples', 'recipes');
const TSC_TIMEOUT_MS = 180_000;
const RECIPE_TIMEOUT_MS = 90_000;

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
  const ai6 = join(root, 'node_modules', 'ai', 'dist', 'index.d.ts');
  assert.ok(resolved.every((path) => path === ai6), `every import of ai is ai 6 (${ai6}): ${resolved.join(', ')}`);
});

test('the Frameworks guide shows each recipe as it is type-checked', () => {
  const guide = readFileSync(join(root, 'docs', 'frameworks.md'), 'utf8');
  const recipes = readdirSync(RECIPES).filter((file) => file.endsWith('.mjs'));
  assert.deepEqual(recipes.sort(), ['ai-sdk.mjs', 'anthropic.mjs', 'openai-agents.mjs', 'openai-responses.mjs']);
  for (const file of recipes) {
    assert.ok(guide.includes('```js\n' + readFileSync(join(RECIPES, file), 'utf8') + '```'), `docs/frameworks.md shows examples/recipes/${file} verbatim`);
  }
});

/** Runs a recipe as a user would (`node recipe.mjs` in its folder); resolves to its exit code and output. */
function runRecipe(file, env) {
  const child = spawn(process.execPath, [file], { cwd: RECIPES, env: { ...process.env, ...env } });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), RECIPE_TIMEOUT_MS);
  return new Promise((resolve) => child.on('close', (code) => (clearTimeout(timer), resolve({ code, stdout, stderr }))));
}

for (const file of ['openai-responses.mjs', 'openai-agents.mjs', 'anthropic.mjs']) {
  const skip = file.startsWith('openai') && NEEDS_NODE22;
  test(`examples/recipes/${file} runs as pasted: the model's tool call reaches server-everything and the result comes back`, { skip }, async (t) => {
    const fake = await startFakeProviders();
    t.after(fake.stop);
    const env = { OPENAI_API_KEY: 'sk-test', OPENAI_BASE_URL: fake.openai, OPENAI_AGENTS_DISABLE_TRACING: '1', ANTHROPIC_API_KEY: 'sk-ant-test', ANTHROPIC_BASE_URL: fake.anthropic };
    const { code, stdout, stderr } = await runRecipe(file, env);
    assert.equal(code, 0, `${file} exited ${code}\n${stdout}\n${stderr}`);
    assert.equal(stdout.trim(), 'The tool says: The sum of 2 and 40 is 42.');
    assert.equal(fake.requests.length, 2, 'one turn asks for the tool, the next gets its result');
  });
}
