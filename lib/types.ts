// The public types of mcpferry.

export type McpServer =
  | {
      name: string;
      type: 'stdio';
      command: string;
      args?: string[];
      /** Variables for the child on top of the allowlist (PATH, HOME, USER, LOGNAME, SHELL, TERM, LANG, TMPDIR). */
      env?: Record<string, string>;
      cwd?: string;
      /** The directory this entry must stay inside: `command` (when a path) and `cwd` are checked through realpath. */
      root?: string;
      /**
       * Where the server's stderr goes. `'pipe'` (default): read and kept, its last 8 KiB shown as `stderrTail`
       * when the server fails. `'diagnostics'`: as `'pipe'`, and each line is delivered to `onDiagnostic` as it
       * comes (`server-stderr`: redacted, cut to 2 KiB, at most 50 a second, the rest counted in one
       * `server-stderr-dropped`); needs `onDiagnostic`. `'inherit'`: the host's own stderr (no tail).
       * `'ignore'`: discarded (no tail).
       */
      stderr?: 'pipe' | 'diagnostics' | 'inherit' | 'ignore';
      enabled?: boolean;
      tools?: McpServerToolFilter;
      /**
       * Put the caller's trace context (`traceparent`, `tracestate`; `baggage` with `telemetry.baggage`)
       * into each request's `params._meta`, so the server's spans join the caller's trace. Default true;
       * false keeps a third-party server from learning your trace ids (spans are still recorded here).
       */
      propagateTraceContext?: boolean;
    }
  | {
      name: string;
      /** `streamable-http` (current) or `sse` (the legacy HTTP+SSE transport). */
      type: 'streamable-http' | 'sse';
      url: string;
      /** Extra request headers. Protocol-owned ones (Mcp-Session-Id, Content-Type, Accept, …) are refused. */
      headers?: Record<string, string>;
      /**
       * Log in to the server with OAuth 2.1 (MCP authorization): `true` for the defaults (an interactive
       * login through the browser, the client registered dynamically). Not with the `auth` option or a
       * static `Authorization` header.
       */
      oauth?: true | McpOAuth;
      /**
       * Headers whose values are read from environment variables when the server is connected (never stored
       * in the configuration): `{ 'X-Api-Key': 'DOCS_API_KEY' }`. A variable that is not set degrades the server.
       */
      headersFromEnv?: Record<string, string>;
      /** `Authorization: Bearer <value of this environment variable>`, read when the server is connected. */
      bearerTokenEnv?: string;
      enabled?: boolean;
      tools?: McpServerToolFilter;
      /**
       * Put the caller's trace context (`traceparent`, `tracestate`; `baggage` with `telemetry.baggage`)
       * into each request's `params._meta`, so the server's spans join the caller's trace. Default true;
       * false keeps a third-party server from learning your trace ids (spans are still recorded here).
       */
      propagateTraceContext?: boolean;
    };

/**
 * One server's own tool filter on original tool names, with `*` and `?` globs, on top of the `tools`
 * option: a name matching `block` is left out whatever allows it; a non-empty `allow` leaves out every
 * name it does not match.
 */
export interface McpServerToolFilter {
  allow?: readonly string[];
  block?: readonly string[];
}

/** How mcpferry obtains tokens for one server. Every secret here is redacted wherever text leaves the engine. */
export interface McpOAuth {
  /**
   * `authorization_code` (default: a person logs in through `onAuthorizationUrl`, redirected back to a
   * listener on 127.0.0.1), `device_code` (RFC 8628: a person enters a code on any device),
   * `client_credentials` (the client's own credentials, no person), `jwt_bearer` (cross-app access with an
   * identity assertion from the enterprise IdP), `workload_identity` (SEP-1933: the workload's own platform-issued
   * JWT, from `assertionFile` or `assertion`, presented with the JWT bearer grant).
   */
  grant?: 'authorization_code' | 'device_code' | 'client_credentials' | 'jwt_bearer' | 'workload_identity';
  /** A client registered with the authorization server beforehand (skips registration). */
  clientId?: string;
  clientSecret?: string;
  /** Default: `private_key_jwt` with `privateKey`, else what the server supports (basic before post), else `none`. */
  tokenEndpointAuthMethod?: 'client_secret_basic' | 'client_secret_post' | 'none' | 'private_key_jwt';
  /** A PKCS#8 PEM private key for `private_key_jwt` client assertions. */
  privateKey?: string;
  /** Default `ES256` (P-256). */
  signingAlgorithm?: 'ES256' | 'RS256';
  /** Your Client ID Metadata Document (an https URL), used as the client_id where the server supports it. */
  clientMetadataUrl?: string;
  /** The name dynamic registration gives the client. Default `mcpferry`. */
  clientName?: string;
  /** The most mcpferry may ask for: a scope outside this list is never requested. */
  scopes?: string[];
  /** A fixed loopback redirect (`http://127.0.0.1:<port>/<path>`). Default: a free port, `/callback`. */
  redirectUri?: string;
  /**
   * The issuer your `clientSecret`, `privateKey` or `identityAssertion` belong to. Without it they are bound to
   * the first authorization server this server was authorized with; an MCP server naming another one later is
   * refused rather than sent your credentials.
   */
  authorizationServer?: string;
  /** For `jwt_bearer`: where to exchange the person's ID token (RFC 8693), and as which IdP client. */
  identityAssertion?: { tokenEndpoint: string; idToken: string; clientId?: string; clientSecret?: string };
  /**
   * For `workload_identity`: an absolute path to the workload's JWT (a Kubernetes projected service-account
   * token, say), read again before the assertion in hand expires. Give this or `assertion`.
   */
  assertionFile?: string;
  /** For `workload_identity`: returns the workload's JWT; asked again before the assertion in hand expires. */
  assertion?: () => string | Promise<string>;
}

/** What `onAuthorizationUrl` is told besides the URL. */
export interface McpAuthorizationPrompt {
  server: string;
  grant: 'authorization_code' | 'device_code';
  /** Device flow: the code the person enters at the URL. */
  userCode?: string;
  /** Device flow: when the code expires (ms since the epoch). */
  expiresAt?: number;
}

/** Opaque to mcpferry: whatever identifies the user or conversation a toolset belongs to. */
export type Session = unknown;

/**
 * What `policy.decide` is asked. A tool call has `kind: 'tool'` and `toolName`; every other request
 * to a server — a resource read or subscription, a prompt get, a completion — has its own `kind` and
 * no `toolName`, so a policy that allows by tool name (`ALLOWED.has(req.toolName)`) refuses them:
 * allowlists fail closed. Narrow on `kind` to allow them.
 */
