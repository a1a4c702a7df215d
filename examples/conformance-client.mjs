#!/usr/bin/env node
// The client under test for the official MCP conformance suite:
//   npx @modelcontextprotocol/conformance client --command "node examples/conformance-client.mjs" --scenario <name>
// The suite appends the server URL as the last argument, names the scenario in MCP_CONFORMANCE_SCENARIO
// and, for the scenarios with credentials, passes them as JSON in MCP_CONFORMANCE_CONTEXT. Everything
// runs through the public API, as a host program would use it: the OAuth settings are the server entry's
// `oauth`, the person who would open the authorization URL in a browser is played by an HTTP client that
// follows the authorization server's redirect to mcpferry's loopback listener, and every form elicitation
// is accepted as offered (mcpferry fills in the schema's defaults; a `confirmed` flag is confirmed).
// The era (2025-11-25 sessions or the stateless 2026-07-28) is mcpferry's to detect: nothing here pins it.
// Exit 0 when the scenario's work is done; 1 (with the reason on stderr) when the server was degraded or
// a call failed.

import * as mcpferry from '../dist/index.js';

const url = process.argv.at(-1);
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? '';
const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT || '{}');
const log = (...a) => console.error('[conformance-client]', ...a);

/** The Client ID Metadata Document URL the suite's CIMD scenarios expect (mcpferry uses it only when the AS advertises CIMD). */
const CLIENT_METADATA_URL = 'https://conformance-test.local/client-metadata.json';
/** Requests are idle-timed-out by mcpferry; the suite's own client timeout is 30 s. */
const TIMEOUT_MS = 20_000;
/** How long a login may wait for the redirect, in ms: a lost redirect fails inside the suite's 30 s. */
const AUTHORIZATION_TIMEOUT_MS = 15_000;

/** The server entry's `oauth` settings for an authorization scenario, from the suite's context. */
function oauthSettings() {
  const base = { clientMetadataUrl: CLIENT_METADATA_URL };
  switch (scenario) {
    case 'auth/pre-registration':
      return { ...base, clientId: context.client_id, clientSecret: context.client_secret };
    case 'auth/client-credentials-basic':
      return { grant: 'client_credentials', clientId: context.client_id, clientSecret: context.client_secret };
    case 'auth/client-credentials-jwt':
      return {
        grant: 'client_credentials',
        clientId: context.client_id,
        privateKey: context.private_key_pem,
        signingAlgorithm: context.signing_algorithm ?? 'ES256',
        tokenEndpointAuthMethod: 'private_key_jwt',
      };
    // SEP-990 as 0.1.16 names it, and as the 0.2.0 alpha does: the same flow.
    case 'auth/cross-app-access-complete-flow':
    case 'auth/enterprise-managed-authorization':
      return {
        grant: 'jwt_bearer',
        clientId: context.client_id,
        clientSecret: context.client_secret,
        identityAssertion: {
          tokenEndpoint: context.idp_token_endpoint,
          idToken: context.idp_id_token,
          clientId: context.idp_client_id,
        },
      };
    // SEP-1933: the workload's JWT (what a platform would project into a file) from the host's callback.
    case 'auth/wif-jwt-bearer':
      return { grant: 'workload_identity', clientId: context.client_id, assertion: () => context.valid_jwt };
    // DPoP (SEP-1932) needs no setting: mcpferry proves a key wherever the authorization server takes ES256 proofs.
    default:
      return base;
  }
}

/** Plays the person at the browser: GET the authorization URL and follow its redirects to the loopback listener. */
function openAuthorizationUrl(authorizationUrl, info) {
  log(`authorization (${info.grant}) requested for ${info.server}`);
  if (info.grant === 'device_code') return; // no scenario uses the device flow; nobody would enter the code
  // Like a browser opening a page: the host returns at once, the flow goes on in the background.
  fetch(authorizationUrl, { redirect: 'follow' })
    .then(async (response) => {
      await response.arrayBuffer();
      log(`authorization redirect ended at the listener with HTTP ${response.status}`);
    })
    .catch((error) => log(`authorization URL could not be followed: ${error.message}`));
}

/** The tool `remoteName` of the connected server, whatever name mcpferry projected it under. */
function tool(tools, remoteName) {
  const found = Object.values(tools).find((t) => t.remoteName === remoteName);
  if (!found) throw new Error(`the server offers no tool ${remoteName} (tools: ${Object.keys(tools).join(', ') || 'none'})`);
  return found;
}

async function call(tools, remoteName, args) {
  const result = await tool(tools, remoteName).execute(args);
  log(`${remoteName} →`, JSON.stringify(result.content));
  return result;
}

/**
 * A tool call that met a 401/403 is never re-sent by mcpferry: it rejects with `mcp_auth_error`, and
 * `reauthorized: true` says a fresh token is in place. Then the agent (here: this client) may call once more.
 */
async function callAllowingOneReauthorization(tools, remoteName, args) {
  try {
    return await call(tools, remoteName, args);
  } catch (error) {
    if (error?.code !== 'mcp_auth_error' || error.reauthorized !== true) throw error;
    log(`${remoteName}: ${error.message} (reauthorized; calling again)`);
    return call(tools, remoteName, args);
  }
}

/** A value of the schema's type for each property, as an agent would fill in a tool's arguments. */
function sampleArguments(inputSchema) {
  const sample = { string: 'us-west1', integer: 1, number: 1, boolean: true, object: {}, array: [] };
  return Object.fromEntries(Object.entries(inputSchema?.properties ?? {}).map(([name, schema]) => [name, sample[schema?.type] ?? 'value']));
}

