//! The instruction files (`AGENTS.md` and friends) a session's model is
//! given, as the `instructions` event of the session log records them.

use serde::{Deserialize, Serialize};

/// One instruction file the model was given (or that the cap left out).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstructionFile {
    /// Absolute path of the file as found (symlinks not resolved).
    pub path: String,
    /// The file's size in bytes.
    pub bytes: u64,
    /// SHA-256 of the file's whole content, lowercase hex.
    pub sha256: String,
    /// How many of its bytes the model got, when the 32 KiB cap cut it
    /// (0: left out whole); absent when it got all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub included_bytes: Option<u64>,
}
