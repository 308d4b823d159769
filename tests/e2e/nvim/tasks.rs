//! Keybinding tasks (issue 11) from Neovim: the daemon's code actions in
//! `vim.lsp.buf.code_action()`, `:TandemTask` on a selection, and an
//! inline edit that comes back through the review, against issue 11's
//! wire (`textDocument/codeAction`, `tandem.runTask`, `tandem/runTask`).

use serde_json::json;

use super::harness::{config, run, user_text, Workspace};
use crate::support::model_server::{openai, ModelServer};

const CODE: &str = "def add(a, b):\n    return a - b\n\nprint(add(1, 2))\n";

#[tokio::test]
async fn code_actions_are_listed_and_run_on_the_selection() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(openai::text(["It subtracts."]));
    let ws = Workspace::new();
    ws.write("m.py", CODE);
    let got = run(
        &ws,
        &config(&server, "review"),
        r#"
-- Task sessions take their configuration from initializationOptions.
T.setup({ init_options = vim.json.decode(TEST.config) })
vim.cmd('edit m.py')
require('tandem').start()
T.wait(require('tandem').ready, 'initialize')
local buf = vim.api.nvim_get_current_buf()
T.wait(function() return #vim.lsp.get_clients({ bufnr = buf, name = 'tandem' }) == 1 end, 'attach')
local client = vim.lsp.get_clients({ bufnr = buf, name = 'tandem' })[1]
local params = {
  textDocument = { uri = vim.uri_from_bufnr(buf) },
  range = { start = { line = 0, character = 0 }, ['end'] = { line = 1, character = 16 } },
  context = { diagnostics = {} },
}
local answer = client:request_sync('textDocument/codeAction', params, 5000, buf)
local actions = answer and answer.result or {}
T.put('titles', vim.tbl_map(function(a) return a.title end, actions))
local explain
for _, a in ipairs(actions) do
  if a.title == 'tandem: Explain' then explain = a end
end
client:exec_cmd(explain.command, { bufnr = buf })
T.turn(1)
T.put('chat', T.chat_lines())
"#,
    )
    .await;
    let titles = got.lines("titles");
    assert!(
        titles.contains(&"tandem: Explain".to_string()),
        "{titles:?}"
    );
    assert!(
        titles.contains(&"tandem: Edit selection…".to_string()),
        "{titles:?}"
    );
    assert!(
        !titles.contains(&"tandem: Fix".to_string()),
        "no diagnostics, no Fix: {titles:?}"
    );
    assert!(
        got.text("chat").contains("It subtracts."),
        "{}",
        got.text("chat")
    );
    let asked = user_text(&server.requests()[0]);
    assert!(
        asked.contains("def add(a, b):\n    return a - b"),
        "{asked}"
    );
}

#[tokio::test]
async fn tandem_task_edit_on_a_selection_comes_back_through_the_review() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(openai::text(["def add(a, b):\n    return a + b"]));
    let ws = Workspace::new();
    ws.write("m.py", CODE);
    let got = run(
        &ws,
        &config(&server, "review"),
        r#"
-- Task sessions take their configuration from initializationOptions.
T.setup({ init_options = vim.json.decode(TEST.config) })
vim.cmd('edit m.py')
local buf = vim.api.nvim_get_current_buf()
vim.ui.input = function(opts, on_confirm)
  T.put('asked', opts.prompt)
  on_confirm('make it add')
end
-- The default visual keymap: edit the selection, asking what to do.
vim.api.nvim_win_set_cursor(0, { 1, 0 })
vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('Vj<leader>ae', true, false, true), 'x', false)
T.event('TandemReviewOpen')
vim.cmd('TandemReviewAcceptAll')
local done = T.event('TandemTaskDone')
T.put('edit', done.data.result.edit)
T.put('buffer', T.lines(buf))
"#,
    )
    .await;
    assert_eq!(
        got.get("asked"),
        &json!("tandem: edit the selection to… "),
        "the keymap asks for the instruction"
    );
    assert_eq!(
        got.lines("buffer"),
        ["def add(a, b):", "    return a + b", "", "print(add(1, 2))"]
    );
    assert_eq!(got.get("edit")["outcome"], "accepted", "{:#}", got.results);
    let asked = user_text(&server.requests()[0]);
    assert!(asked.contains("make it add"), "{asked}");
    assert!(asked.contains("return a - b"), "{asked}");
}

#[tokio::test]
async fn tandem_task_explain_runs_on_a_range_and_completes_task_names() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(openai::text(["It prints 3."]));
    let ws = Workspace::new();
    ws.write("m.py", CODE);
    let got = run(
        &ws,
        &config(&server, "review"),
        r#"
-- Task sessions take their configuration from initializationOptions.
T.setup({ init_options = vim.json.decode(TEST.config) })
vim.cmd('edit m.py')
T.put('completion', vim.fn.getcompletion('TandemTask e', 'cmdline'))
vim.cmd('4TandemTask explain')
T.turn(1)
T.put('chat', T.chat_lines())
"#,
    )
    .await;
    assert_eq!(got.get("completion"), &json!(["edit", "explain"]));
    assert!(
        got.text("chat").contains("It prints 3."),
        "{}",
        got.text("chat")
    );
    let asked = user_text(&server.requests()[0]);
    assert!(asked.contains("print(add(1, 2))"), "{asked}");
}

#[tokio::test]
async fn the_fix_keymap_sends_the_diagnostics_of_the_selection() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    // Fix edits the workspace with the full agent loop; answering in
    // prose is enough here.
    server.push(openai::text(["It should add."]));
    let ws = Workspace::new();
    ws.write("m.py", CODE);
    let got = run(
        &ws,
        &config(&server, "review"),
        r#"
T.setup({ init_options = vim.json.decode(TEST.config) })
vim.cmd('edit m.py')
local buf = vim.api.nvim_get_current_buf()
local ns = vim.api.nvim_create_namespace('test-linter')
vim.diagnostic.set(ns, buf, {
  { lnum = 1, col = 11, end_lnum = 1, end_col = 16, message = 'subtraction in add()', severity = vim.diagnostic.severity.WARN, source = 'testlint' },
  { lnum = 3, col = 0, message = 'outside the selection', severity = vim.diagnostic.severity.ERROR },
})
vim.api.nvim_win_set_cursor(0, { 1, 0 })
vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('Vj<leader>af', true, false, true), 'x', false)
local done = T.event('TandemTaskDone')
T.put('task_error', done.data.error and done.data.error.message or vim.NIL)
"#,
    )
    .await;
    assert_eq!(got.get("task_error"), &json!(null));
    let asked = user_text(&server.requests()[0]);
    assert!(asked.contains("subtraction in add()"), "{asked}");
    assert!(!asked.contains("outside the selection"), "{asked}");
}
