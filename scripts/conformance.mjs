#!/usr/bin/env node
// Runs the official MCP conformance suite against examples/conformance-client.mjs: all 26 client
// scenarios of @modelcontextprotocol/conformance 0.1.16, the 19 of the 0.2.0-alpha suite's frozen
// 2025-11-25 requirement set (`--spec-version 2025-11-25`) and its 33 of the stateless 2026-07-28
// revision (`--spec-version 2026-07-28`), and every client scenario the alpha lists (48 in alpha.12),
// run as it lists them, extensions included (Skills, DPoP, workload identity, enterprise-managed
// authorization). All need Node >= 22.
//   node scripts/conformance.mjs <node22-binary> [scenario | suite:scenario ...]
// MCPFERRY_CONFORMANCE_CLIENT=<script> runs another client instead (e.g. one that does nothing, to see
// the evidence check refuse what the suite alone would pass).
// A scenario passes when the suite's CLI passes it (no FAILURE, no WARNING, client exit 0 unless the
// scenario allows an error) AND its checks.json carries the evidence below, so that a client which never
// got far enough to be checked cannot pass.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { findFiles, runCollecting, suiteCli, suiteDir } from './conformance-common.mjs';

const root = new URL('..', import.meta.url).pathname;
const client = process.env.MCPFERRY_CONFORMANCE_CLIENT || join(root, 'examples', 'conformance-client.mjs');

/** Scenarios run at the same time (sse-retry always runs alone: its check measures reconnect timing). */
const CONCURRENCY = 3;
/** Kill a scenario's CLI after this long, in ms (the CLI itself gives the client 30 000). */
const SCENARIO_TIMEOUT_MS = 90_000;
/** Lines of the client's stderr shown for a failed scenario. */
const STDERR_TAIL_LINES = 30;
const TIMING_SENSITIVE = new Set(['sse-retry']);

const AUTH_CODE_FLOW = ['authorization-request', 'token-request'];
const PKCE = ['pkce-code-challenge-sent', 'pkce-s256-method-used', 'pkce-code-verifier-sent', 'pkce-verifier-matches-challenge'];
const DISCOVERY = ['authorization-server-metadata', 'client-registration', ...AUTH_CODE_FLOW, ...PKCE];
const RESOURCE_PARAMETER = [
  'resource-parameter-in-authorization',
  'resource-parameter-in-token',
  'resource-parameter-valid-uri',
  'resource-parameter-consistency',
];
const AUTH_METHOD = ['token-endpoint-auth-method', 'client-registration', ...AUTH_CODE_FLOW, ...PKCE, ...RESOURCE_PARAMETER];

/**
 * The checks each scenario must show as SUCCESS: the ones that prove the client did the scenario's work
 * (most are the checks the suite back-fills as FAILURE when missing; `initialize` back-fills nothing).
 */
