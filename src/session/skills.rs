//! Skills (SEP-2640, the `io.modelcontextprotocol/skills` extension): `skills/list` and `skills/get`
//! give entries — a skill's SKILL.md URI, its frontmatter verbatim, and the manifest of its files with
//! SHA-256 digests and sizes — and the files themselves are resources, read with `resources/read`.
//!
//! What this file guarantees, as the extension asks of a host:
//! - **Entries are checked before anything is read**: the shape, the URI (ending in `/SKILL.md`, its last
//!   skill-path segment the frontmatter's `name`), the manifest (SKILL.md listed, every file inside the
//!   skill's directory, each once, digests `sha256:` + 64 lowercase hex) and the limits
//!   (`MAX_SKILL_FILES`, `MAX_SKILL_BYTES`). An entry that fails is not loadable ([`McpError::SkillInvalid`]);
//!   so is a `"dynamic"` one, which has no digests to verify against.
//! - **Lazy retrieval**: listing reads no file. SKILL.md is read when the skill is loaded, a supporting
//!   file when it is asked for.
//! - **Verification on every read**: the bytes' length against `size`, then their SHA-256 against
//!   `digest`, then (SKILL.md) its YAML frontmatter compared field by field with the entry's. Any
//!   mismatch is [`McpError::SkillVerificationFailed`] and the content is dropped, never returned.
//! - **Only listed files**: a file of a loaded skill is resolved against the held entry; one it does not
//!   list is a verification failure, and nothing is sent for it.
//!
//! Which server a skill belongs to, and who may read it, is the toolset's (`toolset::skills`).

use super::resources::{self, Body};
use super::{list_all, Listed};
use crate::error::{McpError, Result};
use crate::guard::redact::shown_uri;
use crate::limits::{MAX_FRONTMATTER_BYTES, MAX_FRONTMATTER_DEPTH, MAX_SKILL_BYTES, MAX_SKILL_FILES};
use crate::session::connection::{Connection, RequestOptions};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::collections::HashSet;

pub use crate::protocol::mcp::SKILLS_EXTENSION;
const SKILL_FILE: &str = "SKILL.md";

/// A checked skill entry: loadable as far as the entry alone can tell.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "WireSkill")]
pub struct Skill {
    /// The URI of its SKILL.md.
    pub uri: String,
    /// The SKILL.md frontmatter as the server rendered it (`name` and `description` strings among it).
    pub frontmatter: Map<String, Value>,
    /// Every file of the skill, SKILL.md first.
    pub files: Vec<SkillFile>,
}

/// One file of a skill's manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillFile {
    pub uri: String,
    pub digest: [u8; 32],
    pub size: u64,
}

#[derive(Deserialize)]
struct WireSkill {
    uri: Value,
    frontmatter: Value,
    #[serde(default)]
    resources: Option<Value>,
}

#[derive(Deserialize)]
struct WireFile {
    uri: String,
    digest: String,
    size: u64,
}

impl TryFrom<WireSkill> for Skill {
    type Error = String;

