//! Sessions that survive: list, load with replay, crash recovery after a
//! real SIGKILL, torn lines, locks — through the real binary.

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::support::client::{agent_text, update_kinds, Editor, EditorOptions};
use crate::support::model_server::{openai, ModelServer, Reply, SseStep};

fn config_for(server: &ModelServer) -> Value {
    let mut config = server.session_config();
    config["approval"] = json!({"mode": "auto"});
    config
}

async fn editor_in(home: Option<Arc<tempfile::TempDir>>, root: &Path) -> Editor {
    let mut editor = Editor::spawn_with(EditorOptions {
        home,
        ..EditorOptions::default()
    })
    .await;
    editor.initialize(root).await;
    editor
}

/// Loads a session; returns the response and the replayed updates.
async fn load(editor: &mut Editor, session: &str) -> (Value, Vec<Value>) {
    let start = editor.received.len();
    let id = editor
        .start_request("tandem/loadSession", json!({"sessionId": session}))
        .await;
    let (response, at) = editor.response(id).await;
    let updates = editor.received[start..at]
        .iter()
        .filter(|m| m["method"] == "tandem/update")
        .map(|m| m["params"].clone())
        .collect();
    (response, updates)
}

#[tokio::test]
async fn kill_9_mid_stream_then_load_closes_the_turn_as_interrupted_and_keeps_the_prompt() {
    let server = ModelServer::start().await;
    server.push(Reply::Sse(vec![
        openai::delta(json!({"content": "partial answer"})),
        SseStep::Stall,
    ]));
    let root = tempfile::tempdir().unwrap();
    let mut editor = editor_in(None, root.path()).await;
    let session = editor.new_session(config_for(&server)).await;
    editor
        .start_request(
            "tandem/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "the first prompt"}]}),
        )
        .await;
    editor
        .wait_notification("tandem/update", |p| {
            p["update"]["sessionUpdate"] == "agent_message_chunk"
        })
        .await;
    let home = editor.kill_9().await;

    let mut editor = editor_in(Some(home), root.path()).await;
    let (response, updates) = load(&mut editor, &session).await;
    assert_eq!(
        response["result"]["sessionId"],
        session.as_str(),
        "{response}"
    );
    let kinds = update_kinds(&updates);
    assert!(kinds.contains(&"user_message".to_string()), "{kinds:?}");
    let prompt = updates
        .iter()
        .find(|u| u["update"]["sessionUpdate"] == "user_message")
        .unwrap();
    assert_eq!(prompt["update"]["content"][0]["text"], "the first prompt");
    assert_eq!(agent_text(&updates), "partial answer");
    let end = updates.last().unwrap();
    assert_eq!(end["update"]["sessionUpdate"], "turn_end");
    assert_eq!(end["update"]["stopReason"], "interrupted");

    // The session goes on; the model sees the acknowledged prompt, not the
    // half-streamed text.
    server.push(openai::text(["carrying on"]));
    let (response, updates) = editor.prompt(&session, "second prompt").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(response["result"]["turnId"], "t2");
    assert_eq!(agent_text(&updates), "carrying on");
    let requests = server.requests();
    let messages = requests.last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .clone();
    let users: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(users, vec!["the first prompt", "second prompt"]);
    assert!(!messages.iter().any(|m| m["content"] == "partial answer"));
}

