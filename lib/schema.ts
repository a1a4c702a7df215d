// JSON Schema validation in the engine, for the package's own modules (not exported from the root).
//
//   import { compileJsonSchema } from './schema';
//   const check = compileJsonSchema(tool.inputSchema);   // throws McpSchemaInvalidError (mcp_schema_invalid)
//   const verdict = check.validate(args);                 // { ok: true } | { ok: false, path, message }
//
// - The schema compiles once, in Rust (the `jsonschema` crate): JSON Schema 2020-12 unless its root
//   `$schema` names draft 4, 6, 7 or 2019-09; any other dialect does not compile. Keep the returned
//   object and reuse it; compiling costs far more than validating.
// - Nothing is fetched: a `$ref` (or `$schema`) naming another document makes the schema fail to
//   compile. `format` is an annotation (2020-12's default), not a check.
// - Bounded: schemas over 1 MiB of JSON or nested past 64 levels are refused (src/limits.rs,
//   MAX_SCHEMA_BYTES / MAX_SCHEMA_DEPTH_LEVELS); `pattern` matching has a backtracking budget.
// - No coercion: the value is judged as `JSON.stringify` gives it ("5" is not 5). A value
//   `JSON.stringify` cannot represent (undefined, a function, a BigInt, a cycle) fails at path "".
// - `path` is a JSON Pointer into the value ("" is the value itself, "/a/0" the first item of `a`);
//   `message` names the broken rule and never quotes the value. Both are cut to a few hundred bytes.

import { binding } from './binding';
import { engineCall } from './errors';

export type JsonSchemaVerdict = { ok: true } | { ok: false; path: string; message: string };

export interface CompiledJsonSchema {
  validate(value: unknown): JsonSchemaVerdict;
}

const VALID: JsonSchemaVerdict = Object.freeze({ ok: true });

/** Compiles `schema` (a JSON Schema object, or a boolean) in the engine. Throws `McpSchemaInvalidError`
 * when it is over the bounds, not a schema, or does not compile. */
export function compileJsonSchema(schema: object | boolean): CompiledJsonSchema {
  const native = engineCall(() => new binding.JsonSchemaValidator(JSON.stringify(schema) ?? 'null'));
  return {
    validate(value: unknown): JsonSchemaVerdict {
      let text: string | undefined;
      try {
        text = JSON.stringify(value);
      } catch {
        text = undefined;
      }
      if (text === undefined) return { ok: false, path: '', message: 'the value is not representable as JSON' };
      const violation = engineCall(() => native.validate(text));
      if (violation === null) return VALID;
      const { path, message } = JSON.parse(violation) as { path: string; message: string };
      return { ok: false, path, message };
    },
  };
}
