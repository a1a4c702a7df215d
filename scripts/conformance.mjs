#!/usr/bin/env node
// Runs the official MCP conformance suite (@modelcontextprotocol/conformance 0.1.16, which needs
// Node >= 22) against examples/conformance-client.mjs, one scenario at a time (sse-retry is timing
// sensitive). Usage: node scripts/conformance.mjs <node22-binary> [scenario ...]

import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const require = createRequire(import.meta.url);
const cli = join(dirname(require.resolve('@modelcontextprotocol/conformance/package.json')), 'dist', 'index.js');
const [node22, ...requested] = process.argv.slice(2);
const scenarios = requested.length ? requested : ['initialize', 'tools_call', 'sse-retry'];

let passed = 0;
let failed = 0;
for (const scenario of scenarios) {
  const run = spawnSync(
    node22,
    [cli, 'client', '--command', `${node22} ${join(root, 'examples', 'conformance-client.mjs')}`, '--scenario', scenario],
    { cwd: root, encoding: 'utf8', env: { ...process.env, PATH: `${dirname(node22)}:${process.env.PATH}` } },
  );
  const output = `${run.stdout}${run.stderr}`;
  // The initialize scenario passes vacuously for a client that never connects: require its check too.
  const vacuous = scenario === 'initialize' && !output.includes('mcp-client-initialization');
  const ok = run.status === 0 && !vacuous;
  console.log(`${ok ? 'ok    ' : 'FAILED'} conformance ${scenario}`);
  if (!ok) console.log(output);
  ok ? passed++ : failed++;
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
