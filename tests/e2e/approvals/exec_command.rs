//! `exec_command` in auto mode: output, exit code, the output cap, timeouts,
//! streamed output, the workspace boundary, the scrubbed environment, and
//! cancelling a running command.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{
    auto_session, config_for, exec_call, logged, process_exists, session_in, start_prompt_params,
    streamed_pid, tool_result, wait_until_gone, Caps,
};
use crate::support::client::{Editor, EditorOptions};
use crate::support::model_server::{openai, ModelServer};

#[tokio::test]
async fn exec_command_output_and_exit_code_are_returned_to_the_model() {
    let server = ModelServer::start().await;
    server.push(exec_call(
        "call_1",
        json!({"cmd": "echo to-stdout; echo to-stderr >&2"}),
    ));
    server.push(openai::text(["done"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = auto_session(&server, root.path()).await;

    let (response, updates) = editor.prompt(&session, "run it").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(result.starts_with("exit code 0\n"), "{result}");
    assert!(
        result.contains("to-stdout") && result.contains("to-stderr"),
        "{result}"
    );
    // The wire shows an execute call that completed with the same text.
    let call = updates
        .iter()
        .find(|u| u["update"]["sessionUpdate"] == "tool_call")
        .expect("tool_call update");
    assert_eq!(call["update"]["kind"], "execute");
    assert_eq!(
        call["update"]["rawInput"]["cmd"],
        "echo to-stdout; echo to-stderr >&2"
    );
    let last = updates
        .iter()
        .rfind(|u| u["update"]["toolCallId"] == "call_1")
        .unwrap();
    assert_eq!(last["update"]["status"], "completed");
    assert_eq!(last["update"]["content"][0]["content"]["text"], result);
}

#[tokio::test]
async fn exec_command_nonzero_exit_is_reported_with_its_code() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "echo failing; exit 3"})));
    server.push(openai::text(["noted"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = auto_session(&server, root.path()).await;

    let (response, _) = editor.prompt(&session, "fail").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert_eq!(result, "exit code 3\nfailing\n");
}

#[tokio::test]
async fn exec_command_output_over_the_cap_keeps_head_and_tail_with_an_elision_note() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "seq 1 100000"})));
    server.push(openai::text(["long"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = auto_session(&server, root.path()).await;

    let (response, _) = editor.prompt(&session, "count").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(
        result.starts_with("exit code 0\n1\n2\n3\n"),
        "{}",
        &result[..40]
    );
    assert!(
        result.ends_with("\n99999\n100000\n"),
        "{}",
        &result[result.len() - 40..]
    );
    assert!(
        result.contains(" bytes elided ...]"),
        "no elision note in a {}-byte result",
        result.len()
    );
    assert!(!result.contains("\n50000\n"), "the middle is elided");
    assert!(result.len() < 40 * 1024, "{} bytes", result.len());
}

#[tokio::test]
async fn exec_command_timeout_kills_the_command_and_says_so() {
    let server = ModelServer::start().await;
    server.push(exec_call(
        "call_1",
        json!({"cmd": "echo $$; exec sleep 30", "timeout_ms": 500}),
    ));
    server.push(openai::text(["too slow"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = auto_session(&server, root.path()).await;

    let started = Instant::now();
    let id = editor
        .start_request("tandem/prompt", start_prompt_params(&session, "wait"))
        .await;
    let pid = streamed_pid(&mut editor, "call_1").await;
    let (response, _) = editor.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the 30 s sleep was not cut short: {:?}",
        started.elapsed()
    );
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(
        result.starts_with("killed after timeout of 500ms"),
        "{result}"
    );
    wait_until_gone(pid).await;
}

#[tokio::test]
async fn exec_command_output_streams_as_tool_call_updates_before_the_call_completes() {
    let server = ModelServer::start().await;
    // The command prints, then waits for the test to create `go`: the
    // delta can only arrive before completion if it is streamed.
    server.push(exec_call(
        "call_1",
        json!({"cmd": "echo started; while [ ! -e go ]; do sleep 0.01; done; echo finished",
               "timeout_ms": 20000}),
    ));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = auto_session(&server, root.path()).await;

    let id = editor
        .start_request("tandem/prompt", start_prompt_params(&session, "stream"))
        .await;
    let first = editor
        .wait_notification("tandem/update", |p| {
            p["update"]["toolCallId"] == "call_1" && p["update"]["outputDelta"].is_string()
        })
        .await;
    assert_eq!(
        first["params"]["update"]["sessionUpdate"],
        "tool_call_update"
    );
    assert_eq!(first["params"]["update"]["outputDelta"], "started\n");
    assert!(
        !editor
            .received
            .iter()
            .any(|m| m["params"]["update"]["toolCallId"] == "call_1"
                && m["params"]["update"]["status"] == "completed"),
        "the call completed before its output was streamed"
    );
    std::fs::write(root.path().join("go"), "").unwrap();
    let (response, _) = editor.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let streamed: String = editor
        .received
        .iter()
        .filter(|m| m["params"]["update"]["toolCallId"] == "call_1")
        .filter_map(|m| m["params"]["update"]["outputDelta"].as_str())
        .collect();
    assert_eq!(streamed, "started\nfinished\n");
    let requests = server.wait_for_requests(2).await;
    assert_eq!(
        tool_result(&requests[1], "call_1"),
        "exit code 0\nstarted\nfinished\n"
    );
}

#[tokio::test]
async fn exec_command_streams_at_most_a_bounded_amount_of_output() {
    let server = ModelServer::start().await;
    // 2.5 MB of output: more than the editor and the log should take.
    server.push(exec_call(
        "call_1",
        json!({"cmd": "head -c 2500000 /dev/zero | tr '\\0' y; echo; echo the-end",
               "timeout_ms": 20000}),
    ));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = auto_session(&server, root.path()).await;

    let (response, updates) = editor.prompt(&session, "flood").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let streamed: String = updates
        .iter()
        .filter_map(|u| u["update"]["outputDelta"].as_str())
        .collect();
    assert!(
        streamed.len() <= (1 << 20) + 200,
        "{} bytes streamed",
        streamed.len()
    );
    assert!(
        streamed.ends_with("keeps the head and tail of the output ...]\n"),
        "{} bytes streamed, ending {:?}",
        streamed.len(),
        &streamed[streamed.len().saturating_sub(200)..]
    );
    let log = std::fs::metadata(editor.sessions_dir().join(format!("{session}.jsonl")))
        .unwrap()
        .len();
    assert!(log < 2 << 20, "the session log grew to {log} bytes");
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(result.ends_with("\nthe-end\n"), "the tail is kept");
    assert!(result.contains(" bytes elided ...]"));
}

#[tokio::test]
async fn exec_command_workdir_outside_the_workspace_is_refused_as_a_tool_error() {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("workspace");
    std::fs::create_dir(&root).unwrap();
    let server = ModelServer::start().await;
    server.push(exec_call(
        "call_1",
        json!({"cmd": "touch escaped", "workdir": "../"}),
    ));
    server.push(openai::text(["refused"]));
    let (mut editor, session) = auto_session(&server, &root).await;

    let (response, _) = editor.prompt(&session, "escape").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(result.starts_with("error:"), "{result}");
    assert!(result.contains("outside the workspace"), "{result}");
    assert!(!outer.path().join("escaped").exists(), "the command ran");
}

#[tokio::test]
async fn exec_command_children_do_not_see_secret_environment_variables() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "env"})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let options = EditorOptions {
        env: vec![
            ("FOO_API_KEY".to_string(), "sk-very-secret".to_string()),
            ("FOO_VISIBLE".to_string(), "plain-value".to_string()),
        ],
        ..EditorOptions::default()
    };
    let (mut editor, session) =
        session_in(&server, root.path(), "auto", Caps::default(), options).await;

    editor.prompt(&session, "env").await;
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(result.contains("FOO_VISIBLE=plain-value"), "{result}");
    assert!(!result.contains("FOO_API_KEY"), "{result}");
    assert!(!result.contains("sk-very-secret"), "{result}");
}

#[tokio::test]
async fn a_configured_allow_list_lets_a_secret_looking_variable_through() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "env"})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn_with(EditorOptions {
        env: vec![
            ("FOO_API_KEY".to_string(), "sk-allowed".to_string()),
            ("BAR_TOKEN".to_string(), "still-hidden".to_string()),
        ],
        ..EditorOptions::default()
    })
    .await;
    editor.initialize(root.path()).await;
    let mut config = config_for(&server, "auto");
    config["tools"] = json!({"exec_env_allow": ["FOO_API_KEY"]});
    let session = editor.new_session(config).await;
    editor.prompt(&session, "env").await;
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(result.contains("FOO_API_KEY=sk-allowed"), "{result}");
    assert!(!result.contains("still-hidden"), "{result}");
}

#[tokio::test]
async fn cancel_during_a_running_command_kills_it_and_ends_the_turn_cancelled() {
    let server = ModelServer::start().await;
    server.push(exec_call(
        "call_1",
        json!({"cmd": "echo $$; exec sleep 30", "timeout_ms": 60000}),
    ));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = auto_session(&server, root.path()).await;

    let id = editor
        .start_request("tandem/prompt", start_prompt_params(&session, "sleep"))
        .await;
    let pid = streamed_pid(&mut editor, "call_1").await;
    assert!(process_exists(pid), "the command is running");
    let cancelled_at = Instant::now();
    editor
        .notify("tandem/cancel", json!({"sessionId": session}))
        .await;
    let (response, _) = editor.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(5),
        "cancel took {:?}",
        cancelled_at.elapsed()
    );
    wait_until_gone(pid).await;

    let results = logged(&editor, &session, "tool_result");
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["call_id"], "call_1");
    assert_eq!(results[0]["status"], "aborted", "{results:?}");
    assert_eq!(server.requests().len(), 1, "no model call after the cancel");
}
