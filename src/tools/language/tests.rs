//! Unit tests of the language tools: a place named by column or symbol,
//! in the negotiated encoding.

use super::{find_symbol, target, word_at};
use crate::buffers::PositionEncoding;
use crate::tools::test_support::workspace_with;
use crate::vocab::language::TextPosition;

#[test]
fn a_symbol_is_found_as_a_whole_word_first() {
    assert_eq!(find_symbol("xgreet = greet(1)", "greet"), Some(9));
    assert_eq!(find_symbol("greeting()", "greet"), Some(0));
    assert_eq!(find_symbol("nothing here", "greet"), None);
    assert_eq!(find_symbol("é = greet", "greet"), Some(4));
}

#[test]
fn the_word_at_a_column_is_the_identifier_around_it() {
    let chars: Vec<char> = "x = greet(name)".chars().collect();
    assert_eq!(word_at(&chars, 6), "greet");
    assert_eq!(word_at(&chars, 9), "greet");
    assert_eq!(word_at(&chars, 3), "");
}

#[test]
fn a_target_is_converted_to_the_negotiated_encoding() {
    let (_dir, ctx) = workspace_with(&[("a.py", "s = \"😀\"; f(s)\n")]);
    let at = |column: Option<usize>, symbol: Option<&str>| {
        target(&ctx, "a.py", 1, column, symbol).map(|t| t.position)
    };
    // `f` is the 10th character, the 11th UTF-16 unit, the 13th byte.
    let utf16 = TextPosition {
        line: 0,
        character: 10,
    };
    assert_eq!(at(None, Some("f")).unwrap(), utf16);
    assert_eq!(at(Some(10), None).unwrap(), utf16);
    ctx.buffers.set_encoding(PositionEncoding::Utf8);
    assert_eq!(at(Some(10), None).unwrap().character, 12);
    ctx.buffers.set_encoding(PositionEncoding::Utf32);
    assert_eq!(at(Some(10), None).unwrap().character, 9);
}

#[test]
fn a_bad_target_names_what_is_wrong() {
    let (_dir, ctx) = workspace_with(&[("a.py", "one\ntwo\n")]);
    let error = |line, column, symbol| {
        target(&ctx, "a.py", line, column, symbol)
            .err()
            .expect("an error")
            .0
    };
    assert_eq!(
        error(3, Some(1), None),
        "`a.py` has 2 lines; there is no line 3"
    );
    assert!(error(1, Some(9), None).contains("there is no column 9"));
    assert!(error(1, None, None).contains("give `column`"));
    assert!(error(2, None, Some("one")).contains("which reads: two"));
}