#[tokio::test]
async fn kill_9_mid_tool_reports_the_call_interrupted_and_never_reruns_it() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let cmd = "echo ran >> marker.txt; echo started; sleep 30";
    server.push(openai::tool_calls(&[(
        "call_exec",
        "exec_command",
        &json!({"cmd": cmd, "timeout_ms": 60000}).to_string(),
    )]));
    let mut editor = editor_in(None, root.path()).await;
    let session = editor.new_session(config_for(&server)).await;
    editor
        .start_request(
            "tandem/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "run it"}]}),
        )
        .await;
    editor
        .wait_notification("tandem/update", |p| {
            p["update"]["outputDelta"]
                .as_str()
                .is_some_and(|t| t.contains("started"))
        })
        .await;
    let home = editor.kill_9().await;

    let mut editor = editor_in(Some(home), root.path()).await;
    let (_, updates) = load(&mut editor, &session).await;
    let result = updates
        .iter()
        .rev()
        .find(|u| u["update"]["toolCallId"] == "call_exec" && u["update"]["status"].is_string())
        .unwrap();
    assert_eq!(result["update"]["status"], "failed");
    let text = result["update"]["content"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(text.contains("INTERRUPTED"), "{text}");
    assert_eq!(
        updates.last().unwrap()["update"]["stopReason"],
        "interrupted"
    );

    server.push(openai::text(["ok"]));
    let (response, _) = editor.prompt(&session, "what happened?").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.requests();
    let last = requests.last().unwrap();
    let tool = last.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the interrupted call still has a result for the model");
    assert_eq!(tool["tool_call_id"], "call_exec");
    assert!(tool["content"].as_str().unwrap().contains("INTERRUPTED"));
    // Run once, before the crash; never again.
    assert_eq!(
        std::fs::read_to_string(root.path().join("marker.txt")).unwrap(),
        "ran\n"
    );
    assert_eq!(requests.len(), 2, "no model call was repeated");
}

