//! Inline edits (`edit = "selection"` tasks): the answer becomes one
//! `workspace/applyEdit` of the range, moved along when the user typed
//! elsewhere, refused when they typed inside it; the model is told how it
//! ended at its next request.

use std::path::Path;

use serde_json::{json, Value};

use super::{last_user_message, range, Fixture};
use crate::support::client::file_uri;
use crate::support::model_server::openai;

const FILE: &str = "fn main() {\n    let x = 1;\n    println!(\"{x}\");\n}\n";

/// Answers `workspace/applyEdit` with `answer` and
/// `window/workDoneProgress/create` with null.
fn answer_edits(fixture: &mut Fixture, answer: Value) {
    fixture.editor.on_request(move |method, _| match method {
        "workspace/applyEdit" => Some(answer.clone()),
        "window/workDoneProgress/create" => Some(Value::Null),
        _ => None,
    });
}

/// Sends `tandem/runTask`; once the daemon's `workspace/applyEdit` arrives
/// (answered by the handler), sends `then` (an editor applying it).
/// Returns the task's result and the edit (`None` if none was sent).
async fn run_and_apply(
    fixture: &mut Fixture,
    params: Value,
    then: Option<(i32, Value, &str)>,
    path: &Path,
) -> (Value, Option<Value>) {
    let id = fixture.start_run_task(params).await;
    let mut edit = None;
    loop {
        let message = fixture.editor.next_message().await;
        if message["method"] == "workspace/applyEdit" {
            edit = Some(message["params"].clone());
            if let Some((version, range, text)) = then.clone() {
                fixture.change(path, version, range, text).await;
            }
        }
        if message["id"] == id && message.get("method").is_none() {
            return (message, edit);
        }
    }
}

