// Types of `mcpferry/openai` (CommonJS). `openaiAgentsTools` is typed against @openai/agents.
export { openaiAgentsTools, openaiToolDefinitions, dispatchOpenAiToolCall } from '../dist/adapters/openai.js';
export type {
  AgentsFunctionTool,
  OpenAiResponsesTool,
  OpenAiChatTool,
  OpenAiResponsesFunctionCall,
  OpenAiChatToolCall,
  OpenAiResponsesFunctionCallOutput,
  OpenAiChatToolMessage,
} from '../dist/adapters/openai.js';
