//! Every bound the engine enforces, named with its unit: sizes, counts, waits and timeouts a server,
//! a host or a configuration file could otherwise push without end, on the client and in
//! `createMcpServer`.
//!
//! Not here, on purpose: lengths a format or cryptography fixes (a `jti`'s, a salt's or a key's bytes,
//! JavaScript's largest safe integer), read-buffer sizes and polling cadences that tune the engine
//! without bounding anything, and the heuristics of secret redaction (`guard::redact`).

/// Idle timeout of one request when the caller sets none. Progress notifications reset it.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;
/// Largest single message (a stdio line, an HTTP body or an SSE event) accepted from a server.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 2 * 1024 * 1024;
/// Pages of `tools/list` followed before discovery gives up.
pub const MAX_LIST_PAGES: usize = 100;
/// Tool entries read from one server, kept or rejected; listing stops there and the rest are reported as
/// left out (one diagnostic).
pub const MAX_TOOLS_PER_SERVER: usize = 10_000;
/// Bytes of a stdio server's stderr kept for the diagnostic when it dies.
pub const STDERR_TAIL_BYTES: usize = 8 * 1024;
/// Longest stderr line delivered as a `server-stderr` diagnostic (`stderr: 'diagnostics'`), in bytes;
/// the rest of the line is dropped and the diagnostic says `truncated`.
pub const MAX_STDERR_LINE_BYTES: usize = 2 * 1024;
/// `server-stderr` diagnostics delivered per server per second; the lines over it are counted and
/// reported as one `server-stderr-dropped` when the second ends.
pub const MAX_STDERR_LINES_PER_SECOND: usize = 50;
/// Longest progress `message` handed to a caller's `onProgress`, in bytes (redacted, then cut, `…` marking it).
pub const MAX_PROGRESS_MESSAGE_BYTES: usize = 1024;
/// The shortest time between two progress updates delivered for one call, in milliseconds: a server
/// flooding progress costs the host at most ~20 wake-ups a second per call. The latest update within
/// it is held and delivered when it ends, or just before the call's outcome.
pub const MIN_PROGRESS_INTERVAL_MS: u64 = 50;
/// Longest wait for a server's answer to `logging/setLevel` (`serverLogLevel`) before its tools are
/// listed, in milliseconds (or the call timeout, if shorter): a server that never answers it delays
/// connect and recovery by this, not by `timeoutMs`. Its logs are still filtered by level client-side.
pub const MAX_SET_LOG_LEVEL_WAIT_MS: u64 = 2_000;
/// `server-log` diagnostics (`notifications/message`) delivered per server connection per second; the
/// ones over it are counted and reported as one `server-log-dropped` when the second ends.
pub const MAX_SERVER_LOGS_PER_SECOND: usize = 50;
/// Largest `data` of a `server-log`, as compact JSON after redaction, in bytes; larger data is delivered
/// as the head of its JSON text (a string), cut there, and the diagnostic says `truncated`.
pub const MAX_SERVER_LOG_DATA_BYTES: usize = 4 * 1024;
/// A log notification's `data` longer than this (its JSON text, in bytes) is not parsed at all, and none
/// of it is shown (`data: null`, `truncated`).
pub const MAX_SERVER_LOG_PARSED_BYTES: usize = 64 * 1024;
/// Longest one-line summary of a log in a `server-log`'s `message`, in bytes.
pub const MAX_SERVER_LOG_SUMMARY_BYTES: usize = 512;
/// After stdin is closed, how long a stdio server gets to exit by itself.
pub const STDIO_EXIT_GRACE_MS: u64 = 300;
/// When a stdio server's stdout ends, how long to wait for its exit status, and then for the rest of
/// its stderr, before the failure is described with what is known.
pub const STDIO_EXIT_REPORT_WAIT_MS: u64 = 200;
/// After SIGTERM to the process group, how long before SIGKILL.
pub const STDIO_TERM_GRACE_MS: u64 = 1_000;
/// How long a server has to start and finish its handshake (spawn, initialize) when neither
/// `connectTimeoutMs` nor `timeoutMs` is given. Two minutes: a first `npx -y <package>` run downloads
/// and installs the package (and its dependencies) before the server starts. Measured here on a fast
/// link: 4.7 s for @modelcontextprotocol/server-everything from a cold npm cache; packages with
/// native or browser downloads on an ordinary home or CI link take tens of seconds more, and the
/// old 30 s cap failed them. A server that truly hangs still fails, after two minutes.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 120_000;
/// Longest projected tool name model providers accept.
pub const MAX_TOOL_NAME_CHARS: usize = 64;
/// Bytes of an offending message quoted in an error.
pub const MAX_QUOTED_BYTES: usize = 200;
/// How long `close()` waits for the engine's own tasks (after the connections are closed) before it
/// resolves anyway and reports an `internal-error` diagnostic.
pub const MAX_CLOSE_WAIT_MS: u64 = 5_000;

// Outbound HTTP (src/egress/ and the HTTP transports).