export type PolicyRequest = ToolPolicyRequest | ResourcePolicyRequest | PromptPolicyRequest | CompletionPolicyRequest | SkillPolicyRequest;

export interface ToolPolicyRequest {
  kind: 'tool';
  toolName: string;
  server: string;
  remoteName: string;
  args: unknown;
  session: Session;
  /** The call's `ctx.runId`, when it had one. */
  runId?: string;
  /** The call's `ctx.toolCallId`, when it had one. */
  toolCallId?: string;
  /** The key sent in `params._meta.idempotencyKey`, when the call carries one. */
  idempotencyKey?: string;
}

/** `readResource` (`operation: 'read'`) or `subscribeResource` (`'subscribe'`) of `uri` on `server`. */
export interface ResourcePolicyRequest {
  kind: 'resource';
  operation: 'read' | 'subscribe';
  server: string;
  uri: string;
  /** `'model'`: the model asked for it, through `mcp__resources` (`exposeResources`); absent for the host's own reads. */
  origin?: 'model';
  session: Session;
  toolName?: undefined;
}

/** `getPrompt(server, name, args)`, asked before anything is sent (the arguments are checked against the prompt's after an allow). */
export interface PromptPolicyRequest {
  kind: 'prompt';
  operation: 'get';
  server: string;
  name: string;
  args: Record<string, string>;
  session: Session;
  toolName?: undefined;
}

/** `complete(server, ref, argument, context)`: the partial value typed so far and the context's arguments go to the server. */
export interface CompletionPolicyRequest {
  kind: 'completion';
  operation: 'complete';
  server: string;
  ref: McpCompletionRef;
  argument: { name: string; value: string };
  /** The values already chosen (`complete`'s `context.arguments`), sent to the server with it. */
  context?: { arguments: Record<string, string> };
  session: Session;
  toolName?: undefined;
}

/**
 * `loadSkill(server, uri)` (`operation: 'load'`: the moment to approve a skill; its SKILL.md is read after
 * an allow) or `readSkillFile(server, uri, path)` (`'read'`, with `file`, the URI of the file). `name` is
 * the entry's, when known before the load.
 */
export interface SkillPolicyRequest {
  kind: 'skill';
  operation: 'load' | 'read';
  server: string;
  uri: string;
  name?: string;
  file?: string;
  /** `'model'`: the model asked for it, through `mcp__skills` (`exposeSkills`); absent for the host's own loads and reads. */
  origin?: 'model';
  session: Session;
  toolName?: undefined;
}

export type Decision = { kind: 'allow' } | { kind: 'deny'; reason?: string } | { kind: 'ask'; reason?: string };

export interface McpPolicy {
  /** Called before every tool call. A deny (or a throw) means the server receives nothing. */
  decide(request: PolicyRequest): Decision | Promise<Decision>;
  /** The approver for `ask` decisions; without it, `ask` rejects with `mcp_approval_required`. */
  ask?(request: PolicyRequest, reason?: string): boolean | Promise<boolean>;
  /**
   * Told how each call ended (`ok`: it returned a result; refused calls too), before the call's promise
   * settles: how `mcpFirewall` counts successful calls per run. A throw is ignored.
   */
  record?(request: PolicyRequest, outcome: { ok: boolean; error?: unknown }): void | Promise<void>;
}

import type { McpConnectionStore } from './stores';
import type { McpTokenStore } from './token-stores';

