//! A server that misbehaves: never answers `initialize`, crashes mid-call,
//! takes longer than its time limit, or is cancelled during a call.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{
    call, config_with, fault_log, fault_server, list_servers, offered_names, session, tool_result,
    wait_fault_log,
};
use crate::support::client::EditorOptions;
use crate::support::model_server::{openai, ModelServer};

#[tokio::test]
async fn a_server_that_never_answers_initialize_is_reported_and_the_session_goes_on() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let server = ModelServer::start().await;
    server.push(openai::text(["still here"]));
    let root = tempfile::tempdir().unwrap();
    let mut silent = fault_server("silent", log.path());
    silent["startup_timeout_sec"] = json!(3);
    let config = config_with(&server, "auto", json!({"silent": silent}));
    let (mut editor, session) = session(root.path(), config, EditorOptions::default()).await;
    let started = Instant::now();
    let (receipt, _) = editor.prompt(&session, "hello").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the first turn waited {:?}",
        started.elapsed()
    );
    let names = offered_names(&server.requests()[0]);
    assert!(!names.iter().any(|n| n.starts_with("mcp__")), "{names:?}");
    let servers = list_servers(&mut editor, &session).await;
    assert_eq!(servers[0]["state"], "failed", "{servers}");
    assert!(
        servers[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("startup_timeout_sec")),
        "{servers}"
    );
    // It was asked: the handshake reached it and went unanswered.
    wait_fault_log(log.path(), |l| l.contains("\"initialize\"")).await;
}

#[tokio::test]
async fn a_server_that_crashes_mid_call_is_a_tool_error_then_restarted_on_next_use() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let server = ModelServer::start().await;
    server.push(call("c1", "mcp__fault__crash", json!({})));
    server.push(call("c2", "mcp__fault__echo", json!({"text": "back"})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let config = config_with(
        &server,
        "auto",
        json!({"fault": fault_server("tools", log.path())}),
    );
    let (mut editor, session) = session(root.path(), config, EditorOptions::default()).await;
    let (receipt, _) = editor.prompt(&session, "go").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    let requests = server.requests();
    let crashed = tool_result(&requests[1], "c1");
    assert!(crashed.contains("exited during the call"), "{crashed}");
    assert_eq!(tool_result(&requests[2], "c2"), "fault echo: back");
    let starts = fault_log(log.path())
        .iter()
        .filter(|l| l.starts_with("started "))
        .count();
    assert_eq!(starts, 2, "started once, restarted once");
    let results: Vec<String> = editor
        .log_lines(&session)
        .into_iter()
        .filter(|e| e["type"] == "tool_result")
        .map(|e| e["status"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(results, ["failed", "completed"]);
}

#[tokio::test]
async fn a_call_past_its_time_limit_is_stopped_and_cancelled_at_the_server() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let server = ModelServer::start().await;
    server.push(call("c1", "mcp__fault__slow", json!({"seconds": 30})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let mut fault = fault_server("tools", log.path());
    fault["tool_timeout_sec"] = json!(0.5);
    let config = config_with(&server, "auto", json!({"fault": fault}));
    let (mut editor, session) = session(root.path(), config, EditorOptions::default()).await;
    let started = Instant::now();
    editor.prompt(&session, "go").await;
    assert!(started.elapsed() < Duration::from_secs(10));
    let result = tool_result(&server.requests()[1], "c1");
    assert!(result.contains("time limit"), "{result}");
    wait_fault_log(log.path(), |l| l.contains("notifications/cancelled")).await;
}

#[tokio::test]
async fn a_cancel_during_a_call_reaches_the_server_and_ends_the_turn_at_once() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let server = ModelServer::start().await;
    server.push(call("c1", "mcp__fault__slow", json!({"seconds": 30})));
    let root = tempfile::tempdir().unwrap();
    let config = config_with(
        &server,
        "auto",
        json!({"fault": fault_server("tools", log.path())}),
    );
    let (mut editor, session) = session(root.path(), config, EditorOptions::default()).await;
    let id = editor.start_prompt(&session, "go").await;
    editor
        .wait_update(&session, |u| {
            u["sessionUpdate"] == "tool_call_update" && u["status"] == "in_progress"
        })
        .await;
    wait_fault_log(log.path(), |l| l.contains("tools/call")).await;
    let cancelled_at = Instant::now();
    editor
        .notify("tandem/cancel", json!({"sessionId": session}))
        .await;
    let (receipt, _) = editor.response(id).await;
    let took = cancelled_at.elapsed();
    assert_eq!(receipt["result"]["stopReason"], "cancelled", "{receipt}");
    assert!(
        took < Duration::from_millis(500),
        "the turn ended {took:?} after the cancel"
    );
    wait_fault_log(log.path(), |l| l.contains("notifications/cancelled")).await;
}
