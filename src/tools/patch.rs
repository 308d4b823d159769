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

use std::collections::HashMap;
use std::ops::Range;

const BEGIN_PATCH: &str = "*** Begin Patch";
const END_PATCH: &str = "*** End Patch";
const ADD_FILE: &str = "*** Add File:";
const DELETE_FILE: &str = "*** Delete File:";
const UPDATE_FILE: &str = "*** Update File:";
const MOVE_TO: &str = "*** Move to:";
const END_OF_FILE: &str = "*** End of File";

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

/// Parses the `apply_patch` format. Tolerates what Codex tolerates: blank
/// lines and whitespace around the patch and its markers, a heredoc
/// (`<<'EOF'` … `EOF`) or Markdown fence around it, a first hunk without
/// `@@`, and empty lines inside hunks (read as empty context lines).
pub fn parse_patch(input: &str) -> Result<Patch, PatchError> {
    let numbered: Vec<(usize, &str)> = input.lines().enumerate().map(|(i, l)| (i + 1, l)).collect();
    let mut lines = trim_blank_lines(&numbered);
    if lines.is_empty() {
        return Err(PatchError::Empty);
    }
    if let Some(inner) = strip_wrapper(lines) {
        lines = trim_blank_lines(inner);
        if lines.is_empty() {
            return Err(PatchError::Empty);
        }
    }

    let (first_line, first) = lines[0];
    if first.trim() != BEGIN_PATCH {
        return Err(PatchError::MissingBegin {
            line: first_line,
            found: first.trim().to_string(),
        });
    }
    let (last_line, last) = lines[lines.len() - 1];
    if lines.len() < 2 || last.trim() != END_PATCH {
        return Err(PatchError::MissingEnd {
            line: last_line,
            found: last.trim().to_string(),
        });
    }

    let ops = Parser {
        lines: &lines[1..lines.len() - 1],
        pos: 0,
        seen: HashMap::new(),
    }
    .file_ops()?;
    if ops.is_empty() {
        return Err(PatchError::Empty);
    }
    Ok(Patch { ops })
}

fn trim_blank_lines<'a, 'b>(lines: &'b [(usize, &'a str)]) -> &'b [(usize, &'a str)] {
    let start = lines
        .iter()
        .position(|(_, l)| !l.trim().is_empty())
        .unwrap_or(lines.len());
    let end = lines
        .iter()
        .rposition(|(_, l)| !l.trim().is_empty())
        .map_or(start, |i| i + 1);
    &lines[start..end]
}

/// The lines inside a heredoc (`<<EOF`, `<<'EOF'`, `<<"EOF"`, optionally after
/// `apply_patch`) or a Markdown fence, if the patch is wrapped in one.
fn strip_wrapper<'a, 'b>(lines: &'b [(usize, &'a str)]) -> Option<&'b [(usize, &'a str)]> {
    let [(_, first), inner @ .., (_, last)] = lines else {
        return None;
    };
    let first = first.trim();
    let last = last.trim();
    let heredoc = ["<<EOF", "<<'EOF'", "<<\"EOF\""]
        .iter()
        .any(|opener| first == *opener || first == format!("apply_patch {opener}"));
    let fence = first.starts_with("```") && last == "```";
    ((heredoc && last == "EOF") || fence).then_some(inner)
}

struct Parser<'a, 'b> {
    /// The lines between `*** Begin Patch` and `*** End Patch`, numbered.
    lines: &'b [(usize, &'a str)],
    pos: usize,
    /// Each path named so far, with the patch line that named it.
    seen: HashMap<String, usize>,
}

