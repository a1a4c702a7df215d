//! One live session with one MCP server: the connection and everything spoken over it, in both eras.
//! The toolset (`toolset/`) owns sessions — it opens, supervises, gates (policy, auth, readiness) and
//! closes them; a transport (`transport/`) only moves bytes. One file per concern:
//!
//! | file               | concern                                                                      |
//! |--------------------|------------------------------------------------------------------------------|
//! | `connection/`      | the connection: the pending map, negotiation, resends, the server's requests |
//! | `elicitation.rs`   | the server asking the person (`elicitation/create`): modes, checks, answers   |
//! | `mrtr.rs`          | multi-round-trip requests (2026-07-28 `input_required` results)               |
//! | `catalog/`         | tool listings: pages, cache hints, catalogues shared by content               |
//! | `outcome.rs`       | what a `tools/call` result means (`isError`, depth), for every caller         |
//! | `resources.rs`     | resources: list, templates, read, subscribe                                   |
//! | `prompts.rs`       | prompts: list, get                                                            |
//! | `completion.rs`    | argument completion                                                           |
//! | `skills.rs`        | skills (SEP-2640)                                                             |
//!
//! The request files (resources to skills) each turn one concern into requests on a [`Connection`] and
//! interpret the answers; what they share (capability checks, listing bounds) is below.

pub mod catalog;
pub mod completion;
pub mod connection;
pub mod elicitation;
pub mod mrtr;
pub mod outcome;
pub mod prompts;
pub mod resources;
pub mod skills;

use crate::error::{McpError, Result};
use crate::limits::{MAX_JSON_DEPTH, MAX_TOOLS_PER_SERVER};
use crate::protocol::nesting;
use crate::session::connection::{Connection, RequestOptions, SessionInfo};
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use std::collections::HashSet;

/// What every listed entry (resource, template, prompt, prompt argument) calls itself.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize, PartialEq)]
pub struct Named {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// Fails with `mcp_not_supported` unless the server declared `capability` (`resources`, `prompts`,
/// `completions`, `skills`: the extension); nothing is sent.
pub fn require(session: &SessionInfo, capability: &str, server: &str, method: &str) -> Result<()> {
    if declares(session, capability) {
        return Ok(());
    }
    Err(McpError::NotSupported(format!("{server} declares no {capability} capability, so it takes no {method}")))
}

/// Whether the server declared `capability` (`skills`: the Skills extension): a listing of a server
/// without it contributes nothing.
pub fn declares(session: &SessionInfo, capability: &str) -> bool {
    match capability {
        "skills" => session.skills,
        _ => session.capabilities.iter().any(|c| c == capability),
    }
}

/// One page of a listing, its members kept raw: the items (each parsed alone) and `nextCursor`.
type Page<'a> = std::collections::HashMap<String, &'a RawValue>;

/// Every item of a paginated listing (`method` answers with its items under `key`), under the bounds
/// tool listings have: `MAX_LIST_PAGES` pages (a repeated cursor refused, see [`crate::session::catalog::next_cursor`]),
/// `MAX_TOOLS_PER_SERVER` items, each page within the toolset's `maxResultBytes` (the transport's bound)
/// and `MAX_JSON_DEPTH`. An item that does not parse is left out (and counted in `skipped`); one bad entry
/// does not cost the rest.
pub async fn list_all<T: DeserializeOwned>(
    connection: &Connection,
    method: &str,
    key: &str,
    opts: &RequestOptions<'_>,
) -> Result<Listed<T>> {
    let mut listed = Listed { items: Vec::new(), skipped: 0 };
    let mut cursors: HashSet<[u8; 32]> = HashSet::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let params = cursor.as_ref().map(|c| serde_json::json!({ "cursor": c }).to_string());
        let raw = connection.request(method, params.as_deref(), opts).await?;
        pages += 1;
        let next = listed.accept(method, key, raw.get())?;
        match next {
            Some(next) => cursor = Some(crate::session::catalog::next_cursor(method, &mut cursors, pages, next)?),
            None => return Ok(listed),
        }
    }
}

/// What a listing found.
#[derive(Debug)]
pub struct Listed<T> {
    pub items: Vec<T>,
    /// Entries left out because they did not parse, or past `MAX_TOOLS_PER_SERVER`.
    pub skipped: usize,
}

impl<T: DeserializeOwned> Listed<T> {
    /// Take one page; its next cursor.
    fn accept(&mut self, method: &str, key: &str, page: &str) -> Result<Option<String>> {
        if nesting::exceeds_depth(page.as_bytes(), MAX_JSON_DEPTH) {
            return Err(McpError::ResultTooDeep { max_depth: MAX_JSON_DEPTH });
        }
        let malformed = || McpError::Protocol(format!("{method} returned a malformed result"));
        let page: Page = serde_json::from_str(page).map_err(|_| malformed())?;
        let next_cursor: Option<String> = match page.get("nextCursor") {
            Some(cursor) => serde_json::from_str(cursor.get()).map_err(|_| malformed())?,
            None => None,
        };
        let items =
            page.get(key).ok_or_else(|| McpError::Protocol(format!("{method} returned a result without {key:?}")))?;
        let items: Vec<&RawValue> = serde_json::from_str(items.get())
            .map_err(|_| McpError::Protocol(format!("{method} returned {key:?} that is not an array")))?;
        for item in items {
            if self.items.len() >= MAX_TOOLS_PER_SERVER {
                self.skipped += 1;
                continue;
            }
            match serde_json::from_str::<T>(item.get()) {
                Ok(item) => self.items.push(item),
                Err(_) => self.skipped += 1,
            }
        }
        Ok(next_cursor)
    }
}

/// `{"k": v, …}` text as a JSON object of strings (prompt arguments, completion context), or why not.
pub fn string_map(json: &str, what: &str) -> Result<serde_json::Map<String, serde_json::Value>> {
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|_| McpError::InvalidArguments(format!("{what} are not JSON")))?;
    let serde_json::Value::Object(map) = value else {
        return Err(McpError::InvalidArguments(format!("{what} must be an object of strings")));
    };
    if let Some((name, _)) = map.iter().find(|(_, v)| !v.is_string()) {
        return Err(McpError::InvalidArguments(format!("{what}: the value of {name:?} is not a string")));
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[test]
    fn a_page_keeps_good_items_and_counts_bad_ones() {
        #[derive(Deserialize, Debug)]
        struct Item {
            #[allow(dead_code)]
            name: String,
        }
        let mut listed: Listed<Item> = Listed { items: Vec::new(), skipped: 0 };
        let next = listed
            .accept(
                "prompts/list",
                "prompts",
                r#"{"prompts":[{"name":"a"},{"name":null},{"name":"b"}],"nextCursor":"c2"}"#,
            )
            .unwrap();
        assert_eq!((listed.items.len(), listed.skipped, next.as_deref()), (2, 1, Some("c2")));
        assert_eq!(
            listed.accept("prompts/list", "prompts", r#"{"other":[]}"#).unwrap_err().code(),
            "mcp_protocol_error"
        );
        assert_eq!(
            listed.accept("prompts/list", "prompts", r#"{"prompts":{}}"#).unwrap_err().code(),
            "mcp_protocol_error"
        );
    }

    #[test]
    fn string_maps_refuse_what_is_not_an_object_of_strings() {
        assert_eq!(string_map(r#"{"a":"1"}"#, "arguments").unwrap().len(), 1);
        for bad in [r#"{"a":1}"#, "[]", "nope", r#""s""#] {
            assert_eq!(string_map(bad, "arguments").unwrap_err().code(), "mcp_invalid_arguments", "{bad}");
        }
    }
}