export interface McpOptions {
  /**
   * Bounds the schema bulk shown to the model per server: full schemas when a server's tool definitions
   * fit `budget` (default 20 000 tokens; 'auto' = 10 % of `contextWindowTokens`) or it is in `alwaysLoad`,
   * otherwise deferred (parameter names, scalar types, required) or bare schemas plus `mcp__describe_tool`
   * and `mcp__search_tools`. Every tool's name and description always stay.
   */
  disclosure?: { budget?: number | 'auto'; alwaysLoad?: readonly string[] };
  /** The model's context window, for `disclosure.budget: 'auto'`. Default 200 000. */
  contextWindowTokens?: number;
  /** Persist each server's catalogue and drift baseline; enables drift quarantine and rebuilds. */
  storage?: McpConnectionStore;
  /** Resolves the bearer token for a server, before initialize and again before every call. Requires `session`. */
  auth?: (server: string, ctx: { session: Session }) => Promise<{ token: string }>;
  /** Hosts HTTP servers may reach (an SSRF guard), or a per-server resolver (requires `session`). */
  allowedHosts?: readonly string[] | ((server: string, ctx: { session: Session }) => readonly string[] | Promise<readonly string[]>);
  /**
   * Reach every HTTP server through this proxy (`http://host:port` or `https://host:port`). Without it,
   * connections are direct: HTTP_PROXY/HTTPS_PROXY/ALL_PROXY in the environment are ignored. With
   * `allowedHosts`, the proxy's own host must be listed too.
   */
  proxy?: string;
  /** Required when `auth` or an `allowedHosts` resolver is set: one toolset per session. */
  session?: Session;
  /** The approval gate every tool call passes through. Tool annotations play no part. */
  policy?: McpPolicy;
  /** Discovery filter on original tool names, with `*` and `?` globs. Either `allow` or `block`, never both. */
  tools?: { allow: readonly string[] } | { block: readonly string[] };
  /** Idle timeout of each request in ms (reset by progress notifications). Default 60 000. */
  timeoutMs?: number;
  /**
   * How long each server has to start and finish its handshake (spawn, initialize), in ms. Default
   * 120 000 — room for a first `npx -y` run that downloads its package — or `timeoutMs` when only that is
   * given. A server that takes longer is degraded with `mcp_timeout`. It also bounds an OAuth login's
   * requests (discovery, registration, tokens) all together, the person's own time aside.
   */
  connectTimeoutMs?: number;
  /** How a lost server is recovered (on by default; `false`: not at all). See {@link McpReconnectOptions}. */
  reconnect?: false | McpReconnectOptions;
  /**
   * What a server that cannot connect does to `mcpTools`: `'warn'` (default) resolves with the other
   * servers' tools and reports it (`server-degraded`); `'throw'` rejects with an `McpError` whose
   * `code` is the first failure's, whose message names every failed server and why, and whose
   * `servers` lists them (`McpDegradedServer[]`). Nothing is left running.
   */
  onDegraded?: 'warn' | 'throw';
  /**
   * Without `onDiagnostic`, warnings (degraded servers, rejected or quarantined tools, name collisions,
   * an exceeded disclosure budget) are printed to stderr, each once. `false` keeps stderr silent.
   */
  warnings?: boolean;
  /**
   * Also deliver `server-connecting` and `server-connected` (with `elapsedMs`) to `onDiagnostic`, as they
   * happen — to show which servers are still pending. Default false.
   */
  progress?: boolean;
  /**
   * `'diagnostics'`: the engine's structured logs reach `onDiagnostic` as `log` diagnostics (needs
   * `onDiagnostic`). Independently, `MCPFERRY_LOG=debug` (tracing's env-filter syntax) prints them to stderr.
   */
  logs?: 'diagnostics';
  /**
   * Ask every server that declares the `logging` capability for its logs from this level up, delivered
   * as `server-log` diagnostics (needs `onDiagnostic`): `logging/setLevel` once after `initialize`, or on
   * 2026-07-28 servers the per-request `_meta` level. Default: nothing is asked (a session-era server's
   * unasked logs are still delivered). MCP logging is deprecated in 2026-07-28.
   */
  serverLogLevel?: McpLogLevel;
  /**
   * Offer the servers' skills (SEP-2640) to the model: listed at connect (and after a recovery) from every
   * server that declares the Skills extension, named in `composeMcpSystemPrompt` by server, and loaded through
   * the local tool `mcp__skills` (no arguments: each skill's server, name and description; `server` and `skill`:
   * load it, SKILL.md verified; `file` too: read one of its files). Loads and reads go to the skill's own server
   * through `policy.decide` (`kind: 'skill'`). Default false: nothing is listed and the tool is not there.
   */
  exposeSkills?: boolean;
  /**
   * Offer the servers' resources to the model through the local tool `mcp__resources` (server `'mcpferry'`): with no
   * arguments (or only `server`) it lists every server's resources and templates; with `server` and `uri` it reads
   * one, through `policy.decide` (`kind: 'resource'`). Text comes back as text, images and audio as media, other
   * blobs described. `composeMcpSystemPrompt` names the servers that offer resources. Default false.
   */
  exposeResources?: boolean;
  /**
   * The host renders MCP Apps (`ui://` HTML resources): the `io.modelcontextprotocol/ui` extension is declared
   * to every server, so servers that have apps may offer them. Tools only an app may call are left out of
   * `tools` either way. Default false.
   */
  apps?: boolean;
  /** Largest message accepted from a server, in bytes. Default 2 MiB. */
  maxResultBytes?: number;
  /**
   * Check each call's arguments against the tool's `inputSchema` (JSON Schema 2020-12, in the engine, no
   * coercion) before anything is sent: a mismatch rejects with `mcp_invalid_arguments` naming the failing
   * path, and the server receives nothing. Default true. A schema the engine cannot use (over its bounds,
   * an unknown dialect, a `$ref` to another document — never fetched) is reported once as
   * `tool-schema-invalid` and that tool's calls go unchecked. Arguments too deep or too large to check within the
   * engine's bounds for that schema are refused (`mcp_invalid_arguments`), not sent unchecked.
   */
  validateArguments?: boolean;
  /**
   * Check `structuredContent` against the tool's `outputSchema`, when it has one: missing or mismatching
   * rejects with `mcp_result_invalid` (JSON-looking text does not count). `isError` results are not
   * checked. Default true, as the official SDKs do. A result too deep or too large to check within the engine's
   * bounds for that schema is refused (`mcp_result_invalid`), not passed unchecked.
   */
  validateResults?: boolean;
  /**
   * `false` replaces any error text a server may have written — an `isError` result's text, a JSON-RPC
   * error's message, the quoted part of a protocol or transport error (a non-JSON-RPC line, an HTTP error
   * body, a stderr line) — with a fixed message, keeping the error's `code` (and the JSON-RPC error number),
   * so no remote text reaches the model through an error. The withheld text goes to `onDiagnostic` as
   * `server-error-withheld` (redacted, at most 4 KiB). Default true.
   */
  exposeServerErrors?: boolean;
  /** Receives everything the engine reports: degraded servers, name collisions, tool-list changes. */
  onDiagnostic?: (diagnostic: Diagnostic) => void;
  /**
   * OpenTelemetry (docs/observability.md). With `@opentelemetry/api` installed and a tracer or meter
   * provider registered, every tool call, resource read and prompt get gets a CLIENT span (a child of
   * the active context) and an `mcp.client.operation.duration` measurement, and each server session an `mcp.client.session.duration`
   * one; `enabled: false` turns that off. `baggage: true` also sends the active W3C baggage to servers in `params._meta`.
   */
  telemetry?: { enabled?: boolean; baggage?: boolean };
  /**
   * Where OAuth tokens and client registrations are kept: `createKeyringTokenStore()` (the OS secret
   * store), `createEncryptedFileTokenStore(path, { key })`, or your own. Default: this toolset's memory.
   */
  tokenStore?: McpTokenStore;
  /**
   * Sends a person to a login page (`oauth` servers). Without it, a server that needs a login is degraded
   * with a diagnostic saying how to log in; the default is `printAuthorizationUrl` when stdin and stderr
   * are terminals.
   */
  onAuthorizationUrl?: (url: string, prompt: McpAuthorizationPrompt) => void | Promise<void>;
  /** How long a person has to finish a login, in ms. Default 300 000. */
  authorizationTimeoutMs?: number;
  /**
   * Ends every OAuth login of this toolset in progress (a device code being polled, a browser login being
   * waited for) and any later one: the server is degraded with `mcp_aborted`. Calls have their own signal.
   */
  signal?: AbortSignal;
  /**
   * Answers a server's `elicitation/create`: show the person `request.message` and which `ctx.server` asks,
   * then resolve to their answer. Only with it does the client declare the elicitation capability. On
   * `accept`, the schema's defaults fill the fields left out, and an answer that does not match the
   * requested schema (wrong type, outside an enum, a required field missing, a field not asked for) is
   * sent as `decline`, as is a throw or a rejection. No answer within 5 minutes is sent as `cancel`. At
   * most 4 elicitations per server are open at once. The message and schema are the server's text:
   * never show them to a model as instructions. `ctx.signal` aborts when the question is withdrawn before
   * it is answered (the call that asked was aborted, the server cancelled the request, the connection
   * ended, or the 5 minutes passed): stop asking the person then; any answer given later is discarded.
   */
  onElicitation?: (
    request: McpElicitationRequest,
    ctx: { server: string; session?: Session; signal: AbortSignal },
  ) => McpElicitationResult | Promise<McpElicitationResult>;
  /**
   * The elicitation modes declared with `onElicitation`. Default `['form']`. Add `'url'` only when the host
   * can show the full URL and open it in a browser after the person agrees (never fetch it yourself).
   */
  elicitationModes?: ReadonlyArray<'form' | 'url'>;
}