impl<'a> Parser<'a, '_> {
    fn peek(&self) -> Option<(usize, &'a str)> {
        self.lines.get(self.pos).copied()
    }

    fn file_ops(mut self) -> Result<Vec<FileOp>, PatchError> {
        let mut ops = Vec::new();
        while let Some((line, raw)) = self.peek() {
            let header = raw.trim();
            self.pos += 1;
            if header.is_empty() {
                continue;
            }
            if let Some(rest) = header.strip_prefix(ADD_FILE) {
                let path = self.path(rest, line, ADD_FILE)?;
                let contents = self.added_contents()?;
                ops.push(FileOp::Add { path, contents });
            } else if let Some(rest) = header.strip_prefix(DELETE_FILE) {
                let path = self.path(rest, line, DELETE_FILE)?;
                ops.push(FileOp::Delete { path });
            } else if let Some(rest) = header.strip_prefix(UPDATE_FILE) {
                ops.push(self.update(rest, line)?);
            } else {
                return Err(PatchError::Syntax {
                    line,
                    message: format!(
                        "expected `{ADD_FILE}`, `{UPDATE_FILE}` or `{DELETE_FILE}`, found `{header}`"
                    ),
                });
            }
        }
        Ok(ops)
    }

    /// Reads a header's path and checks that no other section names it.
    fn path(&mut self, rest: &str, line: usize, marker: &str) -> Result<String, PatchError> {
        let path = rest.trim();
        if path.is_empty() {
            return Err(PatchError::Syntax {
                line,
                message: format!("`{marker}` must be followed by a path"),
            });
        }
        if let Some(&first_line) = self.seen.get(path) {
            return Err(PatchError::DuplicatePath {
                path: path.to_string(),
                line,
                first_line,
            });
        }
        self.seen.insert(path.to_string(), line);
        Ok(path.to_string())
    }

    fn added_contents(&mut self) -> Result<String, PatchError> {
        let mut contents = String::new();
        while let Some((line, raw)) = self.peek() {
            if let Some(text) = raw.strip_prefix('+') {
                contents.push_str(text);
                contents.push('\n');
                self.pos += 1;
            } else if raw.trim_start().starts_with("***") {
                break;
            } else if raw.trim().is_empty() && self.only_blank_lines_before_next_section() {
                // Blank lines separating this section from the next one.
                break;
            } else {
                let found = if raw.trim().is_empty() {
                    "an empty line".to_string()
                } else {
                    format!("`{raw}`")
                };
                return Err(PatchError::Syntax {
                    line,
                    message: format!(
                        "every line of an added file must start with `+` \
                         (a lone `+` for an empty line), found {found}"
                    ),
                });
            }
        }
        Ok(contents)
    }

    fn only_blank_lines_before_next_section(&self) -> bool {
        self.lines[self.pos..]
            .iter()
            .find(|(_, l)| !l.trim().is_empty())
            .is_none_or(|(_, l)| l.trim_start().starts_with("***"))
    }

    fn update(&mut self, rest: &str, header_line: usize) -> Result<FileOp, PatchError> {
        let path = self.path(rest, header_line, UPDATE_FILE)?;
        let mut move_to = None;
        if let Some((line, raw)) = self.peek() {
            if let Some(rest) = raw.trim().strip_prefix(MOVE_TO) {
                self.pos += 1;
                if rest.trim() != path {
                    move_to = Some(self.path(rest, line, MOVE_TO)?);
                }
            }
        }

        let mut hunks = Vec::new();
        // The hunk being read, with the patch line it started on.
        let mut open: Option<(usize, Hunk)> = None;
        // Blank patch lines are held back: inside a hunk they are empty
        // context lines, at its end they only separate sections.
        let mut held_blanks: Vec<&str> = Vec::new();
        while let Some((line, raw)) = self.peek() {
            if raw.starts_with("***") {
                if raw.trim() != END_OF_FILE {
                    break;
                }
                match open.take() {
                    Some((start, mut hunk)) => {
                        hunk.end_of_file = true;
                        hunks.push(finish_hunk(start, hunk)?);
                    }
                    None => {
                        return Err(PatchError::Syntax {
                            line,
                            message: format!("`{END_OF_FILE}` must follow a hunk's lines"),
                        })
                    }
                }
                held_blanks.clear();
                self.pos += 1;
                continue;
            }
            self.pos += 1;
            if raw.trim_end() == "@@" || raw.starts_with("@@ ") {
                if let Some((start, hunk)) = open.take() {
                    hunks.push(finish_hunk(start, hunk)?);
                }
                held_blanks.clear();
                let context = raw[2..].trim();
                open = Some((
                    line,
                    Hunk {
                        context: (!context.is_empty()).then(|| context.to_string()),
                        lines: Vec::new(),
                        end_of_file: false,
                    },
                ));
                continue;
            }
            if raw.trim().is_empty() {
                if open.is_some() {
                    held_blanks.push(raw);
                }
                continue;
            }
            let hunk_line = match raw.as_bytes()[0] {
                b' ' => HunkLine::Context(raw[1..].to_string()),
                b'-' => HunkLine::Remove(raw[1..].to_string()),
                b'+' => HunkLine::Add(raw[1..].to_string()),
                _ => {
                    return Err(PatchError::Syntax {
                        line,
                        message: format!(
                            "expected a hunk line starting with ` ` (context), `-` (removed) \
                             or `+` (added), or `@@`, found `{raw}`"
                        ),
                    })
                }
            };
            let hunk = match &mut open {
                Some((_, hunk)) => hunk,
                // Codex lets the first hunk of a section omit its `@@`.
                None if hunks.is_empty() => {
                    &mut open
                        .insert((
                            line,
                            Hunk {
                                context: None,
                                lines: Vec::new(),
                                end_of_file: false,
                            },
                        ))
                        .1
                }
                None => {
                    return Err(PatchError::Syntax {
                        line,
                        message: format!(
                            "expected `@@` to start hunk {} of `{path}`, found `{raw}`",
                            hunks.len() + 1
                        ),
                    })
                }
            };
            for blank in held_blanks.drain(..) {
                hunk.lines.push(HunkLine::Context(
                    blank.strip_prefix(' ').unwrap_or(blank).to_string(),
                ));
            }
            hunk.lines.push(hunk_line);
        }
        if let Some((start, hunk)) = open {
            hunks.push(finish_hunk(start, hunk)?);
        }
        if hunks.is_empty() && move_to.is_none() {
            return Err(PatchError::Syntax {
                line: header_line,
                message: format!("`{UPDATE_FILE} {path}` has no hunks"),
            });
        }
        Ok(FileOp::Update {
            path,
            move_to,
            hunks,
        })
    }
}

