//! The inbox, turns and steps: an over-long input blocked in a zero-step
//! turn, a tool result continuing the turn, and an idle inject waiting for
//! the next prompt.

use serde_json::json;

use super::{log_events, of_type, roles_and_contents, session_with, types};
use crate::support::client::{agent_text, update_kinds};
use crate::support::model_server::{openai, ModelServer};

#[tokio::test]
async fn input_over_max_input_chars_is_blocked_in_a_zero_step_turn_and_the_session_goes_on() {
    let server = ModelServer::start().await;
    server.push(openai::text(["fine"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) =
        session_with(&server, root.path(), json!({"max_input_chars": 20})).await;

    let long = "x".repeat(21);
    let (response, updates) = editor.prompt(&session, &long).await;
    let result = &response["result"];
    assert_eq!(result["stopReason"], "blocked", "{response}");
    assert_eq!(result["turnId"], "t1");
    let message = result["message"].as_str().unwrap();
    assert!(
        message.contains("21 characters") && message.contains("max_input_chars = 20"),
        "{message}"
    );
    assert!(
        server.requests().is_empty(),
        "a blocked turn calls no model"
    );

    // On the wire: pending, claimed, discarded with the reason, turn_end.
    let kinds = update_kinds(&updates);
    assert!(!kinds.contains(&"user_message".to_string()), "{kinds:?}");
    let statuses: Vec<&str> = updates
        .iter()
        .filter(|u| u["update"]["sessionUpdate"] == "input_status")
        .map(|u| u["update"]["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["pending", "claimed", "discarded"]);
    let discarded = updates
        .iter()
        .find(|u| u["update"]["status"] == "discarded")
        .unwrap();
    assert!(
        discarded["update"]["reason"]
            .as_str()
            .unwrap()
            .contains("rejected at admission"),
        "{discarded}"
    );
    assert_eq!(kinds.last().map(String::as_str), Some("turn_end"));

    // The log: a turn with no step at all.
    let log = log_events(&editor, &session);
    assert_eq!(
        types(&log),
        [
            "title_changed",
            "input_queued",
            "turn_start",
            "input_claimed",
            "input_discarded",
            "turn_end"
        ]
    );
    assert_eq!(log[5]["stop_reason"], "blocked");

    // The session goes on, and the rejected input never reaches the model.
    let (response, updates) = editor.prompt(&session, "short").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(response["result"]["turnId"], "t2");
    assert_eq!(agent_text(&updates), "fine");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert!(!requests[0].raw_body.contains(&long));
}

#[tokio::test]
async fn a_tool_result_continues_the_turn_with_a_second_step() {
    let server = ModelServer::start().await;
    server.push(openai::tool_calls(&[(
        "call_1",
        "read_file",
        r#"{"path":"a.txt"}"#,
    )]));
    server.push(openai::text(["read it"]));
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "alpha\n").unwrap();
    let (mut editor, session) = session_with(&server, root.path(), json!({})).await;

    let (response, updates) = editor.prompt(&session, "read a.txt").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(response["result"]["turnId"], "t1");
    assert_eq!(agent_text(&updates), "read it");
    assert_eq!(server.requests().len(), 2);

    let log = log_events(&editor, &session);
    let boundaries: Vec<&str> = types(&log)
        .into_iter()
        .filter(|t| {
            [
                "turn_start",
                "step_start",
                "assistant_message",
                "tool_call",
                "tool_started",
                "tool_result",
                "step_end",
                "turn_end",
            ]
            .contains(t)
        })
        .collect();
    assert_eq!(
        boundaries,
        [
            "turn_start",
            "step_start",
            "assistant_message",
            "tool_call",
            "tool_started",
            "tool_result",
            "step_end",
            "step_start",
            "assistant_message",
            "step_end",
            "turn_end"
        ]
    );
    let steps: Vec<(&str, u64)> = of_type(&log, "step_start")
        .iter()
        .map(|e| (e["turn_id"].as_str().unwrap(), e["step"].as_u64().unwrap()))
        .collect();
    assert_eq!(steps, [("t1", 1), ("t1", 2)]);
    let anchors = of_type(&log, "assistant_message");
    assert_eq!(anchors[0]["finish_reason"], "tool_calls");
    assert_eq!(anchors[1]["finish_reason"], "stop");
}

#[tokio::test]
async fn an_idle_inject_does_not_wake_the_session_and_enters_ahead_of_the_next_prompt() {
    let server = ModelServer::start().await;
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = session_with(&server, root.path(), json!({})).await;

    let response = editor
        .request(
            "tandem/steer",
            json!({"sessionId": session, "wake": false,
                   "prompt": [{"type": "text", "text": "context: the tests live in tests/"}]}),
        )
        .await;
    let inject_id = response["result"]["messageId"]
        .as_str()
        .unwrap_or_else(|| panic!("steer failed: {response}"))
        .to_string();
    // Its `pending` status is written before the steer's response.
    let updates = editor.updates_of(&session);
    assert_eq!(updates.len(), 1, "{updates:?}");
    let pending = &updates[0];
    assert_eq!(pending["update"]["status"], "pending");
    assert_eq!(pending["update"]["queue"], "next_step");
    assert_eq!(pending["update"]["messageIds"], json!([inject_id]));
    // Queued and nothing else: no turn was opened for it.
    assert_eq!(types(&log_events(&editor, &session)), ["input_queued"]);

    let (response, updates) = editor.prompt(&session, "go").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        response["result"]["turnId"], "t1",
        "the inject opened no turn of its own"
    );
    let claimed = updates
        .iter()
        .find(|u| u["update"]["status"] == "claimed")
        .expect("claimed");
    let ids = claimed["update"]["messageIds"].as_array().unwrap();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0], inject_id.as_str(), "the inject is claimed first");

    let requests = server.requests();
    assert_eq!(requests.len(), 1, "one model call carried both");
    let messages = roles_and_contents(&requests[0]);
    let users: Vec<&str> = messages
        .iter()
        .filter(|(role, _)| role == "user")
        .map(|(_, c)| c.as_str())
        .collect();
    assert_eq!(users, ["context: the tests live in tests/", "go"]);
}
