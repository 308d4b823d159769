//! A new user's first minutes, as `editors/README.md` sets the plugin up:
//! the first prompt of a fresh Neovim, buffers opened later, the chat
//! window, an accepted edit, questions offered to the model, a range
//! prompt. Each of these failed before issue 18.

use serde_json::json;

use super::harness::{config, run, tool_names, user_text, Workspace};
use crate::support::model_server::{openai, ModelServer};

#[tokio::test]
async fn the_answer_streams_into_the_chat_buffer_and_the_model_reads_unsaved_edits() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(openai::tool_calls(&[(
        "call_1",
        "read_file",
        r#"{"path":"src/lib.rs"}"#,
    )]));
    server.push(openai::text(["The buffer ", "says hello ", "from Neovim."]));
    let ws = Workspace::new();
    ws.write("src/lib.rs", "// on disk\n");
    let got = run(
        &ws,
        &config(&server, "read-only"),
        r#"
T.setup()
vim.cmd('edit src/lib.rs')
vim.api.nvim_buf_set_lines(0, 0, -1, false, { '// unsaved: hello from the buffer 😀' })
vim.cmd('TandemPrompt read src/lib.rs')
T.put('receipt', T.turn(1))
T.put('chat', T.chat_lines())
"#,
    )
    .await;
    let chat = got.text("chat");
    assert!(
        chat.contains("The buffer says hello from Neovim."),
        "{chat}"
    );
    assert!(chat.contains("Read src/lib.rs"), "{chat}");
    assert_eq!(got.get("receipt")["stopReason"], "end_turn");
    // The model read the unsaved buffer, not the file on disk.
    let requests = server.requests();
    let result = &requests[1].tool_messages()[0].1;
    assert!(
        result.contains("// unsaved: hello from the buffer 😀"),
        "{result}"
    );
    assert!(!result.contains("on disk"), "{result}");
}

#[tokio::test]
async fn the_first_prompt_of_a_fresh_neovim_waits_for_initialize() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(openai::text(["first ", "answer"]));
    let ws = Workspace::new();
    let got = run(
        &ws,
        &config(&server, "read-only"),
        r#"
-- A daemon that is slow to start (a cold binary): the prompt below goes
-- out long before `initialize` is answered. Sent at once, the daemon
-- refused it with "Server not initialized" (two starts in three).
T.setup({ cmd = { 'sh', '-c', 'sleep 0.2; exec "$0" lsp', TEST.bin } })
vim.cmd('TandemPrompt hello')
T.put('receipt', T.turn(1))
T.put('chat', T.chat_lines())
"#,
    )
    .await;
    assert_eq!(
        got.get("receipt")["stopReason"],
        "end_turn",
        "{:#}",
        got.results
    );
    assert!(
        got.text("chat").contains("first answer"),
        "{}",
        got.text("chat")
    );
    assert!(!got.stderr.contains("not initialized"), "{}", got.stderr);
}

#[tokio::test]
async fn a_buffer_opened_after_the_first_prompt_reaches_the_agent_unsaved() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(openai::text(["ok"]));
    server.push(openai::tool_calls(&[(
        "call_1",
        "read_file",
        r#"{"path":"b.txt"}"#,
    )]));
    server.push(openai::text(["read it"]));
    let ws = Workspace::new();
    ws.write("a.txt", "a\n");
    ws.write("b.txt", "b on disk\n");
    run(
        &ws,
        &config(&server, "read-only"),
        r#"
T.setup()
vim.cmd('edit a.txt')
vim.cmd('TandemPrompt hello')
T.turn(1)
vim.cmd('edit b.txt')
vim.api.nvim_buf_set_lines(0, 0, -1, false, { 'b unsaved in the buffer' })
vim.cmd('TandemPrompt read b.txt')
T.turn(2)
"#,
    )
    .await;
    let requests = server.requests();
    let result = &requests[2].tool_messages()[0].1;
    assert!(result.contains("b unsaved in the buffer"), "{result}");
}

#[tokio::test]
async fn prompts_reuse_one_chat_window_that_follows_the_end_of_the_answer() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    let long: String = (1..=80).map(|i| format!("line {i}\n")).collect();
    for _ in 0..3 {
        server.push(openai::text([long.as_str(), "the end"]));
    }
    let ws = Workspace::new();
    let got = run(
        &ws,
        &config(&server, "read-only"),
        r#"
T.setup()
for i = 1, 3 do
  vim.cmd('TandemPrompt prompt ' .. i)
  T.turn(i)
end
local chat = vim.fn.bufnr('tandem://chat')
local wins = vim.fn.win_findbuf(chat)
T.put('windows', #wins)
T.put('cursor', vim.api.nvim_win_get_cursor(wins[1])[1])
T.put('last', vim.api.nvim_buf_line_count(chat))
T.put('filetype', vim.bo[chat].filetype)
"#,
    )
    .await;
    assert_eq!(got.get("windows"), &json!(1), "{:#}", got.results);
    assert_eq!(got.get("cursor"), got.get("last"), "{:#}", got.results);
    assert_eq!(got.get("filetype"), &json!("markdown"));
}

#[tokio::test]
async fn an_edit_in_auto_mode_lands_in_the_open_buffer_not_behind_it() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n*** End Patch";
    server.push(openai::tool_calls(&[(
        "call_p",
        "apply_patch",
        &json!({ "input": patch }).to_string(),
    )]));
    server.push(openai::text(["done"]));
    let ws = Workspace::new();
    ws.write("a.txt", "alpha\nbeta\n");
    let got = run(
        &ws,
        &config(&server, "auto"),
        r#"
T.setup()
vim.cmd('edit a.txt')
vim.api.nvim_buf_set_lines(0, 2, 2, false, { 'unsaved line' })
vim.cmd('TandemPrompt make it loud')
T.turn(1)
vim.cmd('buffer a.txt')
T.put('buffer', T.lines(0))
T.put('modified', vim.bo.modified)
"#,
    )
    .await;
    assert_eq!(got.lines("buffer"), ["ALPHA", "beta", "unsaved line"]);
    assert_eq!(got.get("modified"), &json!(true));
    // Nothing was written behind the buffer.
    assert_eq!(ws.read("a.txt").as_deref(), Some("alpha\nbeta\n"));
    let requests = server.requests();
    let result = &requests[1].tool_messages()[0].1;
    assert!(result.contains("The patch was applied"), "{result}");
}

#[tokio::test]
async fn the_model_is_offered_questions_and_a_range_prompt_sends_the_selection() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(openai::text(["it adds"]));
    let ws = Workspace::new();
    ws.write(
        "m.py",
        "import os\ndef add(a, b):\n    return a + b\nprint(1)\n",
    );
    run(
        &ws,
        &config(&server, "review"),
        r#"
T.setup()
vim.cmd('edit m.py')
vim.cmd('2,3TandemPrompt what does this do?')
T.turn(1)
"#,
    )
    .await;
    let request = &server.requests()[0];
    assert!(
        tool_names(request).contains(&"request_user_input".to_string()),
        "{:?}",
        tool_names(request)
    );
    let asked = user_text(request);
    assert!(asked.contains("what does this do?"), "{asked}");
    assert!(
        asked.contains("def add(a, b):\n    return a + b"),
        "{asked}"
    );
    assert!(asked.contains("m.py#L2-3"), "{asked}");
    assert!(!asked.contains("import os"), "{asked}");
}
