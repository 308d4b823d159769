//! The editor's language servers as tools: `diagnostics`, `definition`,
//! `references` and `workspace_symbols` ask the editor through the
//! [`ClientBridge`](crate::vocab::bridge::ClientBridge), and
//! [`after_edit`] checks a patch against the editor's diagnostics.
//!
//! Each tool is offered only to a client that declared the feature
//! (`experimental.tandem.languageFeatures`). Positions go to the editor in
//! the negotiated encoding and come back to the model as 1-based lines and
//! columns in characters, each with its source line, read through the
//! buffer cache (unsaved text included).
//!
//! Invariant: an editor that cannot answer is a result the model reads
//! ("no answer: why"), never a failure of the turn; a location outside the
//! workspace is shown by path only (no file outside is read).

pub mod after_edit;
mod diagnostics;
mod locations;
mod symbols;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ropey::Rope;

use super::{ToolContext, ToolError, ToolRegistry};
use crate::buffers::{char_to_position, position_to_char, Position, PositionEncoding};
use crate::vocab::bridge::BridgeOutcome;
use crate::vocab::language::{TextPosition, TextRange};

/// How long one request to the editor may take.
pub const LANGUAGE_TIMEOUT: Duration = Duration::from_secs(30);
/// Source lines are cut at this many characters.
const MAX_SOURCE_CHARS: usize = 300;

/// Registers the four tools.
pub fn register(registry: &mut ToolRegistry) {
    registry.register(Arc::new(diagnostics::Diagnostics));
    registry.register(Arc::new(locations::Definition));
    registry.register(Arc::new(locations::References));
    registry.register(Arc::new(symbols::WorkspaceSymbols));
}

/// The texts of the files a result names, each read once, through the
/// buffer cache; files outside the workspace are not read.
pub(crate) struct Sources<'a> {
    ctx: &'a ToolContext,
    texts: HashMap<PathBuf, Option<Rope>>,
}

impl<'a> Sources<'a> {
    pub(crate) fn new(ctx: &'a ToolContext) -> Self {
        Sources {
            ctx,
            texts: HashMap::new(),
        }
    }

    fn rope(&mut self, path: &Path) -> Option<&Rope> {
        if !self.texts.contains_key(path) {
            let inside = path
                .to_str()
                .and_then(|p| self.ctx.workspace.resolve(p).ok());
            let rope = inside.and_then(|p| self.ctx.buffers.read_text(&p).ok().map(Rope::from));
            self.texts.insert(path.to_path_buf(), rope);
        }
        self.texts.get(path).and_then(Option::as_ref)
    }

    /// `path` as the model reads it: relative to the first root when under it.
    pub(crate) fn shown(&self, path: &Path) -> String {
        self.ctx.workspace.display_path(path)
    }

    /// The 1-based line and column (in characters) of an editor position,
    /// and the source line (cut), when the file can be read.
    pub(crate) fn place(&mut self, path: &Path, at: TextPosition) -> Place {
        let enc = self.ctx.buffers.encoding();
        let Some(rope) = self.rope(path) else {
            return Place {
                line: at.line as usize + 1,
                column: at.character as usize + 1,
                source: None,
            };
        };
        let position = Position {
            line: at.line,
            character: at.character,
        };
        let char_idx = position_to_char(rope, position, enc).unwrap_or(rope.len_chars());
        let line = rope.char_to_line(char_idx.min(rope.len_chars()));
        let column = char_idx - rope.line_to_char(line) + 1;
        Place {
            line: line + 1,
            column,
            source: Some(line_text(rope, line)),
        }
    }

    /// `path:line:col: source line`, grep's style with a column.
    pub(crate) fn location_line(&mut self, path: &Path, range: TextRange) -> String {
        let place = self.place(path, range.start);
        let shown = self.shown(path);
        match place.source {
            Some(source) => format!("{shown}:{}:{}: {source}", place.line, place.column),
            None => format!("{shown}:{}:{}", place.line, place.column),
        }
    }
}

/// A position as the model reads it.
pub(crate) struct Place {
    pub line: usize,
    pub column: usize,
    pub source: Option<String>,
}

