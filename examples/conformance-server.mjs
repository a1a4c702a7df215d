#!/usr/bin/env node
// The server under test for the official MCP conformance suite's server scenarios (scripts/conformance-
// server.mjs runs them): mcpferry's createMcpServer publishing the tools those scenarios call, over
// Streamable HTTP on loopback. Prints `{"url": …}` on stdout once it listens; stops on SIGTERM.
//   node examples/conformance-server.mjs [port]
// Everything goes through the public API, as a host program would use it.

import { createMcpServer } from '../dist/index.js';

/** A 1×1 PNG and a 44-byte silent WAV: the smallest real media the content checks accept. */
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
const WAV = 'UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=';
const RESOURCE = { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' };
/** The schema the json-schema-2020-12 scenario looks for, kept exactly as it sends it. */
const JSON_SCHEMA_2020_12 = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  $defs: { address: { $anchor: 'addressDef', type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
  properties: {
    name: { type: 'string' },
    address: { $ref: '#/$defs/address' },
    contactMethod: { type: 'string', enum: ['phone', 'email'] },
    phone: { type: 'string' },
    email: { type: 'string' },
  },
  allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
  if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
  // oxlint-disable-next-line unicorn/no-thenable -- JSON Schema's if/then/else, never awaited
  then: { required: ['phone'] },
  else: { required: ['email'] },
  additionalProperties: false,
};

const server = createMcpServer({
  name: 'mcpferry-conformance-server',
  version: '1.0.0',
  tools: {
    test_simple_text: { description: 'Returns simple text.', execute: () => 'This is a simple text response for testing.' },
    test_image_content: {
      description: 'Returns an image.',
      execute: () => ({ content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] }),
    },
    test_audio_content: {
      description: 'Returns audio.',
      execute: () => ({ content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }] }),
    },
    test_embedded_resource: {
      description: 'Returns an embedded resource.',
      execute: () => ({ content: [{ type: 'resource', resource: RESOURCE }] }),
    },
    test_multiple_content_types: {
      description: 'Returns text, an image and a resource.',
      execute: () => ({
        content: [
          { type: 'text', text: 'Multiple content types test:' },
          { type: 'image', data: PNG, mimeType: 'image/png' },
          { type: 'resource', resource: { ...RESOURCE, uri: 'test://mixed-content-resource', mimeType: 'application/json', text: '{"test":"data","value":123}' } },
        ],
      }),
    },
    test_error_handling: {
      description: 'Always fails.',
      execute: () => {
        throw new Error('This tool intentionally returns an error for testing');
      },
    },
    json_schema_2020_12_tool: {
      description: 'Takes a JSON Schema 2020-12 input (preserved as published).',
      inputSchema: JSON_SCHEMA_2020_12,
      execute: (args) => ({ received: args }),
    },
  },
});

const { http } = await server.listen({ http: { port: Number(process.argv[2] ?? 0) } });
process.stdout.write(`${JSON.stringify({ url: http.url })}\n`);
process.on('SIGTERM', () => server.close().then(() => process.exit(0)));
