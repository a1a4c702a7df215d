// Types of `mcpferry/mayura` (CommonJS).
export { defineMcpTool, DEFAULT_MCP_TOOL_TIMEOUT_MS, MAX_MCP_TOOL_RESULT_BYTES, McpOutcomeUnknownError, McpResultInvalidError } from '../dist/mayura.js';
export type {
  McpClient,
  McpToolCallRequest,
  McpToolEffects,
  McpToolValidator,
  StandardSchemaV1,
  DefineMcpToolOptions,
  McpDeclaredTool,
  McpToolCallDiagnostic,
} from '../dist/mayura.js';
