//! Tests of the buffer cache and position conversion: encodings, line
//! breaks LSP's way, all-or-nothing changes, path keys.

use std::path::{Path, PathBuf};

use ropey::Rope;

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

#[test]
fn diagnostics_are_kept_per_document_until_it_closes() {
    use crate::vocab::language::{Diagnostic, TextPosition, TextRange};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.py");
    std::fs::write(&path, "x\n").unwrap();
    let cache = BufferCache::new();
    cache.open(path.clone(), 1, "x\n");
    let changes = cache.diagnostics().subscribe();
    let at = TextPosition {
        line: 0,
        character: 0,
    };
    let error = Diagnostic {
        range: TextRange { start: at, end: at },
        severity: None,
        message: "x is not defined".to_string(),
        source: None,
        code: None,
    };
    // A path spelled differently meets the same document.
    let spelled = dir.path().join(".").join("a.py");
    cache
        .diagnostics()
        .report(&spelled, Some(1), vec![error.clone()]);
    assert!(changes.has_changed().unwrap(), "subscribers are told");
    let report = cache.diagnostics().get(&path).expect("a report");
    assert_eq!((report.version, report.diagnostics), (Some(1), vec![error]));
    cache.close(&path);
    assert_eq!(cache.diagnostics().get(&path), None);
}