/// Line `line` (0-based) of `rope` without its line break, cut.
fn line_text(rope: &Rope, line: usize) -> String {
    if line >= rope.len_lines() {
        return String::new();
    }
    let text: String = rope.line(line).chars().collect();
    let text = text.trim_end_matches(['\n', '\r']);
    match text.char_indices().nth(MAX_SOURCE_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// Where a `definition` or `references` call points: `line` (1-based) and
/// `column` (1-based, in characters) or a `symbol` named on that line.
pub(crate) struct Target {
    pub path: PathBuf,
    pub shown: String,
    pub position: TextPosition,
    /// The word at the position, for the result's header.
    pub word: String,
}

/// Resolves a call's place in the file (as the user sees it) to an editor
/// position in the negotiated encoding.
pub(crate) fn target(
    ctx: &ToolContext,
    path: &str,
    line: usize,
    column: Option<usize>,
    symbol: Option<&str>,
) -> Result<Target, ToolError> {
    let resolved = ctx
        .workspace
        .resolve(path)
        .map_err(|e| ToolError::new(e.to_string()))?;
    let shown = ctx.workspace.display_path(&resolved);
    let text = ctx
        .buffers
        .read_text(&resolved)
        .map_err(|e| ToolError::new(format!("cannot read `{shown}`: {e}")))?;
    let rope = Rope::from(text);
    let lines = if rope.len_chars() > 0 && rope.char(rope.len_chars() - 1) == '\n' {
        rope.len_lines() - 1
    } else {
        rope.len_lines()
    };
    // Models count from 0 now and then; line 0 can only mean the first.
    let line = line.max(1);
    if line > lines {
        return Err(ToolError::new(format!(
            "`{shown}` has {lines} lines; there is no line {line}"
        )));
    }
    let source = line_text(&rope, line - 1);
    let chars: Vec<char> = source.chars().collect();
    let (column0, word) = match (symbol.filter(|s| !s.is_empty()), column) {
        (Some(symbol), _) => match find_symbol(&source, symbol) {
            Some(at) => (at, symbol.to_string()),
            None => {
                return Err(ToolError::new(format!(
                    "`{symbol}` is not on line {line} of `{shown}`, which reads: {source}"
                )))
            }
        },
        (None, Some(column)) => {
            let column0 = column.max(1) - 1;
            if column0 > chars.len() {
                return Err(ToolError::new(format!(
                    "line {line} of `{shown}` has {} characters; there is no column {column}; it reads: {source}",
                    chars.len()
                )));
            }
            (column0, word_at(&chars, column0))
        }
        (None, None) => {
            return Err(ToolError::new(
                "give `column` (1-based, in characters) or `symbol` (a name on that line)",
            ))
        }
    };
    let char_idx = rope.line_to_char(line - 1) + column0;
    let enc: PositionEncoding = ctx.buffers.encoding();
    let position = char_to_position(&rope, char_idx, enc);
    Ok(Target {
        path: resolved,
        shown,
        position: TextPosition {
            line: position.line,
            character: position.character,
        },
        word,
    })
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

/// The character column of `symbol` in `line`: its first occurrence as a
/// whole word, else its first occurrence at all.
fn find_symbol(line: &str, symbol: &str) -> Option<usize> {
    let char_column = |byte: usize| line[..byte].chars().count();
    let whole = line.match_indices(symbol).find(|(at, _)| {
        let before = line[..*at].chars().next_back();
        let after = line[at + symbol.len()..].chars().next();
        !before.is_some_and(is_word_char) && !after.is_some_and(is_word_char)
    });
    whole
        .or_else(|| line.match_indices(symbol).next())
        .map(|(at, _)| char_column(at))
}

/// The identifier around character `column` of `chars`.
fn word_at(chars: &[char], column: usize) -> String {
    let mut start = column.min(chars.len());
    while start > 0 && is_word_char(chars[start - 1]) {
        start -= 1;
    }
    let mut end = column.min(chars.len());
    while end < chars.len() && is_word_char(chars[end]) {
        end += 1;
    }
    chars[start..end].iter().collect()
}

/// The editor's answer, or why there is none: a result for the model.
pub(crate) fn answered<T>(
    outcome: BridgeOutcome<T>,
    what: &str,
    ctx: &ToolContext,
) -> Result<Result<T, String>, ToolError> {
    match outcome {
        BridgeOutcome::Answered(answer) => Ok(Ok(answer)),
        BridgeOutcome::Cancelled if ctx.cancel.is_cancelled() => Err(ToolError::new("cancelled")),
        BridgeOutcome::Cancelled => Ok(Err(format!(
            "The editor cancelled the {what} request; no answer."
        ))),
        BridgeOutcome::Unavailable(why) => {
            Ok(Err(format!("The editor could not answer ({what}): {why}")))
        }
    }
}

/// ` (the editor says: why)` when the editor gave a reason.
pub(crate) fn because(reason: &Option<String>) -> String {
    match reason {
        Some(reason) if !reason.trim().is_empty() => {
            format!(" (the editor says: {})", reason.trim())
        }
        _ => String::new(),
    }
}