    fn try_from(wire: WireSkill) -> std::result::Result<Skill, String> {
        let Value::String(uri) = wire.uri else { return Err("its uri is not a string".into()) };
        let Value::Object(frontmatter) = wire.frontmatter else {
            return Err("its frontmatter is not an object".into());
        };
        let text = |field: &str| frontmatter.get(field).and_then(Value::as_str).filter(|s| !s.is_empty());
        let (Some(name), Some(_)) = (text("name"), text("description")) else {
            return Err("its frontmatter lacks a name or a description".into());
        };
        let root = skill_root(&uri).ok_or("its uri does not name a SKILL.md under a skill path")?;
        if root.rsplit('/').next() != Some(name) {
            return Err("the last segment of its skill path is not its name".into());
        }
        let files = match wire.resources {
            Some(Value::String(dynamic)) if dynamic == "dynamic" => {
                return Err("its content is \"dynamic\": it has no digests to verify against, and mcpferry loads only verifiable skills".into())
            }
            Some(Value::Array(items)) => items,
            Some(_) => return Err("its resources are neither an array nor \"dynamic\"".into()),
            None => return Err("it has no resources".into()),
        };
        if files.len() > MAX_SKILL_FILES {
            return Err(format!("it lists {} files, over the {MAX_SKILL_FILES} a skill may have", files.len()));
        }
        let inside = format!("{root}/");
        let mut seen = HashSet::new();
        let mut checked = Vec::with_capacity(files.len());
        let mut total: u64 = 0;
        for item in files {
            let file: WireFile =
                serde_json::from_value(item).map_err(|_| "a file of its manifest is malformed".to_owned())?;
            let digest = parse_digest(&file.digest)
                .ok_or("a file of its manifest has a digest that is not sha256: and 64 lowercase hex digits")?;
            let within = file.uri == uri || file.uri.strip_prefix(&inside).is_some_and(is_plain_path);
            if !within {
                return Err("its manifest lists a file outside the skill's directory".into());
            }
            if !seen.insert(file.uri.clone()) {
                return Err("its manifest lists a file twice".into());
            }
            total = total.saturating_add(file.size);
            checked.push(SkillFile { uri: file.uri, digest, size: file.size });
        }
        if total > MAX_SKILL_BYTES {
            return Err(format!("its files come to {total} bytes, over the {MAX_SKILL_BYTES} a skill may have"));
        }
        let Some(at) = checked.iter().position(|f| f.uri == uri) else {
            return Err("its manifest does not list its SKILL.md".into());
        };
        checked.swap(0, at);
        Ok(Skill { uri, frontmatter, files: checked })
    }
}

impl Skill {
    pub fn name(&self) -> &str {
        self.frontmatter.get("name").and_then(Value::as_str).unwrap_or_default()
    }

    pub fn description(&self) -> &str {
        self.frontmatter.get("description").and_then(Value::as_str).unwrap_or_default()
    }

    /// The skill's directory: its SKILL.md URI without `/SKILL.md`.
    pub fn root(&self) -> &str {
        skill_root(&self.uri).unwrap_or_default()
    }

    /// The listed file `reference` names: a URI, or a path relative to the skill's directory
    /// (`references/FORMS.md`, `./SKILL.md`). A file the manifest does not list, or a path leaving the
    /// directory, is a verification failure: while a skill is loaded only its listed files are read.
    pub fn file(&self, reference: &str) -> Result<&SkillFile> {
        let uri = if reference.contains("://") {
            reference.to_owned()
        } else {
            let path = reference.trim_start_matches("./");
            if !is_plain_path(path) {
                return Err(McpError::InvalidArguments(
                    "a skill file is named by a path inside the skill's directory, without '..', '.' or empty segments"
                        .into(),
                ));
            }
            format!("{}/{path}", self.root())
        };
        self.files.iter().find(|f| f.uri == uri).ok_or_else(|| {
            McpError::SkillVerificationFailed(format!(
                "{} is not a file of the skill {} as it was loaded; nothing was read",
                shown_uri(&uri),
                shown(self.name())
            ))
        })
    }

    /// A file's path inside the skill's directory (`SKILL.md`, `references/FORMS.md`).
    pub fn path_of<'a>(&self, file: &'a SkillFile) -> &'a str {
        file.uri.strip_prefix(self.root()).and_then(|p| p.strip_prefix('/')).unwrap_or(&file.uri)
    }
}

impl Serialize for Skill {
    /// `{uri, name, description, frontmatter, files: [{path, uri, size, digest}]}`.
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct File<'a> {
            path: &'a str,
            uri: &'a str,
            size: u64,
            digest: String,
        }
        #[derive(Serialize)]
        struct Entry<'a> {
            uri: &'a str,
            name: &'a str,
            description: &'a str,
            frontmatter: &'a Map<String, Value>,
            files: Vec<File<'a>>,
        }
        let files = self
            .files
            .iter()
            .map(|f| File {
                path: self.path_of(f),
                uri: &f.uri,
                size: f.size,
                digest: format!("sha256:{}", hex(&f.digest)),
            })
            .collect();
        Entry {
            uri: &self.uri,
            name: self.name(),
            description: self.description(),
            frontmatter: &self.frontmatter,
            files,
        }
        .serialize(serializer)
    }
}

/// `skills/list`, every page (bounded as every listing is). Entries that fail the checks are left out
/// and counted in `skipped`.
pub async fn list(connection: &Connection, opts: &RequestOptions<'_>) -> Result<Listed<Skill>> {
    list_all(connection, "skills/list", "skills", opts).await
}