const MUST_SUCCEED = {
  initialize: ['mcp-client-initialization'],
  tools_call: ['tool-add-numbers'],
  'sse-retry': ['client-sse-graceful-reconnect', 'client-sse-retry-timing', 'client-sse-last-event-id'],
  'elicitation-sep1034-client-defaults': ['string', 'integer', 'number', 'enum', 'boolean'].map((t) => `client-elicitation-sep1034-${t}-default`),
  'json-schema-2020-12-preservation': [
    'json-schema-2020-12-client-tool-found',
    'json-schema-2020-12-client-echo-completed',
    'json-schema-2020-12-client-$schema-preserved',
    'json-schema-2020-12-client-$defs-preserved',
    'json-schema-2020-12-client-additionalProperties-preserved',
  ],
  'auth/metadata-default': ['prm-pathbased-requested', ...DISCOVERY],
  'auth/metadata-var1': ['prm-pathbased-requested', ...DISCOVERY],
  'auth/metadata-var2': DISCOVERY,
  'auth/metadata-var3': DISCOVERY,
  'auth/basic-cimd': ['cimd-client-id-used', ...AUTH_CODE_FLOW, ...PKCE],
  'auth/scope-from-www-authenticate': ['scope-from-www-authenticate', ...AUTH_CODE_FLOW, ...PKCE],
  'auth/scope-from-scopes-supported': ['scope-from-scopes-supported', ...AUTH_CODE_FLOW, ...PKCE],
  'auth/scope-omitted-when-undefined': ['scope-omitted-when-undefined', ...AUTH_CODE_FLOW, ...PKCE],
  'auth/scope-step-up': ['scope-step-up-initial', 'scope-step-up-escalation', ...AUTH_CODE_FLOW, ...PKCE],
  'auth/scope-retry-limit': ['scope-retry-limit', 'authorization-request'],
  'auth/token-endpoint-auth-basic': AUTH_METHOD,
  'auth/token-endpoint-auth-post': AUTH_METHOD,
  'auth/token-endpoint-auth-none': AUTH_METHOD,
  'auth/pre-registration': ['pre-registration-auth', 'authorization-server-metadata', ...AUTH_CODE_FLOW, ...PKCE],
  'auth/2025-03-26-oauth-metadata-backcompat': DISCOVERY,
  // The 2025-03-26 default endpoints: the suite's own /authorize and /token record no PKCE checks.
  'auth/2025-03-26-oauth-endpoint-fallback': ['client-registration', ...AUTH_CODE_FLOW],
  'auth/resource-mismatch': ['resource-mismatch-rejected', 'prm-pathbased-requested'],
  'auth/offline-access-scope': ['authorization-server-metadata', ...AUTH_CODE_FLOW, ...PKCE],
  'auth/offline-access-not-supported': ['sep-2207-offline-access-not-requested', ...AUTH_CODE_FLOW, ...PKCE],
  'auth/client-credentials-jwt': ['client-credentials-jwt-verified', 'authorization-server-metadata'],
  'auth/client-credentials-basic': ['client-credentials-basic-auth', 'authorization-server-metadata'],
  'auth/cross-app-access-complete-flow': ['complete-flow-token-exchange', 'complete-flow-jwt-bearer', 'authorization-server-metadata'],
};

/** The alpha's authorization extensions (listed as extensions): SEP-990 under its new name, DPoP, workload identity. */
const DPOP = ['sep-1932-client-token-request-proof', 'sep-1932-client-dpop-auth-scheme', 'sep-1932-client-fresh-proof', ...AUTH_CODE_FLOW, ...PKCE];
const MUST_SUCCEED_EXTENSIONS = {
  'auth/enterprise-managed-authorization': MUST_SUCCEED['auth/cross-app-access-complete-flow'],
  'auth/dpop': DPOP,
  'auth/dpop-nonce': [...DPOP, 'sep-1932-client-as-nonce', 'sep-1932-client-rs-nonce'],
  'auth/wif-jwt-bearer': ['wif-assertion-verified', 'authorization-server-metadata', 'token-request'],
};
/** Scenarios whose resource server checks tokens itself (DPoP-bound): it records no valid-bearer-token check. */
const OWN_TOKEN_CHECK = new Set(['auth/dpop', 'auth/dpop-nonce']);

/**
 * The Skills extension's client scenarios (SEP-2640, listed as extensions): each check is SKIPPED when the
 * client never lists skills, and the verify checks are untestable FAILUREs when it never reads SKILL.md,
 * so requiring SUCCESS means the client listed, loaded, verified and refused.
 */
const MUST_SUCCEED_SKILLS = {
  'sep-2640-client-no-prefetch': ['sep-2640-host-no-prefetch'],
  'sep-2640-client-verify-digest': ['sep-2640-host-verify-digest'],
  'sep-2640-client-verify-size': ['sep-2640-host-size-mismatch-failure'],
  'sep-2640-client-verify-frontmatter': ['sep-2640-host-frontmatter-comparison'],
};
/** Skills scenarios where the client must refuse the skill it loads (and say so). */
const SKILL_REFUSAL = new Set(Object.keys(MUST_SUCCEED_SKILLS).filter((s) => s.startsWith('sep-2640-client-verify-')));

/** Scenarios where the client is expected to give up; every other auth scenario must end in a tool call. */
const EXPECTED_REFUSAL = new Set(['auth/scope-retry-limit', 'auth/resource-mismatch']);
const MISMATCHED_RESOURCE = 'https://evil.example.com/mcp';
/** Checks that mean the client went on with the authorization server after the PRM. */
const AUTHORIZATION_PROGRESS = ['client-registration', 'authorization-request', 'token-request', 'valid-bearer-token'];
/** http-invalid-tool-headers: the tools whose x-mcp-header annotation is invalid (the client must drop each, with a diagnostic). */
const INVALID_HEADER_TOOLS = [
  'invalid_empty_header',
  'invalid_object_header',
  'invalid_array_header',
  'invalid_null_header',
  'invalid_number_header',
  'invalid_duplicate_same_case',
  'invalid_duplicate_diff_case',
  'invalid_space_in_name',
  'invalid_colon_in_name',
  'invalid_non_ascii_name',
  'invalid_control_char_name',
];

