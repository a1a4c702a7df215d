//! Elicitation (MCP 2025-11-25, `client/elicitation`): a server asks the person behind the host for
//! input, through the host's `onElicitation`. This module is that exchange without I/O: the capability
//! the client declares, reading an `elicitation/create` request (refusing what the spec does not
//! allow), the request the host is given, and the result the server gets back. On `accept`, the
//! schema's defaults fill the fields the host left out (SEP-1034) and the whole answer is then checked
//! against the requested schema, so nothing of the wrong type, outside an enum, missing a required
//! field, or not asked for is ever sent as `accept`: such an answer is sent as `decline`.
//!
//! The request's message and schema are third-party text. They go to the host's callback and nowhere
//! else: the errors built here name no part of them. The connection runs the callback (`connection.rs`).

use crate::hooks::Callback;
use crate::limits::{MAX_ELICITATION_ANSWER_BYTES, MAX_ELICITATION_FIELDS, MAX_ELICITATION_OPTIONS};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// The JSON-RPC error code for an `elicitation/create` refused because `MAX_ELICITATIONS_IN_FLIGHT`
/// are already open (the implementation-defined server-error range: this client is the busy "server").
pub const BUSY_ERROR_CODE: i64 = -32000;

/// The result sent when the host declined, failed, or answered something the schema does not allow.
pub const DECLINE: &str = r#"{"action":"decline"}"#;
/// The result sent when the host did not answer in time.
pub const CANCEL: &str = r#"{"action":"cancel"}"#;
const URL_ACCEPT: &str = r#"{"action":"accept"}"#;

/// Which elicitation modes the client declares (the `elicitationModes` option).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Modes {
    pub form: bool,
    pub url: bool,
}

impl Default for Modes {
    /// `['form']`: URL mode only when the host says it can show a URL and ask before opening it.
    fn default() -> Self {
        Modes { form: true, url: false }
    }
}

impl Modes {
    /// The `elicitation` client capability, e.g. `{"form": {}, "url": {}}`.
    pub fn capability(self) -> Value {
        let mut modes = Map::new();
        if self.form {
            modes.insert("form".into(), json!({}));
        }
        if self.url {
            modes.insert("url".into(), json!({}));
        }
        Value::Object(modes)
    }
}

/// What a connection needs to answer one server's elicitations.
pub struct Elicitor {
    /// The configured server name, given to the host with each request (the spec wants the person
    /// told which server is asking).
    pub server: String,
    pub modes: Modes,
    /// Request JSON (see [`host_request`]) → the host's result JSON.
    pub callback: Arc<dyn Callback<String, String>>,
    /// How long the host may take before the server is told `cancel`.
    pub timeout: Duration,
    /// Told the `askId` of a question withdrawn before the host answered it (the call was aborted,
    /// the server cancelled it, the connection ended, the timeout passed), so the host can stop asking.
    pub withdrawn: Option<Arc<dyn Fn(u64) + Send + Sync>>,
}

/// The `askId` of the next question to the host: unique in this process, so the host can match a
/// withdrawal to its question.
static NEXT_ASK_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// One question to the host: tells the host it was withdrawn (once), unless it was answered first,
/// however the wait for it ends (dropped, timed out, cancelled).
pub(crate) struct Asking {
    pub id: u64,
    withdrawn: Option<Arc<dyn Fn(u64) + Send + Sync>>,
}

impl Asking {
    pub fn new(elicitor: &Elicitor) -> Self {
        Asking {
            id: NEXT_ASK_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            withdrawn: elicitor.withdrawn.clone(),
        }
    }

    /// The host answered: nothing to withdraw.
    pub fn answered(mut self) {
        self.withdrawn = None;
    }

    /// Tell the host now (the wait for its answer may go on).
    pub fn withdraw(&mut self) {
        if let Some(withdrawn) = self.withdrawn.take() {
            withdrawn(self.id);
        }
    }
}

impl Drop for Asking {
    fn drop(&mut self) {
        self.withdraw();
    }
}

