//! `tandem/runTask` and `workspace/executeCommand` `tandem.runTask`: what
//! the model receives, the errors that run nothing, the task session, and
//! progress with its cancel.

use std::time::Duration;

use serde_json::{json, Value};

use super::{diagnostic, last_user_message, range, Fixture};
use crate::support::client::file_uri;
use crate::support::model_server::{openai, Reply, SseStep};

const FILE: &str = "fn main() {\n    let x = 1;\n    println!(\"{x}\");\n}\n";

/// The params of a `$/progress` that `pred` accepts: one received already,
/// else the next one.
async fn progress(fixture: &mut Fixture, pred: impl Fn(&Value) -> bool) -> Value {
    let seen = fixture
        .editor
        .received
        .iter()
        .find(|m| m["method"] == "$/progress" && pred(&m["params"]))
        .map(|m| m["params"].clone());
    match seen {
        Some(params) => params,
        None => fixture.editor.wait_notification("$/progress", pred).await["params"].clone(),
    }
}

fn accept_progress(fixture: &mut Fixture) {
    fixture.editor.on_request(|method, _| {
        (method == "window/workDoneProgress/create").then_some(Value::Null)
    });
}

#[tokio::test]
async fn run_task_sends_the_unsaved_selection_with_its_place_and_context_and_answers_at_turn_end() {
    let mut fixture = Fixture::start(json!({})).await;
    accept_progress(&mut fixture);
    let path = fixture.open("src/main.rs", FILE).await;
    // Unsaved: the disk still has `let x = 1;`.
    fixture
        .change(&path, 2, range((1, 12), (1, 13)), "42")
        .await;
    fixture.server.push(openai::text(["It prints ", "42."]));
    let result = fixture
        .run_task(json!({
            "task": "explain",
            "textDocument": {"uri": file_uri(&path), "version": 2},
            "range": range((1, 0), (2, 0)),
        }))
        .await;
    let result = &result["result"];
    assert_eq!(result["stopReason"], "end_turn", "{result}");
    assert_eq!(result["turnId"], "t1");
    assert!(result.get("edit").is_none(), "{result}");
    let session = result["sessionId"].as_str().expect("sessionId").to_string();

    let requests = fixture.server.wait_for_requests(1).await;
    let asked = last_user_message(&requests[0].body);
    assert!(asked.contains("```rust\n    let x = 42;\n```"), "{asked}");
    assert!(
        asked.contains("Selection: `src/main.rs` (rust), line 2 of 5."),
        "{asked}"
    );
    assert!(
        asked.contains("Before the selection (line 1):\n```rust\nfn main() {\n```"),
        "{asked}"
    );
    assert!(
        asked.contains("After the selection (lines 3-4):"),
        "{asked}"
    );
    assert!(
        asked.contains("Explain what the selected rust code in src/main.rs does"),
        "{asked}"
    );

    // The turn streamed like a prompt's, and its user message is what the
    // model was asked (so `tandem replay` shows it).
    let updates = fixture.editor.updates_of(&session);
    let user = updates
        .iter()
        .find(|u| u["update"]["sessionUpdate"] == "user_message")
        .expect("user_message");
    assert_eq!(user["update"]["content"][0]["text"], asked);
    assert_eq!(
        crate::support::client::agent_text(&updates),
        "It prints 42."
    );

    // The task session is listed as one, and the next task reuses it.
    let tasks = fixture.task_sessions().await;
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    assert_eq!(tasks[0]["sessionId"], session);
    fixture.server.push(openai::text(["again"]));
    let again = fixture
        .run_task(json!({
            "task": "explain",
            "textDocument": {"uri": file_uri(&path)},
            "range": range((2, 0), (2, 4)),
        }))
        .await;
    assert_eq!(again["result"]["sessionId"], session);
    assert_eq!(again["result"]["turnId"], "t2");
}

