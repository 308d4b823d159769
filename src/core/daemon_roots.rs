//! More workspace roots for a session that already runs (ACP's
//! `additionalDirectories` of `session/load` and `session/resume` when
//! this daemon has the session loaded).
//!
//! Invariant: roots are only added, never removed; a session without a
//! folder of its own shares its client's workspace, which then gets them.
//! A session whose task has ended has no workspace to add to.

use std::path::PathBuf;

use super::Daemon;

impl Daemon {
    /// Adds `more` to running session `id`'s workspace (the tools reach
    /// and walk them from its next call on).
    pub(super) fn add_roots(&self, id: &str, more: Vec<PathBuf>) {
        if more.is_empty() {
            return;
        }
        let workspace = self
            .workspaces
            .lock()
            .get(id)
            .and_then(std::sync::Weak::upgrade);
        let Some(workspace) = workspace else {
            return;
        };
        for root in more {
            workspace.add_root(root);
        }
    }
}