/// An `elicitation/create` request, read and checked.
#[derive(Debug)]
pub enum Request {
    Form {
        message: String,
        /// As the server sent it: the host renders it (titles, descriptions, formats, defaults).
        schema: Value,
        fields: Vec<(String, Field)>,
        required: Vec<String>,
    },
    Url {
        message: String,
        url: String,
        /// Always present in a server's `elicitation/create`; absent in a 2026-07-28 input request
        /// (`mrtr.rs`), which has no completion notification to key.
        elicitation_id: Option<String>,
    },
}

/// One property of a form's `requestedSchema`.
#[derive(Debug)]
pub struct Field {
    kind: Kind,
    /// Applied when the host leaves the field out, if it is itself a valid value for the field.
    default: Option<Value>,
}

/// The primitive schemas the spec allows (a flat object of these, nothing nested).
#[derive(Debug)]
enum Kind {
    /// `format` (email, uri, date, date-time) is a rendering hint here; the server validates it.
    Text {
        min_chars: Option<u64>,
        max_chars: Option<u64>,
    },
    Number {
        integer: bool,
        minimum: Option<f64>,
        maximum: Option<f64>,
    },
    Boolean,
    /// A single-select enum: `enum` (optionally with the legacy `enumNames`) or titled `oneOf` consts.
    Choice {
        options: Vec<String>,
    },
    /// A multi-select enum: an array whose `items` are an `enum` or titled `anyOf` consts.
    Choices {
        options: Vec<String>,
        min_items: Option<u64>,
        max_items: Option<u64>,
    },
}

impl Kind {
    fn accepts(&self, value: &Value) -> bool {
        match (self, value) {
            (Kind::Text { min_chars, max_chars }, Value::String(text)) => {
                within(text.chars().count() as u64, *min_chars, *max_chars)
            }
            (Kind::Number { integer, minimum, maximum }, Value::Number(number)) => {
                let Some(n) = number.as_f64() else { return false };
                let whole = number.is_i64() || number.is_u64() || n.fract() == 0.0;
                (!integer || whole) && minimum.is_none_or(|min| n >= min) && maximum.is_none_or(|max| n <= max)
            }
            (Kind::Boolean, Value::Bool(_)) => true,
            (Kind::Choice { options }, Value::String(choice)) => options.contains(choice),
            (Kind::Choices { options, min_items, max_items }, Value::Array(choices)) => {
                within(choices.len() as u64, *min_items, *max_items)
                    && choices.iter().all(|c| c.as_str().is_some_and(|c| options.iter().any(|o| o == c)))
            }
            _ => false,
        }
    }
}

fn within(n: u64, min: Option<u64>, max: Option<u64>) -> bool {
    min.is_none_or(|min| n >= min) && max.is_none_or(|max| n <= max)
}

/// Read an `elicitation/create` request's params. `Err` is the message of the `-32602` (invalid params)
/// the server gets; it quotes nothing the server sent.
pub fn parse_request(params: Option<&RawValue>, modes: Modes) -> Result<Request, String> {
    parse(params, modes, true)
}

/// Read the params of an `elicitation/create` input request (MCP 2026-07-28 multi round-trip requests,
/// `mrtr.rs`): the same rules, except that a URL-mode request carries no `elicitationId`.
pub fn parse_input_request(params: Option<&RawValue>, modes: Modes) -> Result<Request, String> {
    parse(params, modes, false)
}

