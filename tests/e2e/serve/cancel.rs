//! `$/cancelRequest` through `tandem lsp --attach`, as over stdio: a
//! running prompt's turn is cancelled and its answer (the receipt) follows
//! the turn's last update; a queued prompt is discarded alone.

use std::sync::Arc;

use serde_json::{json, Value};

use super::{attach_options, log_lines, StopOnDrop};
use crate::support::client::Editor;
use crate::support::model_server::openai::{delta, text};
use crate::support::model_server::{ModelServer, Reply, SseStep};

fn text_then_stall(piece: &str) -> Reply {
    Reply::Sse(vec![
        delta(json!({"role": "assistant", "content": ""})),
        delta(json!({ "content": piece })),
        SseStep::Stall,
    ])
}

/// A shim editor with a session on `model`, and the guard that stops the
/// serve it started.
async fn shim_session(model: &ModelServer) -> (Editor, String, StopOnDrop, tempfile::TempDir) {
    let home = Arc::new(tempfile::tempdir().unwrap());
    let stop = StopOnDrop(home.path().to_path_buf());
    let workspace = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn_with(attach_options(&home)).await;
    editor.initialize(workspace.path()).await;
    let session = editor.new_session(model.session_config()).await;
    (editor, session, stop, workspace)
}

async fn start_stalled_turn(editor: &mut Editor, session: &str, model: &ModelServer) -> i64 {
    model.push(text_then_stall("partial"));
    let id = editor.start_prompt(session, "long job").await;
    editor
        .wait_update(session, |u| u["content"]["text"] == "partial")
        .await;
    id
}

fn updates_after(editor: &Editor, session: &str, at: usize) -> Vec<Value> {
    editor.received[at..]
        .iter()
        .filter(|m| m["method"] == "tandem/update" && m["params"]["sessionId"] == session)
        .cloned()
        .collect()
}

#[tokio::test]
async fn cancel_request_through_the_shim_cancels_the_running_turn_and_answers_after_its_updates() {
    let model = ModelServer::start().await;
    let (mut editor, session, _stop, _ws) = shim_session(&model).await;
    let id = start_stalled_turn(&mut editor, &session, &model).await;

    editor.notify("$/cancelRequest", json!({"id": id})).await;
    let (response, at) = editor.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    assert_eq!(response["result"]["turnId"], "t1", "{response}");
    let end = editor
        .updates_of(&session)
        .into_iter()
        .find(|u| u["update"]["sessionUpdate"] == "turn_end")
        .expect("turn_end before the answer");
    assert_eq!(end["update"]["stopReason"], "cancelled");
    assert_eq!(updates_after(&editor, &session, at), Vec::<Value>::new());
    model.wait_for_hangups(1).await;

    model.push(text(["still here"]));
    let (again, _) = editor.prompt(&session, "again").await;
    assert_eq!(again["result"]["stopReason"], "end_turn", "{again}");
    assert_eq!(again["result"]["turnId"], "t2");
}

#[tokio::test]
async fn cancel_request_through_the_shim_discards_only_the_queued_prompt() {
    let model = ModelServer::start().await;
    let (mut editor, session, stop, _ws) = shim_session(&model).await;
    let first = start_stalled_turn(&mut editor, &session, &model).await;
    let second = editor.start_prompt(&session, "queued").await;
    editor
        .wait_update(&session, |u| {
            u["sessionUpdate"] == "input_status" && u["queue"] == "next_turn"
        })
        .await;

    editor
        .notify("$/cancelRequest", json!({"id": second}))
        .await;
    let (response, _) = editor.response(second).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    assert_eq!(response["result"]["turnId"], Value::Null, "{response}");
    // Written before the answer, like every update of the input.
    let discarded = editor
        .updates_of(&session)
        .into_iter()
        .find(|u| u["update"]["status"] == "discarded")
        .expect("input_status discarded before the answer");
    assert_eq!(discarded["update"]["reason"], "its request was cancelled");
    let log = log_lines(&stop.0, &session);
    assert!(
        !log.iter().any(|e| e["type"] == "turn_end"),
        "the running turn goes on"
    );

    editor
        .notify("tandem/cancel", json!({"sessionId": session}))
        .await;
    let (one, _) = editor.response(first).await;
    assert_eq!(one["result"]["stopReason"], "cancelled", "{one}");
    assert_eq!(model.requests().len(), 1);
}
