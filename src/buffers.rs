//! The file-state cache: one rope per open document, updated by the editor's
//! incremental `didChange`s, so tools see what the user sees.
//!
//! Invariant: positions arrive in the negotiated [`PositionEncoding`]
//! (UTF-16 code units by default) and are converted to char offsets here and
//! nowhere else; a change that does not fit the document is an error and
//! leaves the document untouched.
//!
//! Lines are LSP's: only `\n`, `\r\n` and `\r` end a line. Ropey (with its
//! default `unicode_lines` feature, which we cannot turn off) also ends lines
//! at VT, FF, NEL, LS and PS, so its line index is not LSP's whenever a
//! document holds one of those. Each document therefore keeps, only when it
//! needs one, a masked twin of its rope whose ropey lines are LSP's lines.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::RwLock;

use ropey::{Rope, RopeSlice};
use tokio::sync::watch;

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

/// A cheap copy of an open document (ropes share structure).
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub rope: Rope,
    pub version: i32,
    lsp_lines: Option<Rope>,
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
    /// [`position_to_char`], because the snapshot carries its LSP line index.
    pub fn position_to_char(
        &self,
        pos: Position,
        enc: PositionEncoding,
    ) -> Result<usize, LineOutOfRange> {
        lsp_position_to_char(self.lsp_lines.as_ref().unwrap_or(&self.rope), pos, enc)
    }

    /// The LSP position of `char_idx` in this snapshot; O(log n), unlike the
    /// free [`char_to_position`].
    pub fn char_to_position(&self, char_idx: usize, enc: PositionEncoding) -> Position {
        lsp_char_to_position(self.lsp_lines.as_ref().unwrap_or(&self.rope), char_idx, enc)
    }
}

/// The char index in `rope` that the LSP position `pos` names.
///
/// Follows LSP: a `character` past the end of its line means the end of the
/// line (before its line break); line `len_lines` means the end of the
/// document; a `character` inside a char (half a surrogate pair, a UTF-8
/// continuation byte) rounds down to that char's start. A line further out is
/// an error.
///
/// Exact for any rope. When `rope` holds a break ropey counts and LSP does
/// not (VT, FF, NEL, LS, PS), nothing in a bare rope says where, so this scans
/// it: O(n). [`Snapshot::position_to_char`] avoids the scan.
pub fn position_to_char(
    rope: &Rope,
    pos: Position,
    enc: PositionEncoding,
) -> Result<usize, LineOutOfRange> {
    match mask_non_lsp_breaks(rope) {
        Some(masked) => lsp_position_to_char(&masked, pos, enc),
        None => lsp_position_to_char(rope, pos, enc),
    }
}

/// The LSP position of `char_idx` in `rope` (clamped to the end of the rope);
/// the inverse of [`position_to_char`] on char boundaries. A char index inside
/// a `\r\n` maps to the end of its line. O(n) for the same reason as
/// [`position_to_char`]; [`Snapshot::char_to_position`] is O(log n).
pub fn char_to_position(rope: &Rope, char_idx: usize, enc: PositionEncoding) -> Position {
    match mask_non_lsp_breaks(rope) {
        Some(masked) => lsp_char_to_position(&masked, char_idx, enc),
        None => lsp_char_to_position(rope, char_idx, enc),
    }
}

