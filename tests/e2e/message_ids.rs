//! `messageId` on every user message, agent message chunk and thought
//! chunk (issue 29), over `tandem lsp` and through the serve: one id per
//! message, shared by its chunks, logged for the user's, and the same in
//! a reloaded session's replay as in the live stream.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::serve::{attach_options, StopOnDrop};
use crate::support::client::{Editor, EditorOptions};
use crate::support::model_server::{openai, ModelServer};

/// `(sessionUpdate, messageId)` of every update that is part of a message.
fn message_ids(updates: &[Value]) -> Vec<(String, String)> {
    updates
        .iter()
        .filter(|u| {
            matches!(
                u["update"]["sessionUpdate"].as_str(),
                Some("user_message" | "agent_message_chunk" | "agent_thought_chunk")
            )
        })
        .map(|u| {
            let id = u["update"]["messageId"]
                .as_str()
                .unwrap_or_else(|| panic!("no messageId: {u}"));
            (
                u["update"]["sessionUpdate"].as_str().unwrap().to_string(),
                id.to_string(),
            )
        })
        .collect()
}

/// The distinct ids of `ids`, in order of first appearance.
fn distinct(ids: &[(String, String)]) -> Vec<(String, String)> {
    let mut seen: Vec<(String, String)> = Vec::new();
    for id in ids {
        if !seen.contains(id) {
            seen.push(id.clone());
        }
    }
    seen
}

async fn ids_on_the_wire_and_across_reload(first: EditorOptions, second: EditorOptions) {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn_with(first).await;
    editor.initialize(root.path()).await;
    let session = editor.new_session(server.session_config()).await;

    server.push(openai::reasoning_then_text(
        &["let me ", "think"],
        &["Hel", "lo ", "there"],
    ));
    let (receipt, _) = editor.prompt(&session, "hi").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    assert_eq!(receipt["result"]["messageId"], "m1", "the prompt's own id");
    server.push(openai::text(["again"]));
    let (receipt, _) = editor.prompt(&session, "once more").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    // Through the serve the last updates may follow the answer.
    if !editor
        .updates_of(&session)
        .iter()
        .any(|u| u["update"]["sessionUpdate"] == "turn_end" && u["turnId"] == "t2")
    {
        editor
            .wait_update(&session, |u| u["sessionUpdate"] == "turn_end")
            .await;
    }
    let live = message_ids(&editor.updates_of(&session));
    // Every chunk of a message has its id; each message its own.
    assert_eq!(
        distinct(&live),
        [
            ("user_message", "m1"),
            ("agent_thought_chunk", "t1-1-1-thought"),
            ("agent_message_chunk", "t1-1-1"),
            ("user_message", "m2"),
            ("agent_message_chunk", "t2-1-1"),
        ]
        .map(|(k, id)| (k.to_string(), id.to_string())),
        "{live:?}"
    );
    assert!(live.len() > 5, "several chunks per message: {live:?}");
    // The user's id is in its log event.
    let logged: Vec<Value> = editor
        .log_lines(&session)
        .into_iter()
        .filter(|e| e["type"] == "user_message")
        .map(|e| e["message_id"].clone())
        .collect();
    assert_eq!(logged, [json!("m1"), json!("m2")]);
    editor.shutdown_and_exit().await;

    // Another daemon (or window) loads it: the replay names every message
    // as the live stream did.
    let mut other = Editor::spawn_with(second).await;
    other.initialize(root.path()).await;
    let loaded = other
        .request("tandem/loadSession", json!({"sessionId": session}))
        .await;
    assert!(
        loaded["result"]["replayed"].as_u64().unwrap() > 0,
        "{loaded}"
    );
    let replayed = message_ids(&other.updates_of(&session));
    assert_eq!(distinct(&replayed), distinct(&live));
    let text = |ids: &[(String, String)]| ids.iter().filter(|(k, _)| k != "user_message").count();
    assert!(text(&replayed) >= 3, "{replayed:?}");
}

#[tokio::test]
async fn lsp_messages_carry_ids_that_a_reload_keeps() {
    let home = Arc::new(tempfile::tempdir().unwrap());
    let options = || EditorOptions {
        home: Some(home.clone()),
        ..EditorOptions::default()
    };
    ids_on_the_wire_and_across_reload(options(), options()).await;
}

#[tokio::test]
async fn lsp_attach_messages_carry_ids_that_another_window_replays() {
    let home = Arc::new(tempfile::tempdir().unwrap());
    let _stop = StopOnDrop(home.path().to_path_buf());
    ids_on_the_wire_and_across_reload(attach_options(&home), attach_options(&home)).await;
}
