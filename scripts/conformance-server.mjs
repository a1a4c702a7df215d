#!/usr/bin/env node
// Runs the official MCP conformance suite's server scenarios that concern tools against
// examples/conformance-server.mjs (createMcpServer over Streamable HTTP): those of
// @modelcontextprotocol/conformance 0.1.16, of the 0.2.0-alpha suite at 2025-11-25 and at 2026-07-28.
// The CLI needs Node >= 22; the server runs on this process's Node.
//   node scripts/conformance-server.mjs <node22-binary> [scenario | suite:scenario ...]
// A scenario passes when the CLI passes it (exit 0) AND its checks.json has no FAILURE or WARNING and
// shows SUCCESS for the checks below, so that a server that never got far enough to be checked cannot pass.
//
// Not run (mcpferry's server publishes tools only, and answers each request with one JSON body): the
// scenarios about prompts, resources, completion, logging, progress, sampling and elicitation requests
// from a tool, SSE streams, caching of prompt and resource lists, input-required results, and
// x-mcp-header parameter headers. In server-stateless, the checks that need such a tool are reported
// untestable by the suite and accepted only as that (UNTESTABLE); subscriptions are not applicable.

import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { findFiles, runCollecting, suiteCli } from './conformance-common.mjs';

const root = new URL('..', import.meta.url).pathname;

/** Scenarios run at the same time against the one server. */
const CONCURRENCY = 3;
/** Kill a scenario's CLI after this long, in ms. */
const SCENARIO_TIMEOUT_MS = 60_000;
/** How long the server may take to print its URL, in ms. */
const SERVER_START_TIMEOUT_MS = 20_000;

/** The checks each scenario must show as SUCCESS. */
const MUST_SUCCEED = {
  'server-initialize': ['server-initialize'],
  ping: ['ping'],
  'tools-list': ['tools-list'],
  'tools-call-simple-text': ['tools-call-simple-text'],
  'tools-call-image': ['tools-call-image'],
  'tools-call-audio': ['tools-call-audio'],
  'tools-call-embedded-resource': ['tools-call-embedded-resource'],
  'tools-call-mixed-content': ['tools-call-mixed-content'],
  'tools-call-error': ['tools-call-error'],
  'json-schema-2020-12': ['json-schema-2020-12-tool-found', 'json-schema-2020-12-$schema', 'json-schema-2020-12-$defs', 'json-schema-2020-12-additionalProperties'],
  'dns-rebinding-protection': ['localhost-host-rebinding-rejected', 'localhost-host-valid-accepted'],
  'server-session-lifecycle': ['server-session-initialized-accepted', 'server-session-delete-accepted', 'server-session-terminated-returns-404'],
  'http-header-validation': ['sep-2243-server-reject-invalid-headers', 'sep-2243-server-reject-error-code', 'sep-2243-server-accepts-whitespace-header-value', 'wire-schema-valid'],
  'server-stateless': [
    'sep-2575-request-meta-invalid-missing-meta',
    'sep-2575-http-server-meta-invalid-400',
    'sep-2575-request-meta-client-info-optional',
    'sep-2575-server-implements-discover',
    'sep-2575-server-identifies-in-result-meta',
    'sep-2575-server-unsupported-version-error',
    'sep-2575-http-server-unsupported-version-400',
    'sep-2575-http-server-header-mismatch-400',
    'sep-2575-http-server-method-not-found-404-ping',
    'sep-2575-http-server-method-not-found-404',
    'sep-2575-http-server-error-jsonrpc-id',
  ],
};
/**
 * Checks the suite reports as FAILURE with `details.untestable` because they need a diagnostic tool for a
 * feature this server does not have (a tool needing a client capability, an elicitation stream, logging):
 * accepted only as untestable, never as a real failure.
 */
const UNTESTABLE = new Set([
  'sep-2575-server-rejects-undeclared-capability',
  'sep-2575-missing-capability-http-400',
  'sep-2575-http-server-no-independent-requests-on-stream',
  'sep-2575-server-no-log-without-loglevel',
]);
const MUST_SUCCEED_2026 = {
  ...MUST_SUCCEED,
  'tools-list': ['tools-list', 'tools-list-deterministic-order'],
  'json-schema-2020-12': [...MUST_SUCCEED['json-schema-2020-12'], 'sep-2106-composition-keywords-preserved', 'sep-2106-conditional-keywords-preserved'],
};
const TOOLS = [
  'tools-list',
  'tools-call-simple-text',
  'tools-call-image',
  'tools-call-audio',
  'tools-call-embedded-resource',
  'tools-call-mixed-content',
  'tools-call-error',
];

