//! Applying one file's hunks to its text: the new text plus one exact,
//! non-overlapping edit per hunk, so any subset of them can be applied alone.

use std::ops::Range;

use super::seek::locate;
use super::{Hunk, HunkLine, PatchError};

/// The result of applying one file's hunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedUpdate {
    /// The whole new file text.
    pub new_text: String,
    /// One entry per hunk, in the patch's order. Applying every hunk's
    /// `old_bytes` → `new_text` to the original gives [`Self::new_text`];
    /// the ranges do not overlap, so any subset can be applied alone.
    pub hunks: Vec<AppliedHunk>,
}

/// Where one hunk landed. Unchanged leading and trailing context lines are
/// left out, so the range covers only what the hunk changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedHunk {
    /// 0-based lines of the original that are replaced; an empty range is an
    /// insertion before `old_lines.start` (or at the end when it is the line
    /// count).
    pub old_lines: Range<usize>,
    /// The lines that replace them, without line endings. Context lines keep
    /// the original's text even when they matched only fuzzily.
    pub new_lines: Vec<String>,
    /// The same change as an exact byte edit of the original.
    pub old_bytes: Range<usize>,
    pub new_text: String,
}

/// Applies `hunks` to `original`, the text of `path` (used only in errors).
/// Each hunk is searched for after the previous hunk's match. New lines take
/// the file's line ending (that of its first line), and a file that did not
/// end with a newline still does not — except in one corner: a hunk that
/// only deletes the file's last lines, directly after another hunk's change.
pub fn apply_hunks(
    path: &str,
    original: &str,
    hunks: &[Hunk],
) -> Result<AppliedUpdate, PatchError> {
    let source = Source::new(original);
    let mut applied = Vec::with_capacity(hunks.len());
    let mut cursor = 0;
    let mut bytes_floor = 0;
    for (index, hunk) in hunks.iter().enumerate() {
        let located = locate(&source, hunk, cursor)
            .map_err(|miss| PatchError::from_miss(miss, path, index, hunks, cursor))?;
        cursor = located.end;
        let edit = source.edit(located.start, located.lines, bytes_floor);
        bytes_floor = edit.old_bytes.end;
        applied.push(edit);
    }

    let added: usize = applied.iter().map(|h| h.new_text.len()).sum();
    let mut new_text = String::with_capacity(original.len() + added);
    let mut copied_to = 0;
    for hunk in &applied {
        new_text.push_str(&original[copied_to..hunk.old_bytes.start]);
        new_text.push_str(&hunk.new_text);
        copied_to = hunk.old_bytes.end;
    }
    new_text.push_str(&original[copied_to..]);
    Ok(AppliedUpdate {
        new_text,
        hunks: applied,
    })
}

/// The original text indexed by line once; lines are borrowed slices of it.
pub(super) struct Source<'a> {
    text: &'a str,
    /// Byte offset where each line starts, then the text's length, so line
    /// `i` spans `starts[i]..starts[i + 1]` including its ending.
    starts: Vec<usize>,
    eol: &'static str,
    missing_final_newline: bool,
}

impl<'a> Source<'a> {
    fn new(text: &'a str) -> Self {
        // Only the line starts are recorded (found with `find`, which uses
        // memchr): this is the one pass over the whole file.
        let mut starts = Vec::with_capacity(text.len() / 32 + 2);
        starts.push(0);
        let mut offset = 0;
        while let Some(newline) = text[offset..].find('\n') {
            offset += newline + 1;
            starts.push(offset);
        }
        if offset != text.len() {
            starts.push(text.len());
        }
        let eol = match text.find('\n') {
            Some(at) if text[..at].ends_with('\r') => "\r\n",
            _ => "\n",
        };
        Source {
            text,
            starts,
            eol,
            missing_final_newline: !text.is_empty() && !text.ends_with('\n'),
        }
    }

    pub(super) fn line_count(&self) -> usize {
        self.starts.len() - 1
    }

    /// Line `i` without its `\n` or `\r\n`.
    pub(super) fn line(&self, i: usize) -> &'a str {
        let raw = &self.text[self.starts[i]..self.starts[i + 1]];
        match raw.strip_suffix('\n') {
            Some(rest) => rest.strip_suffix('\r').unwrap_or(rest),
            None => raw,
        }
    }

    fn content_end(&self, line: usize) -> usize {
        self.starts[line] + self.line(line).len()
    }

    /// Builds the edit for a hunk whose old lines start at line `start`.
    /// `bytes_floor` is where the previous hunk's edit ended.
    fn edit(&self, start: usize, lines: &[HunkLine], bytes_floor: usize) -> AppliedHunk {
        let old_len = lines.iter().filter(|l| l.old().is_some()).count();
        let lead = lines.iter().take_while(|l| l.is_context()).count();
        let trail = lines[lead..]
            .iter()
            .rev()
            .take_while(|l| l.is_context())
            .count();
        let first = start + lead;
        let end = start + old_len - trail;

        let mut new_lines = Vec::new();
        let mut line = first;
        for hunk_line in &lines[lead..lines.len() - trail] {
            match hunk_line {
                HunkLine::Context(_) => {
                    new_lines.push(self.line(line).to_string());
                    line += 1;
                }
                HunkLine::Remove(_) => line += 1,
                HunkLine::Add(text) => new_lines.push(text.clone()),
            }
        }

        let count = self.line_count();
        let (old_bytes, new_text) = if first == end {
            if new_lines.is_empty() {
                let at = self.starts[first];
                (at..at, String::new())
            } else if first == count && self.missing_final_newline {
                // Appending after an unterminated last line: terminate it,
                // and leave the new last line unterminated.
                let at = self.text.len();
                (at..at, format!("{}{}", self.eol, new_lines.join(self.eol)))
            } else {
                let at = self.starts[first];
                let mut text = String::new();
                for new_line in &new_lines {
                    text.push_str(new_line);
                    text.push_str(self.eol);
                }
                (at..at, text)
            }
        } else if new_lines.is_empty() {
            if end == count && self.missing_final_newline && first > 0 {
                // Deleting the unterminated tail: take the preceding line
                // ending too, so the file still ends without one.
                let from = self.content_end(first - 1).max(bytes_floor);
                (from..self.text.len(), String::new())
            } else {
                (self.starts[first]..self.starts[end], String::new())
            }
        } else {
            // Replace line contents only; the last replaced line keeps its
            // own ending (or lack of one).
            (
                self.starts[first]..self.content_end(end - 1),
                new_lines.join(self.eol),
            )
        };
        AppliedHunk {
            old_lines: first..end,
            new_lines,
            old_bytes,
            new_text,
        }
    }
}