/** Calls every tool of the map once, one after the other, with sample arguments. */
async function callEveryTool(tools) {
  for (const t of Object.values(tools)) await call(tools, t.remoteName, sampleArguments(t.inputSchema));
}

// What each scenario asks of the client once connected (tools/list is part of connecting).
const scenarios = {
  initialize: async () => {},
  tools_call: (tools) => call(tools, 'add_numbers', { a: 5, b: 3 }),
  'sse-retry': (tools) => call(tools, 'test_reconnection', {}),
  'elicitation-sep1034-client-defaults': (tools) => call(tools, 'test_client_elicitation_defaults', {}),
  // Round-trip the focal tool's inputSchema, exactly as the agent sees it, through the echo tool.
  'json-schema-2020-12-preservation': (tools) =>
    call(tools, 'json_schema_echo', { schema: tool(tools, 'json_schema_2020_12_tool').inputSchema }),
  // 2026-07-28. Connecting already sent requests with the per-request _meta (and retried after -32022).
  'request-metadata': async () => {},
  // Multi round-trip requests: two ask for a confirmation (answered by onElicitation), two complete at once.
  'sep-2322-client-request-state': async (tools) => {
    for (const name of ['test_mrtr_echo_state', 'test_mrtr_no_state', 'test_mrtr_unrelated', 'test_mrtr_no_result_type']) await call(tools, name, {});
  },
  'http-standard-headers': callEveryTool,
  // The calls the scenario names, verbatim: their x-mcp-header parameters go out as Mcp-Param-* headers.
  'http-custom-headers': async (tools) => {
    for (const { name, arguments: args } of context.toolCalls ?? []) await call(tools, name, args);
  },
  // The tools with an invalid x-mcp-header annotation are not in the map; the valid one is called.
  'http-invalid-tool-headers': callEveryTool,
  // Listing is the scenario: the tool's network $ref must never be fetched.
  'json-schema-ref-no-deref': async () => {},
  // Skills (SEP-2640): listing must read no file.
  'sep-2640-client-no-prefetch': async () => {
    const skills = await toolset.listSkills();
    log(`skills: ${skills.map((s) => `${s.server}:${s.uri} (${s.files.length} files)`).join(', ') || '(none)'}`);
  },
  // Load the first skill as an agent would, then read its other files; the suite serves a SKILL.md that
  // fails the named check, so the load must refuse it and nothing further may be read.
  'sep-2640-client-verify-digest': loadFirstSkill,
  'sep-2640-client-verify-size': loadFirstSkill,
  'sep-2640-client-verify-frontmatter': loadFirstSkill,
};

async function loadFirstSkill() {
  const [skill] = await toolset.listSkills();
  if (!skill) throw new Error('the server lists no skill');
  try {
    const loaded = await toolset.loadSkill(skill.server, skill.uri);
    log(`loaded ${loaded.name} (${loaded.instructions.length} characters)`);
  } catch (error) {
    if (error?.code !== 'mcp_skill_verification_failed') throw error;
    // The expected outcome: the skill is refused, and its files are not read.
    log(`skill-verification-failed: ${error.message}`);
    return;
  }
  for (const file of skill.files.slice(1)) {
    const read = await toolset.readSkillFile(skill.server, skill.uri, file.path);
    log(`read ${file.path} (${read.contents.length} item(s))`);
  }
}
const authScenario = scenario.startsWith('auth/');
const run = scenarios[scenario] ?? (authScenario ? (tools) => callAllowingOneReauthorization(tools, 'test-tool', {}) : undefined);
if (!run) {
  log(`scenario ${JSON.stringify(scenario)} is not implemented by this client`);
  process.exit(2);
}

const server = { name: 'server', type: 'streamable-http', url, ...(authScenario && { oauth: oauthSettings() }) };
const diagnostics = [];
let toolset;
try {
  toolset = await mcpferry.mcpTools([server], {
    timeoutMs: TIMEOUT_MS,
    onDiagnostic: (d) => {
      diagnostics.push(d);
      if (d.code === 'tool-rejected') log(`tool-rejected ${d.tool}: ${d.message}`);
    },
    // A fresh, empty store per run: a token from an earlier run would skip the flow the scenario checks.
    tokenStore: mcpferry.createMemoryTokenStore(),
    // http-custom-headers dictates a null for a boolean parameter (to see its Mcp-Param header left out): the
    // schema forbids it, so argument validation, on by default, would refuse the call the scenario checks.
    ...(scenario === 'http-custom-headers' && { validateArguments: false }),
    onAuthorizationUrl: openAuthorizationUrl,
    authorizationTimeoutMs: AUTHORIZATION_TIMEOUT_MS,
    onElicitation: (request) => {
      log(`elicitation (${request.mode}): ${request.message}`);
      const confirm = request.requestedSchema?.properties?.confirmed?.type === 'boolean';
      return { action: 'accept', content: confirm ? { confirmed: true } : {} };
    },
  });
  const degraded = diagnostics.find((d) => d.code === 'server-degraded');
  if (degraded) throw Object.assign(new Error(`degraded: ${degraded.message}`), { code: degraded.errorCode });
  log(`connected; tools: ${Object.keys(toolset.tools).join(', ') || '(none)'}`);
  await run(toolset.tools);
} catch (error) {
  // One line the conformance runner can read: the outcome and its stable code.
  log(`refused: ${error?.code ?? 'error'}: ${error?.message ?? error}`);
  process.exitCode = 1;
} finally {
  await toolset?.close();
}
