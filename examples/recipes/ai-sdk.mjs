// AI SDK (ai 6 or 7): npm install mcpferry ai, set AI_GATEWAY_API_KEY, then node ai-sdk.mjs
import { generateText, stepCountIs } from 'ai';
import { mcpTools } from 'mcpferry';
import { aiSdkTools } from 'mcpferry/ai';

const toolset = await mcpTools([{ name: 'everything', type: 'stdio', command: 'npx', args: ['-y', '@modelcontextprotocol/server-everything'] }]);
try {
  const { text } = await generateText({
    model: 'openai/gpt-5.4-mini', // through the AI Gateway; any provider's model works, e.g. openai('gpt-5.4-mini') from @ai-sdk/openai
    tools: aiSdkTools(toolset),
    stopWhen: stepCountIs(5),
    prompt: 'Add 2 and 40 with the get-sum tool, then tell me the result.',
  });
  console.log(text);
} finally {
  await toolset.close();
}
