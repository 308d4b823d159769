//! The daemon end to end: a session on the wire, the real binary, the
//! scripted model server on loopback.

use std::path::Path;

use serde_json::{json, Value};

use crate::support::client::{agent_text, file_uri, update_kinds, Editor};
use crate::support::model_server::{openai, unused_base_url, ModelServer};

/// Session config pointing at the scripted server, with fast retries.
fn config_for(server: &ModelServer) -> Value {
    server.session_config()
}

async fn session_with(server: &ModelServer, root: &Path) -> (Editor, String) {
    let mut editor = Editor::spawn().await;
    editor.initialize(root).await;
    let session = editor.new_session(config_for(server)).await;
    (editor, session)
}

#[tokio::test]
async fn streamed_chunks_reach_the_client_before_the_prompt_response() {
    let server = ModelServer::start().await;
    server.push(openai::text(["Hel", "lo, ", "wor", "ld"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = session_with(&server, root.path()).await;

    let (response, updates) = editor.prompt(&session, "say hello").await;
    let result = &response["result"];
    assert_eq!(result["stopReason"], "end_turn", "{response}");
    assert_eq!(result["turnId"], "t1");
    assert_eq!(result["usage"]["inputTokens"], openai::PROMPT_TOKENS);
    assert_eq!(result["usage"]["outputTokens"], openai::COMPLETION_TOKENS);
    assert_eq!(agent_text(&updates), "Hello, world");
    let chunks = updates
        .iter()
        .filter(|u| u["update"]["sessionUpdate"] == "agent_message_chunk")
        .count();
    assert_eq!(chunks, 4, "one update per streamed delta");
    let kinds = update_kinds(&updates);
    // The title the first prompt gives the session, then the prompt's status.
    assert_eq!(kinds[..2], ["session_info", "input_status"], "{kinds:?}");
    assert!(kinds.contains(&"user_message".to_string()));
    assert!(kinds.contains(&"usage".to_string()));
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("turn_end"),
        "{kinds:?}"
    );
    assert!(updates.iter().all(|u| u["sessionId"] == session.as_str()));

    // Nothing of the turn arrives after its response.
    editor.request("tandem/newSession", json!({})).await;
    let after: Vec<&Value> = editor
        .received
        .iter()
        .skip_while(|m| m.get("id") != response.get("id") || m.get("method").is_some())
        .filter(|m| m["method"] == "tandem/update")
        .collect();
    assert!(after.is_empty(), "updates after the response: {after:?}");

    // The request the model server saw.
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let body = &requests[0].body;
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["model"], "scripted-model");
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(messages.last().unwrap()["content"], "say hello");
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        vec![
            "read_file",
            "list_files",
            "grep",
            "apply_patch",
            "exec_command",
            "update_plan"
        ],
        "request_user_input needs a client that can answer"
    );

    // The log tells the same story.
    let log = editor.log_lines(&session);
    assert_eq!(log[0]["tandem_log"], 1);
    let types: Vec<&str> = log[1..]
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    for expected in [
        "input_queued",
        "turn_start",
        "user_message",
        "step_start",
        "assistant_chunk",
        "assistant_message",
        "step_end",
        "turn_end",
    ] {
        assert!(
            types.contains(&expected),
            "{expected} missing from {types:?}"
        );
    }
    let anchor = log
        .iter()
        .find(|e| e["type"] == "assistant_message")
        .unwrap();
    assert_eq!(anchor["text"], "Hello, world");
    assert_eq!(anchor["provider"], "openai");
    assert_eq!(anchor["finish_reason"], "stop");
    let seqs: Vec<u64> = log[1..]
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
}

