// Validation in the engine: JSON Schema 2020-12 compiled once in Rust (src/schema/), used directly
// (lib/schema.ts, internal) and by mcpTools for arguments and results.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { McpSchemaInvalidError } from '../dist/index.js';
import { compileJsonSchema } from '../dist/schema.js';

/** An HTTP server on loopback that counts the requests it gets (none are expected). */
async function countingServer() {
  const server = createServer((req, res) => {
    server.requests += 1;
    res.setHeader('content-type', 'application/schema+json');
    res.end('{"type":"integer"}');
  });
  server.requests = 0;
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${server.address().port}` };
}

// ---------------------------------------------------------------------------------------------
// The compiled validator (lib/schema.ts over the engine's JsonSchemaValidator)

test('compileJsonSchema: valid values pass, invalid ones fail with a JSON Pointer and no coercion', () => {
  const check = compileJsonSchema({
    type: 'object',
    properties: { count: { type: 'integer' }, tags: { type: 'array', items: { type: 'string' } } },
    required: ['count'],
    additionalProperties: false,
  });
  assert.deepEqual(check.validate({ count: 5, tags: ['a'] }), { ok: true });
  assert.deepEqual(check.validate({ count: '5' }), { ok: false, path: '/count', message: 'the value is not of type "integer"' });
  const item = check.validate({ count: 1, tags: ['a', 2] });
  assert.equal(item.ok, false);
  assert.equal(item.path, '/tags/1');
  const missing = check.validate({});
  assert.equal(missing.path, '');
  assert.match(missing.message, /"count" is a required property/);
  assert.equal(check.validate({ count: 1, extra: true }).ok, false);
  for (const unrepresentable of [undefined, 10n, () => 1]) {
    assert.deepEqual(check.validate(unrepresentable), { ok: false, path: '', message: 'the value is not representable as JSON' });
  }
});

test('compileJsonSchema: a failure never quotes the value', () => {
  const check = compileJsonSchema({ properties: { key: { type: 'integer' }, choice: { enum: ['a', 'b'] } } });
  const secret = `sk-${'s'.repeat(5000)}`;
  for (const value of [{ key: secret }, { choice: secret }]) {
    const verdict = check.validate(value);
    assert.equal(verdict.ok, false);
    assert.ok(!verdict.message.includes('sk-') && verdict.message.length <= 200, verdict.message);
  }
});

test('compileJsonSchema: a $ref to another document fails to compile, and nothing is fetched', async () => {
  const { server, url } = await countingServer();
  try {
    for (const schema of [
      { $ref: `${url}/schema.json` },
      { type: 'object', properties: { x: { $ref: `${url}/defs.json#/x` } } },
      { $id: `${url}/root.json`, properties: { x: { $ref: 'other.json' } } },
      { $schema: `${url}/dialect.json` },
    ]) {
      assert.throws(() => compileJsonSchema(schema), (error) => {
        assert.ok(error instanceof McpSchemaInvalidError, String(error));
        assert.equal(error.code, 'mcp_schema_invalid');
        return true;
      });
    }
    // Give a stray request every chance to arrive.
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(server.requests, 0);
  } finally {
    server.close();
  }
});

test('compileJsonSchema: a schema over the size or depth bound is refused with mcp_schema_invalid', () => {
  let deep = {};
  for (let i = 0; i < 200; i++) deep = { items: deep };
  assert.throws(() => compileJsonSchema(deep), { code: 'mcp_schema_invalid', message: /nested deeper than 64 levels/ });
  const huge = { type: 'object', description: 'x'.repeat(2 * 1024 * 1024) };
  assert.throws(() => compileJsonSchema(huge), { code: 'mcp_schema_invalid', message: /over the limit of 1048576 bytes/ });
  assert.throws(() => compileJsonSchema({ type: 'no-such-type' }), { code: 'mcp_schema_invalid' });
  assert.equal(compileJsonSchema(true).validate(1).ok, true);
  assert.equal(compileJsonSchema(false).validate(1).ok, false);
});
