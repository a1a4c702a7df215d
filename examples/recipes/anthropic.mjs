// Anthropic Messages API: npm install mcpferry @anthropic-ai/sdk, set ANTHROPIC_API_KEY, then node anthropic.mjs
import Anthropic from '@anthropic-ai/sdk';
import { mcpTools } from 'mcpferry';
import { anthropicTools, dispatchAnthropicToolUses } from 'mcpferry/anthropic';

const anthropic = new Anthropic();
const toolset = await mcpTools([{ name: 'everything', type: 'stdio', command: 'npx', args: ['-y', '@modelcontextprotocol/server-everything'] }]);
try {
  const tools = anthropicTools(toolset);
  /** @type {Anthropic.MessageParam[]} */
  const messages = [{ role: 'user', content: 'Add 2 and 40 with the get-sum tool, then tell me the result.' }];
  for (let step = 0; step < 5; step++) {
    const message = await anthropic.messages.create({ model: 'claude-sonnet-5-5', max_tokens: 1024, tools, messages });
    messages.push({ role: 'assistant', content: message.content });
    if (message.stop_reason !== 'tool_use') {
      console.log(message.content.map((block) => (block.type === 'text' ? block.text : '')).join(''));
      break;
    }
    messages.push({ role: 'user', content: await dispatchAnthropicToolUses(toolset, message.content) });
  }
} finally {
  await toolset.close();
}