#[tokio::test]
async fn fix_sends_the_diagnostics_in_the_range_and_only_those() {
    let mut fixture = Fixture::start(json!({})).await;
    let path = fixture.open("src/main.rs", FILE).await;
    fixture.server.push(openai::text(["fixed"]));
    let result = fixture
        .run_task(json!({
            "task": "fix",
            "textDocument": {"uri": file_uri(&path), "version": 1},
            "range": range((1, 4), (1, 14)),
            "diagnostics": [
                diagnostic((1, 8), (1, 9), "unused variable `x`"),
                {"range": range((3, 0), (3, 1)), "message": "elsewhere", "severity": 2},
            ],
        }))
        .await;
    assert_eq!(result["result"]["stopReason"], "end_turn", "{result}");
    let requests = fixture.server.wait_for_requests(1).await;
    let asked = last_user_message(&requests[0].body);
    assert!(
        asked.contains("Diagnostics:\n- line 2: error [rustc E0308]: unused variable `x`"),
        "{asked}"
    );
    assert!(!asked.contains("elsewhere"), "{asked}");
    // Fix works in the workspace: the model has its edit tool.
    let tools: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(tools.contains(&"apply_patch"), "{tools:?}");
}

#[tokio::test]
async fn bad_requests_are_refused_with_clear_errors_and_run_nothing() {
    let mut fixture = Fixture::start(json!({})).await;
    let path = fixture.open("src/main.rs", FILE).await;
    fixture
        .change(&path, 2, range((0, 0), (0, 0)), "// hi\n")
        .await;
    let uri = file_uri(&path);

    let unknown = fixture
        .run_task(json!({"task": "refactr", "textDocument": {"uri": uri}, "range": range((1, 0), (1, 3))}))
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert_eq!(
        unknown["error"]["message"],
        "unknown task `refactr`; the tasks are: fix, explain, edit, document, tests"
    );

    let outside = fixture
        .run_task(json!({"task": "explain", "textDocument": {"uri": uri}, "range": range((40, 0), (41, 0))}))
        .await;
    assert_eq!(outside["error"]["code"], -32602, "{outside}");
    assert_eq!(
        outside["error"]["message"],
        "range: line 40 is past the end of `src/main.rs` (6 lines)"
    );

    let stale = fixture
        .run_task(json!({"task": "explain", "textDocument": {"uri": uri, "version": 1}, "range": range((1, 0), (1, 3))}))
        .await;
    assert_eq!(stale["error"]["code"], -32801, "{stale}");
    assert_eq!(
        stale["error"]["message"],
        "`src/main.rs` changed: the request is for version 1, and the editor has sent version 2 since"
    );

    let missing = fixture
        .run_task(json!({"task": "explain", "range": range((1, 0), (1, 3))}))
        .await;
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    assert!(
        missing["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("textDocument"),
        "{missing}"
    );

    let bad_command = fixture
        .editor
        .request(
            "workspace/executeCommand",
            json!({"command": "tandem.nope", "arguments": []}),
        )
        .await;
    assert_eq!(bad_command["error"]["code"], -32602, "{bad_command}");

    assert!(
        fixture.server.requests().is_empty(),
        "no model call was made"
    );
    assert!(
        fixture.task_sessions().await.is_empty(),
        "no task session was made"
    );
}

#[tokio::test]
async fn execute_command_answers_when_the_turn_starts_then_its_updates_and_titled_progress_follow()
{
    let mut fixture = Fixture::start(json!({})).await;
    accept_progress(&mut fixture);
    let path = fixture.open("src/main.rs", FILE).await;
    fixture.server.push(Reply::Sse(vec![
        // The answer is due when the turn starts; a model that streams
        // within microseconds of the request can race it (the answer and
        // the turn's updates are queued by two tasks), so the first token
        // comes a moment later here.
        SseStep::Delay(Duration::from_millis(50)),
        openai::delta(json!({"content": "It "})),
        // The model takes its time: the command's answer must not wait.
        SseStep::Delay(Duration::from_millis(100)),
        openai::delta(json!({"content": "counts."})),
        openai::finish("stop"),
        openai::done(),
    ]));
    let actions = fixture
        .code_actions(&path, range((1, 4), (1, 14)), json!([]))
        .await;
    let explain = actions[0]["command"].clone();
    assert_eq!(explain["arguments"][0]["task"], "explain");
    let id = fixture
        .editor
        .start_request(
            "workspace/executeCommand",
            json!({"command": explain["command"], "arguments": explain["arguments"]}),
        )
        .await;
    let (response, answered_at) = fixture.editor.response(id).await;
    let session = response["result"]["sessionId"]
        .as_str()
        .expect("sessionId")
        .to_string();
    assert_eq!(response["result"]["turnId"], "t1", "{response}");

    let end = fixture
        .update(&session, |u| u["sessionUpdate"] == "turn_end")
        .await;
    assert_eq!(end["update"]["stopReason"], "end_turn");
    let first_chunk = fixture
        .editor
        .received
        .iter()
        .position(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .expect("a chunk");
    assert!(
        answered_at < first_chunk,
        "the command was answered before the answer streamed"
    );
    assert_eq!(
        crate::support::client::agent_text(&fixture.editor.updates_of(&session)),
        "It counts."
    );

    // `$/progress` is not ordered with the updates: its end may come first.
    let token = format!("tandem/{session}/t1");
    let progress_end = progress(&mut fixture, |p| {
        p["token"] == token && p["value"]["kind"] == "end"
    })
    .await;
    assert_eq!(progress_end["value"]["message"], "end_turn");
    let begin = fixture
        .editor
        .received
        .iter()
        .find(|m| m["method"] == "$/progress" && m["params"]["token"] == token)
        .expect("begin")["params"]["value"]
        .clone();
    assert_eq!(
        begin,
        json!({"kind": "begin", "title": "Explain", "message": "working", "cancellable": true})
    );
}

#[tokio::test]
async fn work_done_progress_cancel_cancels_the_task_turn() {
    let mut fixture = Fixture::start(json!({})).await;
    accept_progress(&mut fixture);
    let path = fixture.open("src/main.rs", FILE).await;
    fixture.server.push(Reply::Sse(vec![
        openai::delta(json!({"content": "Let me"})),
        SseStep::Stall,
    ]));
    let id = fixture
        .start_run_task(json!({
            "task": "tests",
            "textDocument": {"uri": file_uri(&path)},
            "range": range((0, 0), (4, 0)),
        }))
        .await;
    // Cancel once the model is streaming (the connection is open).
    fixture
        .editor
        .wait_notification("tandem/update", |p| {
            p["update"]["sessionUpdate"] == "agent_message_chunk"
        })
        .await;
    let begin = progress(&mut fixture, |p| p["value"]["kind"] == "begin").await;
    assert_eq!(begin["value"]["title"], "Write tests");
    let token = begin["token"].clone();
    fixture
        .editor
        .notify("window/workDoneProgress/cancel", json!({"token": token}))
        .await;
    let (response, _) = fixture.editor.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    fixture.server.wait_for_hangups(1).await;
}

#[tokio::test]
async fn a_task_can_run_in_a_given_session_and_a_withdrawn_request_cancels_its_turn() {
    let mut fixture = Fixture::start(json!({})).await;
    let path = fixture.open("src/main.rs", FILE).await;
    let chat = fixture
        .editor
        .new_session(fixture.server.session_config())
        .await;
    fixture.server.push(Reply::Sse(vec![
        openai::delta(json!({"content": "Let me"})),
        SseStep::Stall,
    ]));
    let id = fixture
        .start_run_task(json!({
            "task": "explain",
            "textDocument": {"uri": file_uri(&path)},
            "range": range((1, 0), (2, 0)),
            "sessionId": chat,
        }))
        .await;
    fixture
        .editor
        .wait_update(&chat, |u| u["sessionUpdate"] == "agent_message_chunk")
        .await;
    fixture
        .editor
        .notify("$/cancelRequest", json!({"id": id}))
        .await;
    let (response, at) = fixture.editor.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    let end = fixture
        .update(&chat, |u| u["sessionUpdate"] == "turn_end")
        .await;
    assert_eq!(end["update"]["stopReason"], "cancelled");
    assert!(
        !fixture.editor.received[at..]
            .iter()
            .any(|m| m["method"] == "tandem/update" && m["params"]["sessionId"] == chat),
        "an update of the task's turn followed its answer"
    );
    fixture.server.wait_for_hangups(1).await;
    assert!(
        fixture.task_sessions().await.is_empty(),
        "the task ran in the chat session"
    );
}
