//! Read-only mode and `tandem/setMode`: which tools are offered, and that a
//! call to a hidden acting tool is refused anyway.

use serde_json::json;

use super::{
    answer_permission, auto_session, config_for, exec_call, offered_tools, requests_of, session_in,
    tool_result, PERMISSION,
};
use crate::support::client::{Editor, EditorOptions};
use crate::support::model_server::{openai, ModelServer, RecordedRequest};

fn assert_no_acting_tools(request: &RecordedRequest) {
    let tools = offered_tools(request);
    assert!(tools.contains(&"read_file".to_string()), "{tools:?}");
    assert!(
        !tools
            .iter()
            .any(|t| t == "exec_command" || t == "apply_patch"),
        "{tools:?}"
    );
}

#[tokio::test]
async fn read_only_mode_offers_no_acting_tools_and_refuses_a_call_anyway() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "touch ran"})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = session_in(
        &server,
        root.path(),
        "read-only",
        PERMISSION,
        EditorOptions::default(),
    )
    .await;
    answer_permission(&mut editor, "allow_once");

    let (response, _) = editor.prompt(&session, "run").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.wait_for_requests(2).await;
    assert_no_acting_tools(&requests[0]);
    assert_no_acting_tools(&requests[1]);
    let result = tool_result(&requests[1], "call_1");
    assert!(result.starts_with("error:"), "{result}");
    assert!(!root.path().join("ran").exists(), "the command ran");
    assert!(requests_of(&editor, "tandem/requestPermission").is_empty());
}

#[tokio::test]
async fn set_mode_read_only_hides_the_acting_tools_from_the_next_prompt() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "touch ran"})));
    server.push(openai::text(["refused"]));
    server.push(openai::text(["back in auto"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = auto_session(&server, root.path()).await;

    let response = editor
        .request(
            "tandem/setMode",
            json!({"sessionId": session, "mode": "read-only"}),
        )
        .await;
    assert_eq!(response["result"]["mode"], "read-only", "{response}");
    let update = editor
        .received
        .iter()
        .find(|m| m["params"]["update"]["sessionUpdate"] == "current_mode_update")
        .expect("a current_mode_update");
    assert_eq!(update["params"]["update"]["currentModeId"], "read-only");
    assert_eq!(update["params"]["sessionId"], session.as_str());

    editor.prompt(&session, "run").await;
    let requests = server.wait_for_requests(2).await;
    assert_no_acting_tools(&requests[0]);
    assert!(tool_result(&requests[1], "call_1").starts_with("error:"));
    assert!(!root.path().join("ran").exists(), "the command ran");

    editor
        .request(
            "tandem/setMode",
            json!({"sessionId": session, "mode": "auto"}),
        )
        .await;
    editor.prompt(&session, "again").await;
    let requests = server.wait_for_requests(3).await;
    assert!(offered_tools(&requests[2]).contains(&"exec_command".to_string()));
}

#[tokio::test]
async fn set_mode_with_an_unknown_mode_is_invalid_params() {
    let root = tempfile::tempdir().unwrap();
    let server = ModelServer::start().await;
    let (mut editor, session) = auto_session(&server, root.path()).await;
    let response = editor
        .request(
            "tandem/setMode",
            json!({"sessionId": session, "mode": "yolo"}),
        )
        .await;
    assert_eq!(response["error"]["code"], -32602, "{response}");
    assert!(response["error"]["message"]
        .as_str()
        .unwrap()
        .contains("yolo"));
}

#[tokio::test]
async fn new_and_loaded_sessions_answer_with_the_mode_they_are_in() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;
    let response = editor
        .request(
            "tandem/newSession",
            json!({"config": config_for(&server, "read-only")}),
        )
        .await;
    assert_eq!(response["result"]["mode"], "read-only", "{response}");
    let session = response["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();

    // A change made later is the one a reload starts in, not the config's.
    editor
        .request(
            "tandem/setMode",
            json!({"sessionId": session, "mode": "auto"}),
        )
        .await;
    let home = editor.home.clone();
    editor.shutdown_and_exit().await;
    let mut editor = Editor::spawn_with(EditorOptions {
        home: Some(home),
        ..EditorOptions::default()
    })
    .await;
    editor.initialize(root.path()).await;
    let response = editor
        .request("tandem/loadSession", json!({"sessionId": session}))
        .await;
    assert_eq!(response["result"]["mode"], "auto", "{response}");
}