/** One server that could not connect, on the error `mcpTools` rejects with under `onDegraded: 'throw'` (`error.servers`). */
export interface McpDegradedServer {
  server: string;
  errorCode: string;
  message: string;
  /** The last 8 KiB of a stdio server's stderr (redacted), else null. */
  stderrTail: string | null;
}

/** A server's request for input from the person (MCP `elicitation/create`). */
export type McpElicitationRequest =
  | {
      mode: 'form';
      message: string;
      /** A flat object schema of primitive fields (string, number, integer, boolean, enums), as the server sent it. */
      requestedSchema: JsonSchema;
    }
  | {
      /** Send the person to `url` (http or https) after they agree; `accept` means they agreed, not that they finished. */
      mode: 'url';
      message: string;
      url: string;
      /** Absent from 2026-07-28 servers (their input requests carry none). */
      elicitationId?: string;
    };

/** The person's answer: `content` (form mode, with `accept` only) holds the fields of `requestedSchema`. */
export type McpElicitationResult = {
  action: 'accept' | 'decline' | 'cancel';
  content?: Record<string, string | number | boolean | string[]>;
};

export type JsonSchema = { [key: string]: unknown };

/** `_meta` of a content block or result: the server's own metadata, reserved keys included. */
export type McpMeta = Record<string, unknown>;

/** How a client may use or show a block (MCP `Annotations`): hints from the server, not checked. */
export interface McpAnnotations {
  /** Who the block is for. */
  audience?: ('user' | 'assistant')[];
  /** 0 (entirely optional) to 1 (effectively required). */
  priority?: number;
  /** ISO 8601. */
  lastModified?: string;
}

/** What every content block may carry besides its own fields. */
interface McpBlockExtras {
  annotations?: McpAnnotations;
  _meta?: McpMeta;
}

export interface McpTextContent extends McpBlockExtras {
  type: 'text';
  text: string;
}

export interface McpImageContent extends McpBlockExtras {
  type: 'image';
  /** Base64. */
  data: string;
  mimeType: string;
}

export interface McpAudioContent extends McpBlockExtras {
  type: 'audio';
  /** Base64. */
  data: string;
  mimeType: string;
}

/** An icon a server offers for a resource (or a tool, a prompt, itself). */
export interface McpIcon {
  src: string;
  mimeType?: string;
  sizes?: string[];
  theme?: 'light' | 'dark';
}

/** A resource the server can read, named but not included (fetch it with `resources/read`). */
export interface McpResourceLink extends McpBlockExtras {
  type: 'resource_link';
  uri: string;
  name: string;
  title?: string;
  description?: string;
  mimeType?: string;
  /** In bytes, before any encoding. */
  size?: number;
  icons?: McpIcon[];
}

export interface McpTextResourceContents {
  uri: string;
  mimeType?: string;
  text: string;
  _meta?: McpMeta;
}

export interface McpBlobResourceContents {
  uri: string;
  mimeType?: string;
  /** Base64. */
  blob: string;
  _meta?: McpMeta;
}

/** A resource's contents included in the result: text (`resource.text`) or binary (`resource.blob`). */
export interface McpEmbeddedResource extends McpBlockExtras {
  type: 'resource';
  resource: McpTextResourceContents | McpBlobResourceContents;
}

/**
 * One block of a tool result (MCP 2025-11-25 `ContentBlock`), discriminated by `type`:
 * `if (block.type === 'text') block.text` is a string. The blocks are as the server sent them.
 */
export type ContentBlock = McpTextContent | McpImageContent | McpAudioContent | McpResourceLink | McpEmbeddedResource;

/**
 * A tool's result (MCP `CallToolResult`). `Structured` is the type of `structuredContent` when you know it
 * (`toolset.tools.x as McpTool<Forecast>`, or a result typed `McpToolResult<Forecast>`); without it, `unknown`.
 * The type is your claim: what is checked at run time is the tool's own `outputSchema` (`validateResults`).
 */
export interface McpToolResult<Structured = unknown> {
  content: ContentBlock[];
  structuredContent?: Structured;
  _meta?: McpMeta;
  [key: string]: unknown;
}

export interface McpToolCallContext {
  /** Aborting it cancels the call: the server is sent `notifications/cancelled`, the call rejects with `mcp_aborted`. */
  signal?: AbortSignal;
  /** The same as `signal`, under the name the AI SDK's execute options use. Give one of the two. */
  abortSignal?: AbortSignal;
  /** The model's id for this call (the AI SDK passes it). Alone it forms no idempotency key. */
  toolCallId?: string;
  /**
   * The durable run this call belongs to: with `toolCallId`, the call carries
   * `params._meta.idempotencyKey = \`${runId}:${toolCallId}\`` so a server with a journal runs it once.
   */
  runId?: string;
  /** An explicit idempotency key (wins over `runId`/`toolCallId`); at most 512 bytes, not empty. */
  idempotencyKey?: string;
  /**
   * Called with each progress update the server sends for this call (`notifications/progress`), in
   * order, never after the call settles. Updates that arrive faster than the event loop collects them
   * are coalesced: the latest one of the call wins; at most one is delivered every 50 ms per call (the
   * latest held meanwhile, and always delivered before the result). A throwing (or rejecting) `onProgress` is ignored; the
   * call goes on. Without it a call costs nothing more.
   */
  onProgress?: (progress: McpProgress) => void | Promise<void>;
}

/**
 * One progress update of a call, as the server reported it: `progress` a finite number (it should grow),
 * `total` when the server knows it, `message` the server's text, redacted, cut to 1 KiB and without
 * control characters.
 */
export interface McpProgress {
  progress: number;
  total?: number;
  message?: string;
}

/** The syslog levels of MCP logging, lowest first (`serverLogLevel`, `server-log` diagnostics). */
export type McpLogLevel = 'debug' | 'info' | 'notice' | 'warning' | 'error' | 'critical' | 'alert' | 'emergency';

