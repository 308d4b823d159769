//! One open document: its text, and [`Snapshot`], a cheap copy whose
//! position conversions are O(log n).

use ropey::Rope;

use super::position::{lsp_char_to_position, lsp_position_to_char};
use super::{LineOutOfRange, Position, PositionEncoding, Range};

/// A cheap copy of an open document (ropes share structure).
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub rope: Rope,
    pub version: i32,
}

impl Snapshot {
    /// A snapshot of text that is not an open document (a file read from
    /// disk), so positions in it convert as fast as in a buffer's.
    pub fn from_text(text: &str, version: i32) -> Snapshot {
        Snapshot {
            rope: Rope::from_str(text),
            version,
        }
    }

    /// The char index `pos` names in this snapshot; O(log n).
    pub fn position_to_char(
        &self,
        pos: Position,
        enc: PositionEncoding,
    ) -> Result<usize, LineOutOfRange> {
        lsp_position_to_char(&self.rope, pos, enc)
    }

    /// The LSP position of `char_idx` in this snapshot; O(log n).
    pub fn char_to_position(&self, char_idx: usize, enc: PositionEncoding) -> Position {
        lsp_char_to_position(&self.rope, char_idx, enc)
    }
}

/// A document's text; ropey's line index over it is LSP's (ropey is built
/// with `cr_lines` and without `unicode_lines`: lines end at `\n`, `\r\n`
/// and `\r` only).
#[derive(Debug, Clone)]
pub(super) struct Content {
    pub(super) text: Rope,
}

impl Content {
    pub(super) fn new(text: &str) -> Self {
        Content {
            text: Rope::from_str(text),
        }
    }

    /// Replaces the chars in `start..end` (valid, ordered indices) with `new`.
    pub(super) fn replace(&mut self, start: usize, end: usize, new: &str) {
        self.text.remove(start..end);
        self.text.insert(start, new);
    }

    /// Replaces the LSP `range` with `new`.
    pub(super) fn edit(
        &mut self,
        range: Range,
        new: &str,
        enc: PositionEncoding,
    ) -> Result<(), LineOutOfRange> {
        let start = lsp_position_to_char(&self.text, range.start, enc)?;
        let end = lsp_position_to_char(&self.text, range.end, enc)?;
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