fn finish_hunk(start_line: usize, hunk: Hunk) -> Result<Hunk, PatchError> {
    if hunk.lines.is_empty() {
        return Err(PatchError::Syntax {
            line: start_line,
            message: "hunk has no lines starting with ` `, `-` or `+`".to_string(),
        });
    }
    Ok(hunk)
}

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
struct Source<'a> {
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

    fn line_count(&self) -> usize {
        self.starts.len() - 1
    }

    /// Line `i` without its `\n` or `\r\n`.
    fn line(&self, i: usize) -> &'a str {
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

/// Where a hunk matched: its old lines start at `start`; the next hunk is
/// searched for from `end`. `lines` may have lost trailing empty context.
struct Located<'h> {
    start: usize,
    end: usize,
    lines: &'h [HunkLine],
}

enum Miss {
    Context,
    Lines {
        /// Where the old lines do occur, searching the whole file.
        found_at: Option<usize>,
        /// Where the hunk's `@@` context line matched.
        context_at: Option<usize>,
    },
}

fn locate<'h>(source: &Source, hunk: &'h Hunk, cursor: usize) -> Result<Located<'h>, Miss> {
    let mut from = cursor;
    let mut context_at = None;
    if let Some(context) = &hunk.context {
        let at = source
            .seek(&[context.as_str()], from, false)
            .ok_or(Miss::Context)?;
        context_at = Some(at);
        from = at + 1;
    }

    let mut lines: &[HunkLine] = &hunk.lines;
    loop {
        let old: Vec<&str> = lines.iter().filter_map(HunkLine::old).collect();
        if old.is_empty() {
            // A pure addition goes right after its `@@` context line, else at
            // the end of the file (as in Codex).
            let at = if hunk.end_of_file || context_at.is_none() {
                source.line_count()
            } else {
                from
            };
            return Ok(Located {
                start: at,
                end: at,
                lines,
            });
        }
        let found = source.seek(&old, from, hunk.end_of_file).or_else(|| {
            // Models often repeat the `@@` line as the hunk's first context.
            context_at.and_then(|at| source.seek(&old, at, hunk.end_of_file))
        });
        if let Some(start) = found {
            return Ok(Located {
                start,
                end: start + old.len(),
                lines,
            });
        }
        // A trailing empty context line often stands for the file's final
        // newline or a separator; retry without it, as Codex does.
        match lines.split_last() {
            Some((HunkLine::Context(text), rest)) if text.trim().is_empty() => lines = rest,
            _ => break,
        }
    }

    let old: Vec<&str> = hunk.lines.iter().filter_map(HunkLine::old).collect();
    Err(Miss::Lines {
        found_at: source.seek(&old, 0, false),
        context_at,
    })
}

