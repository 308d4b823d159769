//! Cancellation through the wire: during a stream, with and without
//! `keepInbox`, of one queued prompt, on an idle session and during a retry
//! backoff.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{
    log_events, of_type, roles_and_contents, seen_or_next_update, session_with, text_then_stall,
    types,
};
use crate::support::client::{agent_text, Editor};
use crate::support::model_server::{openai, ModelServer};

/// Starts a prompt whose model stream sends `partial` and then stalls, and
/// waits until the editor has seen that chunk: the turn is running.
async fn start_stalled_turn(editor: &mut Editor, session: &str, server: &ModelServer) -> i64 {
    server.push(text_then_stall("partial"));
    let id = editor.start_prompt(session, "long job").await;
    editor
        .wait_update(session, |u| {
            u["sessionUpdate"] == "agent_message_chunk" && u["content"]["text"] == "partial"
        })
        .await;
    id
}

#[tokio::test]
async fn cancel_during_a_stream_answers_cancelled_at_once_and_closes_the_connection() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = session_with(&server, root.path(), json!({})).await;
    let id = start_stalled_turn(&mut editor, &session, &server).await;

    let sent = Instant::now();
    editor
        .notify("tandem/cancel", json!({"sessionId": session}))
        .await;
    let (response, at) = editor.response(id).await;
    let took = sent.elapsed();
    let result = &response["result"];
    assert_eq!(result["stopReason"], "cancelled", "{response}");
    assert_eq!(result["turnId"], "t1");
    assert_eq!(result["message"], "cancelled by the user");
    assert!(took < Duration::from_millis(500), "cancel took {took:?}");
    server.wait_for_hangups(1).await;

    // The turn's updates, turn_end included, came before the response.
    let updates: Vec<&Value> = editor.received[..at]
        .iter()
        .filter(|m| m["method"] == "tandem/update")
        .collect();
    let end = updates.last().unwrap();
    assert_eq!(end["params"]["update"]["sessionUpdate"], "turn_end");
    assert_eq!(end["params"]["update"]["stopReason"], "cancelled");
    let log = log_events(&editor, &session);
    assert!(of_type(&log, "assistant_message").is_empty());
    assert!(of_type(&log, "attempt_failed").is_empty(), "not an error");
    assert_eq!(types(&log).last(), Some(&"turn_end"));
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn cancel_with_keep_inbox_lets_a_queued_prompt_run() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = session_with(&server, root.path(), json!({})).await;
    let first = start_stalled_turn(&mut editor, &session, &server).await;
    server.push(openai::text(["second done"]));
    let second = editor.start_prompt(&session, "queued").await;
    editor
        .wait_update(&session, |u| {
            u["sessionUpdate"] == "input_status"
                && u["status"] == "pending"
                && u["queue"] == "next_turn"
        })
        .await;

    editor
        .notify(
            "tandem/cancel",
            json!({"sessionId": session, "keepInbox": true}),
        )
        .await;
    let (one, _) = editor.response(first).await;
    assert_eq!(one["result"]["stopReason"], "cancelled", "{one}");
    assert_eq!(one["result"]["turnId"], "t1");
    let (two, _) = editor.response(second).await;
    assert_eq!(two["result"]["stopReason"], "end_turn", "{two}");
    assert_eq!(two["result"]["turnId"], "t2");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let last = roles_and_contents(&requests[1]);
    assert_eq!(last.last().unwrap().1, "queued");
    assert!(of_type(&log_events(&editor, &session), "input_discarded").is_empty());
}

#[tokio::test]
async fn cancel_without_keep_inbox_answers_a_queued_prompt_cancelled_with_no_turn() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = session_with(&server, root.path(), json!({})).await;
    let first = start_stalled_turn(&mut editor, &session, &server).await;
    let second = editor.start_prompt(&session, "queued").await;
    let pending = editor
        .wait_update(&session, |u| {
            u["sessionUpdate"] == "input_status"
                && u["status"] == "pending"
                && u["queue"] == "next_turn"
        })
        .await;
    let queued_id = pending["update"]["messageIds"][0].clone();

    editor
        .notify("tandem/cancel", json!({"sessionId": session}))
        .await;
    let (two, _) = editor.response(second).await;
    let result = &two["result"];
    assert_eq!(result["stopReason"], "cancelled", "{two}");
    assert_eq!(result["turnId"], Value::Null);
    assert_eq!(
        result["message"],
        "prompt discarded before its turn started: cancelled by the user"
    );
    let (one, _) = editor.response(first).await;
    assert_eq!(one["result"]["stopReason"], "cancelled", "{one}");
    let discarded = editor
        .updates_of(&session)
        .into_iter()
        .find(|u| u["update"]["status"] == "discarded")
        .expect("a discarded input_status");
    assert_eq!(discarded["update"]["messageIds"], json!([queued_id]));
    assert_eq!(discarded["update"]["reason"], "cancelled by the user");

    // The session goes on; the discarded prompt never reached the model.
    server.push(openai::text(["fresh"]));
    let (three, _) = editor.prompt(&session, "fresh start").await;
    assert_eq!(three["result"]["stopReason"], "end_turn", "{three}");
    assert_eq!(three["result"]["turnId"], "t2");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(!requests[1].raw_body.contains("queued"));
}

