//! One retry budget per turn across every error kind and step.

use serde_json::json;

use super::{log_events, of_type, replay, session_with};
use crate::support::model_server::{openai, ModelServer, Reply, SseStep};

/// A stream that opens and then loses its connection.
fn dropped() -> Reply {
    Reply::Sse(vec![
        openai::delta(json!({"role": "assistant", "content": ""})),
        SseStep::Drop,
    ])
}

#[tokio::test]
async fn mixed_errors_stop_at_the_turn_retry_budget_with_their_counts() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "alpha\n").unwrap();
    // Step 1: three 429s (3 retries), then a tool call.
    for _ in 0..3 {
        server.push(openai::error(429, "slow down"));
    }
    server.push(openai::tool_calls(&[(
        "call_1",
        "read_file",
        r#"{"path":"a.txt"}"#,
    )]));
    // Step 2: three 500s and three drops. No kind exceeds its own bucket
    // (4, 3, 3), but the turn has then failed 9 times: 8 retries is the
    // default budget, so the ninth failure ends the turn.
    for _ in 0..3 {
        server.push(openai::error(500, "the model fell over"));
    }
    for _ in 0..3 {
        server.push(dropped());
    }
    server.push(openai::text(["never asked for"]));
    let (mut editor, session) = session_with(&server, root.path(), json!({}), json!({})).await;

    let (response, updates) = editor.prompt(&session, "read a.txt").await;
    let result = &response["result"];
    assert_eq!(result["stopReason"], "error", "{response}");
    let message = result["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "retry budget spent: 8 retries in this turn (max_retries_per_turn = 8); \
             failures seen: 3 overloaded, 3 rate_limited, 3 stream_dropped"
        ),
        "{message}"
    );
    assert_eq!(
        server.requests().len(),
        10,
        "3 + 1 + 6, and not the eleventh"
    );
    let end = updates.last().unwrap();
    assert_eq!(end["update"]["sessionUpdate"], "turn_end");
    assert_eq!(end["update"]["message"], message);

    let log = log_events(&editor, &session);
    let failed = of_type(&log, "attempt_failed");
    assert_eq!(failed.len(), 9);
    assert!(failed[..8].iter().all(|f| f["retry"] == true));
    assert_eq!(failed[8]["retry"], false, "the ninth is not retried");
    let spent = of_type(&log, "retry_budget_spent");
    assert_eq!(spent.len(), 1);
    assert_eq!(spent[0]["retries"], 8);
    assert_eq!(spent[0]["max_retries"], 8);
    assert_eq!(
        spent[0]["errors"],
        json!({"overloaded": 3, "rate_limited": 3, "stream_dropped": 3})
    );

    let home = editor.home.clone();
    editor.shutdown_and_exit().await;
    let text = replay(home.path(), &session);
    assert!(
        text.contains(
            "retry budget spent: 8 of 8 retries; failures seen: overloaded ×3, rate_limited ×3, stream_dropped ×3"
        ),
        "{text}"
    );
    assert!(
        text.contains("== end of t1: error: retry budget spent"),
        "{text}"
    );
}

#[tokio::test]
async fn a_turn_retry_budget_of_two_stops_the_third_failure_within_its_bucket() {
    let server = ModelServer::start().await;
    for _ in 0..3 {
        server.push(openai::error(500, "down"));
    }
    server.push(openai::text(["never asked for"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = session_with(
        &server,
        root.path(),
        json!({"max_retries_per_turn": 2}),
        json!({}),
    )
    .await;
    let (response, _) = editor.prompt(&session, "hi").await;
    assert_eq!(response["result"]["stopReason"], "error", "{response}");
    let message = response["result"]["message"].as_str().unwrap();
    assert!(
        message.contains("2 retries in this turn (max_retries_per_turn = 2)"),
        "{message}"
    );
    assert_eq!(server.requests().len(), 3);
}