/**
 * The 2026-07-28 set: the same evidence where a scenario is shared, plus the checks of the revision.
 * The stateless mock validates every message the client sends against the 2026 schema (`wire-schema-valid`).
 */
const ISS_REFUSED = ['authorization-server-metadata', 'authorization-request'];
const MUST_SUCCEED_2026 = {
  tools_call: ['tool-add-numbers', 'wire-schema-valid'],
  'request-metadata': [
    'sep-2575-http-client-sends-version-header',
    'sep-2575-client-populates-meta',
    'sep-2575-client-sends-client-info',
    'sep-2575-http-version-header-matches-meta',
    // The client declares elicitation (it has a handler), so this one is SUCCESS, not SKIPPED: an object.
    'sep-2575-client-declares-elicitation-capability',
    'sep-2575-client-retry-supported-version',
  ],
  'sep-2322-client-request-state': [
    'sep-2322-client-request-state-echoed',
    'sep-2322-client-jsonrpc-id-different',
    'sep-2322-client-no-state-omitted',
    'sep-2322-client-parallel-isolation',
    'sep-2322-default-result-type-complete',
  ],
  // Methods the client never sends are SKIPPED there; mcpferry has tools only, so these are the ones it must show.
  'http-standard-headers': [
    'sep-2243-client-includes-standard-headers@ClientMcpMethodHeader_tools_list',
    'sep-2243-client-includes-standard-headers@ClientMcpMethodHeader_tools_call',
    'sep-2243-client-includes-standard-headers@ClientMcpNameHeader_tools_call',
  ],
  'http-custom-headers': [
    'sep-2243-client-supports-custom-headers',
    'sep-2243-client-mirrors-designated-params',
    'sep-2243-client-encode-values',
    'sep-2243-client-base64-unsafe',
    'sep-2243-client-omit-null',
  ],
  'http-invalid-tool-headers': ['sep-2243-client-reject-invalid-tool', ...INVALID_HEADER_TOOLS.map((t) => `@ClientRejectsInvalidTool_${t}`)],
  'json-schema-ref-no-deref': ['sep-2106-no-network-ref-deref'],
  'json-schema-2020-12-preservation': [
    ...MUST_SUCCEED['json-schema-2020-12-preservation'],
    'sep-2106-client-composition-keywords-preserved',
    'sep-2106-client-conditional-keywords-preserved',
    'sep-2106-client-anchor-keyword-preserved',
    'wire-schema-valid',
  ],
  'auth/scope-step-up': [...MUST_SUCCEED['auth/scope-step-up'], 'sep-2350-scope-union-on-reauth'],
  'auth/authorization-server-migration': [
    'sep-2352-reregister-on-as-change',
    'sep-2352-no-reuse-on-as-change',
    'sep-2352-no-cross-as-credential-reuse',
    ...AUTH_CODE_FLOW,
    ...PKCE,
  ],
  'auth/iss-supported': ['sep-2468-client-compare-iss-supported', ...AUTH_CODE_FLOW, ...PKCE],
  'auth/iss-not-advertised': ['sep-2468-client-proceed-no-iss', ...AUTH_CODE_FLOW, ...PKCE],
  'auth/iss-supported-missing': ['sep-2468-client-reject-missing-iss', ...ISS_REFUSED],
  'auth/iss-wrong-issuer': ['sep-2468-client-compare-iss-supported', ...ISS_REFUSED],
  'auth/iss-unexpected': ['sep-2468-client-compare-iss-unadvertised', ...ISS_REFUSED],
  'auth/iss-normalized': ['sep-2468-client-no-normalization', ...ISS_REFUSED],
  'auth/metadata-issuer-mismatch': ['sep-2468-client-validate-metadata-issuer', 'authorization-server-metadata'],
};
/** 2026 scenarios where the client must refuse the authorization response (an `iss` it may not accept): no token request. */
const ISS_REFUSAL = new Set(['auth/iss-supported-missing', 'auth/iss-wrong-issuer', 'auth/iss-unexpected', 'auth/iss-normalized']);
/** 2026 scenario where the client must refuse the authorization server's metadata itself: no registration, authorization or token request. */
const METADATA_REFUSAL = new Set(['auth/metadata-issuer-mismatch']);