#[tokio::test]
async fn a_prompt_sent_right_after_cancel_runs_once_the_cancelled_turn_ends() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = session_with(&server, root.path(), json!({})).await;
    let first = start_stalled_turn(&mut editor, &session, &server).await;
    server.push(openai::text(["after cancel"]));

    // Both in one write: the prompt arrives while the cancelled turn is
    // still winding down.
    let second_id = 1000;
    editor
        .send_together(&[
            json!({"jsonrpc": "2.0", "method": "tandem/cancel", "params": {"sessionId": session}}),
            json!({"jsonrpc": "2.0", "id": second_id, "method": "tandem/prompt",
                   "params": {"sessionId": session, "prompt": [{"type": "text", "text": "next"}]}}),
        ])
        .await;
    let (one, at_one) = editor.response(first).await;
    assert_eq!(one["result"]["stopReason"], "cancelled", "{one}");
    let (two, at_two) = editor.response(second_id).await;
    assert!(at_one < at_two);
    assert_eq!(two["result"]["stopReason"], "end_turn", "{two}");
    assert_eq!(two["result"]["turnId"], "t2");
    let updates = editor.updates_of(&session);
    assert_eq!(
        agent_text(
            &updates
                .into_iter()
                .filter(|u| u["turnId"] == "t2")
                .collect::<Vec<_>>()
        ),
        "after cancel"
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn cancel_on_an_idle_session_is_a_no_op_that_leaves_nothing_behind() {
    let server = ModelServer::start().await;
    server.push(openai::text(["clean"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = session_with(&server, root.path(), json!({})).await;

    editor
        .notify("tandem/cancel", json!({"sessionId": session}))
        .await;
    editor
        .notify(
            "tandem/cancel",
            json!({"sessionId": session, "keepInbox": true}),
        )
        .await;
    // A round trip behind the notifications.
    let response = editor.request("tandem/nothing", json!({})).await;
    assert_eq!(response["error"]["code"], -32601);
    assert!(editor.updates_of(&session).is_empty());
    assert!(log_events(&editor, &session).is_empty());

    let (response, updates) = editor.prompt(&session, "hi").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(response["result"]["turnId"], "t1");
    assert_eq!(agent_text(&updates), "clean");
    let log = log_events(&editor, &session);
    assert_eq!(
        types(&log)[..3],
        ["title_changed", "input_queued", "turn_start"]
    );
    assert!(of_type(&log, "input_discarded").is_empty());
    assert_eq!(of_type(&log, "turn_end").len(), 1);
}

#[tokio::test]
async fn cancel_request_for_a_running_prompt_cancels_its_turn_and_answers_after_its_updates() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = session_with(&server, root.path(), json!({})).await;
    let id = start_stalled_turn(&mut editor, &session, &server).await;

    editor.notify("$/cancelRequest", json!({"id": id})).await;
    let (response, at) = editor.response(id).await;
    // Answered like `tandem/cancel`: the turn's receipt, not -32800, and
    // only after the turn's last update.
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    assert_eq!(response["result"]["turnId"], "t1", "{response}");
    let end =
        seen_or_next_update(&mut editor, &session, |u| u["sessionUpdate"] == "turn_end").await;
    assert_eq!(end["turnId"], "t1");
    assert_eq!(end["update"]["stopReason"], "cancelled");
    assert_eq!(end["update"]["message"], "cancelled by the user");
    let updates_after = editor.received[at..]
        .iter()
        .filter(|m| m["method"] == "tandem/update" && m["params"]["sessionId"] == session)
        .count();
    assert_eq!(
        updates_after, 0,
        "an update of the turn followed its answer"
    );
    server.wait_for_hangups(1).await;

    server.push(openai::text(["still here"]));
    let (response, _) = editor.prompt(&session, "again").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(response["result"]["turnId"], "t2");
}

#[tokio::test]
async fn cancel_request_for_a_queued_prompt_discards_only_that_prompt() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = session_with(&server, root.path(), json!({})).await;
    let first = start_stalled_turn(&mut editor, &session, &server).await;
    let second = editor.start_prompt(&session, "queued").await;
    editor
        .wait_update(&session, |u| {
            u["sessionUpdate"] == "input_status" && u["queue"] == "next_turn"
        })
        .await;

    editor
        .notify("$/cancelRequest", json!({"id": second}))
        .await;
    let (response, _) = editor.response(second).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    assert_eq!(response["result"]["turnId"], Value::Null, "{response}");
    let discarded =
        seen_or_next_update(&mut editor, &session, |u| u["status"] == "discarded").await;
    assert_eq!(discarded["update"]["reason"], "its request was cancelled");
    let log = log_events(&editor, &session);
    assert!(
        of_type(&log, "turn_end").is_empty(),
        "the running turn goes on"
    );

    editor
        .notify("tandem/cancel", json!({"sessionId": session}))
        .await;
    let (one, _) = editor.response(first).await;
    assert_eq!(one["result"]["stopReason"], "cancelled", "{one}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn cancel_during_a_retry_backoff_ends_the_turn_without_waiting_it_out() {
    let server = ModelServer::start().await;
    server.push(openai::error(429, "slow down").with_header("Retry-After", "30"));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = session_with(&server, root.path(), json!({})).await;
    let id = editor.start_prompt(&session, "hi").await;
    server.wait_for_requests(1).await;

    let sent = Instant::now();
    editor
        .notify("tandem/cancel", json!({"sessionId": session}))
        .await;
    let (response, _) = editor.response(id).await;
    let took = sent.elapsed();
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    assert!(took < Duration::from_millis(500), "cancel took {took:?}");
    assert_eq!(server.requests().len(), 1);
}
