//! `$/progress` through `tandem lsp --attach`, as over stdio: a client that
//! declared `window.workDoneProgress` gets a token per turn, begin, reports
//! and end; cancelling the token cancels the turn.

use std::sync::Arc;

use serde_json::{json, Value};

use super::{attach_options, StopOnDrop};
use crate::support::client::Editor;
use crate::support::model_server::openai::{delta, text, tool_calls};
use crate::support::model_server::{ModelServer, Reply, SseStep};

async fn progress_editor(
    model: &ModelServer,
    root: &std::path::Path,
) -> (Editor, String, StopOnDrop) {
    let home = Arc::new(tempfile::tempdir().unwrap());
    let stop = StopOnDrop(home.path().to_path_buf());
    let mut editor = Editor::spawn_with(attach_options(&home)).await;
    editor.on_request(|method, _| {
        (method == "window/workDoneProgress/create").then_some(Value::Null)
    });
    editor
        .initialize_with(
            root,
            json!({"capabilities": {"window": {"workDoneProgress": true}}}),
        )
        .await;
    let session = editor.new_session(model.session_config()).await;
    (editor, session, stop)
}

async fn progress_end(editor: &mut Editor) -> Value {
    let is_end = |m: &Value| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end";
    match editor.received.iter().find(|m| is_end(m)).cloned() {
        Some(end) => end,
        None => {
            editor
                .wait_notification("$/progress", |p| p["value"]["kind"] == "end")
                .await
        }
    }
}

#[tokio::test]
async fn a_turn_through_the_shim_reports_work_done_progress_from_begin_to_end() {
    let model = ModelServer::start().await;
    model.push(tool_calls(&[(
        "call_1",
        "read_file",
        r#"{"path":"a.txt"}"#,
    )]));
    model.push(text(["read it"]));
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "alpha\n").unwrap();
    let (mut editor, session, _stop) = progress_editor(&model, root.path()).await;

    let (response, _) = editor.prompt(&session, "read").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let end = progress_end(&mut editor).await;
    let token = end["params"]["token"].clone();
    assert_eq!(token, json!(format!("tandem/{session}/t1")));
    assert_eq!(end["params"]["value"]["message"], "end_turn");
    let create = editor
        .received
        .iter()
        .find(|m| m["method"] == "window/workDoneProgress/create")
        .expect("a progress token was created");
    assert_eq!(create["params"]["token"], token);
    let values: Vec<&Value> = editor
        .received
        .iter()
        .filter(|m| m["method"] == "$/progress" && m["params"]["token"] == token)
        .map(|m| &m["params"]["value"])
        .collect();
    assert_eq!(values[0]["kind"], "begin", "{values:?}");
    assert_eq!(values[0]["title"], "tandem");
    assert_eq!(values[0]["cancellable"], true);
    assert!(
        values
            .iter()
            .any(|v| v["kind"] == "report" && v["message"] == "running: Read a.txt"),
        "{values:?}"
    );
    assert_eq!(values.last().unwrap()["kind"], "end");
    assert_eq!(
        values.iter().filter(|v| v["kind"] == "end").count(),
        1,
        "{values:?}"
    );
}

#[tokio::test]
async fn cancelling_the_progress_token_through_the_shim_cancels_the_turn() {
    let model = ModelServer::start().await;
    model.push(Reply::Sse(vec![
        delta(json!({"role": "assistant", "content": ""})),
        delta(json!({"content": "partial"})),
        SseStep::Stall,
    ]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session, _stop) = progress_editor(&model, root.path()).await;
    let id = editor.start_prompt(&session, "long job").await;
    let begin = editor
        .wait_notification("$/progress", |p| p["value"]["kind"] == "begin")
        .await;
    let token = begin["params"]["token"].clone();

    editor
        .notify("window/workDoneProgress/cancel", json!({"token": token}))
        .await;
    let (response, _) = editor.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    assert_eq!(response["result"]["turnId"], "t1", "{response}");
    let end = progress_end(&mut editor).await;
    assert_eq!(end["params"]["value"]["message"], "cancelled");
}
