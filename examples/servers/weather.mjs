#!/usr/bin/env node
// A small example MCP server over stdio, written without any SDK to show how little the protocol
// needs: newline-delimited JSON-RPC on stdin/stdout.

import { createInterface } from 'node:readline';

const CITIES = { lisbon: 19, oslo: -2, nairobi: 24, lima: 17 };
const tools = [
  {
    name: 'forecast',
    title: 'City forecast',
    description: 'Tomorrow\'s temperature in a city (Celsius).',
    inputSchema: { type: 'object', properties: { city: { type: 'string', enum: Object.keys(CITIES) } }, required: ['city'] },
  },
  {
    name: 'to_fahrenheit',
    description: 'Convert a Celsius temperature to Fahrenheit.',
    inputSchema: { type: 'object', properties: { celsius: { type: 'number' } }, required: ['celsius'] },
  },
];

function call(name, args) {
  if (name === 'forecast') {
    const t = CITIES[String(args.city).toLowerCase()];
    if (t === undefined) return { isError: true, content: [{ type: 'text', text: `Unknown city ${args.city}; try one of ${Object.keys(CITIES).join(', ')}.` }] };
    return { content: [{ type: 'text', text: `${args.city}: ${t} °C tomorrow` }], structuredContent: { city: args.city, celsius: t } };
  }
  if (name === 'to_fahrenheit') return { content: [{ type: 'text', text: `${(args.celsius * 9) / 5 + 32} °F` }] };
  throw Object.assign(new Error(`Unknown tool: ${name}`), { code: -32602 });
}

const reply = (id, body) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id, ...body }) + '\n');
createInterface({ input: process.stdin }).on('line', (line) => {
  const { id, method, params } = JSON.parse(line);
  if (id === undefined) return;
  try {
    if (method === 'initialize') {
      reply(id, { result: { protocolVersion: params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'weather', version: '1.0.0' } } });
    } else if (method === 'tools/list') {
      reply(id, { result: { tools } });
    } else if (method === 'tools/call') {
      reply(id, { result: call(params.name, params.arguments ?? {}) });
    } else if (method === 'ping') {
      reply(id, { result: {} });
    } else {
      reply(id, { error: { code: -32601, message: `Method not found: ${method}` } });
    }
  } catch (e) {
    reply(id, { error: { code: e.code ?? -32603, message: e.message } });
  }
});
