//! The model's questions (`tandem/requestUserInput`) asked with
//! `vim.ui.select` / `vim.ui.input`, one after another; `<Esc>` cancels
//! and the turn goes on.

use serde_json::json;

use super::harness::{config, run, Workspace};
use crate::support::model_server::{openai, ModelServer};

fn ask(questions: serde_json::Value) -> crate::support::model_server::Reply {
    openai::tool_calls(&[(
        "call_q",
        "request_user_input",
        &json!({ "questions": questions }).to_string(),
    )])
}

#[tokio::test]
async fn questions_are_answered_with_vim_ui_one_after_another() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(ask(json!([
        {"id": "db", "question": "Which database?", "options": [{"label": "sqlite"}, {"label": "postgres", "description": "needs a server"}]},
        {"id": "name", "question": "Table name?"},
        {"id": "engine", "question": "Engine?", "options": [{"label": "a"}]}
    ])));
    server.push(openai::text(["thanks"]));
    let ws = Workspace::new();
    let got = run(
        &ws,
        &config(&server, "review"),
        r#"
T.setup()
local asked = {}
vim.ui.select = function(items, opts, on_choice)
  local labels = vim.tbl_map(opts.format_item, items)
  table.insert(asked, opts.prompt .. ' ' .. table.concat(labels, ' | '))
  -- postgres for the first question, "Other…" for the last.
  on_choice(#items == 3 and items[2] or items[#items])
end
vim.ui.input = function(opts, on_confirm)
  table.insert(asked, opts.prompt)
  on_confirm(#asked == 2 and 'users' or 'custom engine')
end
vim.cmd('TandemPrompt set up the db')
T.put('receipt', T.turn(1))
T.put('asked', asked)
"#,
    )
    .await;
    assert_eq!(
        got.lines("asked"),
        [
            "Which database? sqlite | postgres — needs a server | Other…",
            "Table name? ",
            "Engine? a | Other…",
            "Engine? ",
        ]
    );
    assert_eq!(got.get("receipt")["stopReason"], "end_turn");
    let answer = &server.requests()[1].tool_messages()[0].1;
    assert!(answer.contains("The user answered:"), "{answer}");
    let json_part = &answer[answer.find('{').expect("answers as JSON")..];
    let answers: serde_json::Value = serde_json::from_str(json_part.trim()).expect("JSON answers");
    assert_eq!(
        answers,
        json!({"db": "postgres", "name": "users", "engine": "custom engine"})
    );
}

#[tokio::test]
async fn a_cancelled_question_fails_the_call_and_the_turn_ends() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(ask(
        json!([{"id": "x", "question": "Which?", "options": [{"label": "a"}]}]),
    ));
    server.push(openai::text(["ok, never mind"]));
    let ws = Workspace::new();
    let got = run(
        &ws,
        &config(&server, "review"),
        r#"
T.setup()
vim.ui.select = function(_, _, on_choice)
  on_choice(nil) -- <Esc>
end
vim.cmd('TandemPrompt ask me')
T.put('receipt', T.turn(1))
T.put('chat', T.chat_lines())
"#,
    )
    .await;
    assert_eq!(got.get("receipt")["stopReason"], "end_turn");
    let answer = &server.requests()[1].tool_messages()[0].1;
    assert!(answer.contains("did not answer"), "{answer}");
    assert!(
        got.text("chat").contains("ok, never mind"),
        "{}",
        got.text("chat")
    );
}

#[tokio::test]
async fn a_command_in_review_mode_is_allowed_or_rejected_with_vim_ui_select() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(openai::tool_calls(&[(
        "call_1",
        "exec_command",
        r#"{"cmd":"echo allowed-ran"}"#,
    )]));
    server.push(openai::tool_calls(&[(
        "call_2",
        "exec_command",
        r#"{"cmd":"echo never-ran"}"#,
    )]));
    server.push(openai::text(["done"]));
    let ws = Workspace::new();
    let got = run(
        &ws,
        &config(&server, "review"),
        r#"
T.setup()
local asked = {}
vim.ui.select = function(items, opts, on_choice)
  table.insert(asked, opts.prompt .. ': ' .. table.concat(vim.tbl_map(opts.format_item, items), ' | '))
  on_choice(#asked == 1 and items[1] or nil)
end
vim.cmd('TandemPrompt run things')
T.turn(1)
T.put('asked', asked)
"#,
    )
    .await;
    let asked = got.lines("asked");
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(
        asked[0].starts_with("tandem wants to: Run `echo allowed-ran`: Allow once | Always allow"),
        "{asked:?}"
    );
    // The daemon's whole list is shown, one option per kind.
    assert!(
        asked[0].ends_with(" | Reject | Always reject `echo allowed-ran` in this session"),
        "{asked:?}"
    );
    let requests = server.requests();
    let first = &requests[1].tool_messages()[0].1;
    assert!(first.contains("allowed-ran"), "{first}");
    let second = &requests[2].tool_messages()[1].1;
    assert!(second.contains("dismissed"), "{second}");
}
