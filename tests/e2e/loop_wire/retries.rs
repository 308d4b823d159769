//! Retried attempts: stalled and dropped streams (with the editor told to
//! reset between attempts) and typed recovery from HTTP errors (429 with
//! `Retry-After`, repeated 500s, 401).

use std::time::Duration;

use serde_json::{json, Value};

use super::{
    chunk_text, is_chunk, log_events, of_type, roles_and_contents, session_with, text_then_stall,
};
use crate::support::client::{agent_text, update_kinds};
use crate::support::model_server::{openai, ModelServer, Reply, SseStep};

/// Limits that make a stalled stream fail fast.
fn fast_stream_timeouts() -> Value {
    json!({
        "first_token_timeout_secs": 0.3,
        "first_token_secs_per_1k": 0,
        "chunk_timeout_secs": 0.3,
    })
}

#[tokio::test]
async fn a_stall_before_the_first_token_is_retried_without_a_reset() {
    let server = ModelServer::start().await;
    server.push(Reply::Sse(vec![SseStep::Stall]));
    server.push(openai::text(["Hel", "lo"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = session_with(&server, root.path(), fast_stream_timeouts()).await;

    let (response, updates) = editor.prompt(&session, "hi").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(agent_text(&updates), "Hello");
    assert!(
        !update_kinds(&updates).contains(&"agent_message_reset".to_string()),
        "nothing was streamed, so nothing to reset"
    );
    server.wait_for_hangups(1).await;
    assert_eq!(server.requests().len(), 2);

    let log = log_events(&editor, &session);
    let failed = of_type(&log, "attempt_failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["error_kind"], "stream_stalled");
    assert_eq!(failed[0]["retry"], true);
    assert_eq!(failed[0]["streamed"], false);
    assert!(
        failed[0]["message"]
            .as_str()
            .unwrap()
            .contains("first token timeout"),
        "{}",
        failed[0]
    );
    let anchor = of_type(&log, "assistant_message")[0];
    assert_eq!(anchor["attempt"], 2);
    assert_eq!(anchor["text"], "Hello");
}

/// What a stream cut off after `Hel` and retried must look like: the
/// editor is told to reset between the attempts, so the text it ends up
/// with is the second attempt's alone; the log keeps both attempts and the
/// model's history only the one that succeeded.
async fn assert_streamed_attempt_is_reset_and_retried(first: Reply, error_kind: &str) {
    let server = ModelServer::start().await;
    server.push(first);
    server.push(openai::text(["Hel", "lo"]));
    server.push(openai::text(["next"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = session_with(&server, root.path(), fast_stream_timeouts()).await;

    let (response, updates) = editor.prompt(&session, "hi").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let kinds = update_kinds(&updates);
    let resets: Vec<usize> = kinds
        .iter()
        .enumerate()
        .filter(|(_, k)| *k == "agent_message_reset")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(resets.len(), 1, "{kinds:?}");
    let reset = resets[0];
    let before: String = updates[..reset]
        .iter()
        .filter(|u| is_chunk(u))
        .map(chunk_text)
        .collect();
    let after: String = updates[reset..]
        .iter()
        .filter(|u| is_chunk(u))
        .map(chunk_text)
        .collect();
    assert_eq!(before, "Hel", "the first attempt's text precedes the reset");
    assert_eq!(after, "Hello", "what the editor shows after the reset");
    assert_eq!(updates[reset]["turnId"], "t1");

    let log = log_events(&editor, &session);
    let failed = of_type(&log, "attempt_failed");
    assert_eq!(failed.len(), 1, "{log:#?}");
    assert_eq!(failed[0]["error_kind"], error_kind);
    assert_eq!(failed[0]["retry"], true);
    assert_eq!(failed[0]["streamed"], true);
    let chunk_attempts: Vec<u64> = of_type(&log, "assistant_chunk")
        .iter()
        .filter(|e| !e["text"].as_str().unwrap().is_empty())
        .map(|e| e["attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(chunk_attempts, [1, 2, 2], "the log keeps both attempts");
    let anchors = of_type(&log, "assistant_message");
    assert_eq!(anchors.len(), 1);
    assert_eq!(anchors[0]["text"], "Hello");

    // The model's history has the answer once.
    let (response, _) = editor.prompt(&session, "again").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let assistants: Vec<String> = roles_and_contents(&requests[2])
        .into_iter()
        .filter(|(r, _)| r == "assistant")
        .map(|(_, c)| c)
        .collect();
    assert_eq!(assistants, ["Hello"]);
}

#[tokio::test]
async fn a_stall_between_chunks_is_retried_after_an_agent_message_reset() {
    assert_streamed_attempt_is_reset_and_retried(text_then_stall("Hel"), "stream_stalled").await;
}

#[tokio::test]
async fn a_dropped_connection_mid_stream_is_retried_after_an_agent_message_reset() {
    let dropped = Reply::Sse(vec![
        openai::delta(json!({"role": "assistant", "content": ""})),
        openai::delta(json!({"content": "Hel"})),
        SseStep::Drop,
    ]);
    assert_streamed_attempt_is_reset_and_retried(dropped, "stream_dropped").await;
}

#[tokio::test]
async fn a_429_with_retry_after_is_retried_after_the_delay_it_asks_for() {
    let server = ModelServer::start().await;
    server.push(openai::error(429, "slow down").with_header("Retry-After", "1"));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    // Backoff alone would retry after about a millisecond.
    let (mut editor, session) = session_with(&server, root.path(), json!({})).await;

    let (response, updates) = editor.prompt(&session, "hi").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(agent_text(&updates), "ok");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let waited = requests[1].received_at - requests[0].received_at;
    assert!(
        waited >= Duration::from_secs(1),
        "retried after {waited:?}, before Retry-After"
    );
    let log = log_events(&editor, &session);
    let failed = of_type(&log, "attempt_failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["error_kind"], "rate_limited");
    assert_eq!(failed[0]["retry"], true);
}

#[tokio::test]
async fn repeated_500s_exhaust_the_overloaded_bucket_and_the_error_names_it() {
    let server = ModelServer::start().await;
    // The first attempt and the bucket's three retries; then a success that
    // must never be asked for.
    for _ in 0..4 {
        server.push(openai::error(500, "the model fell over"));
    }
    server.push(openai::text(["too late"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = session_with(&server, root.path(), json!({})).await;

    let (response, _) = editor.prompt(&session, "hi").await;
    let result = &response["result"];
    assert_eq!(result["stopReason"], "error", "{response}");
    let message = result["message"].as_str().unwrap();
    assert!(
        message.starts_with("overloaded after 4 attempts: "),
        "{message}"
    );
    assert!(message.contains("HTTP 500"), "{message}");
    assert!(message.contains("the model fell over"), "{message}");
    assert_eq!(server.requests().len(), 4);
    let log = log_events(&editor, &session);
    let retries: Vec<(u64, bool)> = of_type(&log, "attempt_failed")
        .iter()
        .map(|e| {
            (
                e["attempt"].as_u64().unwrap(),
                e["retry"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(retries, [(1, true), (2, true), (3, true), (4, false)]);
    assert!(of_type(&log, "assistant_message").is_empty());
}

#[tokio::test]
async fn a_401_fails_at_once_with_the_providers_message() {
    let server = ModelServer::start().await;
    server.push(openai::error(401, "Incorrect API key provided: sk-...abcd"));
    server.push(openai::text(["never asked for"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = session_with(&server, root.path(), json!({})).await;

    let (response, _) = editor.prompt(&session, "hi").await;
    let result = &response["result"];
    assert_eq!(result["stopReason"], "error", "{response}");
    let message = result["message"].as_str().unwrap();
    assert!(message.contains("HTTP 401"), "{message}");
    assert!(
        message.contains("Incorrect API key provided: sk-...abcd"),
        "{message}"
    );
    assert_eq!(server.requests().len(), 1, "no retry");
    let log = log_events(&editor, &session);
    let failed = of_type(&log, "attempt_failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["error_kind"], "auth");
    assert_eq!(failed[0]["retry"], false);
}