/// `skills/get` of `uri`: the server's current entry for it, checked. A URI it serves no skill at is
/// `mcp_resource_not_found` (the server's `-32602`).
pub async fn get(connection: &Connection, uri: &str, opts: &RequestOptions<'_>) -> Result<Skill> {
    #[derive(Deserialize)]
    struct Got {
        skill: Option<Box<serde_json::value::RawValue>>,
    }
    let params = serde_json::json!({ "uri": uri }).to_string();
    let raw = connection.request_named("skills/get", uri, &params, opts).await.map_err(|e| match e {
        McpError::Rpc { code: -32602, .. } => {
            McpError::ResourceNotFound(format!("the server serves no skill at {}", shown_uri(uri)))
        }
        other => other,
    })?;
    let got: Got = serde_json::from_str(raw.get())
        .map_err(|_| McpError::Protocol("skills/get returned a malformed result".into()))?;
    let entry = got.skill.ok_or_else(|| McpError::Protocol("skills/get returned a result without a skill".into()))?;
    let wire: WireSkill = serde_json::from_str(entry.get())
        .map_err(|_| McpError::SkillInvalid(format!("the entry of {} is malformed", shown_uri(uri))))?;
    let skill = Skill::try_from(wire)
        .map_err(|why| McpError::SkillInvalid(format!("the skill at {} cannot be loaded: {why}", shown_uri(uri))))?;
    if skill.uri != uri {
        return Err(McpError::SkillInvalid(format!(
            "skills/get for {} answered with another skill's entry",
            shown_uri(uri)
        )));
    }
    Ok(skill)
}

/// Reads `skill`'s SKILL.md and verifies it (size, digest, frontmatter): its text, ready to be loaded.
pub async fn load(connection: &Connection, skill: &Skill, opts: &RequestOptions<'_>) -> Result<String> {
    let (bytes, _) = read_verified(connection, &skill.files[0], opts).await?;
    let text = String::from_utf8(bytes).map_err(|_| {
        McpError::SkillVerificationFailed(format!("the SKILL.md of {} is not UTF-8 text", shown(skill.name())))
    })?;
    let frontmatter = parse_frontmatter(&text).ok_or_else(|| {
        McpError::SkillVerificationFailed(format!(
            "the SKILL.md of {} does not begin with YAML frontmatter that parses (within {MAX_FRONTMATTER_BYTES} bytes and {MAX_FRONTMATTER_DEPTH} levels)",
            shown(skill.name())
        ))
    })?;
    let differing = differing_fields(&frontmatter, &skill.frontmatter);
    if !differing.is_empty() {
        let fields: Vec<String> = differing.iter().take(8).map(|f| shown(f)).collect();
        return Err(McpError::SkillVerificationFailed(format!(
            "the SKILL.md of {} has frontmatter that differs from its entry's ({}): the skill was not loaded",
            shown(skill.name()),
            fields.join(", ")
        )));
    }
    Ok(text)
}

/// Reads `file` with `resources/read` and verifies its bytes against the manifest: the bytes and the
/// MIME type the server gave. Text contents count as their UTF-8 bytes, blobs as their decoded bytes.
pub async fn read_verified(
    connection: &Connection,
    file: &SkillFile,
    opts: &RequestOptions<'_>,
) -> Result<(Vec<u8>, Option<String>)> {
    let read = resources::read(connection, &file.uri, None, opts).await?;
    let mut contents = read.contents.into_iter();
    let first = contents.next();
    let item = match (first, contents.next()) {
        (Some(item), None) => item,
        (None, _) => {
            return Err(McpError::SkillVerificationFailed(format!(
                "the read of {} returned no contents",
                shown_uri(&file.uri)
            )))
        }
        (Some(_), Some(_)) => {
            return Err(McpError::SkillVerificationFailed(format!(
                "the read of {} returned more than one content item",
                shown_uri(&file.uri)
            )))
        }
    };
    let bytes = match item.body {
        Body::Text(text) => text.into_bytes(),
        Body::Blob(bytes) => bytes,
    };
    verify(file, &bytes)?;
    Ok((bytes, item.mime_type))
}

