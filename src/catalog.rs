//! Tool discovery: `tools/list` followed page by page under bounds, with a per-server sanity check of
//! what the server published.

use crate::connection::{Connection, RequestOptions};
use crate::error::{McpError, Result};
use crate::limits::{MAX_LIST_PAGES, MAX_TOOLS_PER_SERVER};
use crate::protocol::mcp::{self, ListToolsPage, Tool};
use std::collections::HashSet;

/// A tool the catalog left out, and why. Reported as a diagnostic; the rest of the server still loads.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    pub tool: String,
    pub reason: &'static str,
}

#[derive(Debug, Default)]
pub struct Listing {
    pub tools: Vec<Tool>,
    pub rejected: Vec<Rejected>,
}

/// List every tool of a server. A repeated cursor, too many pages or too many tools is an error:
/// a server that does that is broken or hostile, and a partial catalog would mislead.
pub async fn list_tools(connection: &Connection, opts: &RequestOptions<'_>) -> Result<Listing> {
    let mut pages = Pages::default();
    let mut cursor: Option<String> = None;
    loop {
        let params = mcp::list_tools_params(cursor.as_deref());
        let raw = connection.request("tools/list", params.as_deref(), opts).await?;
        let page: ListToolsPage = serde_json::from_str(raw.get())
            .map_err(|e| McpError::Protocol(format!("tools/list returned a malformed result: {e}")))?;
        cursor = pages.accept(page)?;
        if cursor.is_none() {
            return Ok(pages.finish());
        }
    }
}

/// The bookkeeping of a paginated listing, apart from the I/O so it can be tested alone.
#[derive(Default)]
struct Pages {
    count: usize,
    cursors: HashSet<String>,
    tools: Vec<Tool>,
}

impl Pages {
    fn accept(&mut self, page: ListToolsPage) -> Result<Option<String>> {
        self.count += 1;
        self.tools.extend(page.tools);
        if self.tools.len() > MAX_TOOLS_PER_SERVER {
            return Err(McpError::Protocol(format!(
                "server published more than {MAX_TOOLS_PER_SERVER} tools; refusing the catalog"
            )));
        }
        let Some(next) = page.next_cursor else { return Ok(None) };
        if !self.cursors.insert(next.clone()) {
            return Err(McpError::Protocol(format!("tools/list repeated the cursor {next:?}; refusing a pagination loop")));
        }
        if self.count >= MAX_LIST_PAGES {
            return Err(McpError::Protocol(format!("tools/list did not finish within {MAX_LIST_PAGES} pages")));
        }
        Ok(Some(next))
    }

    fn finish(self) -> Listing {
        let mut seen = HashSet::new();
        let mut listing = Listing::default();
        for tool in self.tools {
            let reason = if tool.name.is_empty() {
                Some("the tool has an empty name")
            } else if !seen.insert(tool.name.clone()) {
                Some("the server listed this tool name more than once; the first is kept")
            } else if !tool.input_schema.is_object() {
                Some("the tool's inputSchema is not a JSON object")
            } else {
                None
            };
            match reason {
                Some(reason) => listing.rejected.push(Rejected { tool: tool.name, reason }),
                None => listing.tools.push(tool),
            }
        }
        listing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(names: &[&str], next: Option<&str>) -> ListToolsPage {
        let tools = names
            .iter()
            .map(|n| serde_json::from_value(serde_json::json!({ "name": n, "inputSchema": { "type": "object" } })).unwrap())
            .collect();
        ListToolsPage { tools, next_cursor: next.map(str::to_owned) }
    }

    #[test]
    fn follows_cursors_and_refuses_a_repeat() {
        let mut pages = Pages::default();
        assert_eq!(pages.accept(page(&["a"], Some("c1"))).unwrap().as_deref(), Some("c1"));
        assert_eq!(pages.accept(page(&["b"], Some("c2"))).unwrap().as_deref(), Some("c2"));
        let err = pages.accept(page(&["c"], Some("c1"))).unwrap_err();
        assert!(err.to_string().contains("repeated the cursor"), "{err}");
    }

    #[test]
    fn stops_at_the_page_cap() {
        let mut pages = Pages::default();
        let mut result = Ok(None);
        for i in 0..=MAX_LIST_PAGES {
            result = pages.accept(page(&[], Some(&format!("c{i}"))));
            if result.is_err() {
                break;
            }
        }
        assert_eq!(pages.count, MAX_LIST_PAGES);
        assert_eq!(result.unwrap_err().code(), "mcp_protocol_error");
    }

    #[test]
    fn rejects_duplicates_empty_names_and_bad_schemas() {
        let mut pages = Pages::default();
        let mut p = page(&["a", "a", ""], None);
        p.tools.push(serde_json::from_value(serde_json::json!({ "name": "s", "inputSchema": "nope" })).unwrap());
        pages.accept(p).unwrap();
        let listing = pages.finish();
        assert_eq!(listing.tools.len(), 1);
        assert_eq!(listing.rejected.len(), 3);
    }
}