/// How long a TCP (and TLS) connection to a server or proxy may take to open.
pub const HTTP_CONNECT_TIMEOUT_MS: u64 = 10_000;
/// How long an unused keep-alive connection stays in the pool: under the commonest server keep-alive
/// (Node's 5 s), so a request is never written onto a connection the server is closing at that moment
/// (it would fail with "connection closed before message completed" — seen on device-flow polls).
pub const HTTP_POOL_IDLE_TIMEOUT_MS: u64 = 4_000;
/// How long the check that follows a broken HTTP exchange (is the server there at all?) may take.
pub const HTTP_REACHABILITY_PROBE_TIMEOUT_MS: u64 = 5_000;
/// Attempts of that check: each may find one more pooled connection the stopped server had closed.
pub const HTTP_REACHABILITY_PROBES: u32 = 3;
/// Redirects followed for one request before it fails with `mcp_transport_error`.
pub const MAX_REDIRECTS: usize = 5;
/// Slack added to `timeoutMs` for an HTTP request's own deadline, so the connection's timeout (which
/// also tells the server to cancel) normally fires first.
pub const HTTP_DEADLINE_SLACK_MS: u64 = 1_000;
/// Longest reconnection delay a server's SSE `retry` field may ask for.
pub const MAX_SSE_RETRY_MS: u64 = 30_000;
/// How long a session's first tool calls wait for its standalone GET stream to be answered, in ms. A
/// server sends requests not tied to a call (an SDK's `elicitInput` from a tool) on that stream and
/// drops them while it is not open yet, so a call racing the stream's opening could wait forever for an
/// answer to a question it never got. Counted from the stream's asking, right after the handshake: a
/// server that holds the stream's headers back delays only the calls made in that window, never a later one.
pub const MAX_GET_STREAM_OPENING_WAIT_MS: u64 = 2_000;
/// After `close()` cancels an HTTP transport's tasks, how long it waits for them to finish.
pub const HTTP_CLOSE_GRACE_MS: u64 = 500;
/// How long `close()` waits for the server to answer the session's `DELETE`.
pub const HTTP_SESSION_DELETE_TIMEOUT_MS: u64 = 2_000;
/// The most an HTTP transport's `close()` takes, whatever the server does.
pub const HTTP_CLOSE_BOUND_MS: u64 = HTTP_CLOSE_GRACE_MS + HTTP_SESSION_DELETE_TIMEOUT_MS;
/// Notification and reply POSTs (the ones no caller waits for) in flight at once, per server.
pub const MAX_CONCURRENT_SIDE_POSTS: usize = 8;
/// Notification and reply POSTs queued behind those; beyond this they are dropped (a server flooding
/// requests gets no answer to the excess, and cannot grow the engine's memory). Answers to server
/// requests are small (an id of at most 256 bytes and a short result or error), so this holds well
/// under a few MiB, and a burst of a thousand pings is still answered in full.
pub const MAX_QUEUED_SIDE_POSTS: usize = 4096;
/// Bytes of an error response's body read for the excerpt quoted in the error (more than is quoted,
/// so secrets are blanked before the excerpt is cut).
pub const ERROR_BODY_READ_BYTES: usize = 4 * MAX_QUOTED_BYTES;
/// How long the engine waits for that much of an error response's body.
pub const ERROR_BODY_READ_TIMEOUT_MS: u64 = 2_000;
/// Bytes queued for a stdio server's stdin beyond what its pipe holds. A server that stops reading its
/// input makes further sends fail at once (`mcp_transport_error`) instead of growing the queue.
pub const MAX_STDIO_PENDING_WRITE_BYTES: usize = 16 * 1024 * 1024;
/// Bytes of one oversized stdio line skipped past the message limit while waiting for its newline.
/// Past this the line is taken never to end: the server's output can no longer be split into
/// messages, so its connection is closed (pending and later calls fail at once, not by timeout).
pub const MAX_SKIPPED_LINE_BYTES: usize = 16 * 1024 * 1024;
/// Bytes kept of the start of an oversized message (a stdio line, an SSE event), to find the call it
/// answers from its top-level `"id"` when the server writes that first.
pub const OVERSIZED_HEAD_BYTES: usize = 4096;
/// Bytes kept of the end of an oversized message while the middle is dropped: the TypeScript SDK writes
/// the `"id"` last.
pub const OVERSIZED_TAIL_BYTES: usize = 1024;
/// After SIGKILL to a stdio server's process group, how long close() waits to see the exit. A process
/// in uninterruptible sleep can outlive SIGKILL for a while; close() does not wait for it.
pub const STDIO_KILL_WAIT_MS: u64 = 500;
/// After a stdio server is gone, how long close() lets the transport's tasks read the last output
/// (the final stderr lines) before cancelling them; and how long it then waits for them to stop.
pub const STDIO_TASK_JOIN_MS: u64 = 200;
/// The longest close() of one stdio transport takes, whatever the server does: stdin EOF, SIGTERM,
/// SIGKILL, each with its grace, then the tasks joined.
pub const STDIO_CLOSE_MAX_MS: u64 =
    STDIO_EXIT_GRACE_MS + STDIO_TERM_GRACE_MS + STDIO_KILL_WAIT_MS + 2 * STDIO_TASK_JOIN_MS;