const SUITES = [
  {
    label: '0.1.16',
    pkg: '@modelcontextprotocol/conformance',
    args: [],
    scenarios: ['server-initialize', 'ping', ...TOOLS, 'json-schema-2020-12', 'dns-rebinding-protection'],
    mustSucceed: MUST_SUCCEED,
  },
  {
    label: 'alpha',
    pkg: 'conformance-alpha',
    args: ['--spec-version', '2025-11-25'],
    scenarios: ['server-initialize', 'server-session-lifecycle', 'ping', ...TOOLS, 'json-schema-2020-12', 'dns-rebinding-protection'],
    mustSucceed: MUST_SUCCEED,
  },
  {
    label: '2026',
    pkg: 'conformance-alpha',
    args: ['--spec-version', '2026-07-28'],
    scenarios: [...TOOLS, 'json-schema-2020-12', 'dns-rebinding-protection', 'http-header-validation', 'server-stateless'],
    mustSucceed: MUST_SUCCEED_2026,
  },
];

async function startServer() {
  const child = spawn(process.execPath, [join(root, 'examples', 'conformance-server.mjs')], { stdio: ['ignore', 'pipe', 'inherit'] });
  let timer;
  const line = await Promise.race([
    new Promise((resolve) => createInterface({ input: child.stdout }).once('line', resolve)),
    new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('the conformance server did not start')), SERVER_START_TIMEOUT_MS))),
    new Promise((_, reject) => child.once('exit', (code) => reject(new Error(`the conformance server exited (${code})`)))),
  ]).finally(() => clearTimeout(timer));
  return { url: JSON.parse(line).url, child };
}

async function runScenario(node22, url, suite, scenario) {
  const out = mkdtempSync(join(tmpdir(), 'mcpferry-conformance-server-'));
  const args = [suiteCli(suite.pkg), 'server', ...suite.args, '--url', url, '--scenario', scenario, '-o', out];
  const started = Date.now();
  const { code, signal, output } = await runCollecting(node22, args, { cwd: root, timeoutMs: SCENARIO_TIMEOUT_MS });
  const problems = [];
  const [checksFile] = findFiles(out, 'checks.json');
  if (!checksFile) problems.push('no checks.json');
  else {
    const checks = JSON.parse(readFileSync(checksFile, 'utf8'));
    let untestable = 0;
    for (const c of checks) {
      if (c.status === 'FAILURE' && UNTESTABLE.has(c.id) && c.details?.untestable === true) untestable++;
      else if (c.status === 'FAILURE' || c.status === 'WARNING') problems.push(`${c.status} ${c.id}: ${c.errorMessage ?? c.description}`);
    }
    for (const id of suite.mustSucceed[scenario] ?? []) {
      if (!checks.some((c) => c.id === id && c.status === 'SUCCESS')) problems.push(`no SUCCESS ${id}`);
    }
    if (!checks.some((c) => c.status === 'SUCCESS')) problems.push('no check succeeded');
    // The CLI exits 1 for any FAILURE, the accepted untestable ones included.
    if (code !== 0 && !(code === 1 && untestable > 0 && problems.length === 0)) {
      problems.push(signal ? `the suite was killed (${signal})` : `the suite failed it (exit ${code})`);
    }
  }
  if (!checksFile && code !== 0) problems.push(signal ? `the suite was killed (${signal})` : `the suite failed it (exit ${code})`);
  if (problems.length === 0) rmSync(out, { recursive: true, force: true });
  return { suite: suite.label, scenario, problems, seconds: (Date.now() - started) / 1000, output, out };
}

const [node22, ...requested] = process.argv.slice(2);
if (!node22) {
  console.error('usage: node scripts/conformance-server.mjs <node22-binary> [scenario | suite:scenario ...]');
  process.exit(2);
}
const jobs = SUITES.flatMap((suite) =>
  suite.scenarios.filter((s) => !requested.length || requested.some((r) => r === s || r === `${suite.label}:${s}`)).map((scenario) => ({ suite, scenario })),
);
const unknown = requested.filter((r) => !jobs.some((j) => r === j.scenario || r === `${j.suite.label}:${j.scenario}`));
let failed = unknown.length;
for (const name of unknown) console.log(`FAILED unknown scenario ${name}`);
console.log(`conformance server: ${jobs.length} scenario runs, ${CONCURRENCY} at a time`);

const server = await startServer();
let passed = 0;
try {
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (let job = jobs.shift(); job; job = jobs.shift()) {
        const result = await runScenario(node22, server.url, job.suite, job.scenario);
        const ok = result.problems.length === 0;
        console.log(`${ok ? 'ok    ' : 'FAILED'} ${result.suite.padEnd(6)} ${result.scenario.padEnd(32)} ${result.seconds.toFixed(1).padStart(5)} s`);
        if (ok) passed++;
        else {
          failed++;
          for (const problem of result.problems) console.log(`         ${problem}`);
          console.log(`         results kept in ${result.out}\n         ${result.output.trimEnd().split('\n').slice(-15).join('\n         ')}`);
        }
      }
    }),
  );
} finally {
  server.child.kill('SIGTERM');
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