/** One remote tool. `Structured` types its results' `structuredContent` (see `McpToolResult`). */
export interface McpTool<Structured = unknown> {
  /** `${server}__${tool}`, provider-safe (`^[a-zA-Z0-9_-]{1,64}$`). */
  name: string;
  description: string;
  /**
   * Frozen, like `outputSchema` and `annotations`: toolsets listing the same catalogue from the same server share
   * one copy. Copy it (`structuredClone`) to adapt it.
   */
  inputSchema: JsonSchema;
  /** The configured server name. */
  server: string;
  /** The tool's name on its server. */
  remoteName: string;
  title?: string;
  outputSchema?: JsonSchema;
  /** As published by the server. Informational only: nothing in mcpferry trusts them. */
  annotations?: Record<string, unknown>;
  /** Its MCP App (`_meta.ui`), when the server names one: see {@link McpToolUi}. */
  ui?: McpToolUi;
  execute(args: unknown, ctx?: McpToolCallContext): Promise<McpToolResult<Structured>>;
}

/**
 * A tool's MCP Apps metadata (the `io.modelcontextprotocol/ui` extension), as far as it is well formed:
 * `resourceUri` is a `ui://` URI (read it with `readResource`; its `_meta.ui` holds the app's CSP and
 * permissions, for the host to enforce), `visibility` who may call the tool. A tool whose visibility leaves
 * out `'model'` is not in `tools`; `connectMcpServer`'s `callTool` reaches it for the host's app.
 */
export interface McpToolUi {
  resourceUri?: string;
  visibility?: Array<'model' | 'app'>;
}

export interface McpToolset extends McpSessionRequests {
  /** Every tool of every connected server, keyed by projected name. Updated in place on list changes. */
  tools: Record<string, McpTool>;
  /** Close every connection and reap every child process. Idempotent. */
  close(): Promise<void>;
  /** Settles when the tool map has been checked against the servers (immediately for `mcpTools`). */
  reconciled: Promise<void>;
  /** Every configured server's state now, in configuration order (see {@link McpServerStatus}). */
  servers(): McpServerStatus[];
}

/** Where a server is in its life: `toolset.servers()`, `client.servers()`, `handle.servers()`. */
export interface McpServerStatus {
  name: string;
  /**
   * `connecting` (first connection under way; calls wait), `live`, `reconnecting` (lost, being brought
   * back; calls wait up to `reconnect.waitMs`), `failed` (given up for now; calls fail at once with
   * `mcp_server_unavailable`), `disabled` (`enabled: false`), `stale` (projected from a store by
   * `rebuildMcpToolsFromStorage`, not reached yet), `closed`.
   */
  state: 'connecting' | 'live' | 'reconnecting' | 'failed' | 'disabled' | 'stale' | 'closed';
  /** When it entered that state, in ms since the Unix epoch. */
  since: number;
  /** Why it last failed (redacted). */
  lastError?: { code: string; message: string };
  /** Recoveries that brought it back so far. */
  restarts: number;
  /** The negotiated protocol version, while live. */
  protocolVersion?: string;
}

/**
 * `reconnect`: how a lost server is brought back. On by default; `false` leaves a lost server `failed`.
 * A stdio server that exits, is killed or breaks the protocol is started again (its old process group
 * reaped first); an HTTP server whose session can't be re-established is reached again. What comes back is
 * listed and vetted like a first connect (drift quarantine with a store). Nothing sent is ever resent.
 */
export interface McpReconnectOptions {
  /** The first wait, doubled after each failed attempt (plus up to 20% jitter). Default 500. */
  initialDelayMs?: number;
  /** The longest wait between attempts. Default 30000. */
  maxDelayMs?: number;
  /** Failed attempts in a row before the server is `failed`. Default 10. */
  maxAttempts?: number;
  /** How long a call waits for a `reconnecting` server before `mcp_server_unavailable`. Default: its `timeoutMs`. */
  waitMs?: number;
  /**
   * `exits` ends (losses and failed attempts) within `windowMs` make a crash loop: the server is `failed`,
   * then rests `coolDownMs` before one new attempt (sooner on a call, never sooner than `maxDelayMs` after the
   * last attempt). Defaults 5, 60000, 60000.
   */
  crashLoop?: { exits?: number; windowMs?: number; coolDownMs?: number };
}

interface DiagnosticBase {
  server: string;
  message: string;
}

