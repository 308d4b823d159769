//! Inline review of the agent's patches: the plugin takes
//! `workspace/applyEdit`, shows the hunks in the buffers, applies exactly
//! the accepted ones (one undo step per file), and the model's next
//! request says what landed.

use serde_json::json;

use super::harness::{config, run, Workspace};
use crate::support::model_server::{openai, ModelServer};

fn patch_call(id: &str, patch: &str) -> crate::support::model_server::Reply {
    openai::tool_calls(&[(id, "apply_patch", &json!({ "input": patch }).to_string())])
}

const SEVEN: &str = "one\ntwo\nthree\nfour\nfive\nsix\nseven\n";

const TWO_HUNKS: &str = "*** Begin Patch\n*** Update File: a.txt\n@@\n one\n-two\n+TWO\n@@\n five\n-six\n+SIX\n*** End Patch";

/// What the review shows in `a.txt`'s buffer, recorded as `prefix_*`.
const RECORD_MARKS: &str = r#"
local function record_marks(prefix, buf)
  local ns = vim.api.nvim_get_namespaces().tandem_review
  local removed, added, hints, signs = {}, {}, {}, 0
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
    local d = m[4]
    if d.hl_group == 'DiffDelete' then
      for row = m[2], d.end_row - 1 do
        table.insert(removed, vim.api.nvim_buf_get_lines(buf, row, row + 1, false)[1])
      end
    end
    for _, vl in ipairs(d.virt_lines or {}) do
      if vl[1][2] == 'DiffAdd' then
        table.insert(added, vl[1][1])
      else
        table.insert(hints, vl[1][1])
      end
    end
    if d.sign_text then
      signs = signs + 1
    end
  end
  T.put(prefix .. '_removed', removed)
  T.put(prefix .. '_added', added)
  T.put(prefix .. '_hints', hints)
  T.put(prefix .. '_signs', signs)
end
"#;

#[tokio::test]
async fn accepting_one_hunk_and_rejecting_the_other_applies_exactly_the_first_as_one_undo_step() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(patch_call("call_p", TWO_HUNKS));
    server.push(openai::text(["noted"]));
    let ws = Workspace::new();
    ws.write("a.txt", SEVEN);
    let body = format!(
        "{RECORD_MARKS}{}",
        r#"
T.setup()
vim.cmd('edit a.txt')
local buf = vim.api.nvim_get_current_buf()
-- An unsaved edit of the user's, its own undo step.
vim.api.nvim_buf_set_lines(buf, 0, 0, false, { 'user edit' })
vim.cmd('let &g:undolevels = &g:undolevels')
local before = T.lines(buf)
vim.cmd('TandemPrompt shout two and six')
T.event('TandemReviewOpen')
record_marks('open', buf)
T.put('map', vim.fn.maparg('<leader>ta', 'n', false, true).desc or '')
-- The buffer is untouched while the review is open.
T.put('during', T.lines(buf))
vim.api.nvim_set_current_buf(buf)
vim.api.nvim_win_set_cursor(0, { 3, 0 })
vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('<leader>ta', true, false, true), 'x', false)
record_marks('half', buf)
vim.api.nvim_win_set_cursor(0, { 7, 0 })
vim.cmd('TandemReviewReject')
T.turn(1)
T.put('after', T.lines(buf))
T.put('left', #vim.api.nvim_buf_get_extmarks(buf, vim.api.nvim_get_namespaces().tandem_review, 0, -1, {}))
T.put('map_after', vim.fn.maparg('<leader>ta', 'n'))
vim.api.nvim_buf_call(buf, function() vim.cmd('silent undo') end)
T.put('undone', T.lines(buf))
T.put('before', before)
"#
    );
    let got = run(&ws, &config(&server, "review"), &body).await;
    assert_eq!(got.lines("open_removed"), ["two", "six"]);
    assert_eq!(got.lines("open_added"), ["TWO", "SIX"]);
    assert_eq!(got.get("open_signs"), &json!(2));
    assert!(
        got.text("open_hints").contains("<leader>ta accept"),
        "{}",
        got.text("open_hints")
    );
    assert_eq!(
        got.get("map"),
        &json!("tandem: accept the hunk under the cursor")
    );
    assert_eq!(got.lines("during"), got.lines("before"));
    // After the first decision only the second hunk is still proposed.
    assert_eq!(got.lines("half_removed"), ["six"]);
    assert!(
        got.text("half_hints").contains("accepted"),
        "{}",
        got.text("half_hints")
    );
    assert_eq!(
        got.lines("after"),
        [
            "user edit",
            "one",
            "TWO",
            "three",
            "four",
            "five",
            "six",
            "seven"
        ]
    );
    assert_eq!(got.get("left"), &json!(0));
    assert_eq!(got.get("map_after"), &json!(""));
    assert_eq!(got.lines("undone"), got.lines("before"));
    assert_eq!(
        ws.read("a.txt").as_deref(),
        Some(SEVEN),
        "nothing is written to disk"
    );
    let report = &server.requests()[1].tool_messages()[0].1;
    assert!(
        report.contains("a.txt: hunk 1 applied; hunk 2 rejected by the user"),
        "{report}"
    );
}

