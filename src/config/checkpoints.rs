//! `[checkpoints]`: how long the prior content of files the agent changed
//! is kept for rewinding, how much of it, and whether commands are watched.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CheckpointsConfig {
    /// Checkpoints older than this many days are pruned.
    pub keep_days: u64,
    /// The store of one workspace is pruned, oldest checkpoint first, to
    /// stay under this many bytes.
    pub max_bytes: u64,
    /// Scan the workspace around each `exec_command` for the files it
    /// changed.
    pub scan_commands: bool,
}

impl Default for CheckpointsConfig {
    fn default() -> Self {
        CheckpointsConfig {
            keep_days: 14,
            max_bytes: 1 << 30,
            scan_commands: true,
        }
    }
}