export type Diagnostic =
  | (DiagnosticBase & { code: 'server-degraded'; errorCode: string; stderrTail: string | null })
  /** A live server's connection ended unasked; calls in flight failed with `sent: true`; it is being recovered. */
  | (DiagnosticBase & { code: 'server-lost'; errorCode: string; stderrTail: string | null })
  /** The wait (`delayMs`) before attempt `attempt` (from 1) to bring a lost server back. */
  | (DiagnosticBase & { code: 'server-reconnecting'; attempt: number; delayMs: number })
  /** A lost server is live again, `elapsedMs` after it was lost; its tools were listed and vetted again. */
  | (DiagnosticBase & { code: 'server-reconnected'; attempt: number; elapsedMs: number; protocolVersion: string })
  /** Given up on for now; `retryInMs`: when one new attempt is made (null: not automatically). */
  | (DiagnosticBase & { code: 'server-failed'; errorCode: string; restarts: number; retryInMs: number | null; stderrTail: string | null })
  | (DiagnosticBase & { code: 'server-connecting'; transport: 'stdio' | 'streamable-http' | 'sse' })
  | (DiagnosticBase & {
      code: 'server-connected';
      /** From `server-connecting` to the end of the first listing. */
      elapsedMs: number;
      protocolVersion: string;
      /**
       * As the server named itself. Empty strings when a 2026-07-28 connection reused the process's remembered
       * discovery instead of asking: what a server says of itself is not shared between sessions.
       */
      serverInfo: { name: string; version: string };
      /** The capability names the server declared (`tools`, `resources`, …; only the specification's when reused). */
      capabilities: string[];
      /** Tools the server published, before filtering and vetting. */
      toolCount: number;
    })
  | (DiagnosticBase & { code: 'log'; level: 'error' | 'warn' | 'info' | 'debug' | 'trace'; target: string })
  /** A line the stdio server wrote to stderr (`stderr: 'diagnostics'`): redacted, control characters blanked, cut to 2 KiB (`truncated`). */
  | (DiagnosticBase & { code: 'server-stderr'; line: string; truncated: boolean })
  /** Stderr lines over 50 in one second were not delivered: how many. */
  | (DiagnosticBase & { code: 'server-stderr-dropped'; dropped: number })
  /**
   * A server's log (`notifications/message`): `logger` and every string of `data` redacted and without
   * terminal escapes; `data` as sent if its JSON fits in 4 KiB, else the head of its JSON text as a
   * string (`truncated`); `null` with `truncated` when it was over 64 KiB, too deep or did not decode
   * (never shown undecoded). At most 50 a second per server connection.
   */
  | (DiagnosticBase & { code: 'server-log'; level: McpLogLevel; logger: string | null; data: unknown; truncated: boolean })
  /** Server logs over 50 in one second were not delivered: how many. */
  | (DiagnosticBase & { code: 'server-log-dropped'; dropped: number })
  | (DiagnosticBase & { code: 'server-name-collision'; labels: string[] })
  | (DiagnosticBase & { code: 'tool-rejected'; tool: string })
  /** A tool's `inputSchema` or `outputSchema` cannot be used for validation; that check is skipped, the tool works. */
  | (DiagnosticBase & { code: 'tool-schema-invalid'; tool: string })
  /** `exposeServerErrors: false` kept this error text (redacted, cut to 4 KiB) from the caller of `tool` (projected name). */
  | (DiagnosticBase & { code: 'server-error-withheld'; tool: string; errorCode: string })
  | (DiagnosticBase & { code: 'tool-name-rewritten'; tool: string; name: string })
  | (DiagnosticBase & { code: 'tools-changed'; added: string[]; changed: string[]; removed: string[] })
  /** The server announced that its resources or prompts changed (it declared `listChanged`; once until that list is listed again): list them again to see how. */
  | (DiagnosticBase & { code: 'list-changed'; list: 'resources' | 'prompts' })
  /** Entries of a resources, templates, prompts or skills listing were malformed (or past the bound, or a skill repeated or not loadable) and left out. */
  | (DiagnosticBase & { code: 'listing-entries-skipped'; list: 'resources' | 'prompts' | 'skills'; skipped: number })
  /** A listing of every server left this one out: its own listing failed (`errorCode`); the others were listed. */
  | (DiagnosticBase & { code: 'listing-failed'; list: 'resources' | 'prompts' | 'skills'; errorCode: string })
  /** Re-listing a server whose `ttlMs` lapsed failed; its last listing stays in use and is retried, backing off. */
  | (DiagnosticBase & { code: 'catalogue-stale'; errorCode: string })
  /** A rebuild did not project a server's stored tools (a `private` catalogue); they arrive once it is listed. */
  | (DiagnosticBase & { code: 'catalogue-not-reused' })
  /** A bug in mcpferry (a panic) was contained; the operation it hit failed with `mcp_internal_error`. */
  | (DiagnosticBase & { code: 'internal-error' })
  | (DiagnosticBase & { code: 'tool-quarantined' | 'tool-withheld' | 'tool-removed'; tool: string })
  | (DiagnosticBase & { code: 'disclosure-budget-exceeded'; toolCount: number; floorTokens: number; budgetTokens: number });

// ---- resources, prompts, completions (lib/session.ts) ----

/** A resource a server lists (`resources/list`, the fields of a `resource_link`), with the server it came from. */
export type McpResource = Omit<McpResourceLink, 'type' | 'icons'> & { server: string };

/** A resource template a server lists (`resources/templates/list`, an RFC 6570 `uriTemplate`). */
export type McpResourceTemplate = Omit<McpResource, 'uri' | 'size'> & { uriTemplate: string };

/** One item of a read: text as the server's string, or a blob as bytes (decoded once, by the engine). */
/** `_meta` is the server's, as sent: an MCP App's `ui.csp` and `ui.permissions` are for the host to enforce. */
export type McpResourceContents =
  | { uri: string; mimeType?: string; text: string; _meta?: McpMeta }
  | { uri: string; mimeType?: string; blob: Uint8Array; _meta?: McpMeta };

export interface McpReadResourceResult {
  contents: McpResourceContents[];
}

/**
 * A skill a server serves (SEP-2640, `skills/list`), with the server it came from: its entry, checked
 * (shape, manifest, the 512-file and 16 MiB limits). Listing reads no file. Identity is `server` and `uri`
 * together: two servers may serve the same URI, and they are two skills.
 */
export interface McpSkill {
  server: string;
  /** The URI of its SKILL.md. */
  uri: string;
  name: string;
  /** Third-party text: the server's description of its skill. */
  description: string;
  /** SKILL.md's frontmatter as the server rendered it (untrusted: `allowed-tools` and the like grant nothing). */
  frontmatter: Record<string, unknown>;
  /** Every file of the skill, SKILL.md first: `path` inside the skill's directory, `digest` `sha256:<hex>`. */
  files: Array<{ path: string; uri: string; size: number; digest: string }>;
}

/** A loaded skill: its entry and SKILL.md's text, verified (size, SHA-256, frontmatter) against it. */
export interface McpLoadedSkill extends McpSkill {
  /** SKILL.md as the server served it, frontmatter included: third-party instructions, tagged by `server`. */
  instructions: string;
}

export interface McpPromptArgument {
  name: string;
  title?: string;
  description?: string;
  required?: boolean;
}

/** A prompt a server lists (`prompts/list`), with the server it came from. */
export interface McpPrompt {
  server: string;
  name: string;
  title?: string;
  description?: string;
  arguments?: McpPromptArgument[];
}

/** A prompt's message as the server wrote it: a role and one content block. */
export interface McpPromptMessage {
  role: 'user' | 'assistant';
  content: ContentBlock;
}

export interface McpGetPromptResult {
  description?: string;
  messages: McpPromptMessage[];
}

/** What a completion is for: a prompt's argument, or a resource template's variable. */
export type McpCompletionRef = { type: 'ref/prompt'; name: string } | { type: 'ref/resource'; uri: string };

export interface McpCompleteResult {
  completion: { values: string[]; total?: number; hasMore?: boolean };
}

/** What `onUpdated` of `subscribeResource` is told: the server sent `notifications/resources/updated`. */
export interface McpResourceUpdated {
  server: string;
  uri: string;
}

/**
 * Resources, prompts and completions of a toolset's servers, each named by `server`. Listings cover
 * every server that declares the capability (one that does not, or is not available, contributes
 * nothing) or just `server`. A read, a subscribe, a prompt get and a completion are put to
 * `policy.decide` first (see {@link PolicyRequest}): a deny means the server receives nothing.
 */
