//! What a stdio child gets from us: an allowlisted environment and a resolved program path.

use crate::error::{McpError, Result};
use std::path::{Path, PathBuf};

/// Variables a child inherits from this process. Everything else must be given in the entry's `env`,
/// so an API key in the agent's environment never reaches a third-party server by accident.
#[cfg(not(windows))]
pub const INHERITED_ENV_VARS: &[&str] = &["PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "TMPDIR"];
/// On Windows, what a program needs to start at all (SYSTEMROOT for sockets and crypto providers, TEMP, the
/// profile folders): the list the official MCP SDKs pass on, plus PATHEXT and COMSPEC so a child can run
/// `.cmd` launchers such as `npx.cmd`. Names are case-insensitive there.
#[cfg(windows)]
pub const INHERITED_ENV_VARS: &[&str] = &[
    "APPDATA",
    "COMSPEC",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATH",
    "PATHEXT",
    "PROCESSOR_ARCHITECTURE",
    "PROGRAMFILES",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "TMP",
    "USERNAME",
    "USERPROFILE",
];

/// The complete environment of a stdio child: the allowlist from `parent`, then the entry's own `env`.
pub fn child_environment<'a>(
    parent: impl Fn(&str) -> Option<String>,
    entry_env: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> =
        INHERITED_ENV_VARS.iter().filter_map(|name| parent(name).map(|value| (name.to_string(), value))).collect();
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
    which::which_in(command, Some(path), base).map_err(|_| {
        McpError::Transport(format!("command not found: {command:?} (searched the PATH given to the server)"))
    })
}

/// Where a contained stdio entry may run from: its `cwd`, and its program when the command is a path.
#[derive(Debug, PartialEq)]
pub struct Contained {
    pub cwd: PathBuf,
    /// `None` for a bare command name, which is looked up on PATH and is not part of the plugin.
    pub program: Option<PathBuf>,
}

/// Resolve `cwd` (default: the root) and a path-like `command` through realpath and require both to
/// stay inside `root`. A symlink that leaves the root is caught here where a lexical check is not.
/// Containment, not a sandbox: arguments and what the program opens are not checked.
pub fn contain(root: &Path, command: &str, cwd: Option<&Path>) -> Result<Contained> {
    let violation =
        |what: &str| McpError::ContainmentViolation(format!("{what} resolves outside the entry's root; entry skipped"));
    let root = std::fs::canonicalize(root)
        .map_err(|e| McpError::ContainmentViolation(format!("root {} cannot be resolved: {e}", root.display())))?;
    let cwd = match cwd {
        Some(dir) if dir.is_absolute() => dir.to_path_buf(),
        Some(dir) => root.join(dir),
        None => root.clone(),
    };
    let cwd = std::fs::canonicalize(&cwd).map_err(|_| violation("cwd"))?;
    if !cwd.starts_with(&root) {
        return Err(violation("cwd"));
    }
    let program = if command.contains('/') {
        let path = if Path::new(command).is_absolute() { PathBuf::from(command) } else { cwd.join(command) };
        let real = std::fs::canonicalize(&path).map_err(|_| violation("command"))?;
        if !real.starts_with(&root) {
            return Err(violation("command"));
        }
        Some(real)
    } else {
        None
    };
    Ok(Contained { cwd, program })
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

    #[cfg(unix)] // a symlink needs a privilege on Windows
    #[test]
    fn containment_follows_symlinks_out_of_the_root() {
        let base = std::env::temp_dir().join(format!("mcpferry-contain-{}", std::process::id()));
        let root = base.join("plugin");
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::write(root.join("bin/server"), "#!/bin/sh\n").unwrap();
        std::fs::write(base.join("outside"), "#!/bin/sh\n").unwrap();
        let _ = std::fs::remove_file(root.join("bin/escape"));
        std::os::unix::fs::symlink(base.join("outside"), root.join("bin/escape")).unwrap();

        let ok = contain(&root, "bin/server", None).unwrap();
        assert_eq!(ok.program.unwrap(), std::fs::canonicalize(root.join("bin/server")).unwrap());
        assert_eq!(contain(&root, "node", None).unwrap().program, None, "bare names are PATH lookups");
        for (command, cwd) in [("bin/escape", None), ("../outside", None), ("bin/server", Some(Path::new("..")))] {
            let err = contain(&root, command, cwd).unwrap_err();
            assert_eq!(err.code(), "mcp_containment_violation", "{command}");
        }
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn programs_resolve_against_the_child_path() {
        let env = vec![("PATH".to_owned(), "/usr/bin:/bin".to_owned())];
        assert!(resolve_program("sh", &env, None).unwrap().ends_with("sh"));
        let err = resolve_program("definitely-not-a-command-xyz", &env, None).unwrap_err();
        assert_eq!(err.code(), "mcp_transport_error");
    }
}
