//! The production agent loop seen through the real binary: turns and steps,
//! the inbox, budget gates, loop detection, stream timeouts, typed recovery
//! and cancellation, asserted on the wire, in the session log and in the
//! requests the scripted model server received.

use std::path::Path;

use serde_json::{json, Value};

use crate::support::client::Editor;
use crate::support::model_server::{openai, ModelServer, RecordedRequest, Reply, SseStep};

mod cancel;
mod gates;
mod loop_detection;
mod repair;
mod retries;
mod stop_reasons;
mod turns;

/// Session config pointing at the scripted server with fast retries;
/// `limits` is merged over that.
fn config(server: &ModelServer, limits: Value) -> Value {
    server.session_config_with(limits)
}

async fn session_with(server: &ModelServer, root: &Path, limits: Value) -> (Editor, String) {
    let mut editor = Editor::spawn().await;
    editor.initialize(root).await;
    let session = editor.new_session(config(server, limits)).await;
    (editor, session)
}

/// The session's log events (the header left out).
fn log_events(editor: &Editor, session: &str) -> Vec<Value> {
    editor.log_lines(session).into_iter().skip(1).collect()
}

fn types(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default())
        .collect()
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// `(call_id, status)` of every `tool_result` in the log, in log order.
fn tool_results(events: &[Value]) -> Vec<(String, String)> {
    of_type(events, "tool_result")
        .iter()
        .map(|e| {
            (
                e["call_id"].as_str().unwrap_or_default().to_string(),
                e["status"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Checks the log's tool invariant: every `tool_call` has exactly one
/// `tool_result`, and no result lacks its call.
fn assert_every_call_has_one_result(events: &[Value]) {
    let calls: Vec<&str> = of_type(events, "tool_call")
        .iter()
        .map(|e| e["call_id"].as_str().unwrap())
        .collect();
    let results: Vec<&str> = of_type(events, "tool_result")
        .iter()
        .map(|e| e["call_id"].as_str().unwrap())
        .collect();
    for call in &calls {
        let n = results.iter().filter(|r| *r == call).count();
        assert_eq!(n, 1, "call {call} has {n} results: {events:#?}");
    }
    assert_eq!(calls.len(), results.len(), "{events:#?}");
}

/// The `(role, content)` of a model request's messages.
fn roles_and_contents(request: &RecordedRequest) -> Vec<(String, String)> {
    request.body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn is_chunk(update: &Value) -> bool {
    update["update"]["sessionUpdate"] == "agent_message_chunk"
}

fn chunk_text(update: &Value) -> &str {
    update["update"]["content"]["text"]
        .as_str()
        .unwrap_or_default()
}

/// The first update of `session` that `pred` accepts, among those already
/// received or, failing that, the next ones.
async fn seen_or_next_update(
    editor: &mut Editor,
    session: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    match editor
        .updates_of(session)
        .into_iter()
        .find(|u| pred(&u["update"]))
    {
        Some(update) => update,
        None => editor.wait_update(session, pred).await,
    }
}

/// A reply that streams `text` and then stalls with the connection open.
fn text_then_stall(text: &str) -> Reply {
    Reply::Sse(vec![
        openai::delta(json!({"role": "assistant", "content": ""})),
        openai::delta(json!({"content": text})),
        SseStep::Stall,
    ])
}