fn parse(params: Option<&RawValue>, modes: Modes, url_needs_id: bool) -> Result<Request, String> {
    let params = params.and_then(|p| serde_json::from_str::<Value>(p.get()).ok());
    let Some(Value::Object(mut params)) = params else {
        return Err("elicitation/create params must be an object".into());
    };
    let url_mode = match params.get("mode") {
        None => false,
        Some(Value::String(mode)) if mode == "form" => false,
        Some(Value::String(mode)) if mode == "url" => true,
        Some(_) => return Err("elicitation/create has an unknown mode (form or url)".into()),
    };
    if (url_mode && !modes.url) || (!url_mode && !modes.form) {
        let mode = if url_mode { "url" } else { "form" };
        return Err(format!("this client did not declare the {mode} elicitation mode"));
    }
    let Some(Value::String(message)) = params.remove("message") else {
        return Err("elicitation/create needs a message string".into());
    };
    // Shown to a person by the host: nothing in it may steer a terminal or hide as invisible text.
    let message = crate::guard::server_text::for_people(&message);
    if url_mode {
        let url = match params.remove("url") {
            Some(Value::String(url)) => web_url(&url)?,
            _ => return Err("a url elicitation needs an http or https url".into()),
        };
        return match params.remove("elicitationId") {
            Some(Value::String(id)) if !id.is_empty() => Ok(Request::Url { message, url, elicitation_id: Some(id) }),
            None if !url_needs_id => Ok(Request::Url { message, url, elicitation_id: None }),
            _ => Err("a url elicitation needs an elicitationId string".into()),
        };
    }
    let schema = params.remove("requestedSchema").ok_or("a form elicitation needs a requestedSchema")?;
    let (fields, required) = parse_schema(&schema)?;
    Ok(Request::Form { message, schema, fields, required })
}

/// Only web URLs are handed to the host to show and open: never `javascript:`, `file:` or the like.
/// The host gets the URL as parsed and serialized, not the server's text: control characters and
/// spaces in it are percent-encoded (or, at its ends and as tabs and newlines, dropped), the host is
/// lowercased and IDNA-encoded, so what a person is shown is what a browser would open.
fn web_url(text: &str) -> Result<String, String> {
    let url = url::Url::parse(text).ok().filter(|url| matches!(url.scheme(), "http" | "https") && url.has_host());
    let url = url.ok_or("a url elicitation needs an http or https url")?;
    // `https://accounts.example.com@evil.example/` reads as one host and goes to another.
    if !url.username().is_empty() || url.password().is_some() {
        return Err("a url elicitation's url must not carry a user name or password (userinfo)".into());
    }
    Ok(url.as_str().to_owned())
}

type Fields = (Vec<(String, Field)>, Vec<String>);

fn parse_schema(schema: &Value) -> Result<Fields, String> {
    let schema = schema.as_object().filter(|s| s.get("type").and_then(Value::as_str) == Some("object"));
    let Some(schema) = schema else {
        return Err("requestedSchema must be an object schema (type: object)".into());
    };
    let properties = match schema.get("properties") {
        Some(Value::Object(properties)) => properties,
        _ => return Err("requestedSchema must have properties".into()),
    };
    if properties.len() > MAX_ELICITATION_FIELDS {
        return Err(format!("requestedSchema has more than {MAX_ELICITATION_FIELDS} properties"));
    }
    let fields = properties
        .iter()
        .map(|(name, property)| Some((name.clone(), parse_field(property)?)))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| {
            format!(
                "requestedSchema properties must be primitive schemas (string, number, integer, boolean, or an enum of at most {MAX_ELICITATION_OPTIONS} options)"
            )
        })?;
    let required = match schema.get("required") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(names)) => names
            .iter()
            .map(|name| name.as_str().filter(|n| properties.contains_key(*n)).map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or("requestedSchema.required must name its properties")?,
        Some(_) => return Err("requestedSchema.required must be an array".into()),
    };
    Ok((fields, required))
}

