//! The `apply_patch` format: parsing a patch and applying its hunks to text.
//!
//! This is the envelope OpenAI's Codex models are trained to write
//! (`*** Begin Patch` … `*** End Patch` around `*** Add File:`, `*** Delete
//! File:` and `*** Update File:` sections). We parse it as leniently as Codex
//! does, because models lean on that leniency, and locate hunks the way its
//! `seek_sequence` does: exact first, then ignoring trailing whitespace, then
//! ignoring surrounding whitespace, then after folding typographic punctuation.
//!
//! Invariant: nothing here does I/O or knows about LSP. [`apply_hunks`] turns
//! one file's text into new text plus one edit per hunk, so the caller can
//! send the edits for review and apply only those the user accepts. Every
//! error is phrased for the model to correct its patch and retry.

mod apply;
mod parse;
mod seek;
#[cfg(test)]
mod tests;

pub use apply::{apply_hunks, AppliedHunk, AppliedUpdate};
pub use parse::parse_patch;

/// A parsed patch: its file operations, in the order the patch gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    pub ops: Vec<FileOp>,
}

/// One `*** … File:` section of a patch. Paths are as the model wrote them;
/// resolving them against the workspace is the caller's job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOp {
    /// Create a file; `contents` has a `\n` after every line.
    Add {
        path: String,
        contents: String,
    },
    Delete {
        path: String,
    },
    /// Change a file and, with `move_to`, rename it. A rename may have no hunks.
    Update {
        path: String,
        move_to: Option<String>,
        hunks: Vec<Hunk>,
    },
}

/// A contiguous change to a file, located by its context and removed lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// The text after `@@ `: a line (usually a signature) that is searched
    /// for first; the hunk's lines must come after it.
    pub context: Option<String>,
    pub lines: Vec<HunkLine>,
    /// `*** End of File` followed the hunk: its old lines end the file.
    pub end_of_file: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkLine {
    /// ` line`: present before and after.
    Context(String),
    /// `-line`
    Remove(String),
    /// `+line`
    Add(String),
}

impl HunkLine {
    /// The line as it must appear in the original file, if it does.
    fn old(&self) -> Option<&str> {
        match self {
            HunkLine::Context(text) | HunkLine::Remove(text) => Some(text),
            HunkLine::Add(_) => None,
        }
    }

    fn is_context(&self) -> bool {
        matches!(self, HunkLine::Context(_))
    }
}

/// Why a patch could not be parsed or applied, worded so the model can fix it.
/// Line numbers are 1-based: in the patch text for syntax errors, in the file
/// for hints about where lines were found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    #[error(
        "the patch is empty: put at least one `*** Add File:`, `*** Update File:` or \
         `*** Delete File:` section between `*** Begin Patch` and `*** End Patch`"
    )]
    Empty,
    #[error("line {line}: the patch must start with `*** Begin Patch`, found `{found}`")]
    MissingBegin { line: usize, found: String },
    #[error(
        "line {line}: the patch must end with `*** End Patch`, found `{found}` \
         (was the patch cut short?)"
    )]
    MissingEnd { line: usize, found: String },
    #[error("line {line}: {message}")]
    Syntax { line: usize, message: String },
    #[error(
        "line {line}: `{path}` already appears at line {first_line}; put all changes \
         to one file in a single section"
    )]
    DuplicatePath {
        path: String,
        line: usize,
        first_line: usize,
    },
    #[error(
        "{path}: hunk {hunk} of {hunks} did not match; its `@@ {context}` line was not \
         found{}",
        after_line_suffix(.searched_after_line)
    )]
    ContextNotFound {
        path: String,
        hunk: usize,
        hunks: usize,
        context: String,
        /// The hunk was searched for after this file line; 0 = whole file.
        searched_after_line: usize,
    },
    #[error(
        "{path}: hunk {hunk} of {hunks} did not match; expected to find:\n{}{hint}",
        indented(.expected)
    )]
    HunkMismatch {
        path: String,
        hunk: usize,
        hunks: usize,
        /// The hunk's context and removed lines, in order.
        expected: Vec<String>,
        /// Empty, or a sentence starting with a newline saying what was found.
        hint: String,
    },
}

fn after_line_suffix(line: &usize) -> String {
    if *line == 0 {
        String::new()
    } else {
        format!(" after line {line}")
    }
}

fn indented(lines: &[String]) -> String {
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str("  ");
        out.push_str(line);
    }
    out
}

impl Patch {
    /// A one-line label for the review, e.g. "Update src/lib.rs (2 hunks),
    /// add path/new.txt, delete path/old.txt".
    pub fn summary(&self) -> String {
        let parts: Vec<String> = self.ops.iter().map(FileOp::summary).collect();
        let joined = parts.join(", ");
        let mut chars = joined.chars();
        match chars.next() {
            Some(first) => first.to_uppercase().chain(chars).collect(),
            None => joined,
        }
    }
}

impl FileOp {
    /// The path the operation reads or removes (for a move, the source).
    pub fn path(&self) -> &str {
        match self {
            FileOp::Add { path, .. } | FileOp::Delete { path } | FileOp::Update { path, .. } => {
                path
            }
        }
    }

    fn summary(&self) -> String {
        let hunk_count = |n: usize| {
            if n == 1 {
                "1 hunk".to_string()
            } else {
                format!("{n} hunks")
            }
        };
        match self {
            FileOp::Add { path, .. } => format!("add {path}"),
            FileOp::Delete { path } => format!("delete {path}"),
            FileOp::Update {
                path,
                move_to: None,
                hunks,
            } => format!("update {path} ({})", hunk_count(hunks.len())),
            FileOp::Update {
                path,
                move_to: Some(to),
                hunks,
            } if hunks.is_empty() => format!("move {path} to {to}"),
            FileOp::Update {
                path,
                move_to: Some(to),
                hunks,
            } => format!("move {path} to {to} ({})", hunk_count(hunks.len())),
        }
    }
}