#[tokio::test]
async fn read_file_sees_the_unsaved_buffer_after_incremental_changes() {
    let server = ModelServer::start().await;
    server.push(openai::tool_calls(&[(
        "call_1",
        "read_file",
        r#"{"path":"src/lib.rs"}"#,
    )]));
    server.push(openai::text(["done"]));
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("src")).unwrap();
    let file = root.path().join("src/lib.rs");
    std::fs::write(&file, "// the disk version\n").unwrap();
    let (mut editor, session) = session_with(&server, root.path()).await;

    editor.open(&file, "// 😀 日本\r\nfn main() {}\r\n").await;
    // Line 0 in UTF-16 code units: "// " = 3, the emoji = 2, " " = 1, 日本 = 2.
    editor
        .notify(
            "textDocument/didChange",
            json!({
                "textDocument": {"uri": file_uri(&file), "version": 2},
                "contentChanges": [
                    {"range": {"start": {"line": 0, "character": 8}, "end": {"line": 0, "character": 8}}, "text": "語!"},
                    {"range": {"start": {"line": 1, "character": 3}, "end": {"line": 1, "character": 7}}, "text": "edited"},
                    {"range": {"start": {"line": 1, "character": 14}, "end": {"line": 1, "character": 14}}, "text": " // tail"},
                ]
            }),
        )
        .await;

    let (response, updates) = editor.prompt(&session, "read lib.rs").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.wait_for_requests(2).await;
    let results = requests[1].tool_messages();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].0, "call_1");
    let content = &results[0].1;
    assert!(content.contains("// 😀 日本語!"), "{content}");
    assert!(content.contains("fn edited() {} // tail"), "{content}");
    assert!(!content.contains("disk version"), "{content}");

    // The tool call is visible on the wire, pending then completed.
    let tool_updates: Vec<&Value> = updates
        .iter()
        .filter(|u| u["update"]["toolCallId"] == "call_1")
        .collect();
    assert_eq!(tool_updates[0]["update"]["sessionUpdate"], "tool_call");
    assert_eq!(tool_updates[0]["update"]["kind"], "read");
    assert_eq!(
        tool_updates.last().unwrap()["update"]["status"],
        "completed"
    );
}