#[tokio::test]
async fn an_acknowledged_queued_prompt_survives_kill_9_in_the_log() {
    let server = ModelServer::start().await;
    server.push(Reply::Sse(vec![
        openai::delta(json!({"content": "busy"})),
        SseStep::Stall,
    ]));
    let root = tempfile::tempdir().unwrap();
    let mut editor = editor_in(None, root.path()).await;
    let session = editor.new_session(config_for(&server)).await;
    for text in ["first", "queued second"] {
        editor
            .start_request(
                "tandem/prompt",
                json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
            )
            .await;
    }
    editor
        .wait_notification("tandem/update", |p| {
            p["update"]["sessionUpdate"] == "input_status" && p["update"]["messageIds"][0] == "m2"
        })
        .await;
    let home = editor.kill_9().await;

    let mut editor = editor_in(Some(home), root.path()).await;
    let (_, updates) = load(&mut editor, &session).await;
    let statuses: Vec<(String, String)> = updates
        .iter()
        .filter(|u| u["update"]["sessionUpdate"] == "input_status")
        .map(|u| {
            (
                u["update"]["messageIds"][0].as_str().unwrap().to_string(),
                u["update"]["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        statuses.contains(&("m2".into(), "pending".into())),
        "{statuses:?}"
    );
    assert!(
        statuses.contains(&("m2".into(), "discarded".into())),
        "{statuses:?}"
    );
    let log = editor.log_lines(&session);
    let queued = log
        .iter()
        .find(|e| e["type"] == "input_queued" && e["message_id"] == "m2")
        .unwrap();
    assert_eq!(queued["content"][0]["text"], "queued second");
}

#[tokio::test]
async fn list_sessions_shows_title_state_and_turn_count() {
    let server = ModelServer::start().await;
    server.push(openai::text(["one"]));
    let root = tempfile::tempdir().unwrap();
    let mut editor = editor_in(None, root.path()).await;
    let session = editor.new_session(config_for(&server)).await;
    editor
        .prompt(&session, "Fix the flaky test in parser.rs\nplease")
        .await;
    let response = editor.request("tandem/listSessions", json!({})).await;
    let sessions = response["result"]["sessions"].as_array().unwrap();
    let entry = sessions
        .iter()
        .find(|s| s["sessionId"] == session.as_str())
        .unwrap();
    assert_eq!(entry["title"], "Fix the flaky test in parser.rs");
    assert_eq!(entry["turnCount"], 1);
    assert_eq!(entry["state"], "idle");
    assert!(entry["created"].is_string() && entry["updated"].is_string());
}

#[tokio::test]
async fn load_replay_matches_what_the_live_turn_sent() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "alpha\n").unwrap();
    server.push(openai::tool_calls(&[(
        "call_1",
        "read_file",
        r#"{"path":"a.txt"}"#,
    )]));
    server.push(openai::text(["it says ", "alpha"]));
    let mut editor = editor_in(None, root.path()).await;
    let session = editor.new_session(config_for(&server)).await;
    let (_, live) = editor.prompt(&session, "read a.txt").await;
    let home = editor.home.clone();
    let status = editor.shutdown_and_exit().await;
    assert!(status.success());

    let mut editor = editor_in(Some(home), root.path()).await;
    let (response, replayed) = load(&mut editor, &session).await;
    assert_eq!(live, replayed, "replay must produce the live updates");
    assert_eq!(response["result"]["replayed"], live.len());
}

#[tokio::test]
async fn a_torn_last_line_is_skipped_and_the_session_loads() {
    let server = ModelServer::start().await;
    server.push(openai::text(["fine"]));
    let root = tempfile::tempdir().unwrap();
    let mut editor = editor_in(None, root.path()).await;
    let session = editor.new_session(config_for(&server)).await;
    editor.prompt(&session, "hello").await;
    let home = editor.kill_9().await;
    let path = home
        .path()
        .join("sessions")
        .join(format!("{session}.jsonl"));
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(r#"{"seq":999,"ts":"2026-01-01T00:00:00.000Z","type":"assistant_ch"#);
    std::fs::write(&path, text).unwrap();

    let mut editor = editor_in(Some(home), root.path()).await;
    let (response, updates) = load(&mut editor, &session).await;
    assert!(response["result"].is_object(), "{response}");
    assert_eq!(agent_text(&updates), "fine");
    assert!(
        editor.stderr().contains("torn"),
        "the skip is reported on stderr"
    );
    // New lines start clean after the cut.
    server.push(openai::text(["again"]));
    let (response, _) = editor.prompt(&session, "more").await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let lines = editor.log_lines(&session);
    assert!(lines.iter().all(|l| l.is_object()));
}

#[tokio::test]
async fn a_second_daemon_cannot_open_a_session_the_first_holds() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let mut first = editor_in(None, root.path()).await;
    let session = first.new_session(config_for(&server)).await;
    let mut second = editor_in(Some(first.home.clone()), root.path()).await;
    let response = second
        .request("tandem/loadSession", json!({"sessionId": session}))
        .await;
    assert_eq!(response["error"]["code"], -32004, "{response}");
    let message = response["error"]["message"].as_str().unwrap();
    assert!(message.contains("another tandem process"), "{message}");
    assert!(message.contains(&first.pid().to_string()), "{message}");
}

#[tokio::test]
async fn a_log_from_a_newer_tandem_is_refused_and_left_untouched() {
    let root = tempfile::tempdir().unwrap();
    let mut editor = editor_in(None, root.path()).await;
    let dir = editor.sessions_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let text = "{\"tandem_log\":7,\"session_id\":\"future1\",\"created\":\"x\"}\n";
    std::fs::write(dir.join("future1.jsonl"), text).unwrap();
    let response = editor
        .request("tandem/loadSession", json!({"sessionId": "future1"}))
        .await;
    assert_eq!(response["error"]["code"], -32004, "{response}");
    assert!(response["error"]["message"]
        .as_str()
        .unwrap()
        .contains("newer tandem"));
    assert_eq!(
        std::fs::read_to_string(dir.join("future1.jsonl")).unwrap(),
        text
    );
    let response = editor
        .request(
            "tandem/loadSession",
            json!({"sessionId": "no-such-session"}),
        )
        .await;
    assert_eq!(response["error"]["code"], -32001, "{response}");
}

#[tokio::test]
async fn tandem_replay_prints_the_trajectory_and_sessions_lists_it() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "alpha\n").unwrap();
    server.push(openai::tool_calls(&[(
        "call_1",
        "read_file",
        r#"{"path":"a.txt"}"#,
    )]));
    server.push(openai::text(["done"]));
    let mut editor = editor_in(None, root.path()).await;
    let session = editor.new_session(config_for(&server)).await;
    editor.prompt(&session, "read a.txt please").await;
    let home = editor.home.clone();
    editor.shutdown_and_exit().await;

    let output = std::process::Command::new(crate::support::client::tandem_bin())
        .args(["replay", &session])
        .env("TANDEM_HOME", home.path())
        .output()
        .unwrap();
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("== turn t1"), "{text}");
    assert!(text.contains("user (m1): read a.txt please"), "{text}");
    assert!(
        text.contains("tool call requested: read_file {\"path\":\"a.txt\"} [call_1]"),
        "{text}"
    );
    assert!(
        text.contains("tool read_file [call_1] -> completed:"),
        "{text}"
    );
    assert!(text.contains("== end of t1: end_turn"), "{text}");

    let output = std::process::Command::new(crate::support::client::tandem_bin())
        .arg("sessions")
        .env("TANDEM_HOME", home.path())
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(
        text.contains(&session) && text.contains("read a.txt please"),
        "{text}"
    );
}

