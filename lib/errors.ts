// Typed errors with a stable `code`. The engine throws and rejects with errors whose `code` is its own
// error code, and lists every code it has (`engine.errorCodes`); this module is the one place that maps
// a code to its class. A code without a class of its own (an engine newer than this file) becomes a
// plain `McpError` carrying that code: `err.code` is always the engine's.

import { engine } from './binding';

export type McpErrorCode =
  | 'mcp_tool_error'
  | 'mcp_protocol_error'
  | 'mcp_timeout'
  | 'mcp_aborted'
  | 'mcp_transport_error'
  | 'mcp_config_invalid'
  | 'mcp_result_too_large'
  | 'mcp_invalid_arguments'
  | 'mcp_tool_unavailable'
  | 'mcp_connection_closed'
  | 'mcp_host_not_allowed'
  | 'mcp_policy_denied'
  | 'mcp_approval_required'
  | 'mcp_auth_error'
  | 'mcp_containment_violation'
  | 'mcp_tool_quarantined'
  | 'mcp_storage_error'
  | 'mcp_result_too_deep'
  | 'mcp_schema_invalid'
  | 'mcp_result_invalid'
  | 'mcp_internal_error'
  | 'mcp_server_unavailable'
  | 'mcp_resource_not_found'
  | 'mcp_not_supported'
  | 'mcp_skill_invalid'
  | 'mcp_skill_verification_failed'
  | 'mcp_outcome_unknown';

