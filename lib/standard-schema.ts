// Standard Schema v1 (https://standardschema.dev), the part mcpferry uses: zod, valibot, arktype and others
// validate through it, and with Standard JSON Schema (zod ≥ 4.2 and others) describe themselves.
// createMcpServer (its tools' schemas) and mcpferry/mayura (declared tools' validators) both take it.

export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly '~standard': {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => StandardSchemaResult<Output> | Promise<StandardSchemaResult<Output>>;
    readonly types?: { readonly input: Input; readonly output: Output };
    /** Standard JSON Schema: the validator as JSON Schema, for the given target (`draft-2020-12`). */
    readonly jsonSchema?: {
      readonly input: (options: { target: string }) => Record<string, unknown>;
      readonly output?: (options: { target: string }) => Record<string, unknown>;
    };
  };
}

export type StandardSchemaResult<Output> =
  | { readonly value: Output; readonly issues?: undefined }
  | { readonly issues: ReadonlyArray<{ readonly message: string; readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> }> };

/** Whether `value` validates through Standard Schema; callable schemas (arktype's) count. */
export function isStandardSchema(value: unknown): value is StandardSchemaV1 {
  const props = (value as { '~standard'?: { validate?: unknown } } | null)?.['~standard'];
  return (typeof value === 'object' || typeof value === 'function') && value !== null && typeof props === 'object' && props !== null && typeof props.validate === 'function';
}
