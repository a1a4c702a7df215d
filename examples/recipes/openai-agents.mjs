// OpenAI Agents SDK: npm install mcpferry @openai/agents, set OPENAI_API_KEY, then node openai-agents.mjs
import { Agent, run } from '@openai/agents';
import { mcpTools } from 'mcpferry';
import { openaiAgentsTools } from 'mcpferry/openai';

const toolset = await mcpTools([{ name: 'everything', type: 'stdio', command: 'npx', args: ['-y', '@modelcontextprotocol/server-everything'] }]);
try {
  const agent = new Agent({
    name: 'Assistant',
    instructions: 'Answer with the tools you have.',
    tools: openaiAgentsTools(toolset),
  });
  const result = await run(agent, 'Add 2 and 40 with the get-sum tool, then tell me the result.');
  console.log(result.finalOutput);
} finally {
  await toolset.close();
}
