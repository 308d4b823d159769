//! The review's pure hunk logic (`lua/tandem/review/hunks.lua`), tested
//! apart from buffers and the daemon.

use serde_json::json;

use super::harness::{run, Workspace};

#[tokio::test]
async fn hunks_preview_apply_and_locate_edits() {
    if !super::harness::enabled() {
        return;
    }
    let ws = Workspace::new();
    let got = run(
        &ws,
        &json!({}),
        r#"
local h = require('tandem.review.hunks')
local function edit(l1, c1, l2, c2, text)
  return { range = { start = { line = l1, character = c1 }, ['end'] = { line = l2, character = c2 } }, newText = text }
end
local lines = { 'one', 'two', 'three' }
T.put('replace_whole_line', h.preview(lines, edit(1, 0, 2, 0, 'TWO\n')))
T.put('replace_inside_line', h.preview(lines, edit(1, 1, 1, 2, 'W')))
T.put('insert_lines', h.preview(lines, edit(1, 0, 1, 0, 'a\nb\n')))
T.put('delete_lines', h.preview(lines, edit(0, 0, 2, 0, '')))
T.put('at_end', h.preview(lines, edit(3, 0, 3, 0, 'four\n')))
T.put('applied', h.apply(lines, { edit(0, 0, 1, 0, 'ONE\n'), edit(2, 0, 2, 5, 'THREE') }))
T.put('created', h.created({ edit(0, 0, 0, 0, '# new\nfile\n') }))
T.put('shifted', h.shifted(edit(1, 0, 2, 0, 'x'), 3).range)
T.put('at_row', { h.at_row({ { 0, 1 }, { 4, 3 } }, 1), h.at_row({ { 0, 1 }, { 4, 3 } }, 4), h.at_row({ { 0, 1 } }, 2) or 0 })
local files = h.files({
  documentChanges = {
    { kind = 'create', uri = 'file:///n' },
    { textDocument = { uri = 'file:///n', version = vim.NIL }, edits = { edit(0, 0, 0, 0, 'x\n') } },
    { textDocument = { uri = 'file:///a', version = 3 }, edits = { edit(0, 0, 1, 0, ''), edit(5, 0, 6, 0, 'y\n') } },
    { kind = 'rename', oldUri = 'file:///b', newUri = 'file:///c' },
    { kind = 'delete', uri = 'file:///d' },
  },
  changeAnnotations = { p = { label = 'x', needsConfirmation = true } },
})
T.put('files', vim.tbl_map(function(f) return { f.kind, f.uri, #f.edits, f.new_uri or '' } end, files))
T.put('confirm', { h.needs_confirmation({ changeAnnotations = { p = { needsConfirmation = false } } }), h.needs_confirmation({}) })
"#,
    )
    .await;
    assert_eq!(
        got.get("replace_whole_line"),
        &json!({"first": 1, "last": 1, "new": ["TWO"]})
    );
    assert_eq!(
        got.get("replace_inside_line"),
        &json!({"first": 1, "last": 1, "new": ["tWo"]})
    );
    assert_eq!(
        got.get("insert_lines"),
        &json!({"first": 1, "last": 0, "new": ["a", "b"]})
    );
    assert_eq!(
        got.get("delete_lines"),
        &json!({"first": 0, "last": 1, "new": []})
    );
    assert_eq!(
        got.get("at_end"),
        &json!({"first": 3, "last": 2, "new": ["four"]})
    );
    assert_eq!(got.get("applied"), &json!(["ONE", "two", "THREE"]));
    assert_eq!(got.get("created"), &json!(["# new", "file"]));
    assert_eq!(
        got.get("shifted"),
        &json!({"start": {"line": 4, "character": 0}, "end": {"line": 5, "character": 0}})
    );
    assert_eq!(got.get("at_row"), &json!([1, 2, 0]));
    assert_eq!(
        got.get("files"),
        &json!([
            ["create", "file:///n", 1, ""],
            ["update", "file:///a", 2, ""],
            ["move", "file:///b", 0, "file:///c"],
            ["delete", "file:///d", 0, ""]
        ])
    );
    assert_eq!(got.get("confirm"), &json!([false, false]));
}
