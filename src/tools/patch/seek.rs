//! Locating a hunk in a file the way Codex's `seek_sequence` does (exact, then
//! looser comparisons), and phrasing a miss so the model can fix its patch.

use super::apply::Source;
use super::parse::END_OF_FILE;
use super::{Hunk, HunkLine, PatchError};

/// Where a hunk matched: its old lines start at `start`; the next hunk is
/// searched for from `end`. `lines` may have lost trailing empty context.
pub(super) struct Located<'h> {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) lines: &'h [HunkLine],
}

pub(super) enum Miss {
    Context,
    Lines {
        /// Where the old lines do occur, searching the whole file.
        found_at: Option<usize>,
        /// Where the hunk's `@@` context line matched.
        context_at: Option<usize>,
    },
}

pub(super) fn locate<'h>(
    source: &Source,
    hunk: &'h Hunk,
    cursor: usize,
) -> Result<Located<'h>, Miss> {
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
    pub(super) fn from_miss(
        miss: Miss,
        path: &str,
        index: usize,
        hunks: &[Hunk],
        cursor: usize,
    ) -> Self {
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
