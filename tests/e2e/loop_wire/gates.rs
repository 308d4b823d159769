//! Budget gates between steps: tokens, iterations, idle and activity, their
//! order and messages, and what counts as progress for the idle gate.

use std::time::Duration;

use serde_json::json;

use super::{config, log_events, of_type, session_with, tool_results};
use crate::support::client::Editor;
use crate::support::model_server::{openai, ModelServer, Reply, SseStep};

#[tokio::test]
async fn the_token_budget_stops_the_turn_before_the_step_that_would_exceed_it() {
    let server = ModelServer::start().await;
    for i in 0..3 {
        let args = json!({"path": "a.txt", "offset": i + 1}).to_string();
        server.push(openai::tool_calls(&[(
            &format!("call_{i}"),
            "read_file",
            &args,
        )]));
    }
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "1\n2\n3\n").unwrap();
    // Each scripted call uses 10 input (4 of them cached, counted once as
    // part of the input) + 5 output: 15.
    let (mut editor, session) = session_with(&server, root.path(), json!({"max_tokens": 30})).await;

    let (response, updates) = editor.prompt(&session, "read").await;
    let result = &response["result"];
    assert_eq!(result["stopReason"], "token_budget", "{response}");
    assert_eq!(
        result["message"],
        "stopped after using 30 tokens (max_tokens = 30)"
    );
    assert_eq!(result["usage"]["inputTokens"], 2 * openai::PROMPT_TOKENS);
    assert_eq!(
        result["usage"]["outputTokens"],
        2 * openai::COMPLETION_TOKENS
    );
    assert_eq!(server.requests().len(), 2, "no third model call");
    let end = updates.last().unwrap();
    assert_eq!(end["update"]["sessionUpdate"], "turn_end");
    assert_eq!(end["update"]["stopReason"], "token_budget");
    // Both steps' tools ran: the gate stops before a step, not inside one.
    let log = log_events(&editor, &session);
    assert_eq!(
        tool_results(&log),
        [
            ("call_0".to_string(), "completed".to_string()),
            ("call_1".to_string(), "completed".to_string())
        ]
    );
}

/// The idle and activity gates, and the order of the gates. Limits of zero
/// trip them before the first step, which pins their wiring, their order
/// and their messages. Known gap: the driver refreshes `last_progress` on
/// every stream event (`Completed` included) and after every tool batch,
/// i.e. just before `Turn::gate` reads it, so with any positive limit these
/// two gates cannot fire at a step boundary (a step with 1 s of silence
/// under `idle_timeout_secs = 0.2` runs on to `end_turn`).
#[tokio::test]
async fn gates_run_in_order_iterations_idle_activity_and_name_their_limit() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;
    let cases = [
        (
            json!({"max_iterations": 0, "idle_timeout_secs": 0, "activity_timeout_secs": 0, "activity_recent_secs": 0}),
            "max_iterations",
            "stopped after 0 model calls (max_iterations = 0)",
        ),
        (
            json!({"idle_timeout_secs": 0, "activity_timeout_secs": 0, "activity_recent_secs": 0}),
            "timeout",
            "without progress (idle_timeout_secs = 0)",
        ),
        (
            json!({"activity_timeout_secs": 0, "activity_recent_secs": 0}),
            "timeout",
            "of work with no progress in the last 0 s (activity_timeout_secs = 0)",
        ),
    ];
    for (limits, reason, message) in cases {
        let session = editor.new_session(config(&server, limits)).await;
        let (response, updates) = editor.prompt(&session, "work").await;
        let result = &response["result"];
        assert_eq!(result["stopReason"], reason, "{response}");
        let text = result["message"].as_str().unwrap();
        assert!(text.contains(message), "{text}");
        let end = updates.last().unwrap();
        assert_eq!(end["update"]["stopReason"], reason);
        let log = log_events(&editor, &session);
        assert!(of_type(&log, "step_start").is_empty(), "{log:#?}");
        assert_eq!(
            of_type(&log, "user_message").len(),
            1,
            "the prompt was entered before the gate stopped the turn"
        );
    }
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn the_idle_gate_stops_a_turn_that_only_fails_for_longer_than_the_limit() {
    let server = ModelServer::start().await;
    // Each step streams tool calls only (no text) after a pause, and every
    // call fails: no progress, ever.
    for i in 0..6 {
        let Reply::Sse(mut steps) = openai::tool_calls(&[(
            &format!("call_{i}"),
            "read_file",
            &json!({"path": format!("missing-{i}.txt")}).to_string(),
        )]) else {
            unreachable!()
        };
        steps.insert(0, SseStep::Delay(Duration::from_millis(150)));
        server.push(Reply::Sse(steps));
    }
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) =
        session_with(&server, root.path(), json!({"idle_timeout_secs": 0.25})).await;
    let (response, _) = editor.prompt(&session, "read the missing files").await;
    let result = &response["result"];
    assert_eq!(result["stopReason"], "timeout", "{response}");
    let message = result["message"].as_str().unwrap();
    assert!(
        message.contains("without progress (idle_timeout_secs = 0.25)"),
        "{message}"
    );
    let calls = server.requests().len();
    assert!((2..6).contains(&calls), "stopped after {calls} model calls");
}

#[tokio::test]
async fn streamed_text_counts_as_progress_for_the_idle_gate() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "alpha\n").unwrap();
    for i in 0..3 {
        let mut steps = vec![
            SseStep::Delay(Duration::from_millis(150)),
            openai::delta(json!({"content": format!("looking ({i})")})),
        ];
        let Reply::Sse(rest) = openai::tool_calls(&[(
            &format!("call_{i}"),
            "read_file",
            &json!({"path": "a.txt", "offset": 1, "limit": i + 1}).to_string(),
        )]) else {
            unreachable!()
        };
        steps.extend(rest);
        server.push(Reply::Sse(steps));
    }
    server.push(openai::text(["done"]));
    let (mut editor, session) =
        session_with(&server, root.path(), json!({"idle_timeout_secs": 0.25})).await;
    let (response, _) = editor.prompt(&session, "read").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(server.requests().len(), 4);
}
