//! A tool's schemas as the call path uses them: compiled on the tool's first call (a catalogue of
//! thousands pays nothing at connect), kept with the tool's route while its definition stays the same,
//! and applied as the toolset's validation options say.
//!
//! A schema the engine cannot use (over a bound, an unknown dialect, a reference to another document)
//! does not make the tool unusable: it is reported once (`tool-schema-invalid`) and the tool's calls or
//! results go through unvalidated, as they did before validation existed. The server still checks its own
//! input; refusing its tool for a limit of this client would break a server that works.
//!
//! A value too costly to validate against a usable schema (`CompiledSchema::check`: the validator's
//! stack or total work over the bounds) is different: it fails closed. Arguments are refused with
//! `mcp_invalid_arguments` (nothing is sent; the agent can send less), a result with
//! `mcp_result_invalid` (a hostile server must not get a result through unchecked by making it big).
//! A panic while checking fails the call with `mcp_internal_error` instead of unwinding into the
//! transport's reader, where the call would never complete.

use super::{CompiledSchema, Refusal, SchemaError};
use crate::error::{McpError, Result};
use serde_json::value::RawValue;
use serde_json::Value;
use std::sync::OnceLock;

/// The validation options of a toolset (`validateArguments`, `validateResults`, `exposeServerErrors`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValidationConfig {
    /// Check arguments against the tool's `inputSchema` before anything is sent (default on).
    pub arguments: bool,
    /// Check `structuredContent` against the tool's `outputSchema`, when it has one (default on).
    pub results: bool,
    /// Pass a server's own error text (an `isError` result's text, a JSON-RPC error's message) to the
    /// caller (default on). Off, `guard::server_text::withhold` replaces it and the code is kept.
    pub expose_server_errors: bool,
}

impl Default for ValidationConfig {
    fn default() -> Self {
        ValidationConfig { arguments: true, results: true, expose_server_errors: true }
    }
}

/// One schema of one tool, as far as it has been looked at.
enum Compiled {
    /// An input schema that accepts every JSON object (`{}`, `true`, `{"type":"object"}`): the call
    /// path's own object check covers it, so the arguments are not even parsed.
    AnyObject,
    Schema(CompiledSchema),
    /// Validation is skipped for this definition; every toolset using it reports why once.
    Unusable(SchemaError),
}

impl Compiled {
    /// `arguments`: the schema of a call's arguments, which are known to be an object already.
    fn of(schema: &str, arguments: bool) -> Compiled {
        if arguments && is_any_object(schema) {
            return Compiled::AnyObject;
        }
        match CompiledSchema::compile(schema) {
            Ok(compiled) => Compiled::Schema(compiled),
            Err(error) => Compiled::Unusable(error),
        }
    }

    /// The compiled schema to check against, or `None` (nothing to check) after telling `on_unusable`.
    fn usable(&self, on_unusable: impl FnOnce(&SchemaError)) -> Option<&CompiledSchema> {
        match self {
            Compiled::Schema(schema) => Some(schema),
            Compiled::AnyObject => None,
            Compiled::Unusable(error) => {
                on_unusable(error);
                None
            }
        }
    }
}

/// The compiled schemas of one tool definition. A new definition gets a new one; toolsets showing the same
/// shared catalogue share one (`ToolTexts::schemas`): a schema is compiled once a process, not once a session.
#[derive(Default)]
pub struct ToolSchemas {
    input: OnceLock<Compiled>,
    output: OnceLock<Compiled>,
}

impl ToolSchemas {
    /// Checks `arguments` (already known to be a JSON object) against `input_schema`, compiling it on
    /// first use. `tool` names the tool in the error. `on_unusable` hears of a schema that cannot be used
    /// at every check (the caller reports it once).
    pub fn check_arguments(
        &self,
        tool: &str,
        input_schema: &str,
        arguments: &RawValue,
        on_unusable: impl FnOnce(&SchemaError),
    ) -> Result<()> {
        without_panics(tool, "arguments", || {
            let Some(schema) = self.input.get_or_init(|| Compiled::of(input_schema, true)).usable(on_unusable) else {
                return Ok(());
            };
            schema.check_json(arguments.get()).map_err(|refusal| {
                McpError::InvalidArguments(match refusal {
                    Refusal::Violation(violation) => {
                        format!("the arguments of tool {tool:?} do not match its inputSchema, {}; the call was not sent", violation.placed("the arguments"))
                    }
                    Refusal::NotValidated(why) => format!("the arguments of tool {tool:?} cannot be checked against its inputSchema: {why}; the call was not sent"),
                })
            })
        })
    }

