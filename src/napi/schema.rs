//! `JsonSchemaValidator`: a schema compiled once in the engine (`schema::CompiledSchema`), used from
//! JavaScript for any number of values. Values cross as JSON text; a failure comes back as the JSON
//! text of a `Violation` (`{"path":"/a/0","message":"…"}`), success as `null`.

use super::errors::guard;
use crate::schema::CompiledSchema;
use napi_derive::napi;

#[napi]
pub struct JsonSchemaValidator {
    schema: CompiledSchema,
}

#[napi]
impl JsonSchemaValidator {
    /// Compiles `schemaJson`; throws `mcp_schema_invalid` for a schema over the bounds, not a schema,
    /// or one that does not compile (a reference to another document among them: nothing is fetched).
    #[napi(constructor)]
    pub fn new(schema_json: String) -> napi::Result<Self, String> {
        guard("JsonSchemaValidator", || Ok(JsonSchemaValidator { schema: CompiledSchema::compile(&schema_json)? }))
    }

    /// `null` when `valueJson` is valid, else the first violation as JSON text.
    #[napi]
    pub fn validate(&self, value_json: String) -> napi::Result<Option<String>, String> {
        guard("JsonSchemaValidator.validate", || {
            Ok(self
                .schema
                .validate_json(&value_json)
                .err()
                .map(|v| serde_json::to_string(&v).expect("a violation serializes")))
        })
    }
}
