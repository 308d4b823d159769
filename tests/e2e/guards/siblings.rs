//! Finished siblings shown while one waits: the results of calls that have
//! ended reach the editor before a sibling's permission request is
//! answered, and the model still gets every result in call order.

use serde_json::{json, Value};

use crate::support::client::Editor;
use crate::support::model_server::{openai, ModelServer};

/// The index in `received` of the `tool_call_update` that completes
/// `call_id`, if it has arrived.
fn completed_at(received: &[Value], call_id: &str) -> Option<usize> {
    received.iter().position(|m| {
        let update = &m["params"]["update"];
        m["method"] == "tandem/update"
            && update["sessionUpdate"] == "tool_call_update"
            && update["toolCallId"] == call_id
            && update["status"] == "completed"
    })
}

#[tokio::test]
async fn finished_siblings_are_shown_before_the_permission_is_answered() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "alpha\n").unwrap();
    std::fs::write(root.path().join("b.txt"), "beta\n").unwrap();
    server.push(openai::tool_calls(&[
        ("call_1", "read_file", r#"{"path":"a.txt"}"#),
        ("call_2", "read_file", r#"{"path":"b.txt"}"#),
        ("call_3", "exec_command", r#"{"cmd":"echo ran"}"#),
    ]));
    server.push(openai::text(["done"]));
    let mut editor = Editor::spawn().await;
    editor
        .initialize_with(
            root.path(),
            json!({"capabilities": {"experimental": {"tandem": {"requestPermission": true}}}}),
        )
        .await;
    let mut config = server.session_config();
    config["approval"] = json!({"mode": "review"});
    let session = editor.new_session(config).await;
    editor.hold_requests("tandem/requestPermission");

    let id = editor
        .start_request(
            "tandem/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}),
        )
        .await;
    let asked = loop {
        let message = editor.next_message().await;
        if message["method"] == "tandem/requestPermission" {
            break message;
        }
    };
    // The permission is still unanswered: the reads' results are there.
    let asked_at = editor.received.len() - 1;
    for call in ["call_1", "call_2"] {
        let at = completed_at(&editor.received, call)
            .unwrap_or_else(|| panic!("{call} not shown while call_3 waits"));
        assert!(at < asked_at);
    }
    editor
        .send(&json!({"jsonrpc": "2.0", "id": asked["id"],
                      "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}))
        .await;
    let (response, _) = editor.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.wait_for_requests(2).await;
    let ids: Vec<String> = requests[1]
        .tool_messages()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(ids, ["call_1", "call_2", "call_3"], "in call order");
}