/// Deepest nesting of arrays and objects accepted in one tool result or one tool definition, in levels
/// (`{}` is one level). Below serde_json's recursion limit (128), so recursive code never sees deeper
/// JSON, and far below what an agent's `JSON.parse`/`JSON.stringify` handle.
pub const MAX_JSON_DEPTH: usize = 100;
/// Longest tool description accepted, in bytes. A longer one would flood the model's context; the tool
/// is left out with a diagnostic.
pub const MAX_TOOL_DESCRIPTION_BYTES: usize = 64 * 1024;
/// Longest tool name accepted from a server, in bytes (the spec recommends at most 128 characters).
pub const MAX_REMOTE_TOOL_NAME_BYTES: usize = 1024;
/// Longest id of a server-to-client request that is echoed in the answer, in bytes. A request whose id
/// is longer, or not a string or number, is dropped unanswered, so a reply never costs more than its
/// request bought.
pub const MAX_ECHOED_REQUEST_ID_BYTES: usize = 256;
/// Shortest time between two re-listings of one server after `list_changed`: a server announcing a
/// change after every listing costs a listing per interval, not a busy loop.
pub const MIN_REFRESH_INTERVAL_MS: u64 = 200;
/// Longest time a catalogue counts as fresh, whatever `ttlMs` a server sends: a hint of years must not
/// let a rebuilt catalogue go unchecked that long.
pub const MAX_CATALOGUE_TTL_MS: u64 = 24 * 60 * 60 * 1_000;
/// How far in the future a stored `listedAt` may be (another machine's clock) before the row's TTL is
/// ignored as forged or broken.
pub const MAX_STORE_CLOCK_SKEW_MS: i64 = 60_000;
/// Shortest time between two revalidations of a TTL'd catalogue (a server without `list_changed`
/// re-listed when its `ttlMs` lapses): a tiny TTL is not a polling interval.
pub const MIN_REVALIDATION_INTERVAL_MS: u64 = 1_000;
/// Longest wait after failed revalidations (the wait doubles from `MIN_REVALIDATION_INTERVAL_MS`).
pub const MAX_REVALIDATION_BACKOFF_MS: u64 = 5 * 60 * 1_000;
/// Random delay added to each revalidation, as a share of its wait (percent), so many clients of one
/// server do not re-list in step.
pub const REVALIDATION_JITTER_PERCENT: u64 = 10;
/// `tool-rejected` diagnostics per listing; the rest are counted in one more.
pub const MAX_REJECTION_DIAGNOSTICS: usize = 20;

// OAuth (lead)
/// The largest protected-resource or authorization-server metadata document, registration response or
/// token response read.
pub const MAX_OAUTH_METADATA_BYTES: usize = 64 * 1024;
/// One authorization-server request (metadata, registration, token): its whole answer, headers and
/// every byte of the body, under this one deadline. A login's requests together have `connectTimeoutMs`.
pub const OAUTH_REQUEST_TIMEOUT_MS: u64 = 30_000;
/// How long a person has to finish a login at the authorization URL, unless `authorizationTimeoutMs` says.
pub const DEFAULT_AUTHORIZATION_TIMEOUT_MS: u64 = 300_000;
/// Authorizations for one server in a row without a request succeeding in between (a step-up loop).
pub const MAX_AUTHORIZATIONS_IN_A_ROW: u32 = 3;
/// An access token this close to its expiry is refreshed before it is sent.
pub const TOKEN_REFRESH_MARGIN_MS: u64 = 60_000;
/// A refresher that lost the claim on a refresh token, waiting for the winner's tokens, looks at the
/// token store (or the encrypted file's lock) again after this long at first (ms), doubling each time...
pub const TOKEN_CLAIM_POLL_MIN_MS: u64 = 2;
/// ...up to this (ms). The whole wait is bounded by the refresh's own deadline (`OAUTH_REQUEST_TIMEOUT_MS`).
pub const TOKEN_CLAIM_POLL_MAX_MS: u64 = 50;
/// Requests the loopback redirect listener answers without the expected `state` before it gives up.
pub const MAX_LOOPBACK_STRAY_REQUESTS: u32 = 32;
/// The largest request head the loopback redirect listener reads.
pub const MAX_LOOPBACK_REQUEST_BYTES: usize = 16 * 1024;
/// How long the loopback listener waits for one connection's request head.
pub const LOOPBACK_READ_TIMEOUT_MS: u64 = 5_000;
/// `subscriptions/listen` (2026-07-28) has no idle limit of its own: a stream quiet for this long is a
/// subscription nobody needs to end.
pub const LISTEN_TIMEOUT_MS: u64 = 30 * 24 * 3600 * 1000;
/// How long a stdio server may stay silent after reading the modern era's probe (`server/discover`) before
/// `initialize` is sent beside it, for a session-based server that ignores unknown requests (remembered,
/// so paid once per server); half of `connectTimeoutMs` when that is shorter. The probe stays pending:
/// silence is no evidence of an era (a server may still be starting), and whichever request the server
/// answers decides it, within `connectTimeoutMs` for the whole handshake.
pub const STDIO_PROBE_QUIET_MS: u64 = 5_000;
/// How often the stdio probe looks whether a child has read it yet (its stdin pipe drained): the quiet
/// period above runs from then, not from the start of a process still starting.
pub const STDIO_PROBE_READ_POLL_MS: u64 = 50;
/// How long a modern server's `server/discover` answer is reused by later connections to it (this
/// process) instead of asking again. The answer describes the server, not a session, but a server can be
/// redeployed with other capabilities (say, starting to announce tool changes) without failing any
/// request: ten minutes bounds how long that goes unseen, while a backend opening a session per user
/// still asks about once per ten minutes per server, not once per session. A server that changed its
/// era or version is noticed at once (its first answer contradicts the memory, and it is probed again).
pub const MODERN_DISCOVERY_FRESH_MS: u64 = 10 * 60 * 1_000;
/// The largest `Mcp-Param-*` header value (encoded) a call may need; a call over it fails with
/// `mcp_invalid_arguments` before anything is sent.
pub const MAX_PARAM_HEADER_VALUE_BYTES: usize = 8 * 1024;
/// Connections the loopback listener serves at once.
pub const MAX_LOOPBACK_CONNECTIONS: usize = 8;

