// OpenAI Responses API: npm install mcpferry openai, set OPENAI_API_KEY, then node openai-responses.mjs
import OpenAI from 'openai';
import { mcpTools } from 'mcpferry';
import { dispatchOpenAiToolCall, openaiToolDefinitions } from 'mcpferry/openai';

const client = new OpenAI();
const toolset = await mcpTools([{ name: 'everything', type: 'stdio', command: 'npx', args: ['-y', '@modelcontextprotocol/server-everything'] }]);
try {
  const model = 'gpt-5.4-mini';
  const tools = openaiToolDefinitions(toolset, { api: 'responses' });
  let response = await client.responses.create({ model, tools, input: 'Add 2 and 40 with the get-sum tool, then tell me the result.' });
  for (let step = 0; step < 5; step++) {
    const calls = response.output.filter((item) => item.type === 'function_call');
    if (calls.length === 0) break;
    const outputs = await Promise.all(calls.map((call) => dispatchOpenAiToolCall(toolset, call)));
    response = await client.responses.create({ model, tools, previous_response_id: response.id, input: outputs });
  }
  console.log(response.output_text);
} finally {
  await toolset.close();
}
