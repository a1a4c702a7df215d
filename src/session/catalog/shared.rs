//! Catalogues shared by content. A multi-tenant process holds one toolset per user session, each
//! listing the same few servers: the same `tools/list` bytes, projected once per session, made every
//! session hold its own copy of every description and schema. Here a listing is addressed by the
//! SHA-256 of the server's identity, the era it was read in and every page's bytes; toolsets whose
//! listing has the same address share one set of [`ToolTexts`] (descriptions and schemas as text),
//! read-only.
//!
//! - Only identical bytes from the same server identity (kind and command or URL) share: a server that
//!   lists per-user tools gives each user a different address, hence texts of their own.
//! - What is shared is what the server published, nothing a toolset decides: names, filters, disclosure
//!   tiers, quarantine and the drift baseline (per store) stay each toolset's own.
//! - An entry lives while a toolset's projection holds it (`ServerView::catalogue`); the registry keeps
//!   only weak references.

use crate::projection::{ProjectedTool, ToolTexts};
use crate::protocol::mcp::Tool;
use crate::shared_state::WeakRegistry;
use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, Weak};

/// One catalogue's texts, by tool name.
pub struct SharedTexts {
    by_name: HashMap<String, ToolTexts>,
    /// The tools as projected, shared by the toolsets that show one alike (same projected name on a server
    /// of the same name), held weakly: a process with a thousand sessions on a server holds each once.
    shown: Mutex<Shown>,
}

#[derive(Default)]
struct Shown {
    /// By a hash of (tool, projected name, server name), checked against the projection on use.
    by_key: HashMap<u64, Weak<ProjectedTool>>,
    /// The size at which dead entries are swept next (amortized: twice the live ones).
    sweep_at: usize,
}

impl std::fmt::Debug for SharedTexts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedTexts").field("tools", &self.by_name.len()).finish()
    }
}

impl SharedTexts {
    pub fn get(&self, name: &str) -> Option<&ToolTexts> {
        self.by_name.get(name)
    }

    /// `tool` (one of this catalogue's, with its `texts`) projected as `name` on server `server`: the same
    /// `Arc` another toolset showing it alike holds, or a new one. Read-only either way; a toolset's own
    /// decisions (quarantine, a disclosure tier) make a projection of its own instead.
    pub fn projected(&self, texts: &ToolTexts, name: String, server: &str, tool: &Tool) -> Arc<ProjectedTool> {
        let mut shown = self.shown.lock();
        let key = shown.by_key.hasher().hash_one((&tool.name, &name, server));
        let alike = |p: &Arc<ProjectedTool>| {
            p.name == name
                && p.server == server
                && p.remote_name == tool.name
                && p.title == tool.title
                && p.ui == tool.ui
                && p.texts_id == texts.shared_id
        };
        if let Some(found) = shown.by_key.get(&key).and_then(Weak::upgrade).filter(alike) {
            return found;
        }
        let made = Arc::new(ProjectedTool::with_texts(name, server, tool, texts));
        if shown.by_key.len() >= shown.sweep_at {
            shown.by_key.retain(|_, weak| weak.strong_count() > 0);
            // A dead entry still holds its projection's allocation (a `Weak`'s): give back what a peak left.
            let live = shown.by_key.len();
            shown.by_key.shrink_to(live * 2);
            shown.sweep_at = (live * 2).max(64);
        }
        shown.by_key.insert(key, Arc::downgrade(&made));
        made
    }
}

/// The address of a listing, fed page by page as it is read.
pub struct ListingAddress(Sha256);

impl ListingAddress {
    pub fn new(identity: &str, modern: bool) -> Self {
        let mut hasher = Sha256::new();
        hasher.update((identity.len() as u64).to_le_bytes());
        hasher.update(identity.as_bytes());
        hasher.update([u8::from(modern)]);
        ListingAddress(hasher)
    }

    pub fn page(&mut self, page: &str) {
        // Length-prefixed: page boundaries are part of the address.
        self.0.update((page.len() as u64).to_le_bytes());
        self.0.update(page.as_bytes());
    }

    fn finish(self) -> [u8; 32] {
        self.0.finalize().into()
    }
}

/// The catalogues' texts in use, by address (see `shared_state`).
static SHARED: WeakRegistry<[u8; 32], SharedTexts> = WeakRegistry::new();

