//! A context that cannot be compacted (issue 28), through the real binary:
//! after the provider says a request does not fit, the same request is
//! never sent again. A tool result too big for the context is cut
//! head-and-tail and the step retried once; when nothing can be cut, the
//! turn stops at once with `context_overflow`, naming the biggest parts of
//! the request in its stop message, the log and the replay.

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value;

use crate::support::client::{tandem_bin, Editor};
use crate::support::model_server::{openai, ModelServer, RecordedRequest};

fn overflow(limit: u64) -> crate::support::model_server::Reply {
    openai::error(
        400,
        &format!(
            "This model's maximum context length is {limit} tokens. However, your messages resulted in 30000 tokens."
        ),
    )
}

/// No two requests the server received are the same request.
fn assert_no_request_repeated(requests: &[RecordedRequest]) {
    let mut seen = HashSet::new();
    for (i, request) in requests.iter().enumerate() {
        assert!(
            seen.insert(request.raw_body.clone()),
            "request {i} repeats an earlier one after an overflow"
        );
    }
}

/// The content of the tool message answering `call_id` in a request.
fn tool_message(request: &RecordedRequest, call_id: &str) -> String {
    request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no result of {call_id} in {}", request.body))
        .to_string()
}

fn replay(home: &Path, session: &str) -> String {
    let output = std::process::Command::new(tandem_bin())
        .arg("replay")
        .arg(session)
        .env("TANDEM_HOME", home)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "replay failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test]
async fn a_tool_result_too_big_for_the_context_is_cut_head_and_tail_and_the_retry_succeeds() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let lines: String = (1..=1500)
        .map(|n| format!("line {n:04} of the big file\n"))
        .collect();
    std::fs::write(root.path().join("big.txt"), &lines).unwrap();
    server.push(openai::tool_calls(&[(
        "call_big",
        "read_file",
        r#"{"path":"big.txt"}"#,
    )]));
    // Our estimate says it fits (a 128k window); the server's is 4,000.
    server.push(overflow(4000));
    server.push(openai::text(["read it"]));
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;
    let session = editor.new_session(server.session_config()).await;
    let (response, _) = editor.prompt(&session, "read big.txt").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");

    let requests = server.requests();
    assert_eq!(requests.len(), 3, "the step, its overflow, one retry");
    assert_no_request_repeated(&requests);
    let full = tool_message(&requests[1], "call_big");
    let cut = tool_message(&requests[2], "call_big");
    assert!(
        full.contains("line 0750 of the big file"),
        "the first try had it all"
    );
    assert!(
        cut.len() < 12_500 && cut.len() * 3 < full.len(),
        "cut to fit 4,000 tokens: {} of {} bytes",
        cut.len(),
        full.len()
    );
    assert!(cut.contains("line 0001 of the big file"), "the head stays");
    assert!(cut.contains("line 1500 of the big file"), "the tail stays");
    assert!(
        !cut.contains("line 0750 of the big file"),
        "the middle goes"
    );
    assert!(
        cut.contains("bytes elided: this result did not fit the model's context window"),
        "the model is told: {cut}"
    );

    let log = editor.log_lines(&session);
    let failed: Vec<&Value> = log
        .iter()
        .filter(|e| e["type"] == "attempt_failed")
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["error_kind"], "context_overflow");
    assert_eq!(failed[0]["retry"], true);
    let shrunk = log
        .iter()
        .find(|e| e["type"] == "results_shrunk")
        .expect("a results_shrunk event");
    assert_eq!(shrunk["results"][0]["call_id"], "call_big");
    assert_eq!(
        shrunk["results"][0]["from_bytes"].as_u64().unwrap() as usize,
        full.len()
    );
    // The original output stays in the log.
    let result = log
        .iter()
        .find(|e| e["type"] == "tool_result")
        .expect("a tool_result");
    assert!(result["output"]
        .as_str()
        .unwrap()
        .contains("line 0750 of the big file"));

    let home = editor.sessions_dir().parent().unwrap().to_path_buf();
    let text = replay(&home, &session);
    assert!(
        text.contains("context overflow: cut tool results to fit: read_file [call_big]"),
        "{text}"
    );
}

#[tokio::test]
async fn a_request_with_nothing_to_cut_stops_at_once_naming_its_biggest_parts() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    server.push(overflow(1000));
    server.push(openai::text(["never asked for"]));
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;
    let session = editor.new_session(server.session_config()).await;
    let prompt = "please look at this: ".to_string() + &"pasted text ".repeat(2500);
    let (response, updates) = editor.prompt(&session, &prompt).await;

    let result = &response["result"];
    assert_eq!(result["stopReason"], "context_overflow", "{response}");
    let message = result["message"].as_str().unwrap();
    assert!(message.contains("nothing in it can be shrunk"), "{message}");
    let user_chars = prompt.len();
    assert!(
        message.contains(&format!(
            "the biggest parts: user message 1 ({user_chars} chars, about {} tokens)",
            user_chars / 4
        )),
        "the prompt is named first, with its size: {message}"
    );
    assert!(message.contains("system prompt ("), "{message}");
    assert!(
        message.contains("maximum context length is 1000 tokens"),
        "{message}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "no retry of the same request");
    assert_no_request_repeated(&requests);

    let end = updates
        .iter()
        .rev()
        .find(|u| u["update"]["sessionUpdate"] == "turn_end")
        .expect("a turn_end update");
    assert_eq!(end["update"]["stopReason"], "context_overflow");
    assert_eq!(end["update"]["message"], message);

    let log = editor.log_lines(&session);
    let failed = log
        .iter()
        .find(|e| e["type"] == "attempt_failed")
        .expect("the failed attempt");
    assert_eq!(failed["retry"], false);
    let turn_end = log.iter().find(|e| e["type"] == "turn_end").unwrap();
    assert_eq!(turn_end["stop_reason"], "context_overflow");
    assert_eq!(turn_end["message"], message);

    let home = editor.sessions_dir().parent().unwrap().to_path_buf();
    let text = replay(&home, &session);
    assert!(
        text.contains("context_overflow: the request does not fit")
            && text.contains(&format!("user message 1 ({user_chars} chars")),
        "{text}"
    );
}