// OAuth (grants: token endpoint, client assertions, device flow)
/// Bytes of a token endpoint's (or device authorization endpoint's) response body read, success or
/// error. Tokens are JWTs of a few KiB at most; more is refused, not buffered.
pub const OAUTH_TOKEN_RESPONSE_MAX_BYTES: usize = 64 * 1024;
/// Workload identity: the largest assertion file read, in bytes (a service-account JWT is a few KiB).
pub const WORKLOAD_ASSERTION_MAX_BYTES: usize = 64 * 1024;
/// Workload identity: an assertion this close to its `exp` (seconds) is fetched again from its source
/// before the next token request.
pub const WORKLOAD_ASSERTION_REFRESH_MARGIN_SECS: u64 = 60;
/// DPoP (RFC 9449): origins whose last `DPoP-Nonce` is remembered per server; the oldest is forgotten past it.
pub const DPOP_MAX_NONCE_ORIGINS: usize = 16;
/// Longest `DPoP-Nonce` kept (and so sent back in proofs): what a server's choice can add to a proof.
pub const DPOP_MAX_NONCE_BYTES: usize = 256;
/// Longest DPoP proof made: the redaction set blanks a proof of ours up to this length from its fixed
/// header segment (the header with the public key, about 250 bytes; the claims with `htu`, `ath`, a
/// nonce of at most `DPOP_MAX_NONCE_BYTES`; the signature, 86), so a proof never outgrows it.
pub const DPOP_PROOF_MAX_BYTES: usize = 4096;
/// Lifetime of a `private_key_jwt` client assertion (`exp - iat`), in seconds: one request's worth.
pub const OAUTH_CLIENT_ASSERTION_LIFETIME_SECS: u64 = 60;
/// Device flow: the polling interval when the server names none (RFC 8628 §3.2), in seconds.
pub const OAUTH_DEVICE_DEFAULT_INTERVAL_SECS: u64 = 5;
/// Device flow: the shortest polling interval, in seconds, whatever the server says (0 would be a busy loop).
pub const OAUTH_DEVICE_MIN_INTERVAL_SECS: u64 = 1;
/// Device flow: how long one poll of the token endpoint may take, in seconds. A poll that times out
/// doubles the interval (RFC 8628 §3.5) instead of ending the flow.
pub const OAUTH_DEVICE_POLL_TIMEOUT_SECS: u64 = 30;
/// Device flow: what each `slow_down` adds to the polling interval (RFC 8628 §3.5), in seconds.
pub const OAUTH_DEVICE_SLOW_DOWN_SECS: u64 = 5;
/// Device flow: the longest polling interval honoured, in seconds; a server asking for more is polled
/// this often (a larger `interval` would outlast any sensible wait for a person).
pub const OAUTH_DEVICE_MAX_INTERVAL_SECS: u64 = 60;
/// Device flow: the longest `expires_in` honoured for a device code, in seconds (the person's wait is
/// also bounded by the caller's deadline).
pub const OAUTH_DEVICE_MAX_EXPIRES_SECS: u64 = 30 * 60;
/// Device flow: when the server names no `expires_in`, how long the code is taken to live, in seconds.
pub const OAUTH_DEVICE_DEFAULT_EXPIRES_SECS: u64 = 10 * 60;

// OAuth
/// How long one operation on the OS secret store (keyring token store) may take, in milliseconds,
/// connecting included: long enough for a person to answer an unlock prompt, short enough that a
/// secret service that never answers does not hang a connection for good.
pub const KEYRING_OPERATION_TIMEOUT_MS: u64 = 120_000;
/// Largest encrypted token-store file read, in bytes. Tokens for hundreds of servers fit in well under
/// a megabyte; a larger file is refused rather than read into memory.
pub const TOKEN_FILE_MAX_BYTES: u64 = 16 * 1024 * 1024;
/// PBKDF2-HMAC-SHA256 iterations that stretch a passphrase into an encrypted token file's key (OWASP's
/// 2023 figure). Recorded in each file, so raising it later still reads older files.
pub const TOKEN_FILE_PBKDF2_ITERATIONS: u32 = 600_000;

