//! Parsing the `apply_patch` envelope into file operations and hunks, as
//! leniently as Codex does; every error names the patch line to fix.

use std::collections::HashMap;

use super::{FileOp, Hunk, HunkLine, Patch, PatchError};

pub(super) const BEGIN_PATCH: &str = "*** Begin Patch";
pub(super) const END_PATCH: &str = "*** End Patch";
pub(super) const ADD_FILE: &str = "*** Add File:";
pub(super) const DELETE_FILE: &str = "*** Delete File:";
pub(super) const UPDATE_FILE: &str = "*** Update File:";
pub(super) const MOVE_TO: &str = "*** Move to:";
pub(super) const END_OF_FILE: &str = "*** End of File";

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