    /// Checks a successful result's `structuredContent` against `output_schema`, compiling it on first
    /// use: it must be there, and valid. Violations name their place in the result only when the
    /// server's text may be shown (`expose_server_errors`): its keys are the server's text.
    pub fn check_result(
        &self,
        tool: &str,
        output_schema: &str,
        result: &RawValue,
        expose_server_errors: bool,
        on_unusable: impl FnOnce(&SchemaError),
    ) -> Result<()> {
        without_panics(tool, "result", || {
            let Some(schema) = self.output.get_or_init(|| Compiled::of(output_schema, false)).usable(on_unusable)
            else {
                return Ok(());
            };
            #[derive(serde::Deserialize)]
            struct Structured {
                #[serde(rename = "structuredContent")]
                structured_content: Option<Value>,
            }
            let structured = serde_json::from_str::<Structured>(result.get())
                .map_err(|_| McpError::Protocol("tools/call returned a malformed result".to_owned()))?
                .structured_content;
            let Some(structured) = structured else {
                return Err(McpError::ResultInvalid(format!(
                    "tool {tool:?} has an outputSchema but its result has no structuredContent"
                )));
            };
            schema.check(&structured).map_err(|refusal| {
                McpError::ResultInvalid(match refusal {
                    Refusal::Violation(violation) if expose_server_errors => {
                        format!("the structuredContent of tool {tool:?} does not match its outputSchema, {violation}")
                    }
                    Refusal::Violation(_) => format!("the structuredContent of tool {tool:?} does not match its outputSchema"),
                    // Numbers only: nothing of the server's text.
                    Refusal::NotValidated(why) => {
                        format!("the structuredContent of tool {tool:?} cannot be checked against its outputSchema, so the result is refused: {why}")
                    }
                })
            })
        })
    }
}

/// `check`'s outcome, or `mcp_internal_error` if it panics: a check runs inside a call's completion, and
/// a panic unwinding out of it would leave the call pending forever.
fn without_panics(tool: &str, what: &str, check: impl FnOnce() -> Result<()>) -> Result<()> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(check)).unwrap_or_else(|_| {
        Err(McpError::Internal(format!("the engine panicked while checking the {what} of tool {tool:?} against its schema; this is a bug in mcpferry")))
    })
}