#[tokio::test]
async fn usage_and_cost_are_reported_per_call_turn_and_session() {
    let server = ModelServer::start().await;
    for _ in 0..2 {
        server.push(openai::text(["priced"]));
    }
    server.push(openai::text(["free"]));
    let root = tempfile::tempdir().unwrap();
    let mut editor = editor_in(None, root.path()).await;
    let mut config = config_for(&server);
    config["model"]["name"] = json!("gpt-4o-mini-2024-07-18");
    let session = editor.new_session(config).await;
    // 10 input tokens of which 4 cached, 5 output, at gpt-4o-mini prices.
    let per_call = (6.0 * 0.15 + 4.0 * 0.075 + 5.0 * 0.60) / 1e6;
    let close = |v: &Value, want: f64| (v.as_f64().unwrap() - want).abs() < 1e-12;
    editor.prompt(&session, "one").await;
    let (response, updates) = editor.prompt(&session, "two").await;
    let usage = &response["result"]["usage"];
    assert_eq!(usage["inputTokens"], 10);
    assert_eq!(usage["cachedTokens"], 4);
    assert!(close(&usage["costUsd"], per_call), "{usage}");
    let update = updates
        .iter()
        .find(|u| u["update"]["sessionUpdate"] == "usage")
        .unwrap();
    assert!(close(&update["update"]["call"]["costUsd"], per_call));
    assert!(close(
        &update["update"]["session"]["costUsd"],
        2.0 * per_call
    ));
    assert_eq!(update["update"]["session"]["inputTokens"], 20);

    // A model without a known price shows tokens only.
    let free = editor.new_session(config_for(&server)).await;
    let (response, _) = editor.prompt(&free, "three").await;
    assert_eq!(response["result"]["usage"]["outputTokens"], 5);
    assert!(
        response["result"]["usage"].get("costUsd").is_none(),
        "{response}"
    );
}

#[tokio::test]
async fn allow_always_survives_a_reload() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("visible.txt"), "x").unwrap();
    server.push(openai::tool_calls(&[(
        "call_1",
        "exec_command",
        r#"{"cmd":"ls"}"#,
    )]));
    server.push(openai::text(["listed"]));
    let caps = json!({"capabilities": {"experimental": {"tandem": {"requestPermission": true}}}});
    let mut config = config_for(&server);
    config["approval"]["mode"] = json!("review");

    let mut editor = Editor::spawn().await;
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = asked.clone();
    editor.on_request(move |method, _| {
        assert_eq!(method, "tandem/requestPermission");
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Some(json!({"outcome": {"outcome": "selected", "optionId": "allow_always"}}))
    });
    editor.initialize_with(root.path(), caps.clone()).await;
    let session = editor.new_session(config).await;
    let (response, _) = editor.prompt(&session, "list files").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 1);
    let home = editor.home.clone();
    editor.shutdown_and_exit().await;

    server.push(openai::tool_calls(&[(
        "call_2",
        "exec_command",
        r#"{"cmd":"ls -a"}"#,
    )]));
    server.push(openai::text(["listed again"]));
    let mut editor = Editor::spawn_with(EditorOptions {
        home: Some(home),
        ..EditorOptions::default()
    })
    .await;
    editor.on_request(|method, _| panic!("nothing should be asked after a reload, got {method}"));
    editor.initialize_with(root.path(), caps).await;
    load(&mut editor, &session).await;
    let (response, _) = editor.prompt(&session, "again").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.requests();
    let tool = requests.last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    assert_eq!(tool["tool_call_id"], "call_2");
    assert!(
        tool["content"].as_str().unwrap().contains("visible.txt"),
        "{tool}"
    );
}
