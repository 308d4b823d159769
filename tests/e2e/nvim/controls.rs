//! The chat's controls: `:TandemChat` and its prompt input, `:TandemMode`,
//! `:TandemSteer`, the statusline component and `$/progress` in
//! `vim.lsp.status()`.

use serde_json::json;

use super::harness::{config, run, user_text, Workspace};
use crate::support::model_server::{openai, ModelServer};

#[tokio::test]
async fn the_chat_input_sends_on_enter_and_the_statusline_and_progress_follow_the_turn() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(openai::text(["typed answer"]));
    let ws = Workspace::new();
    let got = run(
        &ws,
        &config(&server, "review"),
        r#"
T.setup()
local progress = {}
vim.api.nvim_create_autocmd('LspProgress', {
  callback = function()
    table.insert(progress, vim.lsp.status())
  end,
})
T.put('before', require('tandem').statusline())
vim.cmd('TandemChat')
local input = vim.fn.bufnr('tandem://input')
T.put('windows', { #vim.fn.win_findbuf(vim.fn.bufnr('tandem://chat')), #vim.fn.win_findbuf(input) })
vim.api.nvim_set_current_win(vim.fn.win_findbuf(input)[1])
vim.api.nvim_buf_set_lines(input, 0, -1, false, { 'from the input' })
vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('<CR>', true, false, true), 'x', false)
T.put('input_after', T.lines(input))
T.turn(1)
T.put('idle', require('tandem').statusline())
T.put('chat', T.chat_lines())
vim.cmd('TandemMode auto')
T.wait(function() return require('tandem').statusline():find('auto', 1, true) ~= nil end, 'the mode in the statusline')
T.put('status', require('tandem').statusline())
T.wait(function() return #progress > 0 end, 'progress')
T.put('progress', progress)
vim.cmd('TandemChat')
T.put('closed', { #vim.fn.win_findbuf(vim.fn.bufnr('tandem://chat')), #vim.fn.win_findbuf(input) })
"#,
    )
    .await;
    assert_eq!(got.get("before"), &json!(""));
    assert_eq!(got.get("windows"), &json!([1, 1]));
    assert_eq!(got.lines("input_after"), [""]);
    let chat = got.text("chat");
    assert!(chat.contains("## from the input"), "{chat}");
    assert!(chat.contains("typed answer"), "{chat}");
    assert_eq!(got.get("idle"), &json!("tandem · review · idle · 15 tok"));
    assert_eq!(got.get("status"), &json!("tandem · auto · idle · 15 tok"));
    let progress = got.text("progress");
    assert!(progress.contains("tandem"), "{progress}");
    assert_eq!(got.get("closed"), &json!([0, 0]));
}

#[tokio::test]
async fn a_steer_on_an_idle_session_opens_a_turn() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(openai::text(["first"]));
    server.push(openai::text(["steered"]));
    let ws = Workspace::new();
    let got = run(
        &ws,
        &config(&server, "review"),
        r#"
T.setup()
vim.cmd('TandemPrompt start')
T.turn(1)
vim.cmd('TandemSteer also look at the tests')
T.put('second', T.turn(2))
T.put('chat', T.chat_lines())
"#,
    )
    .await;
    assert_eq!(got.get("second")["stopReason"], "end_turn");
    assert!(
        got.text("chat").contains("## also look at the tests"),
        "{}",
        got.text("chat")
    );
    let asked = user_text(&server.requests()[1]);
    assert!(asked.contains("also look at the tests"), "{asked}");
}

#[tokio::test]
async fn after_the_daemon_dies_the_next_prompt_starts_a_new_one() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(openai::text(["first daemon"]));
    server.push(openai::text(["second daemon"]));
    let ws = Workspace::new();
    let got = run(
        &ws,
        &config(&server, "read-only"),
        r#"
T.setup()
vim.cmd('TandemPrompt one')
T.turn(1)
-- The daemon's pid is in its session's lock file.
local lock = vim.fn.glob(vim.env.TANDEM_HOME .. '/sessions/*.lock', false, true)[1]
vim.uv.kill(tonumber(vim.fn.readfile(lock)[1]), 'sigkill')
T.wait(function() return #vim.lsp.get_clients({ name = 'tandem' }) == 0 end, 'the client to notice')
vim.cmd('TandemPrompt two')
T.put('second', T.turn(2))
T.put('chat', T.chat_lines())
"#,
    )
    .await;
    assert_eq!(got.get("second")["stopReason"], "end_turn");
    assert!(
        got.text("chat").contains("second daemon"),
        "{}",
        got.text("chat")
    );
}

#[tokio::test]
async fn the_statusline_shows_the_mode_the_daemon_resolved_when_setup_names_none() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(openai::text(["ok"]));
    let ws = Workspace::new();
    // No mode in the plugin's options: the daemon's default decides.
    let got = run(
        &ws,
        &server.session_config(),
        r#"
T.setup()
T.put('before', require('tandem').statusline())
vim.cmd('TandemPrompt hello')
T.turn(1)
T.put('after', require('tandem').statusline())
"#,
    )
    .await;
    assert_eq!(got.get("before"), &json!(""));
    assert_eq!(got.get("after"), &json!("tandem · review · idle · 15 tok"));
}
