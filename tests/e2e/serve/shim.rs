//! `tandem lsp --attach`: an editor's stdio relayed to the serve, which
//! the shim starts if none runs, and which keeps a turn running when the
//! window goes away.

use std::time::Duration;

use serde_json::{json, Value};

use super::{attach_options, log_lines, read_serve_json, StopOnDrop};
use crate::support::client::{agent_text, Editor};
use crate::support::model_server::openai::{delta, ending};
use crate::support::model_server::{ModelServer, Reply, SseStep};

#[tokio::test]
async fn lsp_attach_starts_a_serve_and_runs_a_turn_like_stdio() {
    let model = ModelServer::start().await;
    model.push(crate::support::model_server::openai::text(["Hi", " there"]));
    let home = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let _stop = StopOnDrop(home.path().to_path_buf());
    let workspace = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn_with(attach_options(&home)).await;
    let init = editor.initialize(workspace.path()).await;
    // The serve's own frontend answered, through the tunnel.
    let serve = &init["result"]["capabilities"]["experimental"]["tandem"]["serve"];
    assert!(serve["port"].as_u64().is_some_and(|p| p > 0), "{init}");
    assert_ne!(
        serve["pid"].as_u64(),
        Some(u64::from(std::process::id())),
        "{init}"
    );
    // The serve says whether it confines commands, like `tandem lsp` does.
    let sandbox = &init["result"]["capabilities"]["experimental"]["tandem"]["sandbox"];
    assert!(sandbox["available"].is_boolean(), "{init}");
    let info = read_serve_json(home.path()).expect("the shim started a serve");
    assert_ne!(info["pid"], editor.pid());

    let session = editor.new_session(model.session_config()).await;
    let (receipt, updates) = editor.prompt(&session, "hello").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    assert_eq!(agent_text(&updates), "Hi there");
    assert_eq!(
        updates.last().unwrap()["update"]["sessionUpdate"],
        "turn_end"
    );
    let status = editor.shutdown_and_exit().await;
    assert!(status.success());
    // The serve outlives the window.
    let after = read_serve_json(home.path()).expect("serve.json still there");
    assert_eq!(after["pid"], info["pid"]);
}

#[tokio::test]
async fn a_window_reload_keeps_the_turn_and_the_new_window_gets_it_back() {
    let model = ModelServer::start().await;
    let mut steps = vec![delta(json!({"role": "assistant", "content": ""}))];
    let mut text = String::new();
    for i in 0..20 {
        let piece = format!("w{i} ");
        text.push_str(&piece);
        steps.push(SseStep::Delay(Duration::from_millis(40)));
        steps.push(delta(json!({ "content": piece })));
    }
    steps.extend(ending("stop"));
    model.push(Reply::Sse(steps));
    let home = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let _stop = StopOnDrop(home.path().to_path_buf());
    let workspace = tempfile::tempdir().unwrap();

    let mut first = Editor::spawn_with(attach_options(&home)).await;
    first.initialize(workspace.path()).await;
    let session = first.new_session(model.session_config()).await;
    first.start_prompt(&session, "long answer").await;
    first
        .wait_update(&session, |u| u["content"]["text"] == "w2 ")
        .await;
    // The window reloads: its shim is killed outright.
    first.kill_9().await;

    let mut second = Editor::spawn_with(attach_options(&home)).await;
    second.initialize(workspace.path()).await;
    let loaded = second
        .request("tandem/loadSession", json!({"sessionId": session}))
        .await;
    assert_eq!(loaded["result"]["sessionId"], session, "{loaded}");
    let end = second
        .wait_update(&session, |u| u["sessionUpdate"] == "turn_end")
        .await;
    assert_eq!(end["update"]["stopReason"], "end_turn", "{end}");
    assert_eq!(agent_text(&second.updates_of(&session)), text);
    let log = log_lines(home.path(), &session);
    let chunks: Vec<&Value> = log
        .iter()
        .filter(|e| e["type"] == "assistant_chunk")
        .collect();
    assert_eq!(chunks.len(), 20);
    assert_eq!(model.requests().len(), 1);
}

#[tokio::test]
async fn an_unanswered_permission_request_is_asked_again_in_the_reloaded_window() {
    let model = ModelServer::start().await;
    model.push(crate::support::model_server::openai::tool_calls(&[(
        "call_1",
        "exec_command",
        r#"{"cmd":"echo reloaded"}"#,
    )]));
    model.push(crate::support::model_server::openai::text(["ran it"]));
    let home = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let _stop = StopOnDrop(home.path().to_path_buf());
    let workspace = tempfile::tempdir().unwrap();
    let caps = json!({"capabilities": {"experimental": {"tandem": {"requestPermission": true}}}});

    let mut first = Editor::spawn_with(attach_options(&home)).await;
    first.hold_requests("tandem/requestPermission");
    first.initialize_with(workspace.path(), caps.clone()).await;
    let session = first.new_session(model.session_config()).await;
    first.start_prompt(&session, "run echo").await;
    let asked = loop {
        let message = first.next_message().await;
        if message["method"] == "tandem/requestPermission" {
            break message;
        }
    };
    first.kill_9().await;

    let mut second = Editor::spawn_with(attach_options(&home)).await;
    second.on_request(|method, _| {
        (method == "tandem/requestPermission")
            .then(|| json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}))
    });
    second.initialize_with(workspace.path(), caps).await;
    let loaded = second
        .request("tandem/loadSession", json!({"sessionId": session}))
        .await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    let end = second
        .wait_update(&session, |u| u["sessionUpdate"] == "turn_end")
        .await;
    assert_eq!(end["update"]["stopReason"], "end_turn", "{end}");
    let again = second
        .received
        .iter()
        .find(|m| m["method"] == "tandem/requestPermission")
        .expect("the request was sent again");
    assert_eq!(again["id"], asked["id"]);
    assert_eq!(again["params"]["toolCall"]["toolCallId"], "call_1");
    let requests = model.wait_for_requests(2).await;
    let results = requests[1].tool_messages();
    assert!(results[0].1.contains("reloaded"), "{results:?}");
}