/// Whether `bytes` are `file` as its entry describes it: the size first (a differing size fails without
/// hashing), then the SHA-256 digest.
pub fn verify(file: &SkillFile, bytes: &[u8]) -> Result<()> {
    if bytes.len() as u64 != file.size {
        return Err(McpError::SkillVerificationFailed(format!(
            "{} is {} bytes where its entry says {}: not used",
            shown_uri(&file.uri),
            bytes.len(),
            file.size
        )));
    }
    if Sha256::digest(bytes).as_slice() != file.digest {
        return Err(McpError::SkillVerificationFailed(format!(
            "{} does not match the SHA-256 digest of its entry: not used",
            shown_uri(&file.uri)
        )));
    }
    Ok(())
}

/// A SKILL.md's YAML frontmatter as JSON: after an optional byte-order mark, a `---` line, the YAML, and
/// a closing `---` line. None when there is none, it does not parse, or it is not a mapping.
pub fn parse_frontmatter(text: &str) -> Option<Map<String, Value>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text.strip_prefix("---\n").or_else(|| text.strip_prefix("---\r\n"))?;
    // The closing delimiter: a line of `---` (trailing spaces or tabs allowed) ending the block.
    let mut offset = 0;
    let yaml = loop {
        let line_end = rest[offset..].find('\n').map(|i| offset + i);
        let line = &rest[offset..line_end.unwrap_or(rest.len())];
        if line.trim_end_matches(['\r', ' ', '\t']) == "---" && line.starts_with("---") {
            break rest[..offset].strip_suffix('\n').map(|y| y.strip_suffix('\r').unwrap_or(y)).unwrap_or("");
        }
        offset = line_end? + 1;
    };
    if yaml.len() > MAX_FRONTMATTER_BYTES || !nesting_within(yaml, MAX_FRONTMATTER_DEPTH) {
        return None;
    }
    use saphyr::LoadableYamlNode;
    let mut documents = saphyr::YamlOwned::load_from_str(yaml).ok()?;
    if documents.len() != 1 {
        return None;
    }
    match yaml_to_json(documents.pop()?, 0)? {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// Whether `yaml` parses and nests no deeper than `max` levels, read as the parser's events: nothing is
/// built, so a deep block nesting (`- - - - …`, a level every two bytes) costs no recursion.
fn nesting_within(yaml: &str, max: usize) -> bool {
    use saphyr_parser::{Event, Parser};
    let mut depth = 0usize;
    for event in Parser::new_from_str(yaml) {
        match event {
            Ok((Event::SequenceStart(..) | Event::MappingStart(..), _)) => {
                depth += 1;
                if depth > max {
                    return false;
                }
            }
            Ok((Event::SequenceEnd | Event::MappingEnd, _)) => depth = depth.saturating_sub(1),
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    true
}

fn yaml_to_json(node: saphyr::YamlOwned, depth: usize) -> Option<Value> {
    use saphyr::{ScalarOwned, YamlOwned};
    if depth > MAX_FRONTMATTER_DEPTH {
        return None;
    }
    Some(match node {
        YamlOwned::Value(scalar) => match scalar {
            ScalarOwned::Null => Value::Null,
            ScalarOwned::Boolean(b) => Value::Bool(b),
            ScalarOwned::Integer(i) => Value::from(i),
            ScalarOwned::FloatingPoint(f) => serde_json::Number::from_f64(f.into_inner()).map(Value::Number)?,
            ScalarOwned::String(s) => Value::String(s),
        },
        YamlOwned::Sequence(items) => {
            Value::Array(items.into_iter().map(|i| yaml_to_json(i, depth + 1)).collect::<Option<_>>()?)
        }
        YamlOwned::Mapping(entries) => {
            let mut map = Map::new();
            for (key, value) in entries {
                let key = match key {
                    YamlOwned::Value(ScalarOwned::String(s)) => s,
                    YamlOwned::Value(ScalarOwned::Integer(i)) => i.to_string(),
                    YamlOwned::Value(ScalarOwned::Boolean(b)) => b.to_string(),
                    _ => return None,
                };
                map.insert(key, yaml_to_json(value, depth + 1)?);
            }
            Value::Object(map)
        }
        // A tag (`!!str 1`) does not change what the value is compared as.
        YamlOwned::Tagged(_, inner) => yaml_to_json(*inner, depth + 1)?,
        YamlOwned::Representation(text, _, _) => Value::String(text),
        YamlOwned::Alias(_) | YamlOwned::BadValue => return None,
    })
}

/// The top-level fields where the two frontmatters differ (a field missing on one side counts as null,
/// numbers compare by value: YAML's `1.0` is JSON's `1`).
fn differing_fields(file: &Map<String, Value>, entry: &Map<String, Value>) -> Vec<String> {
    let mut fields: Vec<&String> = file.keys().chain(entry.keys().filter(|k| !file.contains_key(*k))).collect();
    fields.sort();
    fields
        .into_iter()
        .filter(|f| !same(file.get(*f).unwrap_or(&Value::Null), entry.get(*f).unwrap_or(&Value::Null)))
        .cloned()
        .collect()
}

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64().is_some_and(|x| y.as_f64() == Some(x)),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// The skill name a SKILL.md URI carries: its last skill-path segment.
pub fn name_in(uri: &str) -> Option<&str> {
    skill_root(uri)?.rsplit('/').next()
}

/// `scheme://<skill-path>` of a `…/SKILL.md` URI with at least one skill-path segment.
fn skill_root(uri: &str) -> Option<&str> {
    let (scheme, rest) = uri.split_once("://")?;
    let root = uri.strip_suffix(SKILL_FILE)?.strip_suffix('/')?;
    let path = rest.strip_suffix(SKILL_FILE)?.strip_suffix('/')?;
    (!scheme.is_empty() && !path.is_empty() && is_plain_path(path)).then_some(root)
}

/// A relative path of non-empty segments, none `.` or `..` (nor their percent-encodings), with no
/// backslash, query, fragment or control character: one that stays inside the directory it is read in.
fn is_plain_path(path: &str) -> bool {
    let dots = |segment: &str| {
        let decoded = segment.to_ascii_lowercase().replace("%2e", ".");
        decoded == "." || decoded == ".."
    };
    !path.is_empty()
        && !path.chars().any(|c| c == '\\' || c == '?' || c == '#' || c.is_control())
        && !path.to_ascii_lowercase().contains("%2f")
        && !path.to_ascii_lowercase().contains("%5c")
        && path.split('/').all(|segment| !segment.is_empty() && !dots(segment))
}

fn parse_digest(text: &str) -> Option<[u8; 32]> {
    let hex = text.strip_prefix("sha256:")?;
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return None;
    }
    let mut digest = [0u8; 32];
    for (i, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(digest)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A server-given name or field for an error message, cut short.
fn shown(text: &str) -> String {
    let cut: String = text.chars().take(96).collect();
    format!("{cut:?}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const BODY: &str =
        "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\n---\n\nSkill body.\n";

    fn digest_of(bytes: &[u8]) -> String {
        format!("sha256:{}", hex(&Sha256::digest(bytes)))
    }

    fn entry(resources: Value) -> Value {
        json!({
            "uri": "skill://pdf-processing/SKILL.md",
            "frontmatter": { "name": "pdf-processing", "description": "Extract, fill, and assemble PDF documents" },
            "resources": resources,
        })
    }

    fn good() -> Value {
        entry(json!([
            { "uri": "skill://pdf-processing/references/FORMS.md", "digest": digest_of(b"Supporting content.\n"), "size": 20 },
            { "uri": "skill://pdf-processing/SKILL.md", "digest": digest_of(BODY.as_bytes()), "size": BODY.len() },
        ]))
    }

    fn checked(value: Value) -> std::result::Result<Skill, String> {
        serde_json::from_value::<Skill>(value).map_err(|e| e.to_string())
    }

    #[test]
    fn a_good_entry_is_checked_and_puts_its_skill_md_first() {
        let skill = checked(good()).unwrap();
        assert_eq!((skill.name(), skill.root()), ("pdf-processing", "skill://pdf-processing"));
        assert_eq!(skill.files[0].uri, skill.uri);
        assert_eq!(skill.file("references/FORMS.md").unwrap().size, 20);
        assert_eq!(skill.file("./SKILL.md").unwrap().uri, skill.uri);
        assert_eq!(skill.file("skill://pdf-processing/references/FORMS.md").unwrap().size, 20);
        let shown = serde_json::to_value(&skill).unwrap();
        assert_eq!(shown["files"][1]["path"], "references/FORMS.md");
        assert_eq!(shown["description"], "Extract, fill, and assemble PDF documents");
    }

    #[test]
    fn unlisted_and_escaping_files_are_refused_before_anything_is_read() {
        let skill = checked(good()).unwrap();
        assert_eq!(skill.file("references/OTHER.md").unwrap_err().code(), "mcp_skill_verification_failed");
        assert_eq!(skill.file("skill://other/SKILL.md").unwrap_err().code(), "mcp_skill_verification_failed");
        for bad in [
            "../x/SKILL.md",
            "a//b",
            "",
            "references/../SKILL.md",
            "%2e%2e/x",
            "references/%2E%2e/SKILL.md",
            "a\\..\\b",
            "a%2f..%2fb",
            "f?x=1",
            "f#frag",
            "a\u{0}b",
        ] {
            assert_eq!(skill.file(bad).unwrap_err().code(), "mcp_invalid_arguments", "{bad}");
        }
    }

    #[test]
    fn malformed_entries_and_those_over_the_limits_are_not_loadable() {
        let file = |uri: &str, size: u64| json!({ "uri": uri, "digest": digest_of(b""), "size": size });
        let skill_md = file("skill://pdf-processing/SKILL.md", 0);
        let cases = [
            ("dynamic", entry(json!("dynamic"))),
            (
                "no resources",
                json!({ "uri": "skill://pdf-processing/SKILL.md", "frontmatter": { "name": "pdf-processing", "description": "d" } }),
            ),
            ("resources an object", entry(json!({}))),
            ("SKILL.md unlisted", entry(json!([file("skill://pdf-processing/a.md", 1)]))),
            ("outside", entry(json!([skill_md.clone(), file("skill://other/a.md", 1)]))),
            ("dot-dot", entry(json!([skill_md.clone(), file("skill://pdf-processing/../other/a.md", 1)]))),
            ("twice", entry(json!([skill_md.clone(), skill_md.clone()]))),
            (
                "upper-case digest",
                entry(
                    json!([{ "uri": "skill://pdf-processing/SKILL.md", "digest": digest_of(b"").to_uppercase(), "size": 0 }]),
                ),
            ),
            (
                "short digest",
                entry(json!([{ "uri": "skill://pdf-processing/SKILL.md", "digest": "sha256:abc", "size": 0 }])),
            ),
            ("too big", entry(json!([skill_md.clone(), file("skill://pdf-processing/big.bin", MAX_SKILL_BYTES + 1)]))),
            (
                "name mismatch",
                json!({ "uri": "skill://other/SKILL.md", "frontmatter": { "name": "pdf-processing", "description": "d" }, "resources": [] }),
            ),
            (
                "no description",
                json!({ "uri": "skill://pdf-processing/SKILL.md", "frontmatter": { "name": "pdf-processing" }, "resources": [skill_md.clone()] }),
            ),
            (
                "not SKILL.md",
                json!({ "uri": "skill://pdf-processing/README.md", "frontmatter": { "name": "pdf-processing", "description": "d" }, "resources": [] }),
            ),
        ];
        for (why, value) in cases {
            assert!(checked(value).is_err(), "{why}");
        }
        let many: Vec<Value> = std::iter::once(skill_md.clone())
            .chain((0..MAX_SKILL_FILES).map(|i| file(&format!("skill://pdf-processing/f{i}"), 1)))
            .collect();
        assert!(checked(entry(Value::Array(many))).unwrap_err().contains("512"));
        let at_limit: Vec<Value> = std::iter::once(skill_md.clone())
            .chain((1..MAX_SKILL_FILES).map(|i| file(&format!("skill://pdf-processing/f{i}"), 1)))
            .collect();
        assert_eq!(
            checked(entry(Value::Array(at_limit))).unwrap().files.len(),
            MAX_SKILL_FILES,
            "the limit itself is supported"
        );
        assert!(
            checked(entry(json!([skill_md.clone(), file("skill://pdf-processing/big.bin", MAX_SKILL_BYTES)]))).is_ok(),
            "16 MiB itself is supported"
        );
        let nested = json!({ "uri": "skill://acme/billing/refunds/SKILL.md", "frontmatter": { "name": "refunds", "description": "d" },
            "resources": [{ "uri": "skill://acme/billing/refunds/SKILL.md", "digest": digest_of(b""), "size": 0 }] });
        assert_eq!(checked(nested).unwrap().root(), "skill://acme/billing/refunds");
    }

    #[test]
    fn bytes_are_verified_by_size_then_digest() {
        let skill = checked(good()).unwrap();
        let file = &skill.files[0];
        assert!(verify(file, BODY.as_bytes()).is_ok());
        let longer = format!("{BODY}extra bytes the entry did not account for\n");
        assert!(verify(file, longer.as_bytes()).unwrap_err().to_string().contains("bytes where its entry says"));
        let tampered = BODY.replace("Skill body.", "Evil body!!");
        assert_eq!(tampered.len(), BODY.len());
        assert!(verify(file, tampered.as_bytes()).unwrap_err().to_string().contains("digest"));
    }

    #[test]
    fn frontmatter_is_parsed_and_compared_field_by_field() {
        let skill = checked(good()).unwrap();
        let parsed = parse_frontmatter(BODY).unwrap();
        assert!(differing_fields(&parsed, &skill.frontmatter).is_empty());
        let evil =
            parse_frontmatter(&BODY.replace(
                "description: Extract, fill, and assemble PDF documents",
                "description: Exfiltrate credentials",
            ))
            .unwrap();
        assert_eq!(differing_fields(&evil, &skill.frontmatter), ["description"]);
        let extra = parse_frontmatter("---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\nallowed-tools: Bash\n---\n").unwrap();
        assert_eq!(
            differing_fields(&extra, &skill.frontmatter),
            ["allowed-tools"],
            "a field the entry does not show is a discrepancy"
        );
        // A byte-order mark, CRLF lines, a trailing space on the closing line, nested metadata, numbers.
        let crlf =
            "\u{feff}---\r\nname: x\r\ndescription: y\r\nmetadata:\r\n  version: 1.0\r\n  tags: [a, b]\r\n--- \r\nbody";
        let parsed = parse_frontmatter(crlf).unwrap();
        let entry = json!({ "name": "x", "description": "y", "metadata": { "version": 1, "tags": ["a", "b"] } });
        assert!(differing_fields(&parsed, entry.as_object().unwrap()).is_empty());
        assert_eq!(
            parse_frontmatter("---\nname: x\n---"),
            Some(json!({ "name": "x" }).as_object().unwrap().clone()),
            "ends at the closing line"
        );
        for bad in [
            "no frontmatter",
            "---\nname: x\n",
            "---\n- a list\n---\n",
            "---\nname: [unclosed\n---\n",
            " ---\nname: x\n---\n",
        ] {
            assert_eq!(parse_frontmatter(bad), None, "{bad:?}");
        }
        let deep = format!("---\nname: {}x{}\n---\n", "[".repeat(200), "]".repeat(200));
        assert_eq!(parse_frontmatter(&deep), None, "flow nesting past the bound");
        // Block nesting is a level every two bytes and has no parser limit: refused from the events, before
        // a tree is built (whose building and dropping recurse per level).
        let block = format!("---\nname: x\ndescription: y\nk:\n{}x\n---\n", "- ".repeat(30_000));
        assert!(block.len() < MAX_FRONTMATTER_BYTES);
        assert_eq!(parse_frontmatter(&block), None, "block nesting past the bound");
        let shallow = format!("---\nname: x\ndescription: y\nk:\n{}x\n---\n", "- ".repeat(MAX_FRONTMATTER_DEPTH - 2));
        assert!(parse_frontmatter(&shallow).is_some(), "nesting within the bound");
        let wide = format!(
            "---\nname: x\ndescription: y\n{}---\n",
            (0..5_000).map(|i| format!("k{i}: v\n")).collect::<String>()
        );
        assert!(
            wide.len() < MAX_FRONTMATTER_BYTES && parse_frontmatter(&wide).is_some(),
            "a large flat frontmatter within the bytes"
        );
        let over = format!("---\nname: x\ndescription: '{}'\n---\n", "y".repeat(MAX_FRONTMATTER_BYTES));
        assert_eq!(parse_frontmatter(&over), None, "over the bytes");
    }

    #[test]
    fn an_alias_bomb_in_frontmatter_does_not_expand_without_bound() {
        let mut yaml = String::from("---\nname: x\ndescription: y\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            let prev = i - 1;
            yaml.push_str(&format!("a{i}: &a{i} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"));
        }
        yaml.push_str("---\n");
        assert_eq!(parse_frontmatter(&yaml), None);
    }
}
