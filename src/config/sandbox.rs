//! `[sandbox]`: how `exec_command` confines the commands it runs (the
//! mechanism lives in `tools::exec::sandbox`; this is only the setting).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What a sandboxed command may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Read everywhere; write only in the workspace roots, the system temp
    /// dir and `writable`.
    #[default]
    WorkspaceWrite,
    /// Read everywhere, write nowhere (but `/dev/null` and friends).
    ReadOnly,
    /// No sandbox: commands run with the user's full rights and network.
    Off,
}

impl SandboxMode {
    /// The name used in config files.
    pub fn as_str(&self) -> &'static str {
        match self {
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::Off => "off",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// The default, `workspace-write`, holds in every approval mode.
    pub mode: SandboxMode,
    /// Let commands reach the network (off by default: they get a network
    /// namespace of their own, with only its own loopback).
    pub network: bool,
    /// More directories (or files) sandboxed commands may write, in
    /// `workspace-write` mode: caches such as `~/.cargo` or `~/.npm`.
    pub writable: Vec<PathBuf>,
}
