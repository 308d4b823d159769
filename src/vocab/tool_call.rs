//! A tool call as editors see it: its kind (what icon and wording they
//! give it), its status (ACP's sets, with tandem's `mcp` kind) and what it
//! waits for.
//!
//! Invariant: a kind this build does not know (from a newer log) reads as
//! `other`, so an old or new session log always loads.

use serde::{Deserialize, Serialize};

/// What a tool does: `read`, `search`, `edit`, `execute`, `think`, `mcp`
/// (a tool of an MCP server) or `other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    Read,
    Search,
    Edit,
    Execute,
    Think,
    Mcp,
    #[default]
    #[serde(other)]
    Other,
}

impl ToolKind {
    /// The wire's name.
    pub fn as_str(&self) -> &'static str {
        match self {
            ToolKind::Read => "read",
            ToolKind::Search => "search",
            ToolKind::Edit => "edit",
            ToolKind::Execute => "execute",
            ToolKind::Think => "think",
            ToolKind::Mcp => "mcp",
            ToolKind::Other => "other",
        }
    }
}

/// Where a tool call is: `pending` (announced, or waiting for the user),
/// `in_progress`, `completed` or `failed` (also refused, aborted, not run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStatus {
    Pending,
    InProgress,
    Completed,
    Failed,
}

/// What a tool call waits for: the user's `permission` (asked, or the
/// editor reviewing a patch) or their `input` (questions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitingFor {
    Permission,
    Input,
}

impl WaitingFor {
    /// The wire's name.
    pub fn as_str(&self) -> &'static str {
        match self {
            WaitingFor::Permission => "permission",
            WaitingFor::Input => "input",
        }
    }
}

impl std::fmt::Display for WaitingFor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_keep_their_names_and_an_unknown_one_reads_as_other() {
        for kind in [
            ToolKind::Read,
            ToolKind::Search,
            ToolKind::Edit,
            ToolKind::Execute,
            ToolKind::Think,
            ToolKind::Mcp,
            ToolKind::Other,
        ] {
            let wire = serde_json::to_value(kind).unwrap();
            assert_eq!(wire, kind.as_str());
            assert_eq!(serde_json::from_value::<ToolKind>(wire).unwrap(), kind);
        }
        assert_eq!(
            serde_json::from_str::<ToolKind>("\"fetch\"").unwrap(),
            ToolKind::Other
        );
        assert_eq!(
            serde_json::to_value(ToolCallStatus::InProgress).unwrap(),
            "in_progress"
        );
    }

    #[test]
    fn a_logged_tool_call_of_a_kind_this_build_does_not_know_still_loads() {
        let line = r#"{"type": "tool_call", "turn_id": "t1", "call_id": "c1", "name": "browse",
                       "arguments": {}, "title": "Browse", "kind": "browse"}"#;
        match serde_json::from_str::<crate::vocab::event::Event>(line) {
            Ok(crate::vocab::event::Event::ToolCall { kind, .. }) => {
                assert_eq!(kind, ToolKind::Other)
            }
            other => panic!("{other:?}"),
        }
    }
}