const SUITES = [
  {
    label: '0.1.16',
    pkg: '@modelcontextprotocol/conformance',
    version: /^0\.1\.16$/,
    args: [],
    scenarios: Object.keys(MUST_SUCCEED).filter((s) => s !== 'json-schema-2020-12-preservation'),
  },
  {
    label: 'alpha',
    pkg: 'conformance-alpha',
    version: /^0\.2\.0-alpha\./,
    args: ['--spec-version', '2025-11-25'],
    scenarios: [
      'initialize',
      'tools_call',
      'elicitation-sep1034-client-defaults',
      'sse-retry',
      ...Object.keys(MUST_SUCCEED).filter((s) => /^auth\/(metadata-|basic-cimd|scope-|token-endpoint-auth-|pre-registration)/.test(s)),
      'json-schema-2020-12-preservation',
    ],
  },
  {
    label: '2026',
    pkg: 'conformance-alpha',
    version: /^0\.2\.0-alpha\./,
    args: ['--spec-version', '2026-07-28'],
    scenarios: [
      'tools_call',
      'request-metadata',
      'sep-2322-client-request-state',
      'http-standard-headers',
      'http-custom-headers',
      'http-invalid-tool-headers',
      'json-schema-ref-no-deref',
      'json-schema-2020-12-preservation',
      ...Object.keys(MUST_SUCCEED).filter((s) => /^auth\/(metadata-|basic-cimd|scope-|token-endpoint-auth-|pre-registration|resource-mismatch|offline-access-)/.test(s)),
      ...Object.keys(MUST_SUCCEED_2026).filter((s) => s.startsWith('auth/') && !(s in MUST_SUCCEED)),
    ],
    mustSucceed: MUST_SUCCEED_2026,
    expectedRefusal: new Set([...EXPECTED_REFUSAL, ...ISS_REFUSAL, ...METADATA_REFUSAL]),
  },
  {
    // Every client scenario the alpha lists, run as it lists them (no --spec-version), extensions included:
    // the scenarios are read from `conformance list --client` at run time, and one without an evidence list
    // here fails, so a scenario the suite adds can never pass unchecked.
    label: 'all',
    pkg: 'conformance-alpha',
    version: /^0\.2\.0-alpha\./,
    args: [],
    scenarios: 'listed',
    mustSucceed: { ...MUST_SUCCEED, ...MUST_SUCCEED_2026_ONLY(), ...MUST_SUCCEED_SKILLS, ...MUST_SUCCEED_EXTENSIONS },
    expectedRefusal: new Set([...EXPECTED_REFUSAL, ...ISS_REFUSAL, ...METADATA_REFUSAL]),
  },
];

/** The 2026 set's evidence for the scenarios only that revision has (the shared ones keep the 2025 lists in the `all` run). */
function MUST_SUCCEED_2026_ONLY() {
  return Object.fromEntries(Object.entries(MUST_SUCCEED_2026).filter(([scenario]) => !(scenario in MUST_SUCCEED)));
}

/** Whether a check matching `spec` succeeded: `id`, `id@name` or `@name` (some ids carry one entry per method or tool). */
function succeededCheck(checks, spec) {
  const [id, name] = spec.split('@');
  return checks.some((c) => (!id || c.id === id) && (name === undefined || c.name === name) && c.status === 'SUCCESS');
}

