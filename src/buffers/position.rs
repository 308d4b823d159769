//! Converting LSP positions (in the negotiated encoding) to char offsets
//! and back. LSP ends lines only at `\n`, `\r\n` and `\r`, and so does
//! ropey as this crate builds it (`cr_lines` without `unicode_lines`), so a
//! rope's line index is LSP's.

use ropey::{Rope, RopeSlice};

use super::{LineOutOfRange, Position, PositionEncoding};

/// The char index in `rope` that the LSP position `pos` names.
///
/// Follows LSP: a `character` past the end of its line means the end of the
/// line (before its line break); line `len_lines` means the end of the
/// document; a `character` inside a char (half a surrogate pair, a UTF-8
/// continuation byte) rounds down to that char's start. A line further out is
/// an error.
///
/// O(log n).
pub fn position_to_char(
    rope: &Rope,
    pos: Position,
    enc: PositionEncoding,
) -> Result<usize, LineOutOfRange> {
    lsp_position_to_char(rope, pos, enc)
}

/// The LSP position of `char_idx` in `rope` (clamped to the end of the rope);
/// the inverse of [`position_to_char`] on char boundaries. A char index inside
/// a `\r\n` maps to the end of its line. O(log n).
pub fn char_to_position(rope: &Rope, char_idx: usize, enc: PositionEncoding) -> Position {
    lsp_char_to_position(rope, char_idx, enc)
}

/// [`position_to_char`]'s body, shared with [`Snapshot`](super::Snapshot).
pub(super) fn lsp_position_to_char(
    lines: &Rope,
    pos: Position,
    enc: PositionEncoding,
) -> Result<usize, LineOutOfRange> {
    let line = pos.line as usize;
    let line_count = lines.len_lines();
    if line > line_count {
        return Err(LineOutOfRange {
            line: pos.line,
            lines: line_count,
        });
    }
    if line == line_count {
        // Clients address "after everything" as the start of the line after
        // the last one (e.g. a range replacing the whole buffer).
        return Ok(lines.len_chars());
    }
    let content = line_content(lines.line(line));
    let character = pos.character as usize;
    // Ropey's slice conversions are O(log n) and already round a unit inside a
    // char down to that char, which is what a half surrogate pair needs.
    let column = match enc {
        PositionEncoding::Utf8 => content.byte_to_char(character.min(content.len_bytes())),
        PositionEncoding::Utf16 => content.utf16_cu_to_char(character.min(content.len_utf16_cu())),
        PositionEncoding::Utf32 => character.min(content.len_chars()),
    };
    Ok(lines.line_to_char(line) + column)
}

/// [`char_to_position`]'s body, shared with [`Snapshot`](super::Snapshot).
pub(super) fn lsp_char_to_position(
    lines: &Rope,
    char_idx: usize,
    enc: PositionEncoding,
) -> Position {
    let char_idx = char_idx.min(lines.len_chars());
    let line = lines.char_to_line(char_idx);
    let content = line_content(lines.line(line));
    // Inside a line break (between `\r` and `\n`) is not addressable in LSP;
    // the line's end is the nearest position that is.
    let column = (char_idx - lines.line_to_char(line)).min(content.len_chars());
    let character = match enc {
        PositionEncoding::Utf8 => content.char_to_byte(column),
        PositionEncoding::Utf16 => content.char_to_utf16_cu(column),
        PositionEncoding::Utf32 => column,
    };
    Position {
        line: saturating_u32(line),
        character: saturating_u32(character),
    }
}

fn saturating_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// `line` without its trailing line break; LSP columns stop before it.
fn line_content(line: RopeSlice<'_>) -> RopeSlice<'_> {
    let len = line.len_chars();
    let last = |back: usize| (len >= back).then(|| line.char(len - back));
    let break_len = match (last(2), last(1)) {
        (Some('\r'), Some('\n')) => 2,
        (_, Some('\n' | '\r')) => 1,
        _ => 0,
    };
    line.slice(..len - break_len)
}
