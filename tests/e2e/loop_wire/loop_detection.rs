//! Loop detection: a model repeating a batch of calls (period one to three)
//! is stopped with a receipt that says so; changing arguments are no loop.

use serde_json::json;

use super::{
    assert_every_call_has_one_result, log_events, of_type, seen_or_next_update, session_with,
    tool_results,
};
use crate::support::client::agent_text;
use crate::support::model_server::{openai, ModelServer};

/// Scripts `steps` model responses, each calling `batch` (name, args) with
/// fresh call ids `c{step}_{index}`, then a text answer that a correct
/// daemon never asks for.
fn script_repeated_batches(server: &ModelServer, steps: usize, batch: &[(&str, &str)]) {
    for step in 1..=steps {
        let ids: Vec<String> = (0..batch.len()).map(|i| format!("c{step}_{i}")).collect();
        let calls: Vec<(&str, &str, &str)> = batch
            .iter()
            .zip(&ids)
            .map(|((name, args), id)| (id.as_str(), *name, *args))
            .collect();
        server.push(openai::tool_calls(&calls));
    }
    server.push(openai::text(["never asked for"]));
}

/// Runs one prompt against a model that repeats itself and checks what a
/// detected loop must leave behind. Returns the receipt's message.
async fn assert_loop_detected(
    steps: usize,
    batch: &[(&str, &str)],
    looping_calls: &[&str],
) -> String {
    let server = ModelServer::start().await;
    script_repeated_batches(&server, steps, batch);
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "alpha\n").unwrap();
    let (mut editor, session) = session_with(&server, root.path(), json!({})).await;

    let (response, updates) = editor.prompt(&session, "work").await;
    let result = &response["result"];
    assert_eq!(result["stopReason"], "loop_detected", "{response}");
    assert_eq!(
        server.requests().len(),
        steps,
        "no model call after the loop was detected"
    );

    let log = log_events(&editor, &session);
    assert_every_call_has_one_result(&log);
    let results = tool_results(&log);
    for (id, status) in &results {
        let expected = if looping_calls.contains(&id.as_str()) {
            "not_run"
        } else {
            "completed"
        };
        assert_eq!(status, expected, "{id}: {results:?}");
    }
    assert_eq!(
        results.iter().filter(|(_, s)| s == "not_run").count(),
        looping_calls.len()
    );
    // The looping batch never started.
    for started in of_type(&log, "tool_started") {
        assert!(!looping_calls.contains(&started["call_id"].as_str().unwrap()));
    }
    let detected = of_type(&log, "loop_detected");
    assert_eq!(detected.len(), 1);
    // The refusals tell the model what repeated and to change course; the
    // editor shows them as failed calls.
    let refusal = of_type(&log, "tool_result")
        .into_iter()
        .find(|e| e["status"] == "not_run")
        .unwrap();
    let output = refusal["output"].as_str().unwrap();
    assert!(output.starts_with("loop detected: "), "{output}");
    assert!(output.contains("Try a different approach"), "{output}");
    for id in looping_calls {
        let last = updates
            .iter()
            .rfind(|u| u["update"]["toolCallId"] == *id)
            .unwrap_or_else(|| panic!("no update for {id}"));
        assert_eq!(last["update"]["status"], "failed", "{last}");
    }
    let message = result["message"].as_str().unwrap().to_string();
    assert!(
        message.contains(detected[0]["description"].as_str().unwrap()),
        "{message}"
    );
    message
}