/** Why a run's checks.json does not prove the scenario was done, or an empty list. */
function evidenceProblems(suite, scenario, checks, clientStderr) {
  const problems = [];
  const succeeded = (spec) => succeededCheck(checks, spec);
  const seen = (id) => checks.some((c) => c.id === id);
  for (const c of checks) {
    if (c.status === 'FAILURE' || c.status === 'WARNING') problems.push(`${c.status} ${c.id}: ${c.errorMessage ?? c.description}`);
  }
  const mustSucceed = suite.mustSucceed?.[scenario] ?? MUST_SUCCEED[scenario];
  // A scenario passes on evidence only: no list of the checks that prove it, or no check at all, is a failure.
  if (!mustSucceed?.length) problems.push(`this runner has no evidence list for ${scenario}: add one before it can pass`);
  if (checks.length === 0) problems.push('the suite recorded no check at all');
  for (const spec of mustSucceed ?? []) if (!succeeded(spec)) problems.push(`no SUCCESS ${spec}`);
  const responses = checks.filter((c) => c.id === 'outgoing-response');
  const expectedRefusal = suite.expectedRefusal ?? EXPECTED_REFUSAL;
  if (scenario.startsWith('auth/') && !expectedRefusal.has(scenario)) {
    // The whole way through: the tool call reached the MCP server with a token and was answered.
    if (!OWN_TOKEN_CHECK.has(scenario) && !succeeded('valid-bearer-token')) problems.push('no request carried a valid bearer token');
    if (!responses.some((c) => c.details?.mcpMethod === 'tools/call' && c.details.statusCode === 200)) {
      problems.push('the MCP server answered no tools/call with 200');
    }
  }
  if (suite.label === '2026') {
    // Every dynamic client registration names its application_type.
    if (seen('client-registration') && !succeeded('sep-837-application-type-present')) {
      problems.push('a client registration without SUCCESS sep-837-application-type-present');
    }
    // Every 2026 mock speaks the stateless revision: a 2025 handshake means the era was misdetected
    // (where the mock logs its requests; the suite's own checks catch it in the others).
    const handshakes = checks.filter((c) => c.id === 'incoming-request' && c.details?.body?.method === 'initialize').length;
    if (handshakes) problems.push(`${handshakes} initialize request(s): the client fell back to the 2025 handshake`);
  }
  if (scenario === 'auth/scope-retry-limit') {
    const attempts = checks.filter((c) => c.id === 'scope-retry-auth-attempt').length;
    if (attempts < 1 || attempts > 3) problems.push(`${attempts} authorization attempts (1 to 3 expected)`);
  }
  if (scenario === 'auth/resource-mismatch') {
    // Fetched: the protected-resource metadata was served, carrying the foreign resource.
    const served = responses.some(
      (c) => c.details?.path?.startsWith('/.well-known/oauth-protected-resource') && c.details.statusCode === 200 && c.details.body?.resource === MISMATCHED_RESOURCE,
    );
    if (!served) problems.push('the protected-resource metadata (with the foreign resource) was never served to the client');
    // Then refused: nothing more with the authorization server, and the client said why it stopped.
    for (const id of AUTHORIZATION_PROGRESS) if (seen(id)) problems.push(`went on after the PRM: ${id}`);
  }
  if (ISS_REFUSAL.has(scenario)) {
    // The authorization response reached the client, which refused it before any token request.
    for (const id of ['token-request', 'valid-bearer-token']) if (seen(id)) problems.push(`went on after the authorization response: ${id}`);
  }
  if (METADATA_REFUSAL.has(scenario)) {
    for (const id of AUTHORIZATION_PROGRESS) if (seen(id)) problems.push(`went on with the mismatched metadata: ${id}`);
  }
  if (scenario === 'auth/resource-mismatch' || ISS_REFUSAL.has(scenario) || METADATA_REFUSAL.has(scenario)) {
    if (!/refused: mcp_auth_error: /.test(clientStderr)) problems.push('the client did not report an mcp_auth_error refusal');
  }
  if (SKILL_REFUSAL.has(scenario) && !/skill-verification-failed: /.test(clientStderr)) {
    problems.push('the client did not report the skill refused with mcp_skill_verification_failed');
  }
  if (scenario === 'http-invalid-tool-headers') {
    // Dropped by the client itself, with the reason, not merely left uncalled.
    for (const tool of INVALID_HEADER_TOOLS) {
      if (!new RegExp(`tool-rejected ${tool}: `).test(clientStderr)) problems.push(`the client reported no tool-rejected diagnostic for ${tool}`);
    }
  }
  return problems;
}

async function runScenario(node22, suite, scenario) {
  const out = mkdtempSync(join(tmpdir(), 'mcpferry-conformance-'));
  const args = [suiteCli(suite.pkg), 'client', ...suite.args, '--command', `${node22} ${client}`, '--scenario', scenario, '-o', out];
  const started = Date.now();
  const env = { ...process.env, PATH: `${dirname(node22)}:${process.env.PATH}` };
  const { code, signal, output } = await runCollecting(node22, args, { cwd: root, env, timeoutMs: SCENARIO_TIMEOUT_MS });
  const problems = [];
  if (code !== 0) problems.push(signal ? `the suite was killed (${signal})` : `the suite failed it (exit ${code})`);
  const [checksFile] = findFiles(out, 'checks.json');
  const [stderrFile] = findFiles(out, 'stderr.txt');
  const clientStderr = stderrFile ? readFileSync(stderrFile, 'utf8') : '';
  if (!checksFile) problems.push('no checks.json');
  else problems.push(...evidenceProblems(suite, scenario, JSON.parse(readFileSync(checksFile, 'utf8')), clientStderr));
  if (problems.length === 0) rmSync(out, { recursive: true, force: true });
  return { suite: suite.label, scenario, problems, seconds: (Date.now() - started) / 1000, output, clientStderr, out };
}

