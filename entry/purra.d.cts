// Types of `mcpferry/purra` (CommonJS).
export { discoverMcpTools, McpAdapterError } from '../dist/purra.js';
export type {
  McpToolLimits,
  McpReadPolicy,
  McpBindingContext,
  McpScopeCheck,
  McpToolBinding,
  McpToolEntry,
  McpToolSnapshot,
  McpBindingResult,
  McpToolRegistration,
  McpToolCatalog,
  McpDiscoveryOptions,
  McpBindingErrorCode,
  McpAdapterErrorCode,
} from '../dist/types.js';
