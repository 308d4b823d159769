//! The compaction-spiral stop: a turn that compacts, makes no progress and
//! compacts again stops with `compaction_spiral`, its log consistent.

use serde_json::{json, Value};

use super::{log_events, of_type};
use crate::support::client::Editor;
use crate::support::model_server::{openai, ModelServer, RecordedRequest};

fn is_summarizer(request: &RecordedRequest) -> bool {
    request.body.get("tools").is_none()
        && request.body["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .contains("compacting the history")
}

/// A session whose first turn read a big file; our estimate says the
/// history fits (no proactive compaction), the server will disagree.
async fn session_with_big_history(
    server: &ModelServer,
    limits: Value,
) -> (Editor, String, tempfile::TempDir) {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        root.path().join("big.txt"),
        "the big file line\n".repeat(180),
    )
    .unwrap();
    server.push(openai::tool_calls(&[(
        "call_big",
        "read_file",
        r#"{"path":"big.txt"}"#,
    )]));
    server.push(openai::text(["read it"]));
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;
    let mut limits = limits;
    limits["compact_threshold"] = json!(5.0);
    let mut config = server.session_config_with(limits);
    config["model"]["context_window"] = json!(1500);
    let session = editor.new_session(config).await;
    let (response, _) = editor.prompt(&session, "start here").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    (editor, session, root)
}

fn overflow() -> crate::support::model_server::Reply {
    openai::error(400, "This model's maximum context length is 1000 tokens")
}

/// A call of `read_file` on a missing file whose long name fills the
/// history: it fails, which is not progress.
fn failing_read(id: &str) -> crate::support::model_server::Reply {
    let path = format!("missing-{id}-{}.txt", "x".repeat(1200));
    openai::tool_calls(&[(id, "read_file", &json!({ "path": path }).to_string())])
}

#[tokio::test]
async fn compacting_twice_without_progress_stops_the_turn_before_another_call() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;
    let mut config = server.session_config();
    config["model"]["context_window"] = json!(1000);
    let session = editor.new_session(config).await;
    // Each step adds a failed call; from the third step on the history is
    // over the threshold and the oldest step is summarized each time.
    server.push(failing_read("call_a"));
    server.push(failing_read("call_b"));
    server.push(openai::text(["SUMMARY ONE"]));
    server.push(failing_read("call_c"));
    server.push(openai::text(["SUMMARY TWO"]));
    server.push(openai::text(["never asked for"]));

    let (response, updates) = editor.prompt(&session, "go").await;
    let result = &response["result"];
    assert_eq!(result["stopReason"], "compaction_spiral", "{response}");
    assert_eq!(
        result["message"],
        "stopped after 2 compactions without progress (max_compactions_without_progress = 2)"
    );
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        5,
        "the call after the second summary was not made"
    );
    assert!(is_summarizer(&requests[2]) && is_summarizer(&requests[4]));
    let compacted = updates
        .iter()
        .filter(|u| u["update"]["sessionUpdate"] == "context_compacted")
        .count();
    assert_eq!(compacted, 2);
    assert_eq!(
        updates.last().unwrap()["update"]["stopReason"],
        "compaction_spiral"
    );

    // The log is consistent: every call has its result, steps and the
    // turn closed; the session takes the next prompt.
    let log = log_events(&editor, &session);
    assert_eq!(of_type(&log, "compacted").len(), 2);
    assert_eq!(of_type(&log, "tool_call").len(), 3);
    assert_eq!(of_type(&log, "tool_result").len(), 3);
    assert_eq!(
        of_type(&log, "step_start").len(),
        of_type(&log, "step_end").len()
    );
    assert_eq!(
        of_type(&log, "turn_start").len(),
        of_type(&log, "turn_end").len()
    );
    server.push(openai::text(["back"]));
    let (response, _) = editor.prompt(&session, "again").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
}

#[tokio::test]
async fn a_limit_of_one_stops_at_the_first_compaction_of_a_turn() {
    let server = ModelServer::start().await;
    // With a limit of 1, the first compaction of a turn already stops it.
    let (mut editor, session, _root) =
        session_with_big_history(&server, json!({"max_compactions_without_progress": 1})).await;
    server.push(overflow());
    server.push(openai::text(["SUMMARY"]));
    server.push(openai::text(["never asked for"]));
    let (response, _) = editor.prompt(&session, "second prompt").await;
    assert_eq!(
        response["result"]["stopReason"], "compaction_spiral",
        "{response}"
    );
    assert_eq!(server.requests().len(), 4);
}

#[tokio::test]
async fn a_completed_tool_call_between_compactions_resets_the_count() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        root.path().join("big.txt"),
        "the big file line\n".repeat(80),
    )
    .unwrap();
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;
    let mut config = server.session_config();
    config["model"]["context_window"] = json!(1000);
    let session = editor.new_session(config).await;
    // As in the spiral, but the call between the two compactions
    // completes: that is progress, so the second compaction is the first
    // of a new count and the turn goes on.
    server.push(failing_read("call_a"));
    server.push(failing_read("call_b"));
    server.push(openai::text(["SUMMARY ONE"]));
    server.push(openai::tool_calls(&[(
        "call_c",
        "read_file",
        r#"{"path":"big.txt"}"#,
    )]));
    server.push(openai::text(["SUMMARY TWO"]));
    server.push(openai::text(["done"]));
    let (response, _) = editor.prompt(&session, "go").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(server.requests().len(), 6);
    let log = log_events(&editor, &session);
    assert_eq!(of_type(&log, "compacted").len(), 2);
}