function report(result) {
  const ok = result.problems.length === 0;
  console.log(`${ok ? 'ok    ' : 'FAILED'} ${result.suite.padEnd(6)} ${result.scenario.padEnd(42)} ${result.seconds.toFixed(1).padStart(5)} s`);
  if (ok) return;
  for (const problem of result.problems) console.log(`         ${problem}`);
  const tail = result.clientStderr.trimEnd().split('\n').slice(-STDERR_TAIL_LINES).join('\n         ');
  console.log(`         client stderr:\n         ${tail || '(none)'}`);
  console.log(`         results kept in ${result.out}`);
}

/** The client scenarios an installed suite lists (with the suite's spec-version arguments). */
function listed(node22, suite) {
  const list = spawnSync(node22, [join(suiteDir(suite.pkg), 'dist', 'index.js'), 'list', '--client', ...suite.args], { encoding: 'utf8' });
  return [...`${list.stdout}`.matchAll(/^\s+- (\S+) \[/gm)].map((m) => m[1]);
}

/** Checks that each installed suite is the expected release and lists exactly the scenarios we run. */
function suiteProblems(node22, suite) {
  const dir = suiteDir(suite.pkg);
  const { version } = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  if (!suite.version.test(version)) return [`${suite.pkg} is ${version}, expected ${suite.version}`];
  if (suite.scenarios.length === 0) return [`${suite.pkg} ${version} lists no client scenario`];
  const listed = listedScenarios.get(suite);
  const missing = listed.filter((s) => !suite.scenarios.includes(s));
  const extra = suite.scenarios.filter((s) => !listed.includes(s));
  return [
    ...(missing.length ? [`${suite.pkg} ${version} lists scenarios this runner lacks: ${missing.join(', ')}`] : []),
    ...(extra.length ? [`${suite.pkg} ${version} does not list: ${extra.join(', ')}`] : []),
  ];
}

const [node22, ...requested] = process.argv.slice(2);
if (!node22) {
  console.error('usage: node scripts/conformance.mjs <node22-binary> [scenario | suite:scenario ...]');
  process.exit(2);
}
const jobs = [];
let failed = 0;
const listedScenarios = new Map(SUITES.map((suite) => [suite, listed(node22, suite)]));
for (const suite of SUITES) if (suite.scenarios === 'listed') suite.scenarios = listedScenarios.get(suite);
for (const suite of SUITES) {
  for (const problem of requested.length ? [] : suiteProblems(node22, suite)) {
    console.log(`FAILED ${suite.label.padEnd(6)} ${problem}`);
    failed++;
  }
  for (const scenario of suite.scenarios) {
    const wanted = !requested.length || requested.some((r) => r === scenario || r === `${suite.label}:${scenario}`);
    if (wanted) jobs.push({ suite, scenario });
  }
}
const unknown = requested.filter((r) => !jobs.some((j) => r === j.scenario || r === `${j.suite.label}:${j.scenario}`));
for (const name of unknown) {
  console.log(`FAILED unknown scenario ${name}`);
  failed++;
}
console.log(`conformance: ${jobs.length} scenario runs, ${CONCURRENCY} at a time (sse-retry alone)`);

let passed = 0;
const tally = (result) => {
  report(result);
  if (result.problems.length) failed++;
  else passed++;
};
const shared = jobs.filter((j) => !TIMING_SENSITIVE.has(j.scenario));
await Promise.all(
  Array.from({ length: CONCURRENCY }, async () => {
    for (let job = shared.shift(); job; job = shared.shift()) tally(await runScenario(node22, job.suite, job.scenario));
  }),
);
for (const job of jobs.filter((j) => TIMING_SENSITIVE.has(j.scenario))) tally(await runScenario(node22, job.suite, job.scenario));

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