/// One primitive schema; `None` when it is not one the spec allows, or a keyword has the wrong type.
fn parse_field(property: &Value) -> Option<Field> {
    let property = property.as_object()?;
    let kind = match property.get("type")?.as_str()? {
        "string" => {
            if let Some(options) = property.get("enum") {
                Kind::Choice { options: strings(options)? }
            } else if let Some(options) = property.get("oneOf") {
                Kind::Choice { options: consts(options)? }
            } else {
                Kind::Text { min_chars: count(property, "minLength")?, max_chars: count(property, "maxLength")? }
            }
        }
        kind @ ("number" | "integer") => Kind::Number {
            integer: kind == "integer",
            minimum: bound(property, "minimum")?,
            maximum: bound(property, "maximum")?,
        },
        "boolean" => Kind::Boolean,
        "array" => {
            let items = property.get("items")?.as_object()?;
            let options = match (items.get("enum"), items.get("anyOf")) {
                (Some(options), _) => strings(options)?,
                (None, Some(options)) => consts(options)?,
                (None, None) => return None,
            };
            Kind::Choices { options, min_items: count(property, "minItems")?, max_items: count(property, "maxItems")? }
        }
        _ => return None,
    };
    Some(Field { kind, default: property.get("default").cloned() })
}

/// `enum`: an array of strings.
fn strings(options: &Value) -> Option<Vec<String>> {
    let options = options.as_array().filter(|o| o.len() <= MAX_ELICITATION_OPTIONS)?;
    options.iter().map(|o| o.as_str().map(str::to_owned)).collect()
}

/// Titled options (`oneOf` / `anyOf`): an array of `{ const, title }`; the value is the `const`.
fn consts(options: &Value) -> Option<Vec<String>> {
    let options = options.as_array().filter(|o| o.len() <= MAX_ELICITATION_OPTIONS)?;
    options.iter().map(|o| o.get("const")?.as_str().map(str::to_owned)).collect()
}

/// A non-negative whole-number keyword: `Some(None)` when absent, `None` when malformed.
fn count(schema: &Map<String, Value>, key: &str) -> Option<Option<u64>> {
    match schema.get(key) {
        None | Some(Value::Null) => Some(None),
        Some(Value::Number(n)) => {
            let whole = n.as_u64().or_else(|| n.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0).map(|f| f as u64));
            whole.map(Some)
        }
        Some(_) => None,
    }
}

/// A numeric bound keyword: `Some(None)` when absent, `None` when malformed.
fn bound(schema: &Map<String, Value>, key: &str) -> Option<Option<f64>> {
    match schema.get(key) {
        None | Some(Value::Null) => Some(None),
        Some(Value::Number(n)) => n.as_f64().map(Some),
        Some(_) => None,
    }
}

/// What the host's callback receives: `{"server": name, "askId": n, "request": {mode, message, ...}}`, the
/// request rebuilt from the fields read (anything else the server put in its params is not passed on).
pub fn host_request(server: &str, ask_id: u64, request: &Request) -> String {
    let request = match request {
        Request::Form { message, schema, .. } => {
            json!({ "mode": "form", "message": message, "requestedSchema": schema })
        }
        Request::Url { message, url, elicitation_id: Some(id) } => {
            json!({ "mode": "url", "message": message, "url": url, "elicitationId": id })
        }
        Request::Url { message, url, elicitation_id: None } => json!({ "mode": "url", "message": message, "url": url }),
    };
    json!({ "server": server, "askId": ask_id, "request": request }).to_string()
}

/// Ask the host through `elicitor` and return the result the server gets: the host's answer, checked
/// ([`answer`]); `decline` when the callback threw or rejected (its reason stays with the host);
/// `cancel` when it took longer than the elicitor's timeout (and the host is told it was withdrawn, as
/// when this future is dropped unanswered).
pub async fn ask(elicitor: &Elicitor, request: &Request) -> String {
    let guard = Asking::new(elicitor);
    let asking = elicitor.callback.call(host_request(&elicitor.server, guard.id, request));
    let answer = match tokio::time::timeout(elicitor.timeout, asking).await {
        Ok(Ok(host_json)) => answer(request, &host_json),
        Ok(Err(_)) => DECLINE.to_owned(),
        Err(_) => return CANCEL.to_owned(),
    };
    guard.answered();
    answer
}

