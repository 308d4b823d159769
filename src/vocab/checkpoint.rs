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
