//! Skills (SEP-2640) through the toolset: listed per server, loaded and read only from the server that
//! serves them. A skill's identity is the pair (this toolset's label for the server, its URI): two
//! servers serving `skill://refunds/SKILL.md` are two skills, and nothing here is keyed on the URI alone.
//!
//! - `listSkills` sends `skills/list` to the servers that declare the extension and reads no file.
//! - `loadSkill(server, uri)` is put to `policy.decide` (`kind: 'skill'`, `operation: 'load'`), takes the
//!   entry the last listing gave for that URI (or asks `skills/get` for one never listed), then reads
//!   and verifies SKILL.md (`session::skills::load`). The entry is then held: it is what the skill's
//!   files are verified against until the skill is loaded again or let go.
//! - `readSkillFile(server, uri, path)` resolves `path` against the held entry first (a file it does not
//!   list is a verification failure, and nothing is sent), is put to policy (`operation: 'read'`), and
//!   reads from the same server: a skill never causes a read on another server.
//!
//! Skill content is third-party text: it is returned to the host tagged with its server, and nothing
//! in it (frontmatter fields included) is acted on here.

use super::session::{json_string, FromServer};
use crate::guard::redact::shown_uri;
use super::Toolset;
use crate::error::{McpError, Result};
use crate::guard::policy;
use crate::limits::{MAX_HELD_SKILLS_PER_SERVER, MAX_LISTED_SKILLS_PER_SERVER};
use crate::session::resources::{Body, Contents, ReadResult};
use crate::session::skills::{self, Skill};
use crate::session::{self as requests};
use parking_lot::Mutex;
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// A server's skills as this toolset knows them: the entries of its last listing (what a load starts
/// from) and the skills loaded (what their files are verified against).
#[derive(Default)]
pub(crate) struct Skills {
    listed: Mutex<HashMap<String, Arc<Skill>>>,
    /// Loaded skills by URI, oldest first; at most `MAX_HELD_SKILLS_PER_SERVER`.
    held: Mutex<VecDeque<Arc<Skill>>>,
}

impl Skills {
    fn hold(&self, skill: Arc<Skill>) {
        let mut held = self.held.lock();
        held.retain(|s| s.uri != skill.uri);
        if held.len() >= MAX_HELD_SKILLS_PER_SERVER {
            held.pop_front();
        }
        held.push_back(skill);
    }

    fn held(&self, uri: &str) -> Option<Arc<Skill>> {
        self.held.lock().iter().find(|s| s.uri == uri).cloned()
    }
}

/// A loaded skill: its entry and SKILL.md's verified text, from `server`.
#[derive(Debug, Serialize)]
pub struct LoadedSkill {
    pub server: String,
    #[serde(flatten)]
    pub skill: Arc<Skill>,
    /// SKILL.md as the server served it (frontmatter included), verified against the entry.
    pub instructions: String,
}

impl Toolset {
    /// Every server's skills (or `server`'s), from `skills/list`; no file is read. Each server's listing
    /// replaces what a later load starts from (an empty one too). An entry whose URI came earlier in the
    /// same listing, or past `MAX_LISTED_SKILLS_PER_SERVER`, is left out and counted as skipped: what the
    /// host is shown is what a load uses.
    pub async fn list_skills(&self, server: Option<&str>) -> Result<Vec<FromServer<Arc<Skill>>>> {
        self.list_each(server, "skills", |slot, c, o| {
            Box::pin(async move {
                let listed = skills::list(c, &o).await?;
                let mut kept: HashMap<String, Arc<Skill>> = HashMap::new();
                let mut items = Vec::new();
                let mut skipped = listed.skipped;
                for skill in listed.items {
                    if kept.len() >= MAX_LISTED_SKILLS_PER_SERVER || kept.contains_key(&skill.uri) {
                        skipped += 1;
                        continue;
                    }
                    let skill = Arc::new(skill);
                    kept.insert(skill.uri.clone(), skill.clone());
                    items.push(skill);
                }
                *slot.skills.listed.lock() = kept;
                Ok(requests::Listed { items, skipped })
            })
        })
        .await
    }

    /// Load the skill at `uri` on `server`: policy, then its entry, then SKILL.md read and verified.
    pub async fn load_skill(&self, server: &str, uri: &str) -> Result<LoadedSkill> {
        let slot = self.slot(server)?;
        let outcome = async {
            let known = slot.skills.listed.lock().get(uri).cloned();
            // The name is the URI's last skill-path segment (an entry whose name differs is refused), so a
            // policy deciding by name sees it for a skill never listed too.
            let name = skills::name_in(uri).ok_or_else(|| McpError::InvalidArguments(format!("{} is not the URI of a SKILL.md under a skill path", shown_uri(uri))))?;
            let details = format!("\"uri\":{},\"name\":{}", json_string(uri), json_string(name));
            let request = policy::session_request_json("skill", "load", server, &details);
            let connection = self.gated(slot, Some((&format!("the skill {}", shown_uri(uri)), request)), None).await?;
            requests::require(&connection.session, "skills", server, "skills/get")?;
            let skill = match known {
                Some(skill) => skill,
                None => Arc::new(skills::get(&connection, uri, &self.opts(None)).await?),
            };
            let instructions = skills::load(&connection, &skill, &self.opts(None)).await?;
            slot.skills.hold(skill.clone());
            Ok(LoadedSkill { server: server.to_owned(), skill, instructions })
        };
        outcome.await.map_err(|e: McpError| self.caller_error(slot, "skills/get", e))
    }

    /// Read the file `path` (relative to the skill's directory, or its URI) of the skill loaded from
    /// `server` at `uri`, verified against the held entry.
    pub async fn read_skill_file(&self, server: &str, uri: &str, path: &str) -> Result<ReadResult> {
        let slot = self.slot(server)?;
        let outcome = async {
            let skill = slot
                .skills
                .held(uri)
                .ok_or_else(|| McpError::InvalidArguments(format!("the skill {} is not loaded from {server}: load it first", shown_uri(uri))))?;
            let file = skill.file(path)?;
            let details = format!("\"uri\":{},\"name\":{},\"file\":{}", json_string(uri), json_string(skill.name()), json_string(&file.uri));
            let request = policy::session_request_json("skill", "read", server, &details);
            let connection = self.gated(slot, Some((&format!("the skill file {}", shown_uri(&file.uri)), request)), None).await?;
            requests::require(&connection.session, "skills", server, "resources/read of a skill file")?;
            let (bytes, mime_type) = skills::read_verified(&connection, file, &self.opts(None)).await?;
            // Verified bytes: text when they are UTF-8, else a blob.
            let body = match String::from_utf8(bytes) {
                Ok(text) => Body::Text(text),
                Err(e) => Body::Blob(e.into_bytes()),
            };
            Ok(ReadResult { contents: vec![Contents { uri: file.uri.clone(), mime_type, body }] })
        };
        outcome.await.map_err(|e: McpError| self.caller_error(slot, "resources/read", e))
    }
}
