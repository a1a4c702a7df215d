//! `completion/complete`: suggestions for a prompt's argument (`ref/prompt`) or a resource template's
//! variable (`ref/resource`), with the values already chosen as `context.arguments`.

use crate::error::{McpError, Result};
use crate::limits::MAX_COMPLETION_VALUES;
use crate::session::connection::{Connection, RequestOptions};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What is being completed, as the caller names it (`{type: 'ref/prompt', name}` or
/// `{type: 'ref/resource', uri}`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(tag = "type", deny_unknown_fields)]
pub enum Reference {
    #[serde(rename = "ref/prompt")]
    Prompt { name: String },
    #[serde(rename = "ref/resource")]
    Resource { uri: String },
}

/// The argument being completed: its name and what was typed so far.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Argument {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    pub values: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_more: Option<bool>,
}

#[derive(Deserialize)]
struct CompleteResult {
    completion: Completion,
}

/// The caller's reference and argument (JSON), or `mcp_invalid_arguments`.
pub fn parse_request(reference: &str, argument: &str) -> Result<(Reference, Argument)> {
    let reference = serde_json::from_str(reference).map_err(|_| {
        McpError::InvalidArguments(
            "a completion's ref must be { type: 'ref/prompt', name } or { type: 'ref/resource', uri }".into(),
        )
    })?;
    let argument = serde_json::from_str(argument)
        .map_err(|_| McpError::InvalidArguments("a completion's argument must be { name, value } of strings".into()))?;
    Ok((reference, argument))
}

pub async fn complete(
    connection: &Connection,
    reference: &Reference,
    argument: &Argument,
    context: Option<&Map<String, Value>>,
    opts: &RequestOptions<'_>,
) -> Result<Completion> {
    let mut params = serde_json::json!({ "ref": reference, "argument": argument });
    if let Some(arguments) = context {
        params["context"] = serde_json::json!({ "arguments": arguments });
    }
    let raw = connection.request("completion/complete", Some(&params.to_string()), opts).await?;
    parse_result(raw.get())
}

/// A `CompleteResult`; past `MAX_COMPLETION_VALUES` values the rest are dropped and `hasMore` set.
pub fn parse_result(text: &str) -> Result<Completion> {
    let mut completion = serde_json::from_str::<CompleteResult>(text)
        .map_err(|_| McpError::Protocol("completion/complete returned a malformed result".into()))?
        .completion;
    if completion.values.len() > MAX_COMPLETION_VALUES {
        completion.values.truncate(MAX_COMPLETION_VALUES);
        completion.has_more = Some(true);
    }
    Ok(completion)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_and_arguments_are_parsed_strictly() {
        let (reference, argument) =
            parse_request(r#"{"type":"ref/prompt","name":"p"}"#, r#"{"name":"a","value":"x"}"#).unwrap();
        assert_eq!(reference, Reference::Prompt { name: "p".into() });
        assert_eq!(argument.value, "x");
        assert_eq!(
            serde_json::to_string(&Reference::Resource { uri: "a://{x}".into() }).unwrap(),
            r#"{"type":"ref/resource","uri":"a://{x}"}"#
        );
        for (r, a) in [
            (r#"{"type":"ref/tool","name":"p"}"#, r#"{"name":"a","value":"x"}"#),
            (r#"{"type":"ref/prompt","name":"p"}"#, r#"{"name":"a","value":1}"#),
        ] {
            assert_eq!(parse_request(r, a).unwrap_err().code(), "mcp_invalid_arguments");
        }
    }

    #[test]
    fn results_are_bounded() {
        let many: Vec<String> = (0..150).map(|i| i.to_string()).collect();
        let text = serde_json::json!({ "completion": { "values": many } }).to_string();
        let completion = parse_result(&text).unwrap();
        assert_eq!((completion.values.len(), completion.has_more), (MAX_COMPLETION_VALUES, Some(true)));
        assert_eq!(parse_result("{}").unwrap_err().code(), "mcp_protocol_error");
    }
}