/// What the model read in the request after the task: the user messages
/// of the last request.
fn user_messages(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn an_accepted_edit_replaces_exactly_the_range_and_the_model_hears_of_it() {
    let mut fixture = Fixture::start(json!({})).await;
    answer_edits(&mut fixture, json!({"applied": true}));
    let path = fixture.open("src/main.rs", FILE).await;
    fixture
        .server
        .push(openai::text(["```rust\n", "    let x = 42;\n", "```"]));
    let (response, edit) = run_and_apply(
        &mut fixture,
        json!({
            "task": "edit",
            "textDocument": {"uri": file_uri(&path), "version": 1},
            "range": range((1, 0), (2, 0)),
            "instruction": "use 42",
        }),
        Some((2, range((1, 0), (2, 0)), "    let x = 42;\n")),
        &path,
    )
    .await;
    let result = &response["result"];
    assert_eq!(result["stopReason"], "end_turn", "{response}");
    assert_eq!(result["edit"]["outcome"], "accepted", "{result}");
    let edit = edit.expect("a workspace/applyEdit");
    assert_eq!(edit["label"], "tandem: Edit selection…");
    let annotation = format!("tandem-task-{}-t1", result["sessionId"].as_str().unwrap());
    assert_eq!(
        edit["edit"],
        json!({
            "documentChanges": [{
                "textDocument": {"uri": file_uri(&path), "version": 1},
                "edits": [{
                    "range": range((1, 0), (2, 0)),
                    "newText": "    let x = 42;\n",
                    "annotationId": annotation,
                }],
            }],
            "changeAnnotations": {annotation.clone(): {
                "label": "tandem: Edit selection…",
                "needsConfirmation": true,
                "description": "Proposed by the tandem agent (task `edit`)",
            }},
        })
    );
    // The instruction and the answer's shape were asked for.
    let requests = fixture.server.wait_for_requests(1).await;
    let asked = last_user_message(&requests[0].body);
    assert!(asked.starts_with("use 42\n\n"), "{asked}");
    assert!(
        asked.contains("Answer with only the code that replaces the selected text (line 2)"),
        "{asked}"
    );
    // The answer streamed as chunks.
    let session = result["sessionId"].as_str().expect("session").to_string();
    assert_eq!(
        crate::support::client::agent_text(&fixture.editor.updates_of(&session)),
        "```rust\n    let x = 42;\n```"
    );

    // The next task's request carries the outcome.
    fixture.server.push(openai::text(["ok"]));
    let next = fixture
        .run_task(json!({
            "task": "explain",
            "textDocument": {"uri": file_uri(&path)},
            "range": range((1, 0), (2, 0)),
        }))
        .await;
    assert_eq!(next["result"]["stopReason"], "end_turn", "{next}");
    let requests = fixture.server.wait_for_requests(2).await;
    let users = user_messages(&requests[1].body);
    assert!(
        users.iter().any(|m| m == "[tandem] Your replacement for line 2 of `src/main.rs` (task \"Edit selection…\", turn t1) was accepted by the user and is in the file now."),
        "{users:#?}"
    );
    assert!(last_user_message(&requests[1].body).contains("    let x = 42;"));
}

#[tokio::test]
async fn a_rejected_edit_is_reported_with_the_users_comment() {
    let mut fixture = Fixture::start(json!({})).await;
    answer_edits(
        &mut fixture,
        json!({"applied": false, "failureReason": "keep it at 1"}),
    );
    let path = fixture.open("src/main.rs", FILE).await;
    fixture.server.push(openai::text(["    let x = 42;"]));
    let (response, edit) = run_and_apply(
        &mut fixture,
        json!({
            "task": "edit",
            "textDocument": {"uri": file_uri(&path)},
            "range": range((1, 4), (1, 14)),
            "instruction": "use 42",
        }),
        None,
        &path,
    )
    .await;
    let result = &response["result"];
    assert!(edit.is_some());
    assert_eq!(result["edit"]["outcome"], "rejected", "{result}");
    assert_eq!(
        result["edit"]["message"],
        "[tandem] Your replacement for line 2 of `src/main.rs` (task \"Edit selection…\", turn t1) was rejected by the user; nothing was changed. Their comment: keep it at 1"
    );
    // Logged: the outcome waits in the session's log for the next request.
    let session = result["sessionId"].as_str().expect("session");
    let logged = fixture.editor.log_lines(session);
    assert!(
        logged.iter().any(|l| l["type"] == "input_queued"
            && l["queue"] == "next_step"
            && l["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("rejected by the user"))),
        "{logged:#?}"
    );
}

/// The model first asks the user a question (`request_user_input`), which
/// the test holds while it types; then it answers with the replacement.
async fn edit_while_the_user_types(change: (Value, &str)) -> (Fixture, Value, Option<Value>) {
    let mut fixture = Fixture::start(json!({})).await;
    answer_edits(&mut fixture, json!({"applied": true}));
    fixture.editor.hold_requests("tandem/requestUserInput");
    let path = fixture.open("src/main.rs", FILE).await;
    let question = json!({"questions": [{"id": "q", "question": "42 or 43?"}]}).to_string();
    fixture.server.push(openai::tool_calls(&[(
        "call_q",
        "request_user_input",
        &question,
    )]));
    fixture.server.push(openai::text(["    let x = 42;"]));
    let id = fixture
        .start_run_task(json!({
            "task": "edit",
            "textDocument": {"uri": file_uri(&path), "version": 1},
            "range": range((1, 4), (1, 14)),
            "instruction": "use 42",
        }))
        .await;
    let asked = loop {
        let message = fixture.editor.next_message().await;
        if message["method"] == "tandem/requestUserInput" {
            break message;
        }
    };
    // The user types, then answers: one write, so the answer arrives right
    // behind the change it must see.
    let typed = json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
        "textDocument": {"uri": file_uri(&path), "version": 2},
        "contentChanges": [{"range": change.0, "text": change.1}],
    }});
    let answer = json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"answers": {"q": "42"}}});
    fixture.editor.send_together(&[typed, answer]).await;
    let mut edit = None;
    let response = loop {
        let message = fixture.editor.next_message().await;
        if message["method"] == "workspace/applyEdit" {
            edit = Some(message["params"].clone());
            let edits = &message["params"]["edit"]["documentChanges"][0]["edits"][0];
            fixture
                .change(
                    &path,
                    3,
                    edits["range"].clone(),
                    edits["newText"].as_str().unwrap_or_default(),
                )
                .await;
        }
        if message["id"] == id && message.get("method").is_none() {
            break message;
        }
    };
    (fixture, response, edit)
}

