//! The patch format's specification: what parses, what is refused and why,
//! and where hunks land.

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
    let (path, move_to, hunks) = only_update(&patch(
        "*** Update File: src/lib.rs\n@@ fn context_line()\n context\n-removed\n+added\n context",
    ));
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
    let err = parse_patch(&patch("*** Update File: a\n@@\n-x\n*** End of File\n-y")).unwrap_err();
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
    let input = "\n  <<'EOF'\n  *** Begin Patch  \n*** Delete File: a\n  *** End Patch\nEOF\n\n";
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
