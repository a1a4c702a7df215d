// OpenAI strict mode (Structured Outputs for function calling) for MCP input schemas.
//
// Strict mode makes the model's arguments always match the schema, but accepts a subset of JSON Schema
// and wants every object closed and every property required. The rule used here:
//
// A schema is strict-compatible when
//   - its root is an object schema (`type: 'object'`, not a union), and every subschema below it
//   - names its `type` (one JSON type, or a list of them), or is an `enum`, a `const` or an `anyOf`;
//   - uses only the keywords strict mode supports: type, description, title, enum, const, anyOf;
//     properties, required, additionalProperties; items, minItems, maxItems; pattern, format (date-time,
//     time, date, duration, email, hostname, ipv4, ipv6, uuid); minimum, maximum, exclusiveMinimum,
//     exclusiveMaximum, multipleOf (`$schema` on the root is dropped: it describes, never constrains);
//   - has no `$ref`/`$defs`/`definitions` (not rewritten here), no `additionalProperties` other than
//     absent or `false` (an open map cannot be closed without changing what the tool accepts), and no
//     object without `properties`, the root included (a free-form object: closing it would leave the
//     model no argument to send, as for a tool whose schema the disclosure budget reduced to a bare
//     `{ type: 'object' }`; `properties: {}` is a tool that takes none);
//   - stays within strict mode's limits: MAX_STRICT_NESTING_LEVELS levels of objects, MAX_STRICT_PROPERTIES
//     properties in all, MAX_STRICT_ENUM_VALUES values per enum;
//   - and makes no optional property under an `anyOf` (which branch the model meant is not known, so
//     its nulls could not be told apart).
// Anything else is used non-strict, as the server published it, and the reason is kept.
//
// A compatible schema is rewritten: each object gets `additionalProperties: false` and lists every
// property in `required`; a property that was optional is made nullable (`type: [T, 'null']`, or an
// `anyOf` with `{ type: 'null' }`), because strict mode has no optional properties. The model then
// sends `null` for what it leaves out, and `stripRewrittenNulls` removes exactly those nulls before the
// server sees the arguments: a `null` in a property that was optional and whose own schema did not
// accept null. An optional property whose schema already accepts null is left as it is (required, its
// schema unchanged), so a `null` there is a value the server accepts and is passed on.

import type { JsonSchema } from '../types';

/** Levels of nested objects strict mode accepts (the root is level 1). */
export const MAX_STRICT_NESTING_LEVELS = 10;
/** Object properties strict mode accepts in one schema, all levels together. */
export const MAX_STRICT_PROPERTIES = 5000;
/** Values strict mode accepts in one enum. */
export const MAX_STRICT_ENUM_VALUES = 1000;

const KEYWORDS = new Set([
  'type', 'description', 'title', 'enum', 'const', 'anyOf',
  'properties', 'required', 'additionalProperties',
  'items', 'minItems', 'maxItems',
  'pattern', 'format',
  'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf',
]);
const FORMATS = new Set(['date-time', 'time', 'date', 'duration', 'email', 'hostname', 'ipv4', 'ipv6', 'uuid']);
const TYPES = new Set(['object', 'array', 'string', 'number', 'integer', 'boolean', 'null']);

/** Where the rewrite made optional properties nullable: the nulls to strip from the model's arguments. */
export interface NullRewrites {
  /** Properties of this object made nullable. */
  nullable?: string[];
  /** Rewrites inside properties of this object. */
  properties?: Record<string, NullRewrites>;
  /** Rewrites inside each item of this array. */
  items?: NullRewrites;
}

export type StrictConversion = { strict: true; schema: JsonSchema; rewrites: NullRewrites } | { strict: false; reason: string };

class Incompatible extends Error {}

type Schema = Record<string, unknown>;
const isSchema = (value: unknown): value is Schema => typeof value === 'object' && value !== null && !Array.isArray(value);

function acceptsNull(schema: Schema): boolean {
  const type = schema.type;
  if (type === 'null' || (Array.isArray(type) && type.includes('null'))) return true;
  if (Array.isArray(schema.enum) && schema.enum.includes(null)) return true;
  if ('const' in schema && schema.const === null) return true;
  return Array.isArray(schema.anyOf) && schema.anyOf.some((branch) => isSchema(branch) && acceptsNull(branch));
}

function nullable(schema: Schema): Schema {
  if (typeof schema.type === 'string' && !('enum' in schema) && !('const' in schema)) return { ...schema, type: [schema.type, 'null'] };
  if (Array.isArray(schema.type) && !('enum' in schema) && !('const' in schema)) return { ...schema, type: [...schema.type, 'null'] };
  return { anyOf: [schema, { type: 'null' }] };
}

const isEmpty = (rewrites: NullRewrites) => !rewrites.nullable && !rewrites.properties && !rewrites.items;

/**
 * Set `name` as an own, enumerable property: an assignment to `__proto__` would set the prototype
 * instead, and the property would be lost. (Objects keyed by property names are only read with hasOwn.)
 */
function setProperty(target: Record<string, unknown>, name: string, value: unknown): void {
  Object.defineProperty(target, name, { value, enumerable: true, writable: true, configurable: true });
}

class Converter {
  private properties = 0;