#[tokio::test]
async fn accept_all_applies_every_hunk_and_reject_all_none() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(patch_call("call_1", TWO_HUNKS));
    server.push(patch_call(
        "call_2",
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-TWO\n+two again\n*** End Patch",
    ));
    server.push(openai::text(["done"]));
    let ws = Workspace::new();
    ws.write("a.txt", SEVEN);
    let got = run(
        &ws,
        &config(&server, "review"),
        r#"
T.setup()
vim.cmd('edit a.txt')
local buf = vim.api.nvim_get_current_buf()
vim.cmd('TandemPrompt shout')
local open = T.event('TandemReviewOpen')
T.put('hunks', open.data.hunks)
-- The patch's diff is in the chat, folded.
local chat_win = vim.fn.win_findbuf(vim.fn.bufnr('tandem://chat'))[1]
local diff_row = vim.fn.index(T.chat_lines(), '  ```diff') + 1
T.put('diff_folded', diff_row > 0 and vim.api.nvim_win_call(chat_win, function() return vim.fn.foldclosed(diff_row) end) ~= -1)
T.put('diff_chat', T.chat_lines())
vim.cmd('TandemReviewAcceptAll')
T.event('TandemReviewDone')
T.put('accepted', T.lines(buf))
T.event('TandemReviewOpen', #T.events)
vim.cmd('TandemReviewRejectAll')
T.turn(1)
T.put('rejected', T.lines(buf))
-- Still folded once the call completed and its line says so.
T.put('still_folded', vim.api.nvim_win_call(chat_win, function() return vim.fn.foldclosed(diff_row) end) ~= -1)
T.put('final_chat', T.chat_lines())
"#,
    )
    .await;
    assert_eq!(got.get("hunks"), &json!(2));
    assert_eq!(
        got.get("diff_folded"),
        &json!(true),
        "{}",
        got.text("diff_chat")
    );
    let chat = got.text("diff_chat");
    assert!(chat.contains("  -two\n  +TWO"), "{chat}");
    let loud = ["one", "TWO", "three", "four", "five", "SIX", "seven"];
    assert_eq!(got.lines("accepted"), loud);
    assert_eq!(got.lines("rejected"), loud);
    assert_eq!(
        got.get("still_folded"),
        &json!(true),
        "{}",
        got.text("final_chat")
    );
    assert!(
        got.text("final_chat")
            .contains("Patch: Update a.txt (2 hunks) · done"),
        "{}",
        got.text("final_chat")
    );
    let requests = server.requests();
    let first = &requests[1].tool_messages()[0].1;
    assert!(
        first.contains("The patch was applied:\n- a.txt: hunks 1, 2 applied"),
        "{first}"
    );
    let second = &requests[2].tool_messages()[1].1;
    assert!(
        second.contains("The user rejected the patch; nothing was changed."),
        "{second}"
    );
}

