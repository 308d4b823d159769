//! The wire shapes of checkpoints and rewind (`tandem/rewind`, the
//! `rewound` update).

use serde::{Deserialize, Serialize};

use super::RewindStatus;

/// `tandem/rewind` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RewindParams {
    pub session_id: String,
    /// A user message's `messageId`, or a `rewindId` (to undo that rewind).
    pub to_message_id: String,
    /// Restore the files the turns from that message on changed.
    pub files: bool,
    /// End the model's context just before that message.
    pub conversation: bool,
    /// Overwrite conflicting files anyway: `true` for all, or their paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<RewindForce>,
    /// Only report what would happen.
    #[serde(default)]
    pub dry_run: bool,
}

/// `force`: every conflicting file, or the listed (absolute) paths.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RewindForce {
    All(bool),
    Paths(Vec<String>),
}

/// `tandem/rewind` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RewindResult {
    /// Absent for a dry run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewind_id: Option<String>,
    pub files: Vec<RewindFileResult>,
    pub conversation: bool,
}

/// One file of a rewind: `status` is `restore` (dry run), `restored`,
/// `conflict` (with `diff`), `unrestorable`, `unchanged` or `failed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RewindFileResult {
    pub path: String,
    pub status: RewindStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
