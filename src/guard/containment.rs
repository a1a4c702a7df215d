//! What a stdio child gets from us: an allowlisted environment and a resolved program path.

use crate::error::{McpError, Result};
use std::path::{Path, PathBuf};

/// Variables a child inherits from this process. Everything else must be given in the entry's `env`,
/// so an API key in the agent's environment never reaches a third-party server by accident.
pub const INHERITED_ENV_VARS: &[&str] = &["PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "TMPDIR"];

/// The complete environment of a stdio child: the allowlist from `parent`, then the entry's own `env`.
pub fn child_environment<'a>(
    parent: impl Fn(&str) -> Option<String>,
    entry_env: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = INHERITED_ENV_VARS
        .iter()
        .filter_map(|name| parent(name).map(|value| (name.to_string(), value)))
        .collect();
    for (name, value) in entry_env {
        env.retain(|(existing, _)| existing != name);
        env.push((name.clone(), value.clone()));
    }
    env
}

/// Resolve `command` the way a shell would, but against the child's PATH rather than ours.
pub fn resolve_program(command: &str, env: &[(String, String)], cwd: Option<&Path>) -> Result<PathBuf> {
    let path = env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.as_str()).unwrap_or("");
    let base = match cwd {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_dir().map_err(|e| McpError::Transport(e.to_string()))?,
    };
    which::which_in(command, Some(path), base)
        .map_err(|_| McpError::Transport(format!("command not found: {command:?} (searched the PATH given to the server)")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn only_allowlisted_variables_are_inherited() {
        let parent = |name: &str| match name {
            "PATH" => Some("/bin".to_owned()),
            "HOME" => Some("/root".to_owned()),
            "SECRET_TOKEN" => Some("x".to_owned()),
            _ => None,
        };
        let entry: BTreeMap<String, String> =
            [("HOME".to_owned(), "/srv".to_owned()), ("API_KEY".to_owned(), "k".to_owned())].into();
        let env = child_environment(parent, &entry);
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["PATH", "API_KEY", "HOME"]);
        assert!(env.contains(&("HOME".to_owned(), "/srv".to_owned())), "entry env wins");
    }

    #[test]
    fn programs_resolve_against_the_child_path() {
        let env = vec![("PATH".to_owned(), "/usr/bin:/bin".to_owned())];
        assert!(resolve_program("sh", &env, None).unwrap().ends_with("sh"));
        let err = resolve_program("definitely-not-a-command-xyz", &env, None).unwrap_err();
        assert_eq!(err.code(), "mcp_transport_error");
    }
}