// Configuration files (loadMcpConfig)
/// Largest `envFile` (VS Code / Cursor `mcp.json`) read, in bytes. A dotenv file holds a handful of
/// variables; a larger one is refused rather than read into every server's environment.
pub const MAX_ENV_FILE_BYTES: u64 = 256 * 1024;
/// Most `envFile` bytes one load applies, counting a file once for every entry that uses it, in bytes:
/// a thousand entries naming one large file can't make a load copy it a thousand times.
pub const MAX_ENV_FILE_BYTES_PER_LOAD: u64 = 1024 * 1024;
/// Unknown keys of one object that get a "did you mean" (edit distance to every known key); the rest are
/// named without one.
pub const MAX_DID_YOU_MEAN_KEYS: usize = 50;
/// Most PBKDF2 iterations a token file may ask for: a damaged or hostile header cannot make opening it
/// take minutes.
pub const TOKEN_FILE_PBKDF2_MAX_ITERATIONS: u32 = 10_000_000;
/// Shortest passphrase accepted for an encrypted token file, in characters.
pub const TOKEN_FILE_MIN_PASSPHRASE_CHARS: usize = 12;
// Elicitation (src/session/elicitation.rs and the server-request path in src/session/connection.rs).

/// `elicitation/create` requests of one server waiting for the host at once; more are refused at once
/// with a JSON-RPC error, so a server cannot pile up prompts (or tasks) on the host.
pub const MAX_ELICITATIONS_IN_FLIGHT: usize = 4;
/// How long the host's `onElicitation` may take to answer (a person filling a form) before the server
/// is told `cancel`. While an elicitation is open, the server's other requests do not time out.
pub const ELICITATION_TIMEOUT_MS: u64 = 300_000;
/// Fields in one elicitation form; a larger `requestedSchema` is refused as invalid params.
pub const MAX_ELICITATION_FIELDS: usize = 100;
/// Options of one enum field (single or multi-select); a larger one is refused as invalid params.
pub const MAX_ELICITATION_OPTIONS: usize = 1_000;
/// Largest answer (its JSON) accepted from the host's `onElicitation`; a larger one is sent as `decline`.
pub const MAX_ELICITATION_ANSWER_BYTES: usize = 256 * 1024;

// Multi round-trip requests (src/session/mrtr.rs: MCP 2026-07-28 `input_required` results).

/// Retries of one request that the server may answer `input_required` again; one more fails the request
/// with `mcp_protocol_error` (the official TypeScript SDK's default cap, too).
pub const MAX_INPUT_ROUNDS: usize = 10;
/// Input requests in one `input_required` result. The host is asked one at a time (a person answers one
/// form after another), so this bounds how many prompts one round puts before the person; a result
/// asking for more fails the request before anyone is asked.
pub const MAX_INPUT_REQUESTS_PER_ROUND: usize = 8;
/// Longest key of one input request, in bytes. Keys are echoed in `inputResponses`, so a retry never costs
/// more than its keys bought.
pub const MAX_INPUT_KEY_BYTES: usize = 256;
/// Longest `requestState`, in bytes of its JSON text (quotes included). It is echoed in the retry, byte for
/// byte; a larger one fails the request instead of being sent back round after round.
pub const MAX_REQUEST_STATE_BYTES: usize = 1024 * 1024;
/// Longest idempotency key (bytes) a tool call may carry in `params._meta.idempotencyKey`, explicit
/// or formed as `${runId}:${toolCallId}`; a longer one fails the call with `mcp_invalid_arguments`.
pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 512;
/// Longest `tracestate` (bytes) a call carries into `params._meta` (W3C Trace Context: 512 characters).
pub const MAX_TRACESTATE_BYTES: usize = 512;
/// Longest `baggage` (bytes) a call carries into `params._meta` (W3C Baggage: 8192 bytes in all).
pub const MAX_BAGGAGE_BYTES: usize = 8192;

// JSON Schema validation (src/schema/): tool arguments and results against a tool's schemas.

