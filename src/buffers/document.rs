//! One open document: its text and, only when it needs one, a masked twin
//! whose ropey lines are LSP's; and [`Snapshot`], a cheap copy whose
//! position conversions are O(log n).

use std::borrow::Cow;

use ropey::Rope;

use super::position::{has_non_lsp_break, lsp_char_to_position, lsp_position_to_char, masked};
use super::{LineOutOfRange, Position, PositionEncoding, Range};

/// A cheap copy of an open document (ropes share structure).
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub rope: Rope,
    pub version: i32,
    pub(super) lsp_lines: Option<Rope>,
}

impl Snapshot {
    /// A snapshot of text that is not an open document (a file read from
    /// disk), so positions in it convert as fast as in a buffer's.
    pub fn from_text(text: &str, version: i32) -> Snapshot {
        let content = Content::new(text);
        Snapshot {
            rope: content.text,
            version,
            lsp_lines: content.lsp_lines,
        }
    }

    /// The char index `pos` names in this snapshot; O(log n), unlike the free
    /// [`position_to_char`](super::position_to_char), because the snapshot carries its LSP line index.
    pub fn position_to_char(
        &self,
        pos: Position,
        enc: PositionEncoding,
    ) -> Result<usize, LineOutOfRange> {
        lsp_position_to_char(self.lsp_lines.as_ref().unwrap_or(&self.rope), pos, enc)
    }

    /// The LSP position of `char_idx` in this snapshot; O(log n), unlike the
    /// free [`char_to_position`](super::char_to_position).
    pub fn char_to_position(&self, char_idx: usize, enc: PositionEncoding) -> Position {
        lsp_char_to_position(self.lsp_lines.as_ref().unwrap_or(&self.rope), char_idx, enc)
    }
}

/// A document's text and an LSP line index over it.
#[derive(Debug, Clone)]
pub(super) struct Content {
    pub(super) text: Rope,
    /// `text` with non-LSP line breaks masked (see [`lsp_stand_in`](super::position::lsp_stand_in)), so that
    /// ropey's line index over it is LSP's. `None` while `text` has had no
    /// such break since it was last replaced wholesale — the usual case —
    /// and ropey's index over `text` is LSP's already.
    pub(super) lsp_lines: Option<Rope>,
}

impl Content {
    pub(super) fn new(text: &str) -> Self {
        let lsp_lines = has_non_lsp_break(text).then(|| Rope::from_str(&masked(text)));
        Content {
            text: Rope::from_str(text),
            lsp_lines,
        }
    }

    pub(super) fn lines(&self) -> &Rope {
        self.lsp_lines.as_ref().unwrap_or(&self.text)
    }

    /// Replaces the chars in `start..end` (valid, ordered indices) with `new`.
    pub(super) fn replace(&mut self, start: usize, end: usize, new: &str) {
        let masked_new = masked(new);
        if self.lsp_lines.is_none() && matches!(masked_new, Cow::Owned(_)) {
            // The first non-LSP break: from here on the twin is needed. Until
            // now it would have equalled `text`, so a clone (O(1)) is it.
            self.lsp_lines = Some(self.text.clone());
        }
        self.text.remove(start..end);
        self.text.insert(start, new);
        if let Some(lines) = &mut self.lsp_lines {
            lines.remove(start..end);
            lines.insert(start, &masked_new);
        }
    }

    /// Replaces the LSP `range` with `new`.
    pub(super) fn edit(
        &mut self,
        range: Range,
        new: &str,
        enc: PositionEncoding,
    ) -> Result<(), LineOutOfRange> {
        let start = lsp_position_to_char(self.lines(), range.start, enc)?;
        let end = lsp_position_to_char(self.lines(), range.end, enc)?;
        // A reversed range is a client bug; taking it as the span between the
        // two positions is the reading least likely to lose text.
        self.replace(start.min(end), start.max(end), new);
        Ok(())
    }
}

#[derive(Debug)]
pub(super) struct Document {
    pub(super) content: Content,
    pub(super) version: i32,
}
