//! A serve with fsync on (issue 28): the log's fsyncs run on the blocking
//! pool, never on the serve's one thread, and what acknowledges an event
//! still waits for it. Two sessions' turns (one running tool batches, each
//! fsynced) both end with every update before their answer; a steer and a
//! mode change are answered once their events are in the log.

use std::sync::Arc;

use serde_json::json;

use super::{log_lines, poll_until, read_serve_json, serve_command, Serve};
use crate::support::client::agent_text;
use crate::support::model_server::{openai, ModelServer};

async fn fsyncing_serve() -> Serve {
    let home = Arc::new(tempfile::tempdir().expect("temp home"));
    let stderr = std::fs::File::create(home.path().join("serve.stderr")).unwrap();
    let child = serve_command(home.path())
        .env("TANDEM_FSYNC", "1")
        .arg("serve")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .expect("spawn tandem serve");
    let path = home.path().to_path_buf();
    poll_until("serve.json", || read_serve_json(&path).is_some()).await;
    let info = read_serve_json(home.path()).expect("serve.json");
    Serve { child, home, info }
}

#[tokio::test]
async fn with_fsync_on_turns_end_after_their_updates_and_acks_follow_their_events() {
    let serve = fsyncing_serve().await;
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("notes.txt"), "some notes\n").unwrap();
    let (model_a, model_b) = (ModelServer::start().await, ModelServer::start().await);
    for n in 0..3 {
        model_a.push(openai::tool_calls(&[(
            &format!("call_{n}"),
            "read_file",
            // Not the same call each time: no loop to detect.
            &json!({"path": "notes.txt", "limit": n + 1}).to_string(),
        )]));
    }
    model_a.push(openai::text(["a done"]));
    model_b.push(openai::text(["b1", " b2", " b3"]));

    let mut ws = serve.client().await;
    ws.initialize(workspace.path(), json!({})).await;
    let session_a = ws.new_session(model_a.session_config()).await;
    let session_b = ws.new_session(model_b.session_config()).await;

    let prompt_a = ws.start_prompt(&session_a, "read it three times").await;
    let prompt_b = ws.start_prompt(&session_b, "go").await;
    for (session, prompt, text) in [
        (&session_a, prompt_a, "a done"),
        (&session_b, prompt_b, "b1 b2 b3"),
    ] {
        let receipt = ws.response(prompt).await;
        assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
        let answered = ws
            .received
            .iter()
            .position(|m| m["id"] == json!(prompt) && m.get("method").is_none())
            .unwrap();
        let turn_end = ws.received.iter().position(|m| {
            m["method"] == "tandem/update"
                && m["params"]["sessionId"] == *session
                && m["params"]["update"]["sessionUpdate"] == "turn_end"
        });
        assert!(
            turn_end.is_some_and(|at| at < answered),
            "the turn's end reached the client before its answer"
        );
        let updates = ws.updates_of(session);
        assert!(agent_text(&updates).ends_with(text), "{updates:?}");
    }
    let results = log_lines(&serve.path(), &session_a)
        .iter()
        .filter(|e| e["type"] == "tool_result")
        .count();
    assert_eq!(results, 3);

    let steer = ws
        .request(
            "tandem/steer",
            json!({"sessionId": session_b, "prompt": [{"type": "text", "text": "later"}], "wake": false}),
        )
        .await;
    let message_id = steer["result"]["messageId"].as_str().expect("messageId");
    assert!(
        log_lines(&serve.path(), &session_b)
            .iter()
            .any(|e| e["type"] == "input_queued" && e["message_id"] == message_id),
        "the steer is in the log when it is answered"
    );
    let mode = ws
        .request(
            "tandem/setMode",
            json!({"sessionId": session_b, "mode": "auto"}),
        )
        .await;
    assert_eq!(mode["result"]["mode"], "auto", "{mode}");
    assert!(log_lines(&serve.path(), &session_b)
        .iter()
        .any(|e| e["type"] == "mode_changed"));
}