/// The texts of the catalogue at `address`, whose tools (as this listing parsed them) are `tools`: the
/// entry another toolset made already, or a new one.
pub fn texts_for(address: ListingAddress, tools: &[Tool]) -> Arc<SharedTexts> {
    let made = || -> Result<_, std::convert::Infallible> {
        Ok(Arc::new(SharedTexts {
            by_name: tools.iter().map(|t| (t.name.clone(), ToolTexts::shared(t))).collect(),
            shown: Mutex::default(),
        }))
    };
    let Ok(texts) = SHARED.get_or_make(address.finish(), made);
    texts
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools(page: &str) -> Vec<Tool> {
        serde_json::from_value(serde_json::from_str::<serde_json::Value>(page).unwrap()["tools"].clone()).unwrap()
    }

    fn shared(identity: &str, modern: bool, pages: &[&str]) -> Arc<SharedTexts> {
        let mut address = ListingAddress::new(identity, modern);
        pages.iter().for_each(|p| address.page(p));
        texts_for(address, &pages.iter().flat_map(|p| tools(p)).collect::<Vec<_>>())
    }

    const PAGE: &str = r#"{"tools":[{"name":"search","description":"Search the web.","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}}}]}"#;

    #[test]
    fn projections_are_shared_when_alike_and_their_memory_is_swept() {
        let catalogue = shared("projections-test", false, &[PAGE]);
        let tool = &tools(PAGE)[0];
        let texts = catalogue.get("search").unwrap();
        let first = catalogue.projected(texts, "web__search".into(), "web", tool);
        assert!(Arc::ptr_eq(&first, &catalogue.projected(texts, "web__search".into(), "web", tool)));
        assert!(
            !Arc::ptr_eq(&first, &catalogue.projected(texts, "web__search".into(), "web2", tool)),
            "another server name"
        );
        assert!(
            !Arc::ptr_eq(&first, &catalogue.projected(texts, "web_1__search".into(), "web", tool)),
            "another projected name"
        );
        // Projections nobody holds any more do not pile up.
        for n in 0..10_000 {
            drop(catalogue.projected(texts, format!("s{n}__search"), &format!("s{n}"), tool));
        }
        assert!(catalogue.shown.lock().by_key.len() <= 128, "{}", catalogue.shown.lock().by_key.len());
        assert!(
            Arc::ptr_eq(&first, &catalogue.projected(texts, "web__search".into(), "web", tool)),
            "a live one survives the sweeps"
        );
    }

    #[test]
    fn the_same_bytes_from_the_same_server_share_one_copy() {
        let a = shared(r#"["streamable-http","https://shared.test/mcp"]"#, false, &[PAGE]);
        let b = shared(r#"["streamable-http","https://shared.test/mcp"]"#, false, &[PAGE]);
        assert!(Arc::ptr_eq(&a, &b));
        let (ta, tb) = (a.get("search").unwrap(), b.get("search").unwrap());
        assert_eq!(ta.input_schema.get(), r#"{"properties":{"q":{"type":"string"}},"type":"object"}"#);
        assert!(std::ptr::eq(ta.input_schema.get(), tb.input_schema.get()), "one schema text in memory");
    }

    #[test]
    fn another_server_another_listing_or_another_era_never_share() {
        let base = shared(r#"["streamable-http","https://one.test/mcp"]"#, false, &[PAGE]);
        let other_server = shared(r#"["streamable-http","https://two.test/mcp"]"#, false, &[PAGE]);
        assert!(!Arc::ptr_eq(&base, &other_server), "never across server identities");
        let per_user = PAGE.replace("Search the web.", "Search alice's mail.");
        let other_listing = shared(r#"["streamable-http","https://one.test/mcp"]"#, false, &[&per_user]);
        assert!(!Arc::ptr_eq(&base, &other_listing), "a different listing gets its own");
        assert_eq!(&*other_listing.get("search").unwrap().description, "Search alice's mail.");
        assert_eq!(&*base.get("search").unwrap().description, "Search the web.");
        let other_era = shared(r#"["streamable-http","https://one.test/mcp"]"#, true, &[PAGE]);
        assert!(!Arc::ptr_eq(&base, &other_era));
        // The same tools split into pages differently is another listing.
        let page = |names: &[&str]| {
            json!({ "tools": names.iter().map(|n| json!({ "name": n, "inputSchema": { "type": "object" } })).collect::<Vec<_>>() }).to_string()
        };
        let one = shared("x", false, &[&page(&["a", "b"])]);
        let two = shared("x", false, &[&page(&["a"]), &page(&["b"])]);
        assert!(!Arc::ptr_eq(&one, &two));
    }

    #[test]
    fn a_shared_schema_measures_as_the_disclosure_budget_would() {
        for schema in [
            json!({ "type": "object" }),
            json!({ "type": "object", "properties": { "q": { "type": "string", "description": "Requête — \"quoted\" \n 検索 😀" } } }),
        ] {
            let tool: Tool = serde_json::from_value(json!({ "name": "t", "inputSchema": schema })).unwrap();
            let texts = ToolTexts::of(&tool);
            assert_eq!(texts.schema_tokens, crate::projection::disclosure::schema_tokens(&schema));
        }
    }

    #[test]
    fn an_entry_lives_only_while_a_toolset_holds_it() {
        let first = shared("held-test", false, &[PAGE]);
        let weak = Arc::downgrade(&first);
        drop(first);
        assert!(weak.upgrade().is_none(), "the registry keeps nothing alive");
        assert_eq!(Arc::strong_count(&shared("held-test", false, &[PAGE])), 1);
    }
}