#[tokio::test]
async fn results_of_several_calls_return_in_model_order_with_their_ids() {
    let server = ModelServer::start().await;
    server.push(openai::tool_calls(&[
        ("call_a", "read_file", r#"{"path":"b.txt"}"#),
        ("call_b", "grep", r#"{"pattern":"needle"}"#),
        ("call_c", "read_file", r#"{"path":"a.txt"}"#),
    ]));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "alpha\n").unwrap();
    std::fs::write(root.path().join("b.txt"), "bravo needle\n").unwrap();
    let (mut editor, session) = session_with(&server, root.path()).await;

    let (response, _) = editor.prompt(&session, "look").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.wait_for_requests(2).await;
    let second = &requests[1].body["messages"];
    let messages = second.as_array().unwrap();
    let assistant = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    let call_ids: Vec<&str> = assistant["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(call_ids, vec!["call_a", "call_b", "call_c"]);
    assert_eq!(
        assistant["tool_calls"][1]["function"]["arguments"],
        r#"{"pattern":"needle"}"#
    );
    let results = requests[1].tool_messages();
    let ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, vec!["call_a", "call_b", "call_c"]);
    assert!(results[0].1.contains("bravo"), "{results:?}");
    assert!(results[1].1.contains("b.txt:1:bravo needle"), "{results:?}");
    assert!(results[2].1.contains("alpha"), "{results:?}");
    // The tool messages follow the assistant message directly.
    let at = messages
        .iter()
        .position(|m| m["role"] == "assistant")
        .unwrap();
    assert!(messages[at + 1..at + 4].iter().all(|m| m["role"] == "tool"));
}

#[tokio::test]
async fn grep_and_list_files_skip_gitignored_paths() {
    let server = ModelServer::start().await;
    server.push(openai::tool_calls(&[
        ("call_list", "list_files", r#"{}"#),
        ("call_grep", "grep", r#"{"pattern":"needle"}"#),
    ]));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join(".gitignore"), "target/\n*.log\n").unwrap();
    std::fs::create_dir(root.path().join("target")).unwrap();
    std::fs::write(
        root.path().join("target/built.rs"),
        "needle in build output\n",
    )
    .unwrap();
    std::fs::write(root.path().join("debug.log"), "needle in a log\n").unwrap();
    std::fs::write(root.path().join("kept.rs"), "needle kept\n").unwrap();
    let (mut editor, session) = session_with(&server, root.path()).await;

    editor.prompt(&session, "search").await;
    let requests = server.wait_for_requests(2).await;
    let results = requests[1].tool_messages();
    let (list, grep) = (&results[0].1, &results[1].1);
    assert!(list.contains("kept.rs"), "{list}");
    assert!(
        !list.contains("target") && !list.contains("debug.log"),
        "{list}"
    );
    assert!(grep.contains("kept.rs:1:needle kept"), "{grep}");
    assert!(
        !grep.contains("build output") && !grep.contains("in a log"),
        "{grep}"
    );
}

#[tokio::test]
async fn paths_escaping_the_workspace_are_refused_as_tool_errors() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "top secret\n").unwrap();
    let root = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        root.path().join("link.txt"),
    )
    .unwrap();
    let absolute = outside.path().join("secret.txt");
    let server = ModelServer::start().await;
    server.push(openai::tool_calls(&[
        (
            "call_up",
            "read_file",
            r#"{"path":"../outside/secret.txt"}"#,
        ),
        (
            "call_abs",
            "read_file",
            &json!({"path": absolute}).to_string(),
        ),
        ("call_link", "read_file", r#"{"path":"link.txt"}"#),
    ]));
    server.push(openai::text(["ok"]));
    let (mut editor, session) = session_with(&server, root.path()).await;

    let (response, updates) = editor.prompt(&session, "read secrets").await;
    assert_eq!(
        response["result"]["stopReason"], "end_turn",
        "the turn goes on: {response}"
    );
    let requests = server.wait_for_requests(2).await;
    let results = requests[1].tool_messages();
    assert_eq!(results.len(), 3);
    for (id, content) in &results {
        assert!(content.starts_with("error:"), "{id}: {content}");
        assert!(content.contains("outside the workspace"), "{id}: {content}");
        assert!(!content.contains("top secret"), "{id}: {content}");
    }
    let failed = updates
        .iter()
        .filter(|u| {
            u["update"]["sessionUpdate"] == "tool_call_update" && u["update"]["status"] == "failed"
        })
        .count();
    assert_eq!(failed, 3);
}

#[tokio::test]
async fn a_server_error_ends_the_turn_with_error_and_the_session_goes_on() {
    let server = ModelServer::start().await;
    // The first attempt and the three retries of the overloaded bucket.
    for _ in 0..4 {
        server.push(openai::error(500, "the model fell over"));
    }
    server.push(openai::text(["recovered"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = session_with(&server, root.path()).await;

    let (response, updates) = editor.prompt(&session, "hi").await;
    let result = &response["result"];
    assert_eq!(result["stopReason"], "error", "{response}");
    let message = result["message"].as_str().unwrap();
    assert!(message.contains("500"), "{message}");
    assert!(message.contains("the model fell over"), "{message}");
    assert!(message.contains("4 attempts"), "{message}");
    assert_eq!(
        update_kinds(&updates).last().map(String::as_str),
        Some("turn_end")
    );
    assert_eq!(server.requests().len(), 4);

    let (response, updates) = editor.prompt(&session, "again").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(response["result"]["turnId"], "t2");
    assert_eq!(agent_text(&updates), "recovered");
}

#[tokio::test]
async fn a_refused_connection_names_the_address_and_what_to_set() {
    let root = tempfile::tempdir().unwrap();
    let base_url = unused_base_url();
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;
    let session = editor
        .new_session(json!({"model": {"base_url": base_url}}))
        .await;
    for _ in 0..2 {
        let (response, _) = editor.prompt(&session, "hi").await;
        assert_eq!(response["result"]["stopReason"], "error", "{response}");
        let message = response["result"]["message"].as_str().unwrap();
        assert!(message.contains(&base_url), "{message}");
        assert!(message.contains("base_url"), "{message}");
    }
}

#[tokio::test]
async fn with_nothing_configured_the_first_prompt_says_what_to_set() {
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;
    let session = editor.new_session(json!({})).await;
    let (response, _) = editor.prompt(&session, "hi").await;
    assert_eq!(response["result"]["stopReason"], "error", "{response}");
    let message = response["result"]["message"].as_str().unwrap();
    assert!(message.contains("http://127.0.0.1:11434/v1"), "{message}");
    assert!(message.contains("TANDEM_BASE_URL"), "{message}");
}

#[tokio::test]
async fn max_iterations_stops_a_model_that_never_stops_calling_tools() {
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
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;
    let mut config = config_for(&server);
    config["limits"]["max_iterations"] = json!(2);
    let session = editor.new_session(config).await;
    let (response, _) = editor.prompt(&session, "loop").await;
    assert_eq!(
        response["result"]["stopReason"], "max_iterations",
        "{response}"
    );
    assert_eq!(
        response["result"]["message"],
        "stopped after 2 model calls (max_iterations = 2)"
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn reasoning_deltas_become_thought_chunks() {
    let server = ModelServer::start().await;
    server.push(openai::reasoning_then_text(
        &["let me ", "think"],
        &["answer"],
    ));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = session_with(&server, root.path()).await;
    let (_, updates) = editor.prompt(&session, "why").await;
    let thoughts: String = updates
        .iter()
        .filter(|u| u["update"]["sessionUpdate"] == "agent_thought_chunk")
        .map(|u| u["update"]["content"]["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(thoughts, "let me think");
    assert_eq!(agent_text(&updates), "answer");
}

#[tokio::test]
async fn two_prompts_sent_back_to_back_get_their_own_receipts_in_order() {
    let server = ModelServer::start().await;
    server.push(openai::text(["first"]));
    server.push(openai::text(["second"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = session_with(&server, root.path()).await;
    let one = editor
        .start_request(
            "tandem/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "one"}]}),
        )
        .await;
    let two = editor
        .start_request(
            "tandem/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "two"}]}),
        )
        .await;
    let (first, at_first) = editor.response(one).await;
    let (second, at_second) = editor.response(two).await;
    assert!(at_first < at_second);
    assert_eq!(first["result"]["turnId"], "t1");
    assert_eq!(second["result"]["turnId"], "t2");
    let requests = server.requests();
    assert_eq!(
        requests[0].body["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["content"],
        "one"
    );
    let last = requests[1].body["messages"].as_array().unwrap().clone();
    assert_eq!(last.last().unwrap()["content"], "two");
    // The second turn's context carries the first turn's answer.
    assert!(last
        .iter()
        .any(|m| m["role"] == "assistant" && m["content"] == "first"));
    // Every update of turn t1 precedes t1's response.
    let t1_after = editor.received[at_first..]
        .iter()
        .any(|m| m["method"] == "tandem/update" && m["params"]["turnId"] == "t1");
    assert!(!t1_after);
}

#[tokio::test]
async fn a_client_with_work_done_progress_sees_the_turn_begin_report_and_end() {
    let server = ModelServer::start().await;
    server.push(openai::tool_calls(&[(
        "call_1",
        "read_file",
        r#"{"path":"a.txt"}"#,
    )]));
    server.push(openai::text(["done"]));
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "alpha\n").unwrap();
    let mut editor = Editor::spawn().await;
    editor.on_request(|method, _| {
        (method == "window/workDoneProgress/create").then_some(Value::Null)
    });
    editor
        .initialize_with(
            root.path(),
            json!({"capabilities": {"window": {"workDoneProgress": true}}}),
        )
        .await;
    let session = editor.new_session(config_for(&server)).await;
    let (response, _) = editor.prompt(&session, "read").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    // The end may follow the receipt: progress waits for the client's
    // answer to create.
    let is_end = |m: &Value| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end";
    let end = match editor.received.iter().find(|m| is_end(m)).cloned() {
        Some(end) => end,
        None => {
            editor
                .wait_notification("$/progress", |p| p["value"]["kind"] == "end")
                .await
        }
    };
    let token = end["params"]["token"].clone();
    assert_eq!(end["params"]["value"]["message"], "end_turn");
    let create = editor
        .received
        .iter()
        .find(|m| m["method"] == "window/workDoneProgress/create")
        .expect("a progress token was created");
    assert_eq!(create["params"]["token"], token);
    let values: Vec<&Value> = editor
        .received
        .iter()
        .filter(|m| m["method"] == "$/progress" && m["params"]["token"] == token)
        .map(|m| &m["params"]["value"])
        .collect();
    assert_eq!(values.first().unwrap()["kind"], "begin");
    assert_eq!(values.first().unwrap()["cancellable"], true);
    assert!(
        values
            .iter()
            .any(|v| v["kind"] == "report" && v["message"] == "running: Read a.txt"),
        "{values:?}"
    );
    assert_eq!(values.last().unwrap()["kind"], "end");
}
