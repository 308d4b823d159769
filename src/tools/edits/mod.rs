//! A computed patch turned into changes: an LSP `WorkspaceEdit` for the
//! editor to review and apply, or atomic writes to disk.
//!
//! Invariant: nothing here decides *whether* to change anything, or reads
//! the files it changes. Callers compute every file's new text first (so a
//! patch lands whole or not at all) and pick a route; positions are derived
//! from the exact text the hunks were computed against, in the negotiated
//! encoding.

mod disk;
mod edit_proposal;

pub use disk::{apply_to_disk, create_empty_file, DiskChanges, DiskError, DiskWrite};
pub use edit_proposal::{edit_proposal, EditOptions};

use std::path::{Path, PathBuf};

use super::patch::AppliedUpdate;
use crate::buffers::Snapshot;

/// One file's part of a patch, computed before anything is touched.
#[derive(Debug, Clone)]
pub enum FileChange {
    Add {
        path: PathBuf,
        text: String,
    },
    Delete {
        path: PathBuf,
        old_text: String,
        /// The buffer the text came from, when the file is open.
        open: Option<Snapshot>,
    },
    Update {
        path: PathBuf,
        /// The new path of a move; never equal to `path`.
        move_to: Option<PathBuf>,
        old_text: String,
        update: AppliedUpdate,
        /// The buffer `old_text` came from, when the file is open; the
        /// edit is then versioned with its version.
        open: Option<Snapshot>,
    },
}

impl FileChange {
    /// The path the change reads or removes (for a move, the source).
    pub fn path(&self) -> &Path {
        match self {
            FileChange::Add { path, .. }
            | FileChange::Delete { path, .. }
            | FileChange::Update { path, .. } => path,
        }
    }

    /// Whether the text came from an open buffer.
    pub fn is_open(&self) -> bool {
        match self {
            FileChange::Add { .. } => false,
            FileChange::Delete { open, .. } | FileChange::Update { open, .. } => open.is_some(),
        }
    }

    /// Whether applying it needs a create, rename or delete operation.
    pub fn needs_file_operation(&self) -> bool {
        match self {
            FileChange::Add { .. } | FileChange::Delete { .. } => true,
            FileChange::Update { move_to, .. } => move_to.is_some(),
        }
    }
}