/// [`position_to_char`] for a rope whose ropey line breaks are exactly LSP's.
fn lsp_position_to_char(
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

/// [`char_to_position`] for a rope whose ropey line breaks are exactly LSP's.
fn lsp_char_to_position(lines: &Rope, char_idx: usize, enc: PositionEncoding) -> Position {
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

/// Line breaks ropey's `unicode_lines` counts that LSP does not, each with a
/// stand-in that is not a line break and has the same width in UTF-8, UTF-16
/// and chars, so a masked rope converts columns exactly like the original.
fn lsp_stand_in(c: char) -> Option<char> {
    match c {
        '\u{000B}' | '\u{000C}' => Some(' '),
        '\u{0085}' => Some('\u{00A0}'),
        '\u{2028}' | '\u{2029}' => Some('\u{2027}'),
        _ => None,
    }
}

fn has_non_lsp_break(text: &str) -> bool {
    text.chars().any(|c| lsp_stand_in(c).is_some())
}

/// `text` with its non-LSP line breaks replaced by their stand-ins; borrowed
/// when there are none, which is nearly always.
fn masked(text: &str) -> Cow<'_, str> {
    if has_non_lsp_break(text) {
        Cow::Owned(text.chars().map(|c| lsp_stand_in(c).unwrap_or(c)).collect())
    } else {
        Cow::Borrowed(text)
    }
}

/// A copy of `rope` whose ropey lines are LSP's, or `None` when `rope`'s
/// already are.
fn mask_non_lsp_breaks(rope: &Rope) -> Option<Rope> {
    if !rope.chunks().any(has_non_lsp_break) {
        return None;
    }
    let mut builder = ropey::RopeBuilder::new();
    for chunk in rope.chunks() {
        builder.append(&masked(chunk));
    }
    Some(builder.finish())
}

/// A document's text and an LSP line index over it.
#[derive(Debug, Clone)]
struct Content {
    text: Rope,
    /// `text` with non-LSP line breaks masked (see [`lsp_stand_in`]), so that
    /// ropey's line index over it is LSP's. `None` while `text` has had no
    /// such break since it was last replaced wholesale — the usual case —
    /// and ropey's index over `text` is LSP's already.
    lsp_lines: Option<Rope>,
}

impl Content {
    fn new(text: &str) -> Self {
        let lsp_lines = has_non_lsp_break(text).then(|| Rope::from_str(&masked(text)));
        Content {
            text: Rope::from_str(text),
            lsp_lines,
        }
    }

    fn lines(&self) -> &Rope {
        self.lsp_lines.as_ref().unwrap_or(&self.text)
    }

    /// Replaces the chars in `start..end` (valid, ordered indices) with `new`.
    fn replace(&mut self, start: usize, end: usize, new: &str) {
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
    fn edit(
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
struct Document {
    content: Content,
    version: i32,
}

/// The open documents, keyed by absolute (canonical where it exists) path.
#[derive(Debug, Default)]
pub struct BufferCache {
    docs: RwLock<HashMap<PathBuf, Document>>,
    encoding: RwLock<PositionEncoding>,
    /// Bumped after every change to the documents, so a tool waiting for
    /// the editor to report an edit can wait instead of polling.
    changes: watch::Sender<u64>,
}

impl BufferCache {
    pub fn new() -> Self {
        BufferCache::default()
    }

    /// Sets how incoming positions count characters, as negotiated at
    /// `initialize`.
    pub fn set_encoding(&self, encoding: PositionEncoding) {
        *self.encoding.write().unwrap_or_else(|e| e.into_inner()) = encoding;
    }

    pub fn encoding(&self) -> PositionEncoding {
        *self.encoding.read().unwrap_or_else(|e| e.into_inner())
    }

    /// A receiver that is marked changed after every `open`, applied
    /// `change`, `close` and `saved` from now on.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// `didOpen`: starts mirroring `path`, replacing any earlier copy.
    pub fn open(&self, path: PathBuf, version: i32, text: &str) {
        let key = normalize_path(&path);
        let doc = Document {
            content: Content::new(text),
            version,
        };
        self.docs
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, doc);
        self.changed();
    }

    /// Applies the changes in order; all or nothing.
    pub fn change(
        &self,
        path: &Path,
        version: i32,
        changes: &[TextChange],
    ) -> Result<(), BufferError> {
        let key = normalize_path(path);
        let enc = self.encoding();
        let mut docs = self.docs.write().unwrap_or_else(|e| e.into_inner());
        let doc = docs
            .get_mut(&key)
            .ok_or_else(|| BufferError::NotOpen(path.display().to_string()))?;
        // Work on a clone (O(1) for ropes) so that a bad change — or a panic,
        // which poisoning would otherwise let others observe half-done — never
        // leaves a partly applied notification behind.
        let mut content = doc.content.clone();
        for change in changes {
            let Some(range) = change.range else {
                content = Content::new(&change.text);
                continue;
            };
            content
                .edit(range, &change.text, enc)
                .map_err(|e| BufferError::BadRange {
                    path: path.display().to_string(),
                    range,
                    lines: e.lines,
                })?;
        }
        doc.content = content;
        doc.version = version;
        drop(docs);
        self.changed();
        Ok(())
    }

    /// `didClose`: stops mirroring `path`; reads go to disk again.
    pub fn close(&self, path: &Path) {
        let key = normalize_path(path);
        self.docs
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        self.changed();
    }

    /// `didSave`; when the client includes the text, it replaces the buffer.
    pub fn saved(&self, path: &Path, text: Option<&str>) {
        let Some(text) = text else { return };
        let key = normalize_path(path);
        if let Some(doc) = self
            .docs
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&key)
        {
            doc.content = Content::new(text);
        }
        self.changed();
    }

    /// The open document's current text and version, or `None` if not open.
    pub fn snapshot(&self, path: &Path) -> Option<Snapshot> {
        let key = normalize_path(path);
        let docs = self.docs.read().unwrap_or_else(|e| e.into_inner());
        docs.get(&key).map(|doc| Snapshot {
            rope: doc.content.text.clone(),
            version: doc.version,
            lsp_lines: doc.content.lsp_lines.clone(),
        })
    }

    /// The text the user sees: the buffer when open, else the file on disk.
    pub fn read_text(&self, path: &Path) -> std::io::Result<String> {
        match self.snapshot(path) {
            // Convert outside the lock: it is O(n).
            Some(snapshot) => Ok(snapshot.rope.to_string()),
            None => std::fs::read_to_string(path),
        }
    }

    /// Paths of open documents, normalized, in sorted order.
    pub fn open_paths(&self) -> Vec<PathBuf> {
        let docs = self.docs.read().unwrap_or_else(|e| e.into_inner());
        let mut paths: Vec<PathBuf> = docs.keys().cloned().collect();
        paths.sort();
        paths
    }
}

/// The cache key for `path`: canonical when it exists, so `/a/./b` and
/// symlinks meet what tools resolve. When it does not exist (a new, unsaved
/// file, or one deleted under the editor), its nearest existing ancestor is
/// canonicalized and the rest appended, so the key stays the same when the
/// file later appears or goes; with no existing ancestor, `path` as given.
fn normalize_path(path: &Path) -> PathBuf {
    let mut existing = path;
    let mut missing = Vec::new();
    loop {
        if let Ok(mut resolved) = std::fs::canonicalize(existing) {
            // The missing part has no symlinks (it does not exist), so `..`
            // in it can be resolved lexically.
            for component in missing.iter().rev() {
                match component {
                    Component::ParentDir => {
                        resolved.pop();
                    }
                    Component::Normal(name) => resolved.push(name),
                    _ => {}
                }
            }
            return resolved;
        }
        let mut components = existing.components();
        match components.next_back() {
            Some(component @ (Component::Normal(_) | Component::ParentDir | Component::CurDir)) => {
                missing.push(component);
                existing = components.as_path();
            }
            _ => return path.to_path_buf(),
        }
        if existing.as_os_str().is_empty() {
            return path.to_path_buf();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(line: u32, character: u32) -> Position {
        Position { line, character }
    }

    fn edit(start: (u32, u32), end: (u32, u32), text: &str) -> TextChange {
        TextChange {
            range: Some(Range {
                start: pos(start.0, start.1),
                end: pos(end.0, end.1),
            }),
            text: text.into(),
        }
    }

    /// A cache with one open document at a path that does not exist on disk.
    fn cache_with(text: &str, enc: PositionEncoding) -> (BufferCache, PathBuf) {
        let cache = BufferCache::new();
        cache.set_encoding(enc);
        let path = PathBuf::from("/nonexistent-tandem-test/doc.txt");
        cache.open(path.clone(), 1, text);
        (cache, path)
    }

    fn text_after(text: &str, enc: PositionEncoding, changes: &[TextChange]) -> String {
        let (cache, path) = cache_with(text, enc);
        cache.change(&path, 2, changes).expect("change applies");
        cache.read_text(&path).expect("open document reads")
    }

    #[test]
    fn utf16_edit_after_emoji_lands_after_it() {
        // 😀 is two UTF-16 code units.
        let out = text_after("😀x", PositionEncoding::Utf16, &[edit((0, 2), (0, 3), "y")]);
        assert_eq!(out, "😀y");
    }

    #[test]
    fn utf8_edit_after_emoji_lands_after_it() {
        // 😀 is four UTF-8 bytes.
        let out = text_after("😀x", PositionEncoding::Utf8, &[edit((0, 4), (0, 5), "y")]);
        assert_eq!(out, "😀y");
    }

    #[test]
    fn utf32_edit_after_emoji_lands_after_it() {
        let out = text_after("😀x", PositionEncoding::Utf32, &[edit((0, 1), (0, 2), "y")]);
        assert_eq!(out, "😀y");
    }

    #[test]
    fn cjk_columns_count_per_encoding() {
        // 日本語: one UTF-16 unit and three UTF-8 bytes per char.
        let cases = [
            (PositionEncoding::Utf16, 2),
            (PositionEncoding::Utf8, 6),
            (PositionEncoding::Utf32, 2),
        ];
        for (enc, character) in cases {
            let out = text_after("日本語", enc, &[edit((0, character), (0, character), "|")]);
            assert_eq!(out, "日本|語", "{enc:?}");
        }
    }

    #[test]
    fn utf16_position_inside_surrogate_pair_rounds_down_to_the_char() {
        let out = text_after(
            "a😀b",
            PositionEncoding::Utf16,
            &[edit((0, 2), (0, 2), "|")],
        );
        assert_eq!(out, "a|😀b");
    }

    #[test]
    fn utf8_position_inside_multibyte_char_rounds_down_to_the_char() {
        let out = text_after("日本", PositionEncoding::Utf8, &[edit((0, 4), (0, 4), "|")]);
        assert_eq!(out, "日|本");
    }

    #[test]
    fn crlf_insert_past_line_end_lands_before_the_line_break() {
        let out = text_after(
            "ab\r\ncd\r\n",
            PositionEncoding::Utf16,
            &[edit((0, 99), (0, 99), "!")],
        );
        assert_eq!(out, "ab!\r\ncd\r\n");
    }

    #[test]
    fn crlf_delete_of_line_break_joins_lines() {
        let out = text_after(
            "ab\r\ncd",
            PositionEncoding::Utf16,
            &[edit((0, 2), (1, 0), "")],
        );
        assert_eq!(out, "abcd");
    }

    #[test]
    fn lone_cr_ends_a_line() {
        let out = text_after(
            "ab\rcd",
            PositionEncoding::Utf16,
            &[edit((1, 1), (1, 1), "|")],
        );
        assert_eq!(out, "ab\rc|d");
    }

    #[test]
    fn form_feed_and_unicode_separators_do_not_end_lines() {
        // Ropey's unicode_lines counts FF, VT, NEL, LS and PS as line breaks;
        // LSP does not, so line 1 here is "after", not a piece of line 0.
        let text = "a\u{000C}b\u{2028}c\u{0085}d\u{000B}e\nafter";
        let out = text_after(text, PositionEncoding::Utf16, &[edit((1, 0), (1, 0), "|")]);
        assert_eq!(out, "a\u{000C}b\u{2028}c\u{0085}d\u{000B}e\n|after");
        // Columns run through them.
        let out = text_after(text, PositionEncoding::Utf8, &[edit((0, 7), (0, 7), "|")]);
        assert_eq!(out, "a\u{000C}b\u{2028}c|\u{0085}d\u{000B}e\nafter");
    }

    #[test]
    fn separator_typed_into_a_document_does_not_shift_later_lines() {
        let (cache, path) = cache_with("one\ntwo\nthree", PositionEncoding::Utf16);
        cache
            .change(&path, 2, &[edit((0, 3), (0, 3), "\u{000C}")])
            .expect("insert FF");
        cache
            .change(&path, 3, &[edit((2, 0), (2, 0), "|")])
            .expect("edit line 2");
        assert_eq!(
            cache.read_text(&path).expect("reads"),
            "one\u{000C}\ntwo\n|three"
        );
        let snapshot = cache.snapshot(&path).expect("open");
        assert_eq!(
            snapshot.char_to_position(9, PositionEncoding::Utf16),
            pos(2, 0)
        );
    }

    #[test]
    fn several_changes_in_one_call_apply_in_order() {
        // The second change's position is in the text produced by the first.
        let out = text_after(
            "hello\nworld",
            PositionEncoding::Utf16,
            &[
                edit((0, 0), (0, 5), "hi"),
                edit((0, 2), (0, 2), " there"),
                edit((1, 0), (1, 5), "you"),
            ],
        );
        assert_eq!(out, "hi there\nyou");
    }

    #[test]
    fn change_without_range_replaces_whole_text() {
        let (cache, path) = cache_with("old\ntext", PositionEncoding::Utf16);
        cache
            .change(
                &path,
                7,
                &[TextChange {
                    range: None,
                    text: "new".into(),
                }],
            )
            .expect("applies");
        let snapshot = cache.snapshot(&path).expect("open");
        assert_eq!(snapshot.rope.to_string(), "new");
        assert_eq!(snapshot.version, 7);
    }

    #[test]
    fn position_on_line_after_last_means_end_of_document() {
        let out = text_after(
            "a\nb",
            PositionEncoding::Utf16,
            &[edit((0, 0), (2, 0), "whole")],
        );
        assert_eq!(out, "whole");
        let out = text_after(
            "a\nb\n",
            PositionEncoding::Utf16,
            &[edit((3, 0), (3, 0), "z")],
        );
        assert_eq!(out, "a\nb\nz");
    }

    #[test]
    fn bad_range_errors_and_leaves_document_untouched() {
        let (cache, path) = cache_with("a\nb", PositionEncoding::Utf16);
        // The first change is fine, the second names a line that does not exist.
        let result = cache.change(
            &path,
            2,
            &[edit((0, 0), (0, 0), "x"), edit((5, 0), (5, 0), "y")],
        );
        assert!(
            matches!(result, Err(BufferError::BadRange { lines: 2, .. })),
            "{result:?}"
        );
        let snapshot = cache.snapshot(&path).expect("open");
        assert_eq!(snapshot.rope.to_string(), "a\nb");
        assert_eq!(snapshot.version, 1);
    }

    #[test]
    fn subscribers_are_told_of_applied_changes_only() {
        let (cache, path) = cache_with("a\nb", PositionEncoding::Utf16);
        let mut changes = cache.subscribe();
        assert!(!changes.has_changed().expect("sender alive"));
        let _ = cache.change(&path, 2, &[edit((9, 0), (9, 0), "bad")]);
        assert!(!changes.has_changed().expect("sender alive"));
        cache
            .change(&path, 2, &[edit((0, 0), (0, 0), "x")])
            .expect("applies");
        assert!(changes.has_changed().expect("sender alive"));
        changes.borrow_and_update();
        cache.close(&path);
        assert!(changes.has_changed().expect("sender alive"));
    }

    #[test]
    fn snapshot_from_text_converts_positions_like_an_open_buffer() {
        let text = "a\u{000C}😀\nb";
        let (cache, path) = cache_with(text, PositionEncoding::Utf16);
        let open = cache.snapshot(&path).expect("open");
        let loose = Snapshot::from_text(text, 0);
        for char_idx in 0..=loose.rope.len_chars() {
            assert_eq!(
                loose.char_to_position(char_idx, PositionEncoding::Utf16),
                open.char_to_position(char_idx, PositionEncoding::Utf16)
            );
        }
    }

    #[test]
    fn change_on_unopened_document_is_not_open() {
        let cache = BufferCache::new();
        let result = cache.change(Path::new("/nowhere/x.rs"), 1, &[edit((0, 0), (0, 0), "x")]);
        assert!(matches!(result, Err(BufferError::NotOpen(_))), "{result:?}");
    }

    #[test]
    fn read_text_after_close_reads_disk() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f.txt");
        std::fs::write(&path, "on disk").expect("write");
        let cache = BufferCache::new();
        cache.open(path.clone(), 1, "in buffer");
        assert_eq!(cache.read_text(&path).expect("reads"), "in buffer");
        cache.close(&path);
        assert_eq!(cache.read_text(&path).expect("reads"), "on disk");
        assert!(cache.open_paths().is_empty());
    }

    #[test]
    fn saved_with_text_replaces_buffer_and_without_keeps_it() {
        let (cache, path) = cache_with("typed", PositionEncoding::Utf16);
        cache.saved(&path, None);
        assert_eq!(cache.read_text(&path).expect("reads"), "typed");
        cache.saved(&path, Some("from save"));
        let snapshot = cache.snapshot(&path).expect("open");
        assert_eq!(snapshot.rope.to_string(), "from save");
        assert_eq!(snapshot.version, 1);
    }

    #[test]
    fn path_with_dot_component_matches_canonical_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("f.txt"), "disk").expect("write");
        let cache = BufferCache::new();
        cache.open(dir.path().join(".").join("f.txt"), 1, "buffer");
        let canonical = std::fs::canonicalize(dir.path().join("f.txt")).expect("canonicalize");
        assert_eq!(cache.read_text(&canonical).expect("reads"), "buffer");
        assert_eq!(cache.open_paths(), vec![canonical]);
    }

    #[cfg(unix)]
    #[test]
    fn symlinked_path_matches_canonical_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().join("real.txt");
        std::fs::write(&real, "disk").expect("write");
        let link = dir.path().join("link.txt");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        let cache = BufferCache::new();
        cache.open(link, 1, "buffer");
        let canonical = std::fs::canonicalize(&real).expect("canonicalize");
        assert_eq!(cache.read_text(&canonical).expect("reads"), "buffer");
    }

    #[test]
    fn new_file_keeps_its_key_once_created_on_disk() {
        let dir = tempfile::tempdir().expect("tempdir");
        let via_dot = dir.path().join(".").join("new.txt");
        let cache = BufferCache::new();
        cache.open(via_dot.clone(), 1, "unsaved");
        std::fs::write(dir.path().join("new.txt"), "saved").expect("write");
        cache
            .change(&via_dot, 2, &[edit((0, 0), (0, 0), ">")])
            .expect("still open");
        let canonical = std::fs::canonicalize(dir.path().join("new.txt")).expect("canonicalize");
        assert_eq!(cache.read_text(&canonical).expect("reads"), ">unsaved");
    }

    #[test]
    fn char_to_position_inverts_position_to_char() {
        let rope = Rope::from_str("a😀b\r\n日本\u{000C}x\n\nend");
        for enc in [
            PositionEncoding::Utf8,
            PositionEncoding::Utf16,
            PositionEncoding::Utf32,
        ] {
            for char_idx in 0..=rope.len_chars() {
                // Between \r and \n is not addressable; it maps to the line end.
                if char_idx == 4 {
                    assert_eq!(
                        char_to_position(&rope, char_idx, enc),
                        char_to_position(&rope, 3, enc)
                    );
                    continue;
                }
                let position = char_to_position(&rope, char_idx, enc);
                assert_eq!(
                    position_to_char(&rope, position, enc),
                    Ok(char_idx),
                    "{enc:?} {position:?}"
                );
            }
        }
        // The form feed is a column, not a line break.
        assert_eq!(
            char_to_position(&rope, 9, PositionEncoding::Utf16),
            pos(1, 4)
        );
    }

    #[test]
    fn position_beyond_document_is_an_error() {
        let rope = Rope::from_str("a\nb");
        assert_eq!(
            position_to_char(&rope, pos(3, 0), PositionEncoding::Utf16),
            Err(LineOutOfRange { line: 3, lines: 2 })
        );
    }
}