  convert(schema: unknown, path: string, depth: number, underAnyOf: boolean): { schema: Schema; rewrites: NullRewrites } {
    if (!isSchema(schema)) throw new Incompatible(`${path} is not a schema object`);
    for (const key of Object.keys(schema)) {
      if (!KEYWORDS.has(key)) throw new Incompatible(`${path} uses "${key}", which strict mode does not support`);
    }
    const { type } = schema;
    const types = typeof type === 'string' ? [type] : Array.isArray(type) ? type : [];
    if (type !== undefined && (types.length === 0 || !types.every((t) => typeof t === 'string' && TYPES.has(t)))) {
      throw new Incompatible(`${path} has an invalid type`);
    }
    if (type === undefined && !('enum' in schema) && !('const' in schema) && !('anyOf' in schema)) {
      throw new Incompatible(`${path} names no type (strict mode needs one)`);
    }
    if ('format' in schema && !FORMATS.has(String(schema.format))) throw new Incompatible(`${path} has format "${String(schema.format)}", which strict mode does not support`);
    if ('enum' in schema && (!Array.isArray(schema.enum) || schema.enum.length > MAX_STRICT_ENUM_VALUES)) {
      throw new Incompatible(`${path} has an enum strict mode does not accept (more than ${MAX_STRICT_ENUM_VALUES} values, or not a list)`);
    }
    const out: Schema = { ...schema };
    const rewrites: NullRewrites = {};
    if (Array.isArray(schema.anyOf)) {
      out.anyOf = schema.anyOf.map((branch, i) => this.convert(branch, `${path}.anyOf[${i}]`, depth, true).schema);
    } else if ('anyOf' in schema) {
      throw new Incompatible(`${path}.anyOf is not a list`);
    }
    if (types.includes('object') || 'properties' in schema) {
      if (depth + 1 > MAX_STRICT_NESTING_LEVELS) throw new Incompatible(`${path} nests objects deeper than ${MAX_STRICT_NESTING_LEVELS} levels`);
      this.object(schema, out, rewrites, path, depth + 1, underAnyOf);
    }
    if ('items' in schema) {
      const items = this.convert(schema.items, `${path}.items`, depth, underAnyOf);
      out.items = items.schema;
      if (!isEmpty(items.rewrites)) rewrites.items = items.rewrites;
    }
    return { schema: out, rewrites };
  }

  private object(schema: Schema, out: Schema, rewrites: NullRewrites, path: string, depth: number, underAnyOf: boolean): void {
    const additional = schema.additionalProperties;
    if (additional !== undefined && additional !== false) throw new Incompatible(`${path} allows additional properties`);
    if (!('properties' in schema)) throw new Incompatible(`${path} is a free-form object (no properties)`);
    const properties = schema.properties;
    if (!isSchema(properties)) throw new Incompatible(`${path}.properties is not an object`);
    const required = schema.required ?? [];
    if (!Array.isArray(required) || !required.every((name) => typeof name === 'string' && Object.hasOwn(properties, name))) {
      throw new Incompatible(`${path}.required names a property it does not define`);
    }
    const names = Object.keys(properties);
    this.properties += names.length;
    if (this.properties > MAX_STRICT_PROPERTIES) throw new Incompatible(`the schema has more than ${MAX_STRICT_PROPERTIES} properties`);
    const converted: Schema = {};
    for (const name of names) {
      const child = this.convert(properties[name], `${path}.${name}`, depth, underAnyOf);
      if (!isEmpty(child.rewrites)) setProperty((rewrites.properties ??= {}), name, child.rewrites);
      if (required.includes(name) || acceptsNull(child.schema)) {
        setProperty(converted, name, child.schema);
      } else {
        if (underAnyOf) throw new Incompatible(`${path}.${name} is optional under an anyOf`);
        setProperty(converted, name, nullable(child.schema));
        (rewrites.nullable ??= []).push(name);
      }
    }
    out.type = schema.type ?? 'object';
    out.properties = converted;
    out.required = names;
    out.additionalProperties = false;
  }
}

/** The strict form of an MCP input schema and the nulls to strip, or why the schema stays non-strict. */
export function toStrictSchema(schema: JsonSchema): StrictConversion {
  const { $schema: _dialect, ...root } = schema;
  if (root.type !== 'object') return { strict: false, reason: 'the root is not an object schema' };
  try {
    const { schema: converted, rewrites } = new Converter().convert(root, '$', 0, false);
    return { strict: true, schema: converted, rewrites };
  } catch (error) {
    if (error instanceof Incompatible) return { strict: false, reason: error.message };
    throw error;
  }
}

/** The model's arguments without the nulls it was made to send for optional properties (see the rule above). */
export function stripRewrittenNulls(value: unknown, rewrites: NullRewrites): unknown {
  if (Array.isArray(value)) return rewrites.items ? value.map((item) => stripRewrittenNulls(item, rewrites.items!)) : value;
  if (!isSchema(value)) return value;
  const stripped: Schema = {};
  for (const [name, field] of Object.entries(value)) {
    if (field === null && rewrites.nullable?.includes(name)) continue;
    const inner = rewrites.properties && Object.hasOwn(rewrites.properties, name) ? rewrites.properties[name] : undefined;
    setProperty(stripped, name, inner ? stripRewrittenNulls(field, inner) : field);
  }
  return stripped;
}