#[tokio::test]
async fn a_new_file_is_shown_and_created_whole_and_a_rejected_deletion_keeps_the_file() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(patch_call(
        "call_n",
        "*** Begin Patch\n*** Add File: notes/todo.md\n+# Todo\n+- ship it\n*** Delete File: old.txt\n*** End Patch",
    ));
    server.push(openai::text(["ok"]));
    let ws = Workspace::new();
    ws.write("old.txt", "keep me\n");
    let body = format!(
        "{RECORD_MARKS}{}",
        r#"
T.setup()
vim.cmd('TandemPrompt add notes')
T.event('TandemReviewOpen')
local new = vim.fn.bufnr(T.path('notes/todo.md'))
local old = vim.fn.bufnr(T.path('old.txt'))
record_marks('new', new)
record_marks('old', old)
vim.api.nvim_set_current_buf(new)
vim.cmd('TandemReviewAccept')
vim.api.nvim_set_current_buf(old)
vim.cmd('TandemReviewReject')
T.turn(1)
T.put('new_lines', T.lines(new))
T.put('chat', T.chat_lines())
T.put('new_modified', vim.bo[new].modified)
"#
    );
    let got = run(&ws, &config(&server, "review"), &body).await;
    assert_eq!(got.lines("new_added"), ["# Todo", "- ship it"]);
    assert!(
        got.text("new_hints").contains("new file"),
        "{}",
        got.text("new_hints")
    );
    assert_eq!(got.lines("old_removed"), ["keep me"]);
    assert!(
        got.text("old_hints").contains("file deleted"),
        "{}",
        got.text("old_hints")
    );
    assert_eq!(got.lines("new_lines"), ["# Todo", "- ship it"]);
    // The chat's diff of a new file adds its lines and removes nothing.
    let chat = got.text("chat");
    assert!(
        chat.contains("  --- /dev/null\n  +++ ")
            && chat.contains("  @@ -0,0 +1,2 @@\n  +# Todo\n  +- ship it\n  ```"),
        "{chat}"
    );
    assert_eq!(got.get("new_modified"), &json!(false));
    assert_eq!(
        ws.read("notes/todo.md").as_deref(),
        Some("# Todo\n- ship it\n")
    );
    assert_eq!(ws.read("old.txt").as_deref(), Some("keep me\n"));
    let report = &server.requests()[1].tool_messages()[0].1;
    assert!(report.contains("notes/todo.md: created"), "{report}");
    assert!(
        report.contains("old.txt: not deleted (rejected by the user)"),
        "{report}"
    );
}

#[tokio::test]
async fn hunks_follow_lines_typed_above_them_during_the_review_and_brackets_move_between_them() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(patch_call("call_p", TWO_HUNKS));
    server.push(openai::text(["ok"]));
    let ws = Workspace::new();
    ws.write("a.txt", SEVEN);
    let got = run(
        &ws,
        &config(&server, "review"),
        r#"
T.setup()
vim.cmd('edit a.txt')
local buf = vim.api.nvim_get_current_buf()
vim.cmd('TandemPrompt shout')
T.event('TandemReviewOpen')
vim.api.nvim_set_current_buf(buf)
-- The user keeps typing while the review is open.
vim.api.nvim_buf_set_lines(buf, 0, 0, false, { 'typed during the review', 'and more' })
vim.api.nvim_win_set_cursor(0, { 1, 0 })
local rows = {}
for _ = 1, 2 do
  vim.api.nvim_feedkeys(']h', 'x', false)
  table.insert(rows, vim.api.nvim_win_get_cursor(0)[1])
end
vim.api.nvim_feedkeys('[h', 'x', false)
table.insert(rows, vim.api.nvim_win_get_cursor(0)[1])
T.put('rows', rows)
vim.cmd('TandemReviewAcceptAll')
T.turn(1)
T.put('after', T.lines(buf))
"#,
    )
    .await;
    assert_eq!(got.get("rows"), &json!([4, 8, 4]));
    assert_eq!(
        got.lines("after"),
        [
            "typed during the review",
            "and more",
            "one",
            "TWO",
            "three",
            "four",
            "five",
            "SIX",
            "seven"
        ]
    );
    let report = &server.requests()[1].tool_messages()[0].1;
    assert!(report.contains("a.txt: hunks 1, 2 applied"), "{report}");
}

