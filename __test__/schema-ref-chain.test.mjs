// A server's outputSchema of in-place $ref chains, with a deep result, must fail the call or pass it unchecked, never
// take the host down: the validator recurses once per $ref link per level of the value, and over stdio the check runs
// on the JavaScript thread (a stack overflow there is SIGSEGV, not an error).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { here } from './helpers.mjs';

const call = (env) =>
  new Promise((resolve) => {
    execFile(process.execPath, [join(here, 'fixtures', 'schema-ref-chain-child.mjs')], { env: { ...process.env, ...env }, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ error, stdout, stderr }));
  });

test('a 2 000-link $ref chain per level: the outputSchema is refused (tool-schema-invalid) and the call goes through unchecked', async () => {
  const { error, stdout, stderr } = await call({ CHAIN: '2000', DEPTH: '90' });
  assert.equal(error?.signal ?? null, null, `the host process was killed by ${error?.signal}: ${stderr.slice(-300)}`);
  assert.match(stdout, /^ok$/m);
  assert.match(stdout, /^diagnostics: .*tool-schema-invalid/m);
  assert.match(stdout, /alive/);
});

test('a 120-link $ref chain (within the limit) and a 90-level result: the result is refused unchecked (mcp_result_invalid), the host lives', async () => {
  const { error, stdout, stderr } = await call({ CHAIN: '120', DEPTH: '90' });
  assert.equal(error?.signal ?? null, null, `the host process was killed by ${error?.signal}: ${stderr.slice(-300)}`);
  assert.match(stdout, /^mcp_result_invalid: .*cannot be checked against its outputSchema, so the result is refused/m);
  assert.doesNotMatch(stdout, /tool-schema-invalid/);
  assert.match(stdout, /alive/);
});