export interface McpSessionRequests {
  listResources(options?: { server?: string }): Promise<McpResource[]>;
  listResourceTemplates(options?: { server?: string }): Promise<McpResourceTemplate[]>;
  /** `mcp_resource_not_found` for a URI the server does not have; `mcp_result_too_large` past `maxResultBytes`. */
  readResource(server: string, uri: string, options?: { signal?: AbortSignal }): Promise<McpReadResourceResult>;
  /**
   * Calls `onUpdated` on `notifications/resources/updated` for `uri` (coalesced: at most one update on its
   * way at a time); kept across the server's reconnections. Resolves to the function that ends this
   * subscription only (the same function subscribed twice is two subscriptions). A throw or a rejected
   * promise from `onUpdated` is contained. `mcp_not_supported` without `resources.subscribe`.
   */
  subscribeResource(server: string, uri: string, onUpdated: (update: McpResourceUpdated) => void): Promise<() => Promise<void>>;
  listPrompts(options?: { server?: string }): Promise<McpPrompt[]>;
  /** Arguments are checked against the prompt's declared ones before anything is sent (`mcp_invalid_arguments`). */
  getPrompt(server: string, name: string, args?: Record<string, string>): Promise<McpGetPromptResult>;
  complete(
    server: string,
    ref: McpCompletionRef,
    argument: { name: string; value: string },
    context?: { arguments?: Record<string, string> },
  ): Promise<McpCompleteResult>;
  /** The skills of the servers that declare the Skills extension (SEP-2640); no file is read. */
  listSkills(options?: { server?: string }): Promise<McpSkill[]>;
  /**
   * Load the skill at `uri` (its SKILL.md URI) from `server`: put to `policy.decide` (`kind: 'skill'`), then
   * SKILL.md read and verified against the entry (the last listing's, or `skills/get`'s for a skill never
   * listed). `mcp_skill_verification_failed` when it is not what the entry says (nothing is returned),
   * `mcp_skill_invalid` for an entry that cannot be loaded (malformed, over the limits, `"dynamic"`).
   */
  loadSkill(server: string, uri: string): Promise<McpLoadedSkill>;
  /**
   * A file of a loaded skill, by its path inside the skill's directory (`references/FORMS.md`) or its URI,
   * read from the skill's own server and verified against the entry it was loaded with. A file the entry
   * does not list is `mcp_skill_verification_failed`, and nothing is sent.
   */
  readSkillFile(server: string, uri: string, path: string): Promise<McpReadResourceResult>;
}

/** {@link McpSessionRequests} of a `connectMcpServer` client: the same, without the server argument. */
export interface McpClientSessionRequests {
  listResources(): Promise<McpResource[]>;
  listResourceTemplates(): Promise<McpResourceTemplate[]>;
  readResource(uri: string, options?: { signal?: AbortSignal }): Promise<McpReadResourceResult>;
  subscribeResource(uri: string, onUpdated: (update: McpResourceUpdated) => void): Promise<() => Promise<void>>;
  listPrompts(): Promise<McpPrompt[]>;
  getPrompt(name: string, args?: Record<string, string>): Promise<McpGetPromptResult>;
  complete(ref: McpCompletionRef, argument: { name: string; value: string }, context?: { arguments?: Record<string, string> }): Promise<McpCompleteResult>;
  listSkills(): Promise<McpSkill[]>;
  loadSkill(uri: string): Promise<McpLoadedSkill>;
  readSkillFile(uri: string, path: string): Promise<McpReadResourceResult>;
}

// ---- connectMcpServer: one server as a client (lib/client.ts) ----

/**
 * The options of {@link McpServerClient}'s server: those of `mcpTools` (transports, `auth`,
 * `allowedHosts`, `policy`, `timeoutMs`, `maxResultBytes`, `onDiagnostic`, storage, OAuth, …) except
 * the ones about projecting many servers into a model's context.
 */
export type McpClientOptions = Omit<McpOptions, 'disclosure' | 'contextWindowTokens' | 'onDegraded' | 'validateResults' | 'exposeServerErrors'>;

/** A tool exactly as the server listed it (`tools/list`), unknown fields included. */
export interface McpRemoteTool {
  name: string;
  title?: string;
  description?: string;
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  annotations?: Record<string, unknown>;
  /** E.g. `{ taskSupport: 'forbidden' | 'optional' | 'required' }`. */
  execution?: Record<string, unknown>;
  [key: string]: unknown;
}

/** `listTools` options: lower bounds than the engine's own (100 pages, 10 000 tools). */
export interface McpListToolsOptions {
  /** Stops the listing: the page request in flight is cancelled and no further page is asked for (`mcp_aborted`). */
  signal?: AbortSignal;
  /** One deadline for the whole listing, every page included (`mcp_timeout`). */
  timeoutMs?: number;
}

/** One `tools/call`, in the request shape `mayura/adapter-mcp` calls an `McpClient`. */
export interface McpCallToolRequest {
  /** The tool's name on the server (its `remoteName`). */
  name: string;
  arguments?: Record<string, unknown>;
  /** Aborting it cancels the call (`notifications/cancelled`); it rejects with `mcp_aborted`. */
  signal?: AbortSignal;
  /** As for `mcpTools`: `idempotencyKey`, or `runId` + `toolCallId`, go in `params._meta.idempotencyKey`. */
  idempotencyKey?: string;
  runId?: string;
  toolCallId?: string;
  /** Each progress update the server sends for this call (see {@link McpToolCallContext.onProgress}). */
  onProgress?: (progress: McpProgress) => void | Promise<void>;
}

/** A `CallToolResult` exactly as the server sent it (within `maxResultBytes`): `isError` is not thrown. */
export interface McpCallToolResult<Structured = Record<string, unknown>> {
  content: ContentBlock[];
  structuredContent?: Structured;
  isError?: boolean;
  _meta?: Record<string, unknown>;
  [key: string]: unknown;
}

/** One connected MCP server (`connectMcpServer`). Every failure rejects with a typed `McpError`. */
export interface McpServerClient extends McpClientSessionRequests {
  /** The server entry's name. */
  readonly name: string;
  /** The negotiated protocol version (`2025-11-25`, …, or `2026-07-28`). */
  readonly protocolVersion: string;
  /** The server's `serverInfo` (redacted like diagnostics). */
  readonly serverInfo: { name: string; version: string };
  /** A fresh `tools/list`, every page, each tool as the server wrote it. */
  listTools(options?: McpListToolsOptions): Promise<McpRemoteTool[]>;
  /**
   * Call a tool by its remote name, through the same gates as `mcpTools` (`policy`, `auth`). Resolves
   * to the server's result as sent, `isError: true` included; rejects with `mcp_tool_unavailable` for a
   * tool the server does not (or no longer) publish, `mcp_connection_closed` after `close()`, and
   * `mcp_transport_error` (with `sent: true`) when the server dies mid-call, and `mcp_server_unavailable`
   * when it is not live (reconnecting past the wait, or failed).
   */
  callTool(request: McpCallToolRequest): Promise<McpCallToolResult>;
  /**
   * `listener` runs when the server announces that its tools changed, and when a re-listing by the
   * engine finds them changed (it may run more than once for one change). A burst of announcements is
   * coalesced: at most one call per engine re-listing cycle, not one per notification. Returns the unsubscribe.
   */
  onToolsChanged(listener: () => void): () => void;
  /** Close the connection (a stdio server's process group is reaped). Idempotent. */
  close(): Promise<void>;
  /** The server's state now (one entry; see {@link McpServerStatus}). */
  servers(): McpServerStatus[];
}