/// Largest schema compiled, in bytes of its JSON text. Generated schemas of real tools are a few KiB;
/// a larger one is refused (`mcp_schema_invalid`) rather than compiled.
pub const MAX_SCHEMA_BYTES: usize = 1024 * 1024;
/// Deepest nesting of a compiled schema, in levels of arrays and objects (`{}` is one level). The
/// compiler recurses per level, so this bounds its stack use on the engine's 2 MiB worker threads.
pub const MAX_SCHEMA_DEPTH_LEVELS: usize = 64;
/// Subschemas one node of a value may be checked against, in the worst case the schema allows (computed
/// before compiling, src/schema/cost.rs): bounds validation time where `$ref` could multiply the work.
/// Real schemas (generated unions, trees) stay in the tens or hundreds.
pub const MAX_SCHEMA_APPLICATIONS_PER_NODE: u64 = 10_000;
/// Deepest value the cost bound considers, in levels: serde_json's recursion limit, past which no
/// value reaches a validator.
pub const MAX_VALUE_DEPTH_LEVELS: usize = 128;
/// Longest path of subschemas applied in place one inside the other (`$ref` links, `allOf`/`anyOf`/…
/// entries), in links. The validator recurses once per link at every level of the value, so a longer
/// chain is refused before compiling (`tool-schema-invalid`). Real schemas chain a handful.
pub const MAX_SCHEMA_REFERENCE_CHAIN_LINKS: usize = 128;
/// Checks one validation may have open one inside the other, bounded as the value's levels times
/// (the schema's in-place chain + 1) and checked before validating each value. The validator recurses per
/// check, about 1 KiB of stack each in a debug build (0.2 KiB in release): 1 024 stays within half of
/// a 2 MiB thread (the engine's runtime worker over HTTP; the JavaScript thread over stdio). A value
/// over it is not validated, and fails: `mcp_invalid_arguments` for arguments (nothing is sent),
/// `mcp_result_invalid` for a result (a hostile server cannot get an unchecked result through).
pub const MAX_VALIDATION_NESTED_CHECKS: u64 = 1_024;
/// Subschema checks one validation may take in all, bounded as the value's nodes at each depth times
/// the checks a node at that depth can meet (`MAX_SCHEMA_APPLICATIONS_PER_NODE` bounds the latter
/// only): 10 000 per node over a 2 MiB result would be billions. Checked before validating; a value
/// over it is not validated and fails like one over `MAX_VALIDATION_NESTED_CHECKS`. Ten million took
/// 0.2 s in a debug build (5 000 `const` alternatives × 2 000 items); plain schemas meet one to a few
/// dozen checks per node, so a 2 MiB result of them passes.
pub const MAX_VALIDATION_APPLICATIONS: u64 = 10_000_000;
/// Backtracking steps one `pattern` match may take (patterns that need backtracking: lookaround,
/// backreferences); past this the value fails validation instead of matching for minutes.
pub const MAX_PATTERN_BACKTRACK_STEPS: usize = 100_000;
/// Largest compiled `pattern`, in bytes of the regex program; a larger one fails the schema's compilation.
pub const MAX_PATTERN_PROGRAM_BYTES: usize = 1024 * 1024;
/// Transition cache of one `pattern`'s lazy DFA, in bytes.
pub const MAX_PATTERN_DFA_CACHE_BYTES: usize = 1024 * 1024;
/// Longest message of a validation failure, in bytes. Messages name the rule, never the value.
pub const MAX_VALIDATION_MESSAGE_BYTES: usize = MAX_QUOTED_BYTES;
/// Longest server error text kept in a `server-error-withheld` diagnostic, in bytes (after redaction).
pub const MAX_WITHHELD_TEXT_BYTES: usize = 4 * 1024;
/// Longest instance path (JSON Pointer) of a validation failure, in bytes; a longer one (long property
/// names are the value's own text) is cut and marked with `…`.
pub const MAX_VALIDATION_PATH_BYTES: usize = 512;

// createMcpServer's HTTP listener (src/server/http.rs).
/// How long a client may take to send a request's body once its headers are in, in ms; past it the
/// request is answered 408 and the connection closed (a body that never comes holds no connection).
pub const SERVER_HTTP_BODY_READ_TIMEOUT_MS: u64 = 10_000;
/// How long one write of a response may stall (a client that does not read), in ms; past it the
/// connection is dropped.
pub const SERVER_HTTP_WRITE_STALL_TIMEOUT_MS: u64 = 10_000;
/// How long one `execute` of a served tool may run when `callTimeoutMs` is not given, in ms: then its
/// AbortSignal fires and the call fails with `mcp_timeout`.
pub const DEFAULT_SERVER_CALL_TIMEOUT_MS: u64 = 60_000;
/// The largest `callTimeoutMs` accepted, in ms (one hour).
pub const MAX_SERVER_CALL_TIMEOUT_MS: u64 = 60 * 60 * 1_000;
/// How long past `callTimeoutMs` the engine still waits for the host's answer (the host aborts the call
/// at the timeout itself; this covers a host whose event loop is stuck), in ms. A call's slot and its
/// journal lease are never held longer than the timeout plus this.
pub const SERVER_CALL_TIMEOUT_MARGIN_MS: u64 = 1_000;

// loadMcpConfig and the `mcpferry` CLI (lib/config-file.ts reads the file; engineConstants carries this).
/// Largest configuration file read, in bytes (1 MiB; a configuration is kilobytes). At most one byte
/// more is read, so a file that grows without end (`/dev/zero` behind a link) is refused, not read.
pub const MAX_CONFIG_FILE_BYTES: usize = 1024 * 1024;

// ---- recovery of a lost server (`reconnect`; see `toolset::recovery`) ----

/// The first wait before reconnecting a lost server; doubled after each failed attempt.
pub const DEFAULT_RECONNECT_INITIAL_DELAY_MS: u64 = 500;
/// The longest wait between two attempts.
pub const DEFAULT_RECONNECT_MAX_DELAY_MS: u64 = 30_000;
/// Failed attempts in a row before a server is `failed` (then it rests for the cool-down).
pub const DEFAULT_RECONNECT_MAX_ATTEMPTS: u64 = 10;
/// Ends of a server (losses and failed attempts) within [`DEFAULT_CRASH_LOOP_WINDOW_MS`] that make it a
/// crash loop: `failed`, so a broken server can't make the engine spawn processes without bound.
pub const DEFAULT_CRASH_LOOP_EXITS: u64 = 5;
pub const DEFAULT_CRASH_LOOP_WINDOW_MS: u64 = 60_000;
/// How long a `failed` server rests before one new attempt.
pub const DEFAULT_RECONNECT_COOL_DOWN_MS: u64 = 60_000;
/// Each backoff wait is lengthened by up to this share of itself, so clients of one server spread out.
pub const RECONNECT_JITTER_PERCENT: u64 = 20;

