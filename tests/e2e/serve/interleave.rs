//! Sessions of one serve interleave: the serve runs on one thread (a
//! chunk wakes no second worker, see main.rs), so nothing a turn waits on
//! may hold that thread. A turn whose model stream has gone quiet leaves
//! another session's turn to stream and end meanwhile.

use serde_json::json;

use super::Serve;
use crate::support::client::agent_text;
use crate::support::model_server::openai::{delta, text};
use crate::support::model_server::{ModelServer, Reply, SseStep};

#[tokio::test]
async fn a_turn_streams_and_ends_while_another_sessions_model_is_stalled() {
    let serve = Serve::start().await;
    let workspace = tempfile::tempdir().unwrap();
    let (model_a, model_b) = (ModelServer::start().await, ModelServer::start().await);
    model_a.push(Reply::Sse(vec![
        delta(json!({"role": "assistant", "content": ""})),
        delta(json!({"content": "a1"})),
        SseStep::Stall,
    ]));
    model_b.push(text(["b1", " b2", " b3"]));

    let mut ws = serve.client().await;
    ws.initialize(workspace.path(), json!({})).await;
    let session_a = ws.new_session(model_a.session_config()).await;
    let session_b = ws.new_session(model_b.session_config()).await;

    let prompt_a = ws.start_prompt(&session_a, "stall").await;
    ws.wait_update(&session_a, |u| u["content"]["text"] == "a1")
        .await;
    let prompt_b = ws.start_prompt(&session_b, "go").await;
    let receipt_b = ws.response(prompt_b).await;
    assert_eq!(receipt_b["result"]["stopReason"], "end_turn", "{receipt_b}");
    assert_eq!(agent_text(&ws.updates_of(&session_b)), "b1 b2 b3");
    assert!(
        !ws.updates_of(&session_a)
            .iter()
            .any(|u| u["update"]["sessionUpdate"] == "turn_end"),
        "session A's turn is still waiting on its model"
    );

    ws.send(json!({"jsonrpc": "2.0", "method": "tandem/cancel",
                   "params": {"sessionId": session_a}}))
        .await;
    let receipt_a = ws.response(prompt_a).await;
    assert_eq!(
        receipt_a["result"]["stopReason"], "cancelled",
        "{receipt_a}"
    );
    assert_eq!(agent_text(&ws.updates_of(&session_a)), "a1");
}