// ---- mcpferry/purra: explicit read-only bindings (lib/purra.ts) ----

/**
 * Bounds of one discovery and of every call of its registrations. Each may be lowered; none raised
 * above its default, except `timeoutMs` (up to 300 000).
 */
export interface McpToolLimits {
  /** `tools/list` pages followed (32). */
  readonly maxPages: number;
  /** Tools the server may publish, bound or not (256). */
  readonly maxTools: number;
  /** Bytes of every listed page together (1 MiB). */
  readonly maxCatalogBytes: number;
  /** Bytes of one bound tool's input or output schema, as JSON (64 KiB). */
  readonly maxSchemaBytes: number;
  /** Bytes of one bound tool's description (8 KiB). */
  readonly maxDescriptionBytes: number;
  /** Bytes of one result's content, and of one call's arguments as JSON (64 KiB). */
  readonly maxResultBytes: number;
  /** Content blocks in one result (128). */
  readonly maxContentBlocks: number;
  /** One listing or one call, in ms (30 000; at most 300 000). */
  readonly timeoutMs: number;
}

/** The read policy every bound tool has: read-only is the host's assertion, not the server's. */
export interface McpReadPolicy {
  readonly mode: 'read';
  readonly title: string;
  readonly riskLevel?: 'read';
}

/** What a registration's `scope` and `run` receive from the host (purra passes its Run context). */
export interface McpBindingContext {
  readonly signal?: AbortSignal;
  readonly [key: string]: unknown;
}

/**
 * The host's scope check: `undefined` or `true` allows the call; `false` or a non-empty string
 * denies it (`mcp_scope_denied`, nothing is sent).
 */
export type McpScopeCheck = (args: Record<string, unknown>, context: McpBindingContext) => unknown;

/** One remote tool the host exposes, keyed by its remote name in the bindings. */
export interface McpToolBinding {
  /** The name the model sees: a letter or `_`, then letters, digits and `_` (at most 64). */
  readonly localName: string;
  readonly policy: McpReadPolicy;
  /** `null` opts out of a host scope check explicitly. */
  readonly scope: McpScopeCheck | null;
  /** A declaration recorded in the snapshot; it schedules nothing by itself. Default false. */
  readonly concurrencySafe?: boolean;
}

/** One bound tool in the snapshot. */
export interface McpToolEntry {
  readonly remoteName: string;
  readonly localName: string;
  /** The server's description (or `''`). */
  readonly description: string;
  readonly inputSchema: Readonly<Record<string, unknown>>;
  readonly outputSchema: Readonly<Record<string, unknown>> | null;
  readonly policy: Readonly<{ mode: 'read'; title: string; riskLevel: 'read' }>;
  readonly concurrencySafe: boolean;
}

/** The immutable snapshot of a discovery. */
export interface McpToolSnapshot {
  readonly schemaVersion: 1;
  readonly serverId: string;
  readonly protocolVersion: string;
  /**
   * SHA-256 (hex) of `{ schemaVersion, serverId, protocolVersion, entries }` in the
   * `purra.json-identity/v1` encoding.
   */
  readonly revisionDigest: string;
  /** Sorted by `localName`. */
  readonly entries: readonly McpToolEntry[];
}

/** What a registration's `run` resolves to: `errorCode` set (and the envelope empty) on a known failure. */
export interface McpBindingResult {
  readonly content: { readonly text: readonly string[]; readonly structured: Readonly<Record<string, unknown>> | null };
  readonly effectState: 'not_started';
  readonly errorCode?: McpBindingErrorCode;
}

/** One bound tool as an agent's tool definition (purra's `ToolDefinition` shape). */
export interface McpToolRegistration {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: Readonly<Record<string, unknown>>;
  readonly policy: Readonly<{ mode: 'read'; title: string; riskLevel: 'read' }>;
  readonly concurrencySafe: boolean;
  scope(args: Record<string, unknown>, context?: McpBindingContext): Promise<unknown>;
  run(args: unknown, context?: McpBindingContext): Promise<McpBindingResult>;
}

export interface McpToolCatalog {
  readonly snapshot: McpToolSnapshot;
  readonly registrations: readonly McpToolRegistration[];
  /** True once the server's tools changed, its server was lost or came back (a new process or session), or the client closed: discover again. */
  readonly stale: boolean;
}

export interface McpDiscoveryOptions {
  readonly limits?: Partial<McpToolLimits>;
  /** Stops waiting for the listing. */
  readonly signal?: AbortSignal;
}

/** Why one call of a registration failed (the envelope is then empty). */
export type McpBindingErrorCode =
  | 'mcp_invalid_arguments'
  | 'mcp_scope_denied'
  | 'mcp_catalog_stale'
  | 'mcp_connection_closed'
  | 'mcp_timeout'
  | 'mcp_protocol_error'
  | 'mcp_transport_error'
  | 'mcp_tool_error'
  | 'mcp_result_invalid'
  | 'mcp_result_unsupported'
  | 'mcp_result_too_large';

/** Why a discovery failed (`McpAdapterError.code`). */
export type McpAdapterErrorCode =
  | 'mcp_binding_invalid'
  | 'mcp_name_conflict'
  | 'mcp_binding_missing'
  | 'mcp_protocol_unsupported'
  | 'mcp_tools_unavailable'
  | 'mcp_catalog_limit_exceeded'
  | 'mcp_pagination_invalid'
  | 'mcp_tool_unsupported'
  | 'mcp_schema_unsupported'
  | 'mcp_catalog_stale'
  | 'mcp_connection_closed'
  | 'mcp_timeout'
  | 'mcp_protocol_error'
  | 'mcp_transport_error'
  | 'mcp_result_invalid'
  | 'mcp_aborted';