impl PatchError {
    fn from_miss(miss: Miss, path: &str, index: usize, hunks: &[Hunk], cursor: usize) -> Self {
        let hunk = &hunks[index];
        match miss {
            Miss::Context => PatchError::ContextNotFound {
                path: path.to_string(),
                hunk: index + 1,
                hunks: hunks.len(),
                context: hunk.context.clone().unwrap_or_default(),
                searched_after_line: cursor,
            },
            Miss::Lines {
                found_at,
                context_at,
            } => {
                let hint = match (found_at, context_at) {
                    (Some(at), _) if at < cursor => format!(
                        "\nThese lines occur at line {}, before where hunk {index} matched; \
                         hunks must be in file order.",
                        at + 1
                    ),
                    (Some(at), Some(context)) if at <= context => format!(
                        "\nThese lines occur at line {}, before the hunk's `@@` line (found at \
                         line {}); they must come after it.",
                        at + 1,
                        context + 1
                    ),
                    _ if hunk.end_of_file => format!(
                        "\nThe hunk ends with `{END_OF_FILE}`, so these must be the file's last lines."
                    ),
                    _ => String::new(),
                };
                PatchError::HunkMismatch {
                    path: path.to_string(),
                    hunk: index + 1,
                    hunks: hunks.len(),
                    expected: hunk
                        .lines
                        .iter()
                        .filter_map(HunkLine::old)
                        .map(str::to_string)
                        .collect(),
                    hint,
                }
            }
        }
    }
}

impl Source<'_> {
    /// Finds `pattern` at or after line `from`, trying each comparison in
    /// turn over the whole range before loosening it, so an exact match
    /// further on beats a fuzzy one nearby. With `at_end` only the position
    /// that ends the file is tried. `pattern` must not be empty.
    fn seek(&self, pattern: &[&str], from: usize, at_end: bool) -> Option<usize> {
        let last_start = self.line_count().checked_sub(pattern.len())?;
        if from > last_start {
            return None;
        }
        let candidates = if at_end {
            last_start..last_start + 1
        } else {
            from..last_start + 1
        };
        let comparisons: [fn(&str, &str) -> bool; 4] = [
            |a, b| a == b,
            |a, b| a.trim_end() == b.trim_end(),
            |a, b| a.trim() == b.trim(),
            |a, b| {
                a.trim()
                    .chars()
                    .map(fold_punctuation)
                    .eq(b.trim().chars().map(fold_punctuation))
            },
        ];
        comparisons.into_iter().find_map(|same| {
            candidates.clone().find(|&start| {
                pattern
                    .iter()
                    .enumerate()
                    .all(|(offset, expected)| same(self.line(start + offset), expected))
            })
        })
    }
}