/// Diagnostics held while a toolset connects, before its owner has them (the rest are dropped): a
/// server that floods announcements during another's connect cannot grow the buffer without bound.
pub const MAX_STARTUP_DIAGNOSTICS: usize = 1_000;
/// Files one skill (SEP-2640) may list, SKILL.md included: the extension's limit, which every host
/// must support; an entry over it is not loaded (`mcp_skill_invalid`), said before anything is read.
pub const MAX_SKILL_FILES: usize = 512;
/// The sum of a skill's listed file sizes, in bytes (16 MiB, the extension's limit).
pub const MAX_SKILL_BYTES: u64 = 16 * 1024 * 1024;
/// Skills held loaded per server (the entries their file reads are verified against); loading one more
/// lets the longest-held go.
pub const MAX_HELD_SKILLS_PER_SERVER: usize = 64;
/// Deepest nesting of a SKILL.md's YAML frontmatter accepted, in levels: measured on the parser's
/// events before anything is built, since building and dropping a YAML tree recurse per level.
pub const MAX_FRONTMATTER_DEPTH: usize = 32;
/// Largest SKILL.md frontmatter parsed, in bytes; a longer one fails verification.
pub const MAX_FRONTMATTER_BYTES: usize = 64 * 1024;
/// Skill entries kept from one server's listing (what a later load starts from); the rest are listed as
/// skipped. Each holds at most `MAX_SKILL_FILES` files.
pub const MAX_LISTED_SKILLS_PER_SERVER: usize = 1_000;

// Tool schemas vetted at discovery (src/schema/profile.rs).
/// Deepest nesting of a profile schema, in levels of JSON (the root object is level 0).
pub const MAX_PROFILE_SCHEMA_DEPTH_LEVELS: usize = 32;
/// Most JSON values (keys included) in one profile schema.
pub const MAX_PROFILE_SCHEMA_NODES: usize = 4_096;

// createMcpServer (src/server/): messages, calls, HTTP sessions.
/// The largest JSON-RPC message accepted, in bytes: an HTTP request body, a stdio line.
pub const MAX_SERVER_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
/// Tool calls executing at once per server (in-process and every listener together); more wait.
pub const MAX_CONCURRENT_SERVER_CALLS: usize = 64;
/// HTTP connections open at once per listener; one more is answered 503 and closed. A request body
/// must arrive within `limits::SERVER_HTTP_BODY_READ_TIMEOUT_MS` and no response write may stall past
/// `limits::SERVER_HTTP_WRITE_STALL_TIMEOUT_MS`, so idle clients cannot hold these for long.
pub const MAX_HTTP_CONNECTIONS: usize = 256;
/// 2025-era HTTP sessions held at once per listener; an `initialize` beyond it takes the place of the
/// sessions idle for `HTTP_SESSION_IDLE_MS`, or else of the least recently used one.
pub const MAX_HTTP_SESSIONS: usize = 1_024;
/// How long a 2025-era HTTP session may go unused before it is dropped for a new one, in ms.
pub const HTTP_SESSION_IDLE_MS: u64 = 30 * 60 * 1_000;
/// How long a client may take to send a request's headers, in ms.
pub const HTTP_HEADER_READ_TIMEOUT_MS: u64 = 10_000;
/// Tools one `createMcpServer` may publish.
pub const MAX_SERVER_TOOLS: usize = MAX_TOOLS_PER_SERVER;
/// A tool name's length, in characters (MCP 2025-11-25: 1 to 128 of `A-Z a-z 0-9 _ - .`).
pub const MAX_SERVER_TOOL_NAME_CHARS: usize = 128;
/// An error message from `execute` kept in an `isError` result, in bytes.
pub const MAX_TOOL_ERROR_MESSAGE_BYTES: usize = 16 * 1024;
/// Requests a stdio `createMcpServer` has read and not yet answered, at most (calls beyond the server's call bound wait there, and
/// `ping`s and listings are answered meanwhile).
pub const MAX_STDIO_REQUESTS_IN_FLIGHT: usize = 2 * MAX_CONCURRENT_SERVER_CALLS;
/// Reports of requests `createMcpServer` answered itself (for the host's telemetry) sent to JavaScript and
/// not yet taken there; one more is dropped (its span and measurement are lost), so a client sending
/// faster than JavaScript records cannot grow a queue without bound.
pub const MAX_SERVED_REPORTS_PENDING: usize = 1_024;
/// The longest request id a served request's report gives the host's telemetry (`jsonrpc.request.id`),
/// in characters of printable ASCII: a longer one, or one with any other character, is left out.
pub const MAX_REPORTED_REQUEST_ID_CHARS: usize = 128;
/// Keyed calls (with a journal) started or waiting for an execution slot at once; one more is refused
/// with `Refusal::Busy` instead of queuing its arguments without bound.
pub const MAX_QUEUED_KEYED_CALLS: usize = 2 * MAX_CONCURRENT_SERVER_CALLS;
/// How long a keyed call is held in the journal by its running owner without renewal, in ms: another
/// process takes it over only after that. Renewed every third of it while `execute` runs; a renewal
/// that fails or finds the call no longer its own stops the owner's run (its outcome is then unknown,
/// and it is not recorded). Shorter in unit tests, which wait for a lease to lapse.
pub const CALL_LEASE_MS: u64 = if cfg!(test) { 1_500 } else { 30_000 };

// OAuth device flow (src/auth/device.rs).
/// The longest user code shown (RFC 8628 suggests 8 characters; some servers group them).
pub const MAX_USER_CODE_CHARS: usize = 64;

