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
    fn both_at_once_is_a_config_error() {
        let err = ToolFilter::new(strings(&["a"]), strings(&["b"])).unwrap_err();
        assert_eq!(err.code(), "mcp_config_invalid");
    }
}
