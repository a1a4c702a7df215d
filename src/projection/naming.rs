//! Projected names: `${server}__${tool}`, valid for every model provider (`^[a-zA-Z0-9_-]{1,64}$`).
//! Rewrites append a short hash of the original, so they are stable across processes and two
//! different remote tools never land on one name.

use crate::limits::MAX_TOOL_NAME_CHARS;
use sha2::{Digest, Sha256};

pub const SEPARATOR: &str = "__";
const HASH_HEX_CHARS: usize = 8;

/// The first 8 hex digits of SHA-256: short, and the same in every process and on every machine.
pub fn short_hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().take(HASH_HEX_CHARS / 2).map(|b| format!("{b:02x}")).collect()
}

pub fn is_provider_safe(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME_CHARS
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `${server}__${tool}` when that is already safe; otherwise illegal characters become `_`, the name is
/// clamped, and `_` plus a hash of the original name is appended.
pub fn project_tool_name(server_label: &str, tool: &str) -> String {
    let joined = format!("{server_label}{SEPARATOR}{tool}");
    if is_provider_safe(&joined) {
        joined
    } else {
        rewrite(&joined, &joined)
    }
}

/// A provider-safe rendering of `text`, clamped, ending in a hash of `hash_input`.
pub fn rewrite(text: &str, hash_input: &str) -> String {
    let suffix = format!("_{}", short_hash(hash_input));
    let mut safe: String = text
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .take(MAX_TOOL_NAME_CHARS - suffix.len())
        .collect();
    safe.push_str(&suffix);
    safe
}

/// A projected name for `remote_name` of the server labelled `label` (identified by `identity`) that
/// `is_taken` does not report taken. The plain `${label}__${tool}` (rewritten if unsafe) comes first; a
/// taken one is rewritten with a hash of the server's identity and the tool, and that again with a
/// counter until free. Every candidate is checked, so no crafted set of names (a tool literally named
/// like another one's rewrite) can make two tools share a name, or one server's tool shadow another's.
pub fn claim_unique(label: &str, remote_name: &str, identity: &str, is_taken: impl Fn(&str) -> bool) -> String {
    let preferred = project_tool_name(label, remote_name);
    if !is_taken(&preferred) {
        return preferred;
    }
    let original = format!("{label}{SEPARATOR}{remote_name}");
    let mut hash_input = format!("{identity}\u{0}{remote_name}");
    loop {
        let candidate = rewrite(&original, &hash_input);
        if !is_taken(&candidate) {
            return candidate;
        }
        hash_input.push('\u{0}');
    }
}

/// Labels for the configured servers. A name used by one server is its own label; a name shared by
/// several gives each a suffix hashed from its identity (command line or URL), so reordering the
/// list never repoints a name at a different backend.
pub fn server_labels(servers: &[(&str, String)]) -> Vec<String> {
    let mut labels = Vec::with_capacity(servers.len());
    let mut used_identities: Vec<String> = Vec::new();
    for (name, identity) in servers {
        let shared = servers.iter().filter(|(other, _)| other == name).count() > 1;
        if !shared {
            labels.push(name.to_string());
            continue;
        }
        // Two entries that are identical in every way still need distinct labels.
        let mut identity = identity.clone();
        while used_identities.contains(&identity) {
            identity.push('\u{0}');
        }
        used_identities.push(identity.clone());
        labels.push(format!("{name}_{}", short_hash(&identity)));
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_names_are_kept_verbatim() {
        assert_eq!(project_tool_name("docs", "search"), "docs__search");
        assert_eq!(project_tool_name("my-srv", "get_item-2"), "my-srv__get_item-2");
    }

    #[test]
    fn unsafe_names_are_rewritten_with_a_stable_hash() {
        let dotted = project_tool_name("docs", "search.docs");
        assert!(dotted.starts_with("docs__search_docs_"), "{dotted}");
        assert!(is_provider_safe(&dotted));
        // The hash is a pure function of the original: this exact value holds in every process.
        assert_eq!(short_hash("docs__search.docs"), dotted.rsplit('_').next().unwrap());
        assert_eq!(short_hash("abc"), "ba7816bf");

        let long = project_tool_name("srv", &"x".repeat(90));
        assert_eq!(long.len(), 64);
        assert!(is_provider_safe(&long));

        let unicode = project_tool_name("srv", "résumé");
        assert!(is_provider_safe(&unicode), "{unicode}");
        assert_ne!(
            project_tool_name("srv", "a.b"),
            project_tool_name("srv", "a,b"),
            "distinct originals stay distinct"
        );
    }

    #[test]
    fn claimed_names_never_collide_even_when_crafted_to() {
        use std::collections::HashMap;
        let mut taken: HashMap<String, (&str, String)> = HashMap::new();
        let mut claim = |label: &'static str, identity: &str, tool: &str| {
            let name = claim_unique(label, tool, identity, |n| taken.contains_key(n));
            assert!(is_provider_safe(&name), "{name}");
            taken.insert(name.clone(), (label, tool.to_owned()));
            name
        };
        // `a.b` is rewritten; a tool literally named like that rewrite, and one named like the rewrite's
        // own rewrite, are listed first to take those names.
        let first_rewrite = project_tool_name("c", "a.b");
        let crafted = first_rewrite.strip_prefix("c__").unwrap().to_owned();
        let second_rewrite = rewrite(&format!("c__{crafted}"), &format!("stdio:c\u{0}{crafted}"));
        let crafted_again = second_rewrite.strip_prefix("c__").unwrap().to_owned();
        let names = [
            claim("c", "stdio:c", &crafted_again),
            claim("c", "stdio:c", &crafted),
            claim("c", "stdio:c", "a.b"),
            claim("c", "stdio:c", &crafted),
            // Across servers: `x` + `_y` and `x_` + `y` meet on `x___y`.
            claim("x", "stdio:x", "_y"),
            claim("x_", "stdio:x_", "y"),
        ];
        assert_eq!(names.iter().collect::<std::collections::HashSet<_>>().len(), names.len(), "{names:?}");
        assert_eq!(names[0], format!("c__{crafted_again}"));
        assert_eq!(names[4], "x___y");
        assert_ne!(names[5], "x___y");
    }

    #[test]
    fn shared_server_names_all_get_suffixes() {
        let servers = [("local", "stdio:a".to_owned()), ("other", "x".to_owned()), ("local", "stdio:b".to_owned())];
        let labels = server_labels(&servers);
        assert_eq!(labels[1], "other");
        assert!(labels[0].starts_with("local_") && labels[2].starts_with("local_"));
        assert_ne!(labels[0], labels[2]);
        // Order does not change which backend gets which label.
        let reversed = server_labels(&[servers[2].clone(), servers[0].clone()]);
        assert_eq!(reversed[0], labels[2]);
        assert_eq!(reversed[1], labels[0]);
        let twins = server_labels(&[("t", "same".to_owned()), ("t", "same".to_owned())]);
        assert_ne!(twins[0], twins[1]);
    }
}
