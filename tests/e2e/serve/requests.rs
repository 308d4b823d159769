//! The daemon's requests of two sessions on one serve: each goes to the
//! connection that follows its session only, and each answer reaches the
//! request it names, never the other session's (ids are per connection,
//! so the two may well be equal).

use serde_json::json;

use super::Serve;
use crate::support::model_server::openai::{text, tool_calls};
use crate::support::model_server::ModelServer;

fn answer(option: &str) -> serde_json::Value {
    json!({"outcome": {"outcome": "selected", "optionId": option}})
}

#[tokio::test]
async fn two_sessions_permission_requests_go_to_their_own_window_and_each_answer_reaches_its_own() {
    let serve = Serve::start().await;
    let root = tempfile::tempdir().unwrap();
    let (model_a, model_b) = (ModelServer::start().await, ModelServer::start().await);
    model_a.push(tool_calls(&[(
        "call_a",
        "exec_command",
        r#"{"cmd":"echo from-a"}"#,
    )]));
    model_a.push(text(["a done"]));
    model_b.push(tool_calls(&[(
        "call_b",
        "exec_command",
        r#"{"cmd":"echo from-b"}"#,
    )]));
    model_b.push(text(["b done"]));
    let caps = json!({"experimental": {"tandem": {"requestPermission": true}}});

    let mut a = serve.client().await;
    a.initialize(root.path(), caps.clone()).await;
    let session_a = a.new_session(model_a.session_config()).await;
    let mut b = serve.client().await;
    b.initialize(root.path(), caps).await;
    let session_b = b.new_session(model_b.session_config()).await;

    let prompt_a = a.start_prompt(&session_a, "run echo").await;
    let prompt_b = b.start_prompt(&session_b, "run echo").await;
    let asked_a = a
        .wait_for(|m| m["method"] == "tandem/requestPermission")
        .await;
    let asked_b = b
        .wait_for(|m| m["method"] == "tandem/requestPermission")
        .await;
    assert_eq!(
        asked_a["params"]["sessionId"],
        session_a.as_str(),
        "{asked_a}"
    );
    assert_eq!(
        asked_b["params"]["sessionId"],
        session_b.as_str(),
        "{asked_b}"
    );
    assert_eq!(asked_a["params"]["toolCall"]["toolCallId"], "call_a");
    assert_eq!(asked_b["params"]["toolCall"]["toolCallId"], "call_b");

    // B refuses first, then A allows: each decides its own call only.
    b.answer(&asked_b["id"], answer("reject_once")).await;
    a.answer(&asked_a["id"], answer("allow_once")).await;
    assert_eq!(
        a.response(prompt_a).await["result"]["stopReason"],
        "end_turn"
    );
    assert_eq!(
        b.response(prompt_b).await["result"]["stopReason"],
        "end_turn"
    );
    let ran = &model_a.wait_for_requests(2).await[1].tool_messages()[0].1;
    assert!(ran.contains("from-a"), "{ran}");
    let rejected = &model_b.wait_for_requests(2).await[1].tool_messages()[0].1;
    assert!(rejected.starts_with("rejected"), "{rejected}");
    // Neither window was asked about, or told of, the other's session.
    for (window, other) in [(&a, &session_b), (&b, &session_a)] {
        let strays: Vec<_> = window
            .received
            .iter()
            .filter(|m| m["params"]["sessionId"] == other.as_str())
            .collect();
        assert!(strays.is_empty(), "{strays:?}");
    }
}