// What the tool map and its local tools show, and what the engine remembers per process.
/// Characters of a server name shown in the disclosure prompt; the rest is cut so a name cannot crowd
/// out the prompt.
pub const MAX_PROMPT_SERVER_NAME_CHARS: usize = 64;
/// The longest MCP Apps `resourceUri` kept from a tool's metadata, in bytes: it is server text the host
/// will act on.
pub const MAX_RESOURCE_URI_BYTES: usize = 2048;
/// Matches `mcp__search_tools` returns at most (the model's `limit` is clamped to it).
pub const MAX_SEARCH_RESULTS: usize = 20;
/// Entries (resources, then templates) shown by one `mcp__resources` listing; the rest are counted.
pub const MAX_SHOWN_RESOURCES: usize = 100;
/// Longest resource name (and MIME type) shown to the model, in characters: listings are the servers' words.
pub const MAX_SHOWN_RESOURCE_NAME_CHARS: usize = 128;
/// Longest resource description shown to the model, in characters.
pub const MAX_SHOWN_RESOURCE_DESCRIPTION_CHARS: usize = 512;
/// Longest URI (or URI template) listed, in bytes: a longer one is left out, not cut (a cut URI names
/// another resource).
pub const MAX_SHOWN_RESOURCE_URI_BYTES: usize = 2048;
/// The spec's bound on a completion's values: a server must send at most this many.
pub const MAX_COMPLETION_VALUES: usize = 100;
/// Servers whose protocol era this process remembers, at most; past it the memory starts over (a probe
/// each is all that costs).
pub const MAX_REMEMBERED_SERVERS: usize = 4_096;

// Skills shown to the model (src/toolset/skills.rs).
/// Longest skill description shown by `mcp__skills`, in characters.
pub const MAX_SHOWN_SKILL_DESCRIPTION_CHARS: usize = 512;
/// Skills shown by one `mcp__skills` listing; the rest are counted (name a `server` to see only its own).
pub const MAX_SHOWN_SKILLS: usize = 100;
/// Skill URIs named in an error about a name several skills of a server share.
pub const MAX_SHOWN_AMBIGUOUS_SKILLS: usize = 5;
/// The longest wait for a server's `skills/list` at connect (or the call timeout, if shorter): a server
/// that is slow to list its skills delays its tools by this at most, and is then listed without skills.
pub const MAX_SKILLS_LIST_AT_CONNECT_MS: u64 = 5_000;

// Streams a server holds open, and configured headers (src/transport/streamable_http.rs,
// src/toolset/refresh.rs, src/guard/headers.rs).
/// Modern-era `subscriptions/listen` attempts in a row that end within `LISTEN_STREAM_HEALTHY_MS` before
/// listening for tool-list changes is given up.
pub const MAX_LISTEN_STREAM_FAILURES: u32 = 5;
/// A `subscriptions/listen` stream that lived this long was healthy, in ms.
pub const LISTEN_STREAM_HEALTHY_MS: u64 = 5_000;
/// The wait before opening `subscriptions/listen` again, in ms (times the failures in a row).
pub const LISTEN_STREAM_RETRY_MS: u64 = 1_000;
/// The wait when a resumable stream breaks and the server named no `retry` delay, in ms.
pub const DEFAULT_STREAM_RETRY_MS: u64 = 1_000;
/// Resumptions of one response stream before its call fails.
pub const MAX_STREAM_RESUMES: u32 = 5;
/// Consecutive failed or empty GET streams before the transport stops reopening it.
pub const MAX_GET_STREAM_FAILURES: u32 = 5;
/// Longest configured header value (`headers`, `headersFromEnv`), in bytes.
pub const MAX_HEADER_VALUE_BYTES: usize = 16 * 1024;
/// All configured header names and values of one server together, in bytes.
pub const MAX_HEADER_BYTES_PER_SERVER: usize = 64 * 1024;

// purra idempotent calls (src/purra.rs).
/// The longest `timeoutMs` a host may set for a purra call, in ms.
pub const MAX_PURRA_TIMEOUT_MS: u64 = 300_000;
/// Bounds of a value that is digested: levels of nesting, values (keys included), bytes of strings.
pub const MAX_PURRA_IDENTITY_DEPTH_LEVELS: usize = 64;
pub const MAX_PURRA_IDENTITY_NODES: usize = 65_536;
pub const MAX_PURRA_IDENTITY_BYTES: usize = 1_048_576;

// The Postgres connection store (src/store/postgres.rs).
/// The largest pool `createPostgresMcpConnectionStore` accepts: far above any useful size (see
/// `store::postgres::DEFAULT_POOL_SIZE`), low enough that a typo cannot ask for more connections than a server allows.
pub const MAX_POSTGRES_POOL_SIZE: usize = 1024;
/// The longest timeout accepted: Postgres's own bound for `statement_timeout` (2^31 - 1 ms, ~24.8 days).
pub const MAX_POSTGRES_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(i32::MAX as u64);

// stdio transport writes (src/transport/stdio/).
/// Bytes of queued requests written to a stdio server in one go; a larger burst is written in more than
/// one, so one huge burst is not held twice in memory.
pub const MAX_COALESCED_WRITE_BYTES: usize = 1024 * 1024;
