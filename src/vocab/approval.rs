//! The approval modes: how much the agent may do without asking.

use serde::{Deserialize, Serialize};

/// How much the agent may do without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalMode {
    ReadOnly,
    #[default]
    Review,
    Auto,
}

impl ApprovalMode {
    /// The name used in config files and on the wire.
    pub fn as_str(&self) -> &'static str {
        match self {
            ApprovalMode::ReadOnly => "read-only",
            ApprovalMode::Review => "review",
            ApprovalMode::Auto => "auto",
        }
    }
}

impl std::str::FromStr for ApprovalMode {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "read-only" => Ok(ApprovalMode::ReadOnly),
            "review" => Ok(ApprovalMode::Review),
            "auto" => Ok(ApprovalMode::Auto),
            other => Err(format!(
                "`{other}` is not one of `read-only`, `review`, `auto`"
            )),
        }
    }
}
