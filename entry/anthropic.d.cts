// Types of `mcpferry/anthropic` (CommonJS), typed against @anthropic-ai/sdk.
export { anthropicTools, dispatchAnthropicToolUses } from '../dist/adapters/anthropic.js';
export type { AnthropicToolUse } from '../dist/adapters/anthropic.js';
