//! The file-state cache: one rope per open document, updated by the editor's
//! incremental `didChange`s, so tools see what the user sees.
//!
//! Invariant: positions arrive in the negotiated [`PositionEncoding`]
//! (UTF-16 code units by default) and are converted to char offsets here and
//! nowhere else; a change that does not fit the document is an error and
//! leaves the document untouched.
//!
//! Lines are LSP's: only `\n`, `\r\n` and `\r` end a line. Ropey is built
//! without its `unicode_lines` feature (which would also end lines at VT,
//! FF, NEL, LS and PS), so its line index is LSP's for every document.
//!
//! The pieces: this module holds the position types; [`position`] converts
//! LSP positions to char offsets,
//! [`document`] is a document's content and its [`Snapshot`], and [`cache`]
//! is the [`BufferCache`] the editor's notifications update.

mod cache;
mod diagnostics;
mod document;
mod position;
#[cfg(test)]
mod tests;

pub use self::cache::BufferCache;
pub use self::diagnostics::{DiagnosticsReport, DiagnosticsStore};
pub use self::document::Snapshot;
pub use self::position::{char_to_position, position_to_char};

/// How `character` in a [`Position`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PositionEncoding {
    Utf8,
    #[default]
    Utf16,
    Utf32,
}

/// A zero-based line and character offset in the negotiated encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: u32,
    pub character: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub start: Position,
    pub end: Position,
}

/// One content change of a `didChange`; `range: None` replaces the whole text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextChange {
    pub range: Option<Range>,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BufferError {
    #[error("document {0} is not open")]
    NotOpen(String),
    #[error("change range {range:?} does not fit document {path} ({lines} lines)")]
    BadRange {
        path: String,
        range: Range,
        lines: usize,
    },
}

/// A position names a line the document does not have. Lines `0..lines` exist,
/// and line `lines` is accepted as the end of the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("line {line} is past the end of the document ({lines} lines)")]
pub struct LineOutOfRange {
    pub line: u32,
    pub lines: usize,
}
