//! Tier-2 compaction through the wire: a summary replaces the oldest part
//! of the history, a failed summary falls back to dropping it, and a
//! context-overflow error compacts and retries.

use serde_json::{json, Value};

use crate::support::client::Editor;
use crate::support::model_server::{openai, ModelServer, RecordedRequest};

fn messages(request: &RecordedRequest) -> Vec<Value> {
    request.body["messages"].as_array().unwrap().clone()
}

fn is_summarizer(request: &RecordedRequest) -> bool {
    request.body.get("tools").is_none()
        && messages(request)[0]["content"]
            .as_str()
            .unwrap_or_default()
            .contains("compacting the history")
}

/// Every tool message follows an assistant message that made its call.
fn pairs_intact(messages: &[Value]) -> bool {
    let mut calls: Vec<String> = Vec::new();
    for m in messages {
        match m["role"].as_str().unwrap() {
            "assistant" => {
                calls = m["tool_calls"]
                    .as_array()
                    .map(|c| {
                        c.iter()
                            .map(|c| c["id"].as_str().unwrap().to_string())
                            .collect()
                    })
                    .unwrap_or_default()
            }
            "tool" => {
                if !calls.contains(&m["tool_call_id"].as_str().unwrap().to_string()) {
                    return false;
                }
            }
            _ => calls.clear(),
        }
    }
    true
}

/// A first turn that reads a big file into the history.
async fn session_with_big_history(
    server: &ModelServer,
    context_window: u64,
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
    let mut config = server.session_config_with(limits);
    config["model"]["context_window"] = json!(context_window);
    let session = editor.new_session(config).await;
    let (response, _) = editor.prompt(&session, "start here").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        server.requests().len(),
        2,
        "no compaction within the first turn"
    );
    (editor, session, root)
}

#[tokio::test]
async fn a_summary_replaces_the_oldest_history_in_the_next_request() {
    let server = ModelServer::start().await;
    let (mut editor, session, _root) = session_with_big_history(&server, 1000, json!({})).await;
    server.push(openai::text(["SUMMARY: read big.txt, 180 lines"]));
    server.push(openai::text(["continuing"]));
    let (response, updates) = editor.prompt(&session, "second prompt").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");

    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert!(
        is_summarizer(&requests[2]),
        "the third request summarizes: {:?}",
        requests[2].body
    );
    let transcript = messages(&requests[2])[1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(transcript.contains("the big file line"), "{transcript}");

    let next = messages(&requests[3]);
    let text = serde_json::to_string(&next).unwrap();
    assert!(text.contains("SUMMARY: read big.txt"), "{text}");
    assert!(
        !text.contains("the big file line"),
        "the summarized result is gone: {text}"
    );
    assert_eq!(
        next[1]["content"], "start here",
        "the first user message stays"
    );
    assert_eq!(next.last().unwrap()["content"], "second prompt");
    assert!(pairs_intact(&next));

    let compacted = updates
        .iter()
        .find(|u| u["update"]["sessionUpdate"] == "context_compacted")
        .expect("a context_compacted update");
    assert_eq!(compacted["update"]["summarized"], true);
    // Right after it, a usage update: the context in use has dropped below
    // the 80% of the window that set the compaction off.
    let at = updates
        .iter()
        .position(|u| u["update"]["sessionUpdate"] == "context_compacted")
        .unwrap();
    let after = &updates[at + 1]["update"];
    assert_eq!(after["sessionUpdate"], "usage", "{after}");
    assert_eq!(after["context"]["size"], 1000);
    let used = after["context"]["used"].as_u64().unwrap();
    assert!(used > 0 && used < 800, "{after}");
    // The original events stay in the log.
    let log = editor.log_lines(&session);
    assert!(log
        .iter()
        .any(|e| e["type"] == "tool_result" && e["call_id"] == "call_big"));
    assert!(log
        .iter()
        .any(|e| e["type"] == "compacted" && e["summary"].is_string()));
}

#[tokio::test]
async fn a_failed_summary_falls_back_to_dropping_the_oldest_messages() {
    let server = ModelServer::start().await;
    let (mut editor, session, _root) = session_with_big_history(&server, 1000, json!({})).await;
    server.push(openai::error(500, "summarizer down"));
    server.push(openai::text(["continuing"]));
    let (response, _) = editor.prompt(&session, "second prompt").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    let next = messages(&requests[3]);
    let text = serde_json::to_string(&next).unwrap();
    assert!(text.contains("earlier messages were removed"), "{text}");
    assert!(!text.contains("the big file line"), "{text}");
    assert_eq!(next[1]["content"], "start here");
    assert!(pairs_intact(&next));
    let log = editor.log_lines(&session);
    let compacted = log.iter().find(|e| e["type"] == "compacted").unwrap();
    assert!(compacted["error"]
        .as_str()
        .unwrap()
        .contains("summarizer down"));
}

#[tokio::test]
async fn context_overflow_compacts_and_retries() {
    let server = ModelServer::start().await;
    // Our estimate says it fits (no proactive compaction, no trimming);
    // the provider's tokenizer disagrees.
    let (mut editor, session, _root) =
        session_with_big_history(&server, 1500, json!({"compact_threshold": 5.0})).await;
    server.push(openai::error(
        400,
        "This model's maximum context length is 1000 tokens",
    ));
    server.push(openai::text(["SUMMARY"]));
    server.push(openai::text(["fits now"]));
    let (response, _) = editor.prompt(&session, "second prompt").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    assert!(!is_summarizer(&requests[2]));
    assert!(is_summarizer(&requests[3]));
    let retried = serde_json::to_string(&messages(&requests[4])).unwrap();
    assert!(
        retried.contains("SUMMARY") && !retried.contains("the big file line"),
        "{retried}"
    );
    let log = editor.log_lines(&session);
    let failed = log.iter().find(|e| e["type"] == "attempt_failed").unwrap();
    assert_eq!(failed["error_kind"], "context_overflow");
    assert_eq!(failed["retry"], true);
}
