//! The vocabulary of checkpoints: what a file was before a turn (or a
//! rewind) changed it, and what the change left. The content itself lives
//! in the content-addressed store under `$TANDEM_HOME/checkpoints/`; the
//! log names it by hash.

use serde::{Deserialize, Serialize};

/// A file's state: absent (`hash: None`), or its bytes by SHA-256 (hex)
/// and its Unix permission bits.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FileState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
}

impl FileState {
    pub fn absent() -> Self {
        FileState::default()
    }

    pub fn exists(&self) -> bool {
        self.hash.is_some()
    }
}

/// One file of a checkpoint: its absolute path and its state before the
/// change; `before: None` when tandem had no prior content for it (a file
/// a command changed that it had not stored): it cannot be restored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointFile {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<FileState>,
    /// A command changed it (found by the scan around `exec_command`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub by_command: bool,
}

/// One file's state when the turn (or rewind) ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointAfter {
    pub path: String,
    pub after: FileState,
}

/// What a rewind does (or did) to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RewindStatus {
    /// Will be restored (a plan) / was restored (a run).
    Restore,
    Restored,
    /// The user changed it since the agent did: left alone.
    Conflict,
    /// No prior content: a command changed it, or its checkpoint was pruned.
    Unrestorable,
    /// Already as it was before.
    Unchanged,
    /// Writing it failed (the reason says why); it is untouched.
    Failed,
}

impl RewindStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            RewindStatus::Restore => "restore",
            RewindStatus::Restored => "restored",
            RewindStatus::Conflict => "conflict",
            RewindStatus::Unrestorable => "unrestorable",
            RewindStatus::Unchanged => "unchanged",
            RewindStatus::Failed => "failed",
        }
    }
}