/// The result the server gets for the host's answer `{action, content?}` (JSON). Anything malformed,
/// too large, or not matching the requested schema becomes `decline`; `decline` and `cancel` carry no
/// content; a URL-mode `accept` carries none either (the spec omits it: the data never passes here).
pub fn answer(request: &Request, host_json: &str) -> String {
    accepted(request, host_json).unwrap_or_else(|| DECLINE.to_owned())
}

fn accepted(request: &Request, host_json: &str) -> Option<String> {
    if host_json.len() > MAX_ELICITATION_ANSWER_BYTES {
        return None;
    }
    let Value::Object(mut answer) = serde_json::from_str(host_json).ok()? else { return None };
    match answer.get("action")?.as_str()? {
        "decline" => Some(DECLINE.to_owned()),
        "cancel" => Some(CANCEL.to_owned()),
        "accept" => match request {
            Request::Url { .. } => Some(URL_ACCEPT.to_owned()),
            Request::Form { fields, required, .. } => {
                let content = match answer.remove("content") {
                    None | Some(Value::Null) => Map::new(),
                    Some(Value::Object(content)) => content,
                    Some(_) => return None,
                };
                let content = complete(fields, required, content)?;
                Some(json!({ "action": "accept", "content": content }).to_string())
            }
        },
        _ => None,
    }
}