#[tokio::test]
async fn a_moved_file_is_decided_whole() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(patch_call(
        "call_m",
        "*** Begin Patch\n*** Update File: a.txt\n*** Move to: moved/b.txt\n@@\n-alpha\n+ALPHA\n*** End Patch",
    ));
    server.push(openai::text(["moved"]));
    let ws = Workspace::new();
    ws.write("a.txt", "alpha\nbeta\n");
    let body = format!(
        "{RECORD_MARKS}{}",
        r#"
T.setup()
vim.cmd('edit a.txt')
local buf = vim.api.nvim_get_current_buf()
vim.cmd('TandemPrompt move it')
T.event('TandemReviewOpen')
record_marks('move', buf)
vim.api.nvim_win_set_cursor(0, { 2, 0 })
vim.cmd('TandemReviewAccept')
T.turn(1)
T.put('name', vim.fn.fnamemodify(vim.api.nvim_buf_get_name(0), ':.'))
T.put('lines', T.lines(0))
"#
    );
    let got = run(&ws, &config(&server, "review"), &body).await;
    assert!(
        got.text("move_hints").contains("moved to"),
        "{}",
        got.text("move_hints")
    );
    assert_eq!(got.lines("lines"), ["ALPHA", "beta"]);
    assert_eq!(got.get("name"), &json!("moved/b.txt"));
    assert_eq!(ws.read("moved/b.txt").as_deref(), Some("ALPHA\nbeta\n"));
    assert_eq!(ws.read("a.txt"), None);
    let report = &server.requests()[1].tool_messages()[0].1;
    assert!(
        report.contains("a.txt -> moved/b.txt: moved; hunk 1 applied"),
        "{report}"
    );
}

#[tokio::test]
async fn a_pure_move_is_shown_and_can_be_rejected() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(patch_call(
        "call_m",
        "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n*** End Patch",
    ));
    server.push(openai::text(["ok"]));
    let ws = Workspace::new();
    ws.write("a.txt", "alpha\n");
    let body = format!(
        "{RECORD_MARKS}{}",
        r#"
T.setup()
vim.cmd('edit a.txt')
local buf = vim.api.nvim_get_current_buf()
vim.cmd('TandemPrompt rename it')
T.event('TandemReviewOpen')
record_marks('move', buf)
vim.cmd('TandemReviewReject')
T.turn(1)
"#
    );
    let got = run(&ws, &config(&server, "review"), &body).await;
    assert!(
        got.text("move_hints").contains("moved to"),
        "{}",
        got.text("move_hints")
    );
    assert_eq!(ws.read("a.txt").as_deref(), Some("alpha\n"));
    assert_eq!(ws.read("b.txt"), None);
    let report = &server.requests()[1].tool_messages()[0].1;
    assert!(
        report.contains("The user rejected the patch; nothing was changed."),
        "{report}"
    );
}

