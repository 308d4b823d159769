//! Workspace roots and path confinement.
//!
//! Invariant: every path a tool touches comes out of [`Workspace::resolve`],
//! which refuses `..` escapes, absolute paths outside every root and symlinks
//! that point out of the roots. A refusal is a [`PathError`] that the tool
//! turns into an error the model reads.

use std::path::{Path, PathBuf};
use std::sync::RwLock;

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("no workspace folder is open, so `{0}` cannot be resolved")]
    NoRoots(String),
    #[error("`{path}` is outside the workspace ({roots})")]
    OutsideWorkspace { path: String, roots: String },
    #[error("`{path}` resolves through a symlink to `{target}`, which is outside the workspace")]
    SymlinkEscape { path: String, target: String },
}

/// The editor's workspace folders.
#[derive(Debug, Default)]
pub struct Workspace {
    roots: RwLock<Vec<PathBuf>>,
}

impl Workspace {
    /// Roots are canonicalized where they exist.
    pub fn new(roots: Vec<PathBuf>) -> Self {
        let ws = Workspace::default();
        ws.set_roots(roots);
        ws
    }

    pub fn set_roots(&self, roots: Vec<PathBuf>) {
        let _ = roots;
        todo!("workspace helper")
    }

    pub fn add_root(&self, root: PathBuf) {
        let _ = root;
        todo!("workspace helper")
    }

    pub fn remove_root(&self, root: &Path) {
        let _ = root;
        todo!("workspace helper")
    }

    pub fn roots(&self) -> Vec<PathBuf> {
        self.roots.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Resolves a path given by the model (relative to the first root, or
    /// absolute) to an absolute path inside a root. The path need not exist
    /// (tools that create files resolve before creating).
    pub fn resolve(&self, path: &str) -> Result<PathBuf, PathError> {
        let _ = path;
        todo!("workspace helper")
    }

    /// The path relative to the root that contains it, for display.
    pub fn display_path(&self, path: &Path) -> String {
        let _ = path;
        todo!("workspace helper")
    }
}