/// The host's content with the defaults of the fields it left out (SEP-1034), if the result is valid:
/// every field it gave is one the schema asks for and of the right type and range, every required
/// field is there. A field given as `null` counts as left out. A default that is not itself a valid
/// value for its field is not applied.
fn complete(
    fields: &[(String, Field)],
    required: &[String],
    mut content: Map<String, Value>,
) -> Option<Map<String, Value>> {
    content.retain(|_, value| !value.is_null());
    for (name, value) in &content {
        let (_, field) = fields.iter().find(|(field, _)| field == name)?;
        if !field.kind.accepts(value) {
            return None;
        }
    }
    for (name, field) in fields {
        if let Some(default) = field.default.as_ref().filter(|d| !content.contains_key(name) && field.kind.accepts(d)) {
            content.insert(name.clone(), default.clone());
        }
    }
    required.iter().all(|name| content.contains_key(name)).then_some(content)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(json: &str) -> Box<RawValue> {
        RawValue::from_string(json.to_owned()).unwrap()
    }

    fn form(schema: Value) -> Request {
        let params = json!({ "message": "m", "requestedSchema": schema }).to_string();
        parse_request(Some(&raw(&params)), Modes::default()).expect("a valid form request")
    }

    fn result(request: &Request, host: Value) -> Value {
        serde_json::from_str(&answer(request, &host.to_string())).unwrap()
    }

    fn declined() -> Value {
        json!({ "action": "decline" })
    }

    /// The `elicitation-sep1034-client-defaults` conformance scenario's schema.
    fn sep1034() -> Request {
        form(json!({
            "type": "object",
            "properties": {
                "name": { "type": "string", "description": "User name", "default": "John Doe" },
                "age": { "type": "integer", "description": "User age", "default": 30 },
                "score": { "type": "number", "description": "User score", "default": 95.5 },
                "status": { "type": "string", "enum": ["active", "inactive", "pending"], "default": "active" },
                "verified": { "type": "boolean", "default": true }
            },
            "required": []
        }))
    }

    #[test]
    fn defaults_fill_every_primitive_type_the_host_left_out() {
        let request = sep1034();
        let expected = json!({ "name": "John Doe", "age": 30, "score": 95.5, "status": "active", "verified": true });
        assert_eq!(
            result(&request, json!({ "action": "accept", "content": {} })),
            json!({ "action": "accept", "content": expected })
        );
        assert_eq!(result(&request, json!({ "action": "accept" })), json!({ "action": "accept", "content": expected }));
        // What the host gave wins; a null is left out, so its default applies.
        let host = json!({ "action": "accept", "content": { "name": "Ada", "age": 36, "status": "pending", "verified": null } });
        let given = json!({ "name": "Ada", "age": 36, "score": 95.5, "status": "pending", "verified": true });
        assert_eq!(result(&request, host), json!({ "action": "accept", "content": given }));
    }

    #[test]
    fn defaults_fill_titled_and_multi_select_enums() {
        let request = form(json!({
            "type": "object",
            "properties": {
                "color": { "type": "string", "oneOf": [{ "const": "#f00", "title": "Red" }, { "const": "#0f0", "title": "Green" }], "default": "#0f0" },
                "legacy": { "type": "string", "enum": ["a", "b"], "enumNames": ["A", "B"], "default": "b" },
                "tags": { "type": "array", "items": { "type": "string", "enum": ["x", "y", "z"] }, "default": ["x", "z"] },
                "titled": { "type": "array", "items": { "anyOf": [{ "const": "p", "title": "P" }, { "const": "q", "title": "Q" }] }, "minItems": 1, "default": ["q"] }
            }
        }));
        let content = json!({ "color": "#0f0", "legacy": "b", "tags": ["x", "z"], "titled": ["q"] });
        assert_eq!(
            result(&request, json!({ "action": "accept", "content": {} })),
            json!({ "action": "accept", "content": content })
        );
    }

    #[test]
    fn a_default_that_breaks_its_own_schema_is_not_applied() {
        let request = form(json!({
            "type": "object",
            "properties": {
                "age": { "type": "integer", "default": 2.5 },
                "status": { "type": "string", "enum": ["on", "off"], "default": "maybe" },
                "name": { "type": "string", "maxLength": 2, "default": "too long" }
            }
        }));
        assert_eq!(
            result(&request, json!({ "action": "accept", "content": {} })),
            json!({ "action": "accept", "content": {} })
        );
    }

    #[test]
    fn answers_that_break_the_schema_are_declined() {
        let request = form(json!({
            "type": "object",
            "properties": {
                "name": { "type": "string", "minLength": 2, "maxLength": 5 },
                "age": { "type": "integer", "minimum": 0, "maximum": 150 },
                "score": { "type": "number" },
                "ok": { "type": "boolean" },
                "status": { "type": "string", "enum": ["on", "off"] },
                "tags": { "type": "array", "items": { "type": "string", "enum": ["x", "y"] }, "maxItems": 1 }
            },
            "required": ["name"]
        }));
        let valid = json!({ "name": "Ada", "age": 36, "score": 1.5, "ok": false, "status": "on", "tags": ["y"] });
        assert_eq!(
            result(&request, json!({ "action": "accept", "content": valid })),
            json!({ "action": "accept", "content": valid })
        );
        // Whole floats are integers (JSON Schema), as `30.0` from another language would be.
        assert_eq!(
            result(&request, json!({ "action": "accept", "content": { "name": "Ada", "age": 30.0 } }))["action"],
            "accept"
        );
        for content in [
            json!({ "name": 5 }),
            json!({ "name": "A" }),
            json!({ "name": "Adalbert" }),
            json!({ "name": "Ada", "age": "36" }),
            json!({ "name": "Ada", "age": 1.5 }),
            json!({ "name": "Ada", "age": -1 }),
            json!({ "name": "Ada", "score": "high" }),
            json!({ "name": "Ada", "ok": "true" }),
            json!({ "name": "Ada", "status": "maybe" }),
            json!({ "name": "Ada", "tags": "x" }),
            json!({ "name": "Ada", "tags": ["x", "y"] }),
            json!({ "name": "Ada", "tags": ["w"] }),
            json!({ "name": "Ada", "password": "not asked for" }),
            json!({ "age": 3 }),
            json!(["Ada"]),
        ] {
            assert_eq!(result(&request, json!({ "action": "accept", "content": content })), declined(), "{content}");
        }
    }

    #[test]
    fn decline_and_cancel_pass_through_without_content_and_garbage_declines() {
        let request = sep1034();
        assert_eq!(result(&request, json!({ "action": "decline", "content": { "name": "x" } })), declined());
        assert_eq!(
            result(&request, json!({ "action": "cancel", "content": { "name": "x" } })),
            json!({ "action": "cancel" })
        );
        for host in ["null", "\"accept\"", "{}", r#"{"action":"yes"}"#, r#"{"action":1}"#, "not json", "[]"] {
            assert_eq!(answer(&request, host), DECLINE, "{host}");
        }
        let huge =
            json!({ "action": "accept", "content": { "name": "n".repeat(MAX_ELICITATION_ANSWER_BYTES) } }).to_string();
        assert_eq!(answer(&request, &huge), DECLINE);
    }

    #[test]
    fn url_mode_needs_declaring_a_web_url_and_an_id_and_its_accept_carries_nothing() {
        let params =
            raw(r#"{"mode":"url","message":"m","url":"https://example.com/connect?x=1","elicitationId":"e1"}"#);
        let error = parse_request(Some(&params), Modes::default()).unwrap_err();
        assert!(error.contains("url elicitation mode"), "{error}");
        let both = Modes { form: true, url: true };
        let request = parse_request(Some(&params), both).unwrap();
        assert_eq!(
            result(&request, json!({ "action": "accept", "content": { "x": 1 } })),
            json!({ "action": "accept" })
        );
        let host: Value = serde_json::from_str(&host_request("srv", 7, &request)).unwrap();
        assert_eq!(
            host,
            json!({ "server": "srv", "askId": 7, "request": { "mode": "url", "message": "m", "url": "https://example.com/connect?x=1", "elicitationId": "e1" } })
        );
        for params in [
            r#"{"mode":"url","message":"m","url":"javascript:alert(1)","elicitationId":"e1"}"#,
            r#"{"mode":"url","message":"m","url":"file:///etc/passwd","elicitationId":"e1"}"#,
            r#"{"mode":"url","message":"m","url":"not a url","elicitationId":"e1"}"#,
            r#"{"mode":"url","message":"m","url":"https://example.com/"}"#,
            r#"{"mode":"url","message":"m","url":"https://example.com/","elicitationId":""}"#,
        ] {
            assert!(parse_request(Some(&raw(params)), both).is_err(), "{params}");
        }
        // The host is handed the URL as parsed, never the server's bytes: escapes and controls are
        // percent-encoded or dropped, odd-but-valid forms come out in their one normal form.
        let handed = |url: &str| {
            let params = json!({ "mode": "url", "message": "m", "url": url, "elicitationId": "e1" }).to_string();
            let request = parse_request(Some(&raw(&params)), both).unwrap();
            let host: Value = serde_json::from_str(&host_request("srv", 7, &request)).unwrap();
            host["request"]["url"].as_str().unwrap().to_owned()
        };
        let hostile = handed(" https://example.com/a\u{1b}]52;c;aGk=\u{7}/b\u{9b}2J?q=\u{202e}x\t\n#\u{1b}[31m");
        assert_eq!(hostile, "https://example.com/a%1B]52;c;aGk=%07/b%C2%9B2J?q=%E2%80%AEx#%1B[31m");
        assert!(!hostile.chars().any(char::is_control));
        assert_eq!(handed("HTTPS://EXAMPLE.com:443/./a/../b?x=1"), "https://example.com/b?x=1");
        assert_eq!(handed("http://bücher.example"), "http://xn--bcher-kva.example/");
        assert_eq!(handed("https://example.com\\path"), "https://example.com/path");
        for bad in [
            "https://exa\u{1b}mple.com/",
            "https://exa mple.com/",
            "https://\u{9b}evil.example/",
            "https://",
            "https://accounts.google.com@evil.example/",
            "https://u:p@evil.example/",
        ] {
            let params = json!({ "mode": "url", "message": "m", "url": bad, "elicitationId": "e1" }).to_string();
            assert!(parse_request(Some(&raw(&params)), both).is_err(), "{bad:?}");
        }
        let params = json!({ "mode": "url", "message": "m", "url": "https://accounts.google.com@evil.example/", "elicitationId": "e1" }).to_string();
        assert!(parse_request(Some(&raw(&params)), both).unwrap_err().contains("userinfo"));
        // The message a person is shown: no terminal escapes, bidi overrides or invisible characters; lines kept.
        let params = json!({ "mode": "url", "message": "Log in\u{1b}[2J\u{202e}x\u{200b}\nnow\tplease\u{7}", "url": "https://example.com/", "elicitationId": "e1" }).to_string();
        let host: Value =
            serde_json::from_str(&host_request("srv", 7, &parse_request(Some(&raw(&params)), both).unwrap())).unwrap();
        assert_eq!(host["request"]["message"], "Log in [2J x \nnow\tplease ");
        // Form mode can be left undeclared too.
        let url_only = Modes { form: false, url: true };
        assert!(parse_request(
            Some(&raw(r#"{"message":"m","requestedSchema":{"type":"object","properties":{}}}"#)),
            url_only
        )
        .is_err());
    }

    #[test]
    fn requests_outside_the_spec_are_refused_without_quoting_them() {
        let secret = "SECRET-FROM-SERVER";
        let cases = [
            "null".to_owned(),
            format!(r#"{{"mode":"{secret}","message":"m"}}"#),
            r#"{"requestedSchema":{"type":"object","properties":{}}}"#.to_owned(),
            r#"{"message":"m"}"#.to_owned(),
            r#"{"message":"m","requestedSchema":{"type":"array"}}"#.to_owned(),
            format!(r#"{{"message":"m","requestedSchema":{{"type":"object","properties":{{"{secret}":{{"type":"object"}}}}}}}}"#),
            r#"{"message":"m","requestedSchema":{"type":"object","properties":{"a":{"type":"string","minLength":"3"}}}}"#.to_owned(),
            r#"{"message":"m","requestedSchema":{"type":"object","properties":{"a":{"type":"string","enum":[1,2]}}}}"#.to_owned(),
            r#"{"message":"m","requestedSchema":{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"}}}}}"#.to_owned(),
            format!(r#"{{"message":"m","requestedSchema":{{"type":"object","properties":{{}},"required":["{secret}"]}}}}"#),
        ];
        for params in cases {
            let error = parse_request(Some(&raw(&params)), Modes::default()).unwrap_err();
            assert!(!error.contains(secret), "{error}");
        }
        assert!(parse_request(None, Modes::default()).is_err());
    }

    #[test]
    fn schemas_are_bounded() {
        let fields: Map<String, Value> =
            (0..=MAX_ELICITATION_FIELDS).map(|i| (format!("f{i}"), json!({ "type": "boolean" }))).collect();
        let params =
            json!({ "message": "m", "requestedSchema": { "type": "object", "properties": fields } }).to_string();
        assert!(parse_request(Some(&raw(&params)), Modes::default()).unwrap_err().contains("properties"));
        let options: Vec<String> = (0..=MAX_ELICITATION_OPTIONS).map(|i| i.to_string()).collect();
        let params = json!({ "message": "m", "requestedSchema": { "type": "object", "properties": { "a": { "type": "string", "enum": options } } } });
        assert!(parse_request(Some(&raw(&params.to_string())), Modes::default()).is_err());
    }

    #[test]
    fn the_host_gets_the_schema_exactly_as_sent_and_the_server_name() {
        let schema = json!({ "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "properties": { "a": { "type": "string", "format": "email", "title": "A" } } });
        let request = form(schema.clone());
        let host: Value = serde_json::from_str(&host_request("github", 7, &request)).unwrap();
        assert_eq!(
            host,
            json!({ "server": "github", "askId": 7, "request": { "mode": "form", "message": "m", "requestedSchema": schema } })
        );
    }

    #[test]
    fn the_capability_lists_the_declared_modes() {
        assert_eq!(Modes::default().capability(), json!({ "form": {} }));
        assert_eq!(Modes { form: true, url: true }.capability(), json!({ "form": {}, "url": {} }));
        assert_eq!(Modes { form: false, url: true }.capability(), json!({ "url": {} }));
    }
}