/// Whether `schema` accepts every JSON object, judged from its text without compiling: `{}`, `true`, or
/// `{"type":"object"}`, with nothing else than annotations beside.
fn is_any_object(schema: &str) -> bool {
    let Ok(value) = serde_json::from_str::<Value>(schema) else { return false };
    match value {
        Value::Bool(accepts) => accepts,
        Value::Object(map) => map.iter().all(|(key, value)| match key.as_str() {
            "type" => value == "object",
            "title" | "description" | "$comment" | "examples" => true,
            "$schema" => value == "https://json-schema.org/draft/2020-12/schema",
            _ => false,
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn arguments_are_checked_against_the_schema_compiled_once() {
        let schemas = ToolSchemas::default();
        let schema = r#"{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}"#;
        assert!(schemas.check_arguments("s__t", schema, &raw(r#"{"n":5}"#), |_| panic!("usable")).is_ok());
        let error = schemas.check_arguments("s__t", schema, &raw(r#"{"n":"5"}"#), |_| panic!("usable")).unwrap_err();
        assert_eq!(error.code(), "mcp_invalid_arguments");
        assert!(error.to_string().contains("at /n: the value is not of type \"integer\""), "{error}");
        // A rule of the arguments as a whole (a required property) names them as the arguments.
        let missing =
            schemas.check_arguments("s__t", schema, &raw("{}"), |_| panic!("usable")).unwrap_err().to_string();
        assert!(
            missing.contains("do not match its inputSchema, at the arguments: ") && !missing.contains("value itself"),
            "{missing}"
        );
        // The compiled schema is kept: a different text is not looked at again for this definition.
        assert!(schemas.check_arguments("s__t", "{}", &raw(r#"{"n":"5"}"#), |_| ()).is_err());
    }

    #[test]
    fn an_unusable_schema_is_told_at_every_check_and_lets_calls_through() {
        let schemas = ToolSchemas::default();
        let mut reports = Vec::new();
        for _ in 0..3 {
            let outcome = schemas.check_arguments("s__t", r#"{"$ref":"http://127.0.0.1:9/s.json"}"#, &raw("{}"), |e| {
                reports.push(e.to_string())
            });
            assert!(outcome.is_ok());
        }
        assert_eq!(reports.len(), 3, "{reports:?}");
        assert!(reports.iter().all(|r| r == &reports[0]));
    }

    #[test]
    fn any_object_schemas_are_not_compiled() {
        for schema in [
            "{}",
            "true",
            r#"{"type":"object"}"#,
            r#"{"type":"object","description":"d","$schema":"https://json-schema.org/draft/2020-12/schema"}"#,
        ] {
            assert!(is_any_object(schema), "{schema}");
        }
        for schema in [
            r#"{"type":"object","properties":{}}"#,
            r#"{"type":"array"}"#,
            "false",
            r#"{"type":"object","additionalProperties":false}"#,
        ] {
            assert!(!is_any_object(schema), "{schema}");
        }
    }

    /// A server's outputSchema inside every bound (5 000 alternatives per item, under the 10 000 per
    /// node) and a result under the default maxResultBytes (2 MiB) would make one completion run for
    /// seconds on the thread that settles the call: the result is refused unchecked, before any of it is
    /// validated. Arguments that costly are refused the same way, and nothing is sent.
    #[test]
    fn a_result_too_costly_to_check_is_refused() {
        let alternatives: Vec<serde_json::Value> = (1..=5_000).map(|i| serde_json::json!({ "const": i })).collect();
        let schema = serde_json::json!({ "type": "object", "properties": { "a": { "type": "array", "items": { "anyOf": alternatives } } } }).to_string();
        assert!(schema.len() < crate::limits::MAX_SCHEMA_BYTES);
        let items = vec!["5000"; 400_000].join(",");
        let result = format!(r#"{{"content":[],"structuredContent":{{"a":[{items}]}}}}"#);
        assert!(result.len() < crate::limits::DEFAULT_MAX_RESULT_BYTES);
        let schemas = ToolSchemas::default();
        for expose in [true, false] {
            let error = schemas
                .check_result("s__t", &schema, &raw(&result), expose, |e| panic!("within the bounds: {e}"))
                .unwrap_err();
            assert_eq!(error.code(), "mcp_result_invalid");
            assert!(
                error.to_string().contains("cannot be checked against its outputSchema, so the result is refused"),
                "{error}"
            );
        }
        let error = schemas
            .check_arguments("s__t", &schema, &raw(&format!(r#"{{"a":[{items}]}}"#)), |e| {
                panic!("within the bounds: {e}")
            })
            .unwrap_err();
        assert_eq!(error.code(), "mcp_invalid_arguments");
        assert!(error.to_string().contains("cannot be checked against its inputSchema"), "{error}");
    }

    #[test]
    fn a_panic_while_checking_fails_the_call() {
        let error = without_panics("s__t", "result", || panic!("a bug")).unwrap_err();
        assert_eq!(error.code(), "mcp_internal_error");
        assert!(error.to_string().contains("checking the result of tool \"s__t\""), "{error}");
        assert!(without_panics("s__t", "result", || Ok(())).is_ok());
    }

    #[test]
    fn results_need_valid_structured_content() {
        let schemas = ToolSchemas::default();
        let schema = r#"{"type":"object","properties":{"sum":{"type":"number"}},"required":["sum"]}"#;
        let check =
            |result: &str, expose| schemas.check_result("s__t", schema, &raw(result), expose, |_| panic!("usable"));
        assert!(check(r#"{"content":[],"structuredContent":{"sum":3}}"#, true).is_ok());
        for bad in
            [r#"{"content":[{"type":"text","text":"{\"sum\":3}"}]}"#, r#"{"content":[],"structuredContent":null}"#]
        {
            assert_eq!(check(bad, true).unwrap_err().code(), "mcp_result_invalid", "{bad}");
        }
        // The plainest outputSchema still requires structuredContent, and an object.
        let plain = ToolSchemas::default();
        let check_plain =
            |result: &str| plain.check_result("s__t", r#"{"type":"object"}"#, &raw(result), true, |_| panic!("usable"));
        assert!(check_plain(r#"{"content":[],"structuredContent":{}}"#).is_ok());
        assert_eq!(check_plain(r#"{"content":[]}"#).unwrap_err().code(), "mcp_result_invalid");
        assert_eq!(check_plain(r#"{"content":[],"structuredContent":[1]}"#).unwrap_err().code(), "mcp_result_invalid");
        let shown = check(r#"{"content":[],"structuredContent":{"sum":"3"}}"#, true).unwrap_err().to_string();
        assert!(shown.contains("at /sum"), "{shown}");
        let withheld = check(r#"{"content":[],"structuredContent":{"sum":"3"}}"#, false).unwrap_err().to_string();
        assert!(!withheld.contains("/sum"), "{withheld}");
    }
}