#[tokio::test]
async fn the_same_call_three_times_is_a_loop_of_period_one() {
    let message = assert_loop_detected(3, &[("read_file", r#"{"path":"a.txt"}"#)], &["c3_0"]).await;
    assert_eq!(
        message,
        r#"stopped a loop: the same tool call repeated 3 times: read_file {"path":"a.txt"}"#
    );
}

#[tokio::test]
async fn two_calls_repeating_three_times_are_a_loop_of_period_two() {
    let message = assert_loop_detected(
        3,
        &[
            ("read_file", r#"{"path":"a.txt"}"#),
            ("grep", r#"{"pattern":"alpha"}"#),
        ],
        &["c3_0", "c3_1"],
    )
    .await;
    assert!(message.contains("sequence of 2 tool calls"), "{message}");
    assert!(
        message.contains(r#"read_file {"path":"a.txt"} -> grep {"pattern":"alpha"}"#),
        "{message}"
    );
}

#[tokio::test]
async fn three_calls_repeating_three_times_are_a_loop_of_period_three() {
    let message = assert_loop_detected(
        3,
        &[
            ("read_file", r#"{"path":"a.txt"}"#),
            ("grep", r#"{"pattern":"alpha"}"#),
            ("list_files", r#"{}"#),
        ],
        &["c3_0", "c3_1", "c3_2"],
    )
    .await;
    assert!(message.contains("sequence of 3 tool calls"), "{message}");
    assert!(message.contains("list_files {}"), "{message}");
}

#[tokio::test]
async fn paging_through_a_file_with_changing_offsets_is_not_a_loop() {
    let server = ModelServer::start().await;
    let pages = 5;
    for page in 0..pages {
        let args = json!({"path": "big.txt", "offset": 1 + page * 10, "limit": 10}).to_string();
        server.push(openai::tool_calls(&[(
            &format!("page_{page}"),
            "read_file",
            &args,
        )]));
    }
    server.push(openai::text(["read it all"]));
    let root = tempfile::tempdir().unwrap();
    let big: String = (1..=50).map(|i| format!("line {i}\n")).collect();
    std::fs::write(root.path().join("big.txt"), big).unwrap();
    let (mut editor, session) = session_with(&server, root.path(), json!({})).await;

    let (response, updates) = editor.prompt(&session, "read big.txt").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(agent_text(&updates), "read it all");
    let requests = server.requests();
    assert_eq!(requests.len(), pages as usize + 1);
    let log = log_events(&editor, &session);
    assert!(of_type(&log, "loop_detected").is_empty());
    let results = tool_results(&log);
    assert_eq!(results.len(), pages as usize);
    assert!(results.iter().all(|(_, s)| s == "completed"), "{results:?}");
    // Each page really is the next one.
    let last = requests.last().unwrap().tool_messages();
    assert!(last[4].1.contains("line 41"), "{:?}", last[4]);
}

#[tokio::test]
async fn a_second_loop_in_the_same_burst_ends_the_turn_with_error() {
    let server = ModelServer::start().await;
    for step in 1..=6 {
        server.push(openai::tool_calls(&[(
            &format!("c{step}"),
            "read_file",
            r#"{"path":"a.txt"}"#,
        )]));
    }
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "alpha\n").unwrap();
    let (mut editor, session) = session_with(&server, root.path(), json!({})).await;
    let (response, _) = editor.prompt(&session, "work").await;
    assert_eq!(
        response["result"]["stopReason"], "loop_detected",
        "{response}"
    );
    assert_eq!(server.requests().len(), 3);

    // A waking steer opens a turn but no new burst: only a prompt does.
    let response = editor
        .request(
            "tandem/steer",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "keep going"}]}),
        )
        .await;
    assert!(response["result"]["messageId"].is_string(), "{response}");
    let end = seen_or_next_update(&mut editor, &session, |u| {
        u["sessionUpdate"] == "turn_end" && u["stopReason"] != "loop_detected"
    })
    .await;
    assert_eq!(end["turnId"], "t2");
    assert_eq!(end["update"]["stopReason"], "error", "{end}");
    let message = end["update"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("loop detected again after a warning: the same tool call"),
        "{message}"
    );
    assert_eq!(server.requests().len(), 6);
    let log = log_events(&editor, &session);
    assert_every_call_has_one_result(&log);
    assert_eq!(of_type(&log, "loop_detected").len(), 2);
    let refused: Vec<String> = tool_results(&log)
        .into_iter()
        .filter(|(_, s)| s == "not_run")
        .map(|(id, _)| id)
        .collect();
    assert_eq!(refused, ["c3", "c6"]);
}