export class McpError extends Error {
  readonly code: McpErrorCode;
  /**
   * Set when the request reached the server (or may have) before it failed — its server lost mid-call, its
   * response stream broken: it may have run, and it was not sent again. Check before calling again.
   */
  declare readonly sent?: boolean;
  constructor(code: McpErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** The tool ran and reported failure (`isError: true`); the message carries the server's text. */
export class McpToolError extends McpError {}
/** A JSON-RPC error response, or a server that broke the protocol. */
export class McpProtocolError extends McpError {}
/** No response and no progress within `timeoutMs`. The server was sent `notifications/cancelled`. */
export class McpTimeoutError extends McpError {}
/** The caller's AbortSignal fired. The server was sent `notifications/cancelled`. */
export class McpAbortedError extends McpError {}
/** The pipe or socket failed, or the server process exited. */
export class McpTransportError extends McpError {}
/** The server is not live (reconnecting past the call's wait, failed, disabled): the call was not sent. */
export class McpServerUnavailableError extends McpError {}
/** An option or server entry is invalid. */
export class McpConfigError extends McpError {}
/** A message from the server was larger than the result limit. */
export class McpResultTooLargeError extends McpError {}
/** The arguments given to `execute` are not a JSON object. */
export class McpInvalidArgumentsError extends McpError {}
/** The server does not (or no longer) publish this tool. */
export class McpToolUnavailableError extends McpError {}
/** The toolset was closed. */
export class McpConnectionClosedError extends McpError {}
/** A URL, redirect hop or DNS answer outside `allowedHosts`; no request was sent there. */
export class McpHostNotAllowedError extends McpError {
  /** Set when a redirect hop was refused: the first request was delivered, and the server may have acted on it. */
  declare readonly redirected?: boolean;
}
/** `policy.decide` denied the call (or failed); the server received nothing. */
export class McpPolicyDeniedError extends McpError {}
/** `policy.decide` asked for approval and none was granted; the server received nothing. */
export class McpApprovalRequiredError extends McpError {}
/** The `auth` callback failed or gave no usable token, or an OAuth login, refresh or token request failed. */
export class McpAuthError extends McpError {
  /** Set on a tool call refused for authorization: a new token is in place and the call was not sent
   * again. The agent decides whether to call again. */
  declare readonly reauthorized?: boolean;
}
/** A stdio entry's command or cwd resolves outside its `root`. */
export class McpContainmentError extends McpError {}
/** The tool drifted from its trusted baseline; calls are refused until the server is re-trusted. */
export class McpToolQuarantinedError extends McpError {}
/** The connection store failed, is empty where a rebuild needs rows, or holds a mismatched row. */
export class McpStorageError extends McpError {}
/** A message from the server was nested deeper than the engine accepts (a nesting bomb). */
export class McpResultTooDeepError extends McpError {}
/** A JSON Schema that cannot be used: over the engine's size or depth bound, not a schema, or one that does
 * not compile (an unknown dialect, a `$ref` to another document — nothing is ever fetched —, a bad `pattern`). */
export class McpSchemaInvalidError extends McpError {}
/** A tool result that breaks the tool's `outputSchema`: `structuredContent` missing or failing it. */
export class McpResultInvalidError extends McpError {}
/** A bug in mcpferry (a panic in the engine), contained: this call or operation failed, the process lives on. */
export class McpInternalError extends McpError {}
/** The server has no resource at the URI read or subscribed to. */
export class McpResourceNotFoundError extends McpError {}
/** The server declares no capability for the operation (`resources`, `resources.subscribe`, `prompts`, `completions`): nothing was sent. */
export class McpNotSupportedError extends McpError {}
/** A skill (SEP-2640) that cannot be loaded: a malformed entry, one over the 512-file / 16 MiB limits, or a `"dynamic"` one (nothing to verify against). */
export class McpSkillInvalidError extends McpError {}
/** A skill file that is not what its entry says (size, SHA-256 digest, SKILL.md frontmatter), or one the entry does not list: not used. */
export class McpSkillVerificationFailedError extends McpError {}

/**
 * A call of a tool with effects (`defineMcpTool`, `mcpferry/mayura`) failed after its request was sent:
 * whether the server acted is unknown. Check the remote system before calling again. `reason` is the
 * code of the failure (`mcp_timeout`, `mcp_tool_error`, `mcp_result_invalid`, …).
 */
export class McpOutcomeUnknownError extends McpError {
  declare readonly reason: McpErrorCode;
}

const classes: Record<McpErrorCode, new (code: McpErrorCode, message: string) => McpError> = {
  mcp_tool_error: McpToolError,
  mcp_protocol_error: McpProtocolError,
  mcp_timeout: McpTimeoutError,
  mcp_aborted: McpAbortedError,
  mcp_transport_error: McpTransportError,
  mcp_config_invalid: McpConfigError,
  mcp_result_too_large: McpResultTooLargeError,
  mcp_invalid_arguments: McpInvalidArgumentsError,
  mcp_tool_unavailable: McpToolUnavailableError,
  mcp_connection_closed: McpConnectionClosedError,
  mcp_host_not_allowed: McpHostNotAllowedError,
  mcp_policy_denied: McpPolicyDeniedError,
  mcp_approval_required: McpApprovalRequiredError,
  mcp_auth_error: McpAuthError,
  mcp_containment_violation: McpContainmentError,
  mcp_tool_quarantined: McpToolQuarantinedError,
  mcp_storage_error: McpStorageError,
  mcp_result_too_deep: McpResultTooDeepError,
  mcp_schema_invalid: McpSchemaInvalidError,
  mcp_result_invalid: McpResultInvalidError,
  mcp_internal_error: McpInternalError,
  mcp_server_unavailable: McpServerUnavailableError,
  mcp_resource_not_found: McpResourceNotFoundError,
  mcp_not_supported: McpNotSupportedError,
  mcp_skill_invalid: McpSkillInvalidError,
  mcp_skill_verification_failed: McpSkillVerificationFailedError,
  mcp_outcome_unknown: McpOutcomeUnknownError,
};

/** The engine's codes that have no class of their own here (empty when this file is current). */
export const UNMAPPED_ENGINE_CODES: readonly string[] = engine.errorCodes.filter((code) => !(code in classes));

/** The typed error for `code`; a code this file does not know gives a plain `McpError` with that code. */
export function createMcpError(code: McpErrorCode, message: string, options?: { cause?: unknown }): McpError {
  const ErrorClass = Object.prototype.hasOwnProperty.call(classes, code) ? classes[code] : McpError;
  return new ErrorClass(code, message, options);
}

/** Turn an error thrown by the native engine (its `code` is the engine's) into its typed class. */
export function fromEngine(error: unknown): unknown {
  if (error instanceof McpError || !(error instanceof Error)) return error;
  const code = (error as { code?: unknown }).code;
  if (typeof code !== 'string' || !code.startsWith('mcp_')) return error;
  return createMcpError(code as McpErrorCode, error.message);
}

/** An engine promise whose rejection arrives typed (`McpStorageError` and kin). */
export function typedEngine<T>(pending: Promise<T>): Promise<T> {
  return pending.catch((error) => Promise.reject(fromEngine(error)));
}

/** A synchronous engine call whose throw arrives typed. */
export function engineCall<T>(make: () => T): T {
  try {
    return make();
  } catch (error) {
    throw fromEngine(error);
  }
}

/** A failure of the engine itself, as the error every affected call rejects with. */
export function engineFailure(error: unknown): McpError {
  const typed = fromEngine(error);
  if (typed instanceof McpError) return typed;
  return createMcpError('mcp_internal_error', `mcpferry engine failure: ${typed instanceof Error ? typed.message : String(typed)}`);
}
