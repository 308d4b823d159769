//! An edit proposal: what the tools and the core ask the editor to apply to
//! its buffers, as core values. Each frontend turns it into its own wire
//! (the LSP frontend into `lsp-types`' `WorkspaceEdit`).
//!
//! **Invariant:** positions are already in the client's negotiated encoding
//! (the producer converted them against the exact text its hunks were
//! computed on), and paths are absolute; nothing here knows a URI or JSON.

use std::path::PathBuf;

/// A set of file changes, applied in order, under one annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditProposal {
    pub changes: Vec<FileEdit>,
    /// `None` when the client has no change annotation support; otherwise
    /// every change carries it.
    pub annotation: Option<EditAnnotation>,
}

/// The change annotation of one proposal (LSP 3.16's change annotations).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditAnnotation {
    pub id: String,
    pub label: String,
    /// Asks the editor to let the user review the edit before applying it.
    pub needs_confirmation: bool,
    pub description: Option<String>,
}

/// One change of a proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileEdit {
    /// Create an empty file (fails if it exists).
    Create { path: PathBuf },
    /// Replace ranges of a document; `version` is the open buffer's, `None`
    /// for a file the editor has not open (its disk content is the base).
    Text {
        path: PathBuf,
        version: Option<i32>,
        edits: Vec<TextReplace>,
    },
    /// Move a file (fails if the target exists).
    Rename { from: PathBuf, to: PathBuf },
    /// Delete a file (fails if it is missing; never recursive).
    Delete { path: PathBuf },
}

/// One replacement: the text between `start` and `end` becomes `new_text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextReplace {
    pub start: EditPosition,
    pub end: EditPosition,
    pub new_text: String,
}

/// A position in the client's encoding: zero-based line, and `character`
/// counted in the negotiated unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EditPosition {
    pub line: u32,
    pub character: u32,
}
