//! The `tools: { allow } | { block }` discovery filter: `*` and `?` globs on original tool names.

use crate::error::{McpError, Result};
use wildmatch::WildMatch;

#[derive(Debug, Default)]
pub enum ToolFilter {
    #[default]
    All,
    Allow(Vec<WildMatch>),
    Block(Vec<WildMatch>),
}

impl ToolFilter {
    pub fn new(allow: Option<Vec<String>>, block: Option<Vec<String>>) -> Result<Self> {
        let compile = |patterns: Vec<String>| patterns.iter().map(|p| WildMatch::new(p)).collect();
        match (allow, block) {
            (Some(_), Some(_)) => Err(McpError::config("options.tools takes either `allow` or `block`, not both")),
            (Some(allow), None) => Ok(ToolFilter::Allow(compile(allow))),
            (None, Some(block)) => Ok(ToolFilter::Block(compile(block))),
            (None, None) => Ok(ToolFilter::All),
        }
    }

    pub fn admits(&self, tool_name: &str) -> bool {
        match self {
            ToolFilter::All => true,
            ToolFilter::Allow(patterns) => patterns.iter().any(|p| p.matches(tool_name)),
            ToolFilter::Block(patterns) => !patterns.iter().any(|p| p.matches(tool_name)),
        }
    }
}

/// A server entry's own `tools: { allow?, block? }` (also what `allow_tools`/`deny_tools` of a config
/// file become): both may be given; a blocked name is out whatever allows it, and a non-empty allow
/// list leaves out every name it does not match. Applied on top of the toolset's filter.
#[derive(Debug, Default, Clone)]
pub struct ServerToolFilter {
    allow: Vec<WildMatch>,
    block: Vec<WildMatch>,
}

impl ServerToolFilter {
    pub fn new(allow: Vec<String>, block: Vec<String>) -> Self {
        let compile = |patterns: Vec<String>| patterns.iter().map(|p| WildMatch::new(p)).collect();
        ServerToolFilter { allow: compile(allow), block: compile(block) }
    }

    pub fn admits(&self, tool_name: &str) -> bool {
        !self.block.iter().any(|p| p.matches(tool_name))
            && (self.allow.is_empty() || self.allow.iter().any(|p| p.matches(tool_name)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Option<Vec<String>> {
        Some(items.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn allow_and_block_use_star_and_question_mark() {
        let allow = ToolFilter::new(strings(&["read_*", "search?"]), None).unwrap();
        assert!(allow.admits("read_file"));
        assert!(allow.admits("search2"));
        assert!(!allow.admits("search"));
        assert!(!allow.admits("write_file"));
        let block = ToolFilter::new(None, strings(&["*_secret"])).unwrap();
        assert!(!block.admits("get_secret"));
        assert!(block.admits("get_public"));
        // Brackets are literal: only * and ? are special.
        let literal = ToolFilter::new(strings(&["a[b]"]), None).unwrap();
        assert!(literal.admits("a[b]") && !literal.admits("ab"));
    }

    #[test]
    fn a_server_filter_takes_both_lists_and_block_wins() {
        let both = ServerToolFilter::new(vec!["read_*".into(), "list?".into()], vec!["read_secret*".into()]);
        assert!(both.admits("read_file") && both.admits("lists"));
        assert!(!both.admits("read_secrets") && !both.admits("write_file") && !both.admits("list"));
        let block_only = ServerToolFilter::new(vec![], vec!["delete_*".into()]);
        assert!(block_only.admits("anything") && !block_only.admits("delete_repo"));
        assert!(ServerToolFilter::default().admits("x"));
    }

    #[test]
    fn both_at_once_is_a_config_error() {
        let err = ToolFilter::new(strings(&["a"]), strings(&["b"])).unwrap_err();
        assert_eq!(err.code(), "mcp_config_invalid");
    }
}