/// Maps typographic dashes, quotes and spaces to their ASCII counterparts.
fn fold_punctuation(c: char) -> char {
    match c {
        '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
        '\u{2018}'..='\u{201B}' => '\'',
        '\u{201C}'..='\u{201F}' => '"',
        '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patch(body: &str) -> String {
        format!("*** Begin Patch\n{body}\n*** End Patch\n")
    }

    fn only_update(input: &str) -> (String, Option<String>, Vec<Hunk>) {
        let parsed = parse_patch(input).expect("patch parses");
        match parsed.ops.as_slice() {
            [FileOp::Update {
                path,
                move_to,
                hunks,
            }] => (path.clone(), move_to.clone(), hunks.clone()),
            other => panic!("expected one update, got {other:?}"),
        }
    }

    fn apply(original: &str, body: &str) -> Result<AppliedUpdate, PatchError> {
        let (path, _, hunks) = only_update(&patch(body));
        apply_hunks(&path, original, &hunks)
    }

    fn context(text: &str) -> HunkLine {
        HunkLine::Context(text.to_string())
    }
    fn remove(text: &str) -> HunkLine {
        HunkLine::Remove(text.to_string())
    }
    fn add(text: &str) -> HunkLine {
        HunkLine::Add(text.to_string())
    }

    /// Applies only the hunks whose index is in `accepted`.
    fn apply_subset(original: &str, applied: &AppliedUpdate, accepted: &[usize]) -> String {
        let mut out = String::new();
        let mut copied_to = 0;
        for (i, hunk) in applied.hunks.iter().enumerate() {
            if accepted.contains(&i) {
                out.push_str(&original[copied_to..hunk.old_bytes.start]);
                out.push_str(&hunk.new_text);
                copied_to = hunk.old_bytes.end;
            }
        }
        out.push_str(&original[copied_to..]);
        out
    }

    // --- parsing ---------------------------------------------------------

    #[test]
    fn add_file_parses_with_one_newline_per_line() {
        let parsed = parse_patch(&patch(
            "*** Add File: path/new.txt\n+line one\n+\n+line two",
        ))
        .unwrap();
        assert_eq!(
            parsed.ops,
            vec![FileOp::Add {
                path: "path/new.txt".into(),
                contents: "line one\n\nline two\n".into()
            }]
        );
    }

    #[test]
    fn delete_file_parses() {
        let parsed = parse_patch(&patch("*** Delete File: path/old.txt")).unwrap();
        assert_eq!(
            parsed.ops,
            vec![FileOp::Delete {
                path: "path/old.txt".into()
            }]
        );
    }

    #[test]
    fn update_with_context_header_parses_its_lines() {
        let (path, move_to, hunks) =
            only_update(&patch("*** Update File: src/lib.rs\n@@ fn context_line()\n context\n-removed\n+added\n context"));
        assert_eq!(path, "src/lib.rs");
        assert_eq!(move_to, None);
        assert_eq!(
            hunks,
            vec![Hunk {
                context: Some("fn context_line()".into()),
                lines: vec![
                    context("context"),
                    remove("removed"),
                    add("added"),
                    context("context")
                ],
                end_of_file: false,
            }]
        );
    }

    #[test]
    fn move_to_parses_as_the_update_destination() {
        let (path, move_to, hunks) = only_update(&patch(
            "*** Update File: src/lib.rs\n*** Move to: src/renamed.rs\n@@\n-x\n+y",
        ));
        assert_eq!(path, "src/lib.rs");
        assert_eq!(move_to.as_deref(), Some("src/renamed.rs"));
        assert_eq!(hunks.len(), 1);
    }

    #[test]
    fn pure_rename_without_hunks_parses() {
        let (_, move_to, hunks) = only_update(&patch("*** Update File: a.rs\n*** Move to: b.rs"));
        assert_eq!(move_to.as_deref(), Some("b.rs"));
        assert!(hunks.is_empty());
    }

    #[test]
    fn end_of_file_marker_flags_its_hunk() {
        let (_, _, hunks) = only_update(&patch("*** Update File: a\n@@\n-x\n+y\n*** End of File"));
        assert!(hunks[0].end_of_file);
    }

    #[test]
    fn multiple_hunks_parse_in_order() {
        let (_, _, hunks) = only_update(&patch(
            "*** Update File: a\n@@ one\n-a\n+b\n@@\n-c\n+d\n@@ three\n+e",
        ));
        let contexts: Vec<_> = hunks.iter().map(|h| h.context.as_deref()).collect();
        assert_eq!(contexts, vec![Some("one"), None, Some("three")]);
        assert_eq!(hunks[1].lines, vec![remove("c"), add("d")]);
    }

    #[test]
    fn multiple_files_parse_in_order() {
        let parsed = parse_patch(&patch(
            "*** Add File: n.txt\n+hi\n*** Delete File: o.txt\n*** Update File: u.rs\n@@\n-a\n+b\n*** End of File\n*** Add File: m.txt\n+yo",
        ))
        .unwrap();
        let paths: Vec<_> = parsed.ops.iter().map(FileOp::path).collect();
        assert_eq!(paths, vec!["n.txt", "o.txt", "u.rs", "m.txt"]);
    }

    #[test]
    fn first_hunk_may_omit_its_at_at_line() {
        let (_, _, hunks) = only_update(&patch("*** Update File: a\n import foo\n+bar"));
        assert_eq!(
            hunks,
            vec![Hunk {
                context: None,
                lines: vec![context("import foo"), add("bar")],
                end_of_file: false
            }]
        );
    }

    #[test]
    fn later_hunk_without_at_at_line_is_rejected() {
        let err =
            parse_patch(&patch("*** Update File: a\n@@\n-x\n*** End of File\n-y")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 6: expected `@@` to start hunk 2 of `a`, found `-y`"
        );
    }

    #[test]
    fn empty_line_inside_hunk_is_empty_context_but_trailing_blank_lines_are_dropped() {
        let parsed = parse_patch(&patch(
            "*** Update File: a\n@@\n x\n\n-y\n\n\n*** Delete File: b",
        ))
        .unwrap();
        let FileOp::Update { hunks, .. } = &parsed.ops[0] else {
            panic!("expected an update first: {parsed:?}");
        };
        assert_eq!(hunks[0].lines, vec![context("x"), context(""), remove("y")]);
        assert_eq!(parsed.ops[1], FileOp::Delete { path: "b".into() });
    }

    #[test]
    fn heredoc_wrapper_and_surrounding_whitespace_are_accepted() {
        let input =
            "\n  <<'EOF'\n  *** Begin Patch  \n*** Delete File: a\n  *** End Patch\nEOF\n\n";
        assert_eq!(
            parse_patch(input).unwrap().ops,
            vec![FileOp::Delete { path: "a".into() }]
        );
        let input = "apply_patch <<EOF\n*** Begin Patch\n*** Delete File: a\n*** End Patch\nEOF";
        assert!(parse_patch(input).is_ok());
    }

    #[test]
    fn crlf_patch_text_parses_like_lf() {
        let input = "*** Begin Patch\r\n*** Update File: a\r\n@@\r\n-x\r\n+y\r\n*** End Patch\r\n";
        let (_, _, hunks) = only_update(input);
        assert_eq!(hunks[0].lines, vec![remove("x"), add("y")]);
    }

    // --- parse failures --------------------------------------------------

    #[test]
    fn missing_begin_patch_is_reported() {
        let err = parse_patch("*** Update File: a\n@@\n-x\n*** End Patch").unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 1: the patch must start with `*** Begin Patch`, found `*** Update File: a`"
        );
    }

    #[test]
    fn missing_end_patch_is_reported() {
        let err = parse_patch("*** Begin Patch\n*** Update File: a\n@@\n-x").unwrap_err();
        assert_eq!(
            err,
            PatchError::MissingEnd {
                line: 4,
                found: "-x".into()
            }
        );
        assert!(err.to_string().contains("must end with `*** End Patch`"));
    }

    #[test]
    fn bad_header_line_names_its_line_number() {
        let err = parse_patch(&patch("*** Delete File: a\nfoo")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 3: expected `*** Add File:`, `*** Update File:` or `*** Delete File:`, found `foo`"
        );
    }

    #[test]
    fn add_file_line_without_plus_is_rejected() {
        let err = parse_patch(&patch("*** Add File: a\n+one\ntwo")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 4: every line of an added file must start with `+` (a lone `+` for an empty line), found `two`"
        );
        let err = parse_patch(&patch("*** Add File: a\n+one\n\n+three")).unwrap_err();
        assert!(matches!(err, PatchError::Syntax { line: 4, .. }), "{err}");
    }

    #[test]
    fn empty_patch_is_rejected() {
        assert_eq!(
            parse_patch("*** Begin Patch\n*** End Patch"),
            Err(PatchError::Empty)
        );
        assert_eq!(parse_patch("  \n"), Err(PatchError::Empty));
    }

    #[test]
    fn duplicate_path_is_rejected() {
        let err =
            parse_patch(&patch("*** Update File: a\n@@\n-x\n+y\n*** Delete File: a")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 6: `a` already appears at line 2; put all changes to one file in a single section"
        );
        let err = parse_patch(&patch(
            "*** Add File: b\n+x\n*** Update File: a\n*** Move to: b",
        ))
        .unwrap_err();
        assert!(
            matches!(
                err,
                PatchError::DuplicatePath {
                    line: 5,
                    first_line: 2,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn update_without_hunks_is_rejected() {
        let err = parse_patch(&patch("*** Update File: a\n*** Delete File: b")).unwrap_err();
        assert_eq!(err.to_string(), "line 2: `*** Update File: a` has no hunks");
    }

    #[test]
    fn hunk_line_without_prefix_is_rejected() {
        let err = parse_patch(&patch("*** Update File: a\n@@\n-x\nforgot the space")).unwrap_err();
        assert!(matches!(err, PatchError::Syntax { line: 5, .. }), "{err}");
    }

    // --- applying --------------------------------------------------------

    #[test]
    fn hunk_replaces_only_its_changed_lines() {
        let applied = apply(
            "a\nb\nc\nd\n",
            "*** Update File: f\n@@\n a\n-b\n+B\n+B2\n c",
        )
        .unwrap();
        assert_eq!(applied.new_text, "a\nB\nB2\nc\nd\n");
        assert_eq!(applied.hunks[0].old_lines, 1..2);
        assert_eq!(applied.hunks[0].new_lines, vec!["B", "B2"]);
    }

    #[test]
    fn hunks_apply_in_order_each_after_the_previous_match() {
        let applied = apply("x\ny\nx\ny\n", "*** Update File: f\n@@\n-x\n+1\n@@\n-x\n+2").unwrap();
        assert_eq!(applied.new_text, "1\ny\n2\ny\n");
    }

    #[test]
    fn unmatched_hunk_names_file_hunk_and_expected_lines() {
        let err = apply(
            "fn a() {}\nfn b() {}\n",
            "*** Update File: src/lib.rs\n@@\n-fn a() {}\n+fn a2() {}\n@@\n fn b() {}\n-fn c() {}\n@@\n-fn a() {}",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "src/lib.rs: hunk 2 of 3 did not match; expected to find:\n  fn b() {}\n  fn c() {}"
        );
    }

    #[test]
    fn out_of_order_hunk_says_where_its_lines_are() {
        let err = apply("a\nb\nc\n", "*** Update File: f\n@@\n-c\n+C\n@@\n-a\n+A").unwrap_err();
        assert!(err.to_string().ends_with("These lines occur at line 1, before where hunk 1 matched; hunks must be in file order."), "{err}");
    }

    #[test]
    fn lines_before_their_context_line_are_reported_as_such() {
        let err = apply(
            "x\nfn a() {\n}\n",
            "*** Update File: f\n@@ fn a() {\n-x\n+y",
        )
        .unwrap_err();
        assert!(
            err.to_string().ends_with(
                "These lines occur at line 1, before the hunk's `@@` line (found at line 2); \
                 they must come after it."
            ),
            "{err}"
        );
    }

    #[test]
    fn missing_context_line_is_reported() {
        let err = apply("fn a() {\n}\n", "*** Update File: f\n@@ fn b() {\n-}\n+};").unwrap_err();
        assert_eq!(
            err.to_string(),
            "f: hunk 1 of 1 did not match; its `@@ fn b() {` line was not found"
        );
    }

    #[test]
    fn trailing_whitespace_is_ignored_when_matching() {
        let applied = apply(
            "keep  \nold\t\n",
            "*** Update File: f\n@@\n keep\n-old\n+new",
        )
        .unwrap();
        assert_eq!(applied.new_text, "keep  \nnew\n");
    }

    #[test]
    fn indentation_is_ignored_when_matching_and_context_keeps_the_file_text() {
        let applied = apply(
            "    if x {\n        y();\n    }\n",
            "*** Update File: f\n@@\n if x {\n-y();\n+        z();\n }",
        )
        .unwrap();
        assert_eq!(applied.new_text, "    if x {\n        z();\n    }\n");
    }

    #[test]
    fn unicode_dashes_and_quotes_match_their_ascii_forms() {
        let original = "let s = \u{201C}a\u{2014}b\u{201D};\nlet t = \u{2018}x\u{2019};\n";
        let applied = apply(
            original,
            "*** Update File: f\n@@\n-let s = \"a-b\";\n+let s = \"ab\";\n let t = 'x';",
        )
        .unwrap();
        assert_eq!(
            applied.new_text,
            "let s = \"ab\";\nlet t = \u{2018}x\u{2019};\n"
        );
    }

    #[test]
    fn exact_match_further_on_beats_fuzzy_match_nearby() {
        let applied = apply("x  \ny\nx\n", "*** Update File: f\n@@\n-x\n+z").unwrap();
        assert_eq!(applied.new_text, "x  \ny\nz\n");
    }

    #[test]
    fn crlf_file_stays_crlf() {
        let applied = apply(
            "a\r\nb\r\nc\r\n",
            "*** Update File: f\n@@\n a\n-b\n+B\n+B2\n c",
        )
        .unwrap();
        assert_eq!(applied.new_text, "a\r\nB\r\nB2\r\nc\r\n");
        let applied = apply("a\r\nb\r\n", "*** Update File: f\n@@\n b\n+c").unwrap();
        assert_eq!(applied.new_text, "a\r\nb\r\nc\r\n");
    }

    #[test]
    fn file_without_trailing_newline_stays_without() {
        let replace = apply("a\nb", "*** Update File: f\n@@\n-b\n+B").unwrap();
        assert_eq!(replace.new_text, "a\nB");
        let append = apply("a\nb", "*** Update File: f\n@@\n b\n+c\n*** End of File").unwrap();
        assert_eq!(append.new_text, "a\nb\nc");
        let delete = apply("a\nb", "*** Update File: f\n@@\n-b").unwrap();
        assert_eq!(delete.new_text, "a");
        let with_newline = apply("a\nb\n", "*** Update File: f\n@@\n-b").unwrap();
        assert_eq!(with_newline.new_text, "a\n");
    }

    #[test]
    fn end_of_file_hunk_applies_to_the_last_lines() {
        let applied = apply(
            "}\nx\n}\n",
            "*** Update File: f\n@@\n-}\n+};\n*** End of File",
        )
        .unwrap();
        assert_eq!(applied.new_text, "}\nx\n};\n");
        let err = apply("}\nx\n", "*** Update File: f\n@@\n-}\n*** End of File").unwrap_err();
        assert!(
            err.to_string()
                .ends_with("so these must be the file's last lines."),
            "{err}"
        );
    }

    #[test]
    fn context_line_disambiguates_identical_blocks() {
        let original = "fn a() {\n    return 1;\n}\nfn b() {\n    return 1;\n}\n";
        let applied = apply(
            original,
            "*** Update File: f\n@@ fn b() {\n-    return 1;\n+    return 2;",
        )
        .unwrap();
        assert_eq!(
            applied.new_text,
            "fn a() {\n    return 1;\n}\nfn b() {\n    return 2;\n}\n"
        );
        assert_eq!(applied.hunks[0].old_lines, 4..5);
    }

    #[test]
    fn context_line_repeated_as_first_hunk_line_still_matches() {
        let applied = apply(
            "fn a() {\n    1\n}\n",
            "*** Update File: f\n@@ fn a() {\n fn a() {\n-    1\n+    2",
        )
        .unwrap();
        assert_eq!(applied.new_text, "fn a() {\n    2\n}\n");
    }

    #[test]
    fn pure_addition_with_context_inserts_after_the_context_line() {
        let applied = apply(
            "use a;\nfn main() {\n}\n",
            "*** Update File: f\n@@ fn main() {\n+    hi();",
        )
        .unwrap();
        assert_eq!(applied.new_text, "use a;\nfn main() {\n    hi();\n}\n");
        assert_eq!(applied.hunks[0].old_lines, 2..2);
    }

    #[test]
    fn pure_addition_without_context_appends_at_the_end() {
        let applied = apply("a\n", "*** Update File: f\n@@\n+b").unwrap();
        assert_eq!(applied.new_text, "a\nb\n");
        let applied = apply("", "*** Update File: f\n@@\n+b").unwrap();
        assert_eq!(applied.new_text, "b\n");
    }

    #[test]
    fn trailing_empty_context_line_is_retried_without() {
        let hunk = Hunk {
            context: None,
            lines: vec![remove("b"), add("c"), context("")],
            end_of_file: false,
        };
        let applied = apply_hunks("f", "a\nb\n", &[hunk]).unwrap();
        assert_eq!(applied.new_text, "a\nc\n");
    }

    #[test]
    fn each_hunk_edit_can_be_applied_alone() {
        let original = "one\ntwo\nthree\nfour\nfive";
        let applied = apply(
            original,
            "*** Update File: f\n@@\n-one\n+1\n@@\n two\n+2.5\n three\n@@\n-five\n+5\n*** End of File",
        )
        .unwrap();
        assert_eq!(applied.new_text, "1\ntwo\n2.5\nthree\nfour\n5");
        assert_eq!(
            apply_subset(original, &applied, &[0, 1, 2]),
            applied.new_text
        );
        assert_eq!(
            apply_subset(original, &applied, &[1]),
            "one\ntwo\n2.5\nthree\nfour\nfive"
        );
        assert_eq!(
            apply_subset(original, &applied, &[2]),
            "one\ntwo\nthree\nfour\n5"
        );
    }

    #[test]
    fn big_file_with_twenty_hunks_applies_correctly() {
        let lines = 200_000;
        let mut original = String::new();
        for i in 0..lines {
            original.push_str(&format!("line {i} of the big file\n"));
        }
        let mut body = String::from("*** Update File: big.txt\n");
        let mut expected = original.clone();
        for k in 0..20 {
            let i = k * 9_999 + 5;
            body.push_str(&format!(
                "@@\n line {} of the big file\n-line {i} of the big file\n+changed {k}\n line {} of the big file\n",
                i - 1,
                i + 1
            ));
            expected = expected.replacen(
                &format!("\nline {i} of the big file\n"),
                &format!("\nchanged {k}\n"),
                1,
            );
        }
        let applied = apply(&original, body.trim_end()).unwrap();
        assert_eq!(applied.hunks.len(), 20);
        assert_eq!(applied.hunks[19].old_lines, 19 * 9_999 + 5..19 * 9_999 + 6);
        assert!(applied.new_text == expected, "big-file output differs");
    }

    #[test]
    fn summary_names_each_operation() {
        let parsed = parse_patch(&patch(
            "*** Update File: src/lib.rs\n@@\n-a\n+b\n@@\n-c\n+d\n*** Add File: path/new.txt\n+x\n*** Delete File: path/old.txt\n*** Update File: a.rs\n*** Move to: b.rs\n@@\n-x",
        ))
        .unwrap();
        assert_eq!(
            parsed.summary(),
            "Update src/lib.rs (2 hunks), add path/new.txt, delete path/old.txt, move a.rs to b.rs (1 hunk)"
        );
    }
}