#[tokio::test]
async fn typing_outside_the_range_moves_the_edit_along() {
    let (_fixture, response, edit) =
        edit_while_the_user_types((range((0, 0), (0, 0)), "// header\n")).await;
    assert_eq!(
        response["result"]["edit"]["outcome"], "accepted",
        "{response}"
    );
    let edit = edit.expect("a workspace/applyEdit");
    let change = &edit["edit"]["documentChanges"][0];
    assert_eq!(change["textDocument"]["version"], 2);
    assert_eq!(change["edits"][0]["range"], range((2, 4), (2, 14)));
    assert_eq!(change["edits"][0]["newText"], "let x = 42;");
}

#[tokio::test]
async fn typing_inside_the_range_refuses_the_edit() {
    let (_fixture, response, edit) = edit_while_the_user_types((range((1, 8), (1, 9)), "y")).await;
    assert!(edit.is_none(), "no edit is proposed: {edit:?}");
    let result = &response["result"];
    assert_eq!(result["edit"]["outcome"], "refused", "{result}");
    assert_eq!(
        result["edit"]["message"],
        "[tandem] Your replacement for line 2 of `src/main.rs` (task \"Edit selection…\", turn t1) was not applied: the selected text changed while the task ran, so the edit was not proposed."
    );
}

#[tokio::test]
async fn without_an_instruction_the_user_is_asked_for_one() {
    let mut fixture = Fixture::start(json!({})).await;
    let questions = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = questions.clone();
    fixture
        .editor
        .on_request(move |method, params| match method {
            "tandem/requestUserInput" => {
                seen.lock().expect("lock").push(params.clone());
                Some(json!({"answers": {"instruction": "rename x to count"}}))
            }
            "workspace/applyEdit" => Some(json!({"applied": false})),
            _ => None,
        });
    let path = fixture.open("src/main.rs", FILE).await;
    fixture.server.push(openai::text(["    let count = 1;"]));
    let response = fixture
        .run_task(json!({
            "task": "edit",
            "textDocument": {"uri": file_uri(&path)},
            "range": range((1, 4), (1, 14)),
        }))
        .await;
    assert_eq!(
        response["result"]["edit"]["outcome"], "rejected",
        "{response}"
    );
    let questions = questions.lock().expect("lock").clone();
    assert_eq!(questions.len(), 1);
    assert_eq!(
        questions[0]["questions"],
        json!([{"id": "instruction", "question": "Edit selection…: what should change in line 2 of src/main.rs?"}])
    );
    let requests = fixture.server.wait_for_requests(1).await;
    assert!(last_user_message(&requests[0].body).starts_with("rename x to count\n\n"));

    // Dismissing the question runs nothing.
    fixture.editor.on_request(|method, _| {
        (method == "tandem/requestUserInput").then(|| json!({"outcome": "cancelled"}))
    });
    let dismissed = fixture
        .run_task(json!({
            "task": "edit",
            "textDocument": {"uri": file_uri(&path)},
            "range": range((1, 4), (1, 14)),
        }))
        .await;
    assert_eq!(
        dismissed["result"]["stopReason"], "cancelled",
        "{dismissed}"
    );
    assert_eq!(dismissed["result"]["turnId"], Value::Null);
    assert_eq!(fixture.server.requests().len(), 1);
}