#[tokio::test]
async fn cancelling_the_turn_withdraws_the_review_and_leaves_the_buffer_alone() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(patch_call("call_p", TWO_HUNKS));
    server.push(openai::text(["after the cancel"]));
    let ws = Workspace::new();
    ws.write("a.txt", SEVEN);
    let got = run(
        &ws,
        &config(&server, "review"),
        r#"
T.setup()
vim.cmd('edit a.txt')
local buf = vim.api.nvim_get_current_buf()
vim.cmd('TandemPrompt shout')
T.event('TandemReviewOpen')
local seen = #T.events
vim.cmd('TandemCancel')
local done = T.event('TandemReviewDone', seen)
T.put('withdrawn', done.data.withdrawn or false)
T.put('first', T.turn(1))
T.put('marks', #vim.api.nvim_buf_get_extmarks(buf, vim.api.nvim_get_namespaces().tandem_review, 0, -1, {}))
T.put('lines', T.lines(buf))
vim.cmd('TandemPrompt again')
T.put('second', T.turn(2))
"#,
    )
    .await;
    assert_eq!(got.get("withdrawn"), &json!(true));
    assert_eq!(got.get("first")["stopReason"], "cancelled");
    assert_eq!(got.get("marks"), &json!(0));
    assert_eq!(got.text("lines"), SEVEN.trim_end());
    assert_eq!(got.get("second")["stopReason"], "end_turn");
}

#[tokio::test]
async fn a_file_not_loaded_is_loaded_for_the_review_and_shown() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(patch_call(
        "call_c",
        "*** Begin Patch\n*** Update File: src/closed.txt\n@@\n-alpha\n+ALPHA\n*** End Patch",
    ));
    server.push(openai::text(["ok"]));
    let ws = Workspace::new();
    ws.write("src/closed.txt", "alpha\nbeta\n");
    let got = run(
        &ws,
        &config(&server, "review"),
        r#"
T.setup()
vim.cmd('TandemPrompt patch the closed file')
T.event('TandemReviewOpen')
local buf = vim.fn.bufnr(T.path('src/closed.txt'))
T.put('loaded', vim.api.nvim_buf_is_loaded(buf))
T.put('shown', vim.api.nvim_get_current_buf() == buf)
T.put('attached', #vim.lsp.get_clients({ bufnr = buf, name = 'tandem' }))
vim.cmd('TandemReviewAccept')
T.turn(1)
T.put('lines', T.lines(buf))
"#,
    )
    .await;
    assert_eq!(got.get("loaded"), &json!(true));
    assert_eq!(got.get("shown"), &json!(true));
    assert_eq!(got.get("attached"), &json!(1));
    assert_eq!(got.lines("lines"), ["ALPHA", "beta"]);
    let report = &server.requests()[1].tool_messages()[0].1;
    assert!(
        report.contains("src/closed.txt: hunk 1 applied"),
        "{report}"
    );
}

#[tokio::test]
async fn review_diff_shows_the_proposal_side_by_side() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(patch_call("call_p", TWO_HUNKS));
    server.push(openai::text(["ok"]));
    let ws = Workspace::new();
    ws.write("a.txt", SEVEN);
    let got = run(
        &ws,
        &config(&server, "review"),
        r#"
T.setup()
vim.cmd('edit a.txt')
local buf = vim.api.nvim_get_current_buf()
vim.cmd('TandemPrompt shout')
T.event('TandemReviewOpen')
vim.api.nvim_win_set_cursor(0, { 2, 0 })
vim.cmd('TandemReviewReject')
vim.cmd('TandemReviewDiff')
local diffed = {}
for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
  if vim.wo[win].diff then
    table.insert(diffed, vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(win)))
  end
end
T.put('diffed', #diffed)
T.put('proposed', T.lines(0))
vim.cmd('diffoff!')
vim.api.nvim_set_current_buf(buf)
vim.cmd('TandemReviewAcceptAll')
T.turn(1)
"#,
    )
    .await;
    assert_eq!(got.get("diffed"), &json!(2));
    // The rejected first hunk is not in the proposal any more.
    assert_eq!(
        got.lines("proposed"),
        ["one", "two", "three", "four", "five", "SIX", "seven"]
    );
}
