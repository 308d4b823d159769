//! The LSP frontend on the wire: handshake, lifecycle and bad input, through
//! the real binary.

use serde_json::{json, Value};

use crate::support::client::{frame, Editor, EditorOptions};

fn error_code(response: &Value) -> i64 {
    response["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected an error response, got {response}"))
}

#[tokio::test]
async fn initialize_announces_tandem_and_incremental_sync() {
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn().await;
    let response = editor.initialize(root.path()).await;
    let result = &response["result"];
    assert_eq!(result["serverInfo"]["name"], "tandem");
    assert_eq!(result["serverInfo"]["version"], env!("CARGO_PKG_VERSION"));
    let caps = &result["capabilities"];
    // 2 = incremental.
    assert_eq!(caps["textDocumentSync"]["change"], 2);
    assert_eq!(caps["textDocumentSync"]["openClose"], true);
    assert!(caps["textDocumentSync"]["save"].is_object());
    assert_eq!(caps["workspace"]["workspaceFolders"]["supported"], true);
    assert_eq!(caps["experimental"]["tandem"]["protocolVersion"], 1);
    assert_eq!(caps["positionEncoding"], "utf-16");
    let status = editor.shutdown_and_exit().await;
    assert!(
        status.success(),
        "exit after shutdown should be clean: {status:?}"
    );
}

#[tokio::test]
async fn lsp_accepts_the_stdio_flag_that_language_clients_add() {
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn_with(EditorOptions {
        args: vec!["lsp".to_string(), "--stdio".to_string()],
        ..EditorOptions::default()
    })
    .await;
    let response = editor.initialize(root.path()).await;
    assert_eq!(
        response["result"]["serverInfo"]["name"], "tandem",
        "{response}"
    );
    assert!(editor.shutdown_and_exit().await.success());
}

#[tokio::test]
async fn position_encoding_follows_the_clients_preference() {
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn().await;
    let response = editor
        .initialize_with(
            root.path(),
            json!({"capabilities": {"general": {"positionEncodings": ["utf-8", "utf-16"]}}}),
        )
        .await;
    assert_eq!(
        response["result"]["capabilities"]["positionEncoding"],
        "utf-8"
    );
}

#[tokio::test]
async fn eof_on_stdin_ends_the_process_cleanly() {
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;
    let status = editor.close_stdin().await;
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn a_request_sent_just_before_stdin_closes_is_still_answered() {
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;
    let id = editor.start_request("tandem/newSession", json!({})).await;
    let (status, rest) = editor.close_stdin_collect().await;
    assert!(status.success(), "{status:?}");
    assert!(
        rest.iter()
            .any(|m| m["id"] == id && m["result"]["sessionId"].is_string()),
        "{rest:?}"
    );
}

#[tokio::test]
async fn exit_without_shutdown_exits_with_status_one() {
    let mut editor = Editor::spawn().await;
    editor.notify("exit", Value::Null).await;
    let status = editor.close_stdin().await;
    assert_eq!(status.code(), Some(1));
}

#[tokio::test]
async fn bad_frames_get_errors_and_the_daemon_keeps_serving() {
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;

    // A Content-Length that is not a number.
    editor
        .send_raw(b"Content-Length: twelve\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"shutdown\"}")
        .await;
    let message = editor.next_message().await;
    assert_eq!(error_code(&message), -32700, "{message}");
    assert!(
        message["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Content-Length"),
        "{message}"
    );

    // A body that is not JSON.
    editor.send_raw(&frame(b"this is not json")).await;
    let message = editor.next_message().await;
    assert_eq!(error_code(&message), -32700, "{message}");
    assert_eq!(message["id"], Value::Null);

    // JSON that is not JSON-RPC.
    editor
        .send_raw(&frame(br#"{"id": 5, "hello": "world"}"#))
        .await;
    let message = editor.next_message().await;
    assert_eq!(error_code(&message), -32600, "{message}");

    // The daemon still answers a real request.
    let response = editor.request("tandem/newSession", json!({})).await;
    assert!(response["result"]["sessionId"].is_string(), "{response}");
}

#[tokio::test]
async fn unknown_methods_bad_params_and_unknown_sessions_get_specific_errors() {
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;

    let response = editor.request("tandem/doesNotExist", json!({})).await;
    assert_eq!(error_code(&response), -32601, "{response}");

    let response = editor
        .request(
            "tandem/prompt",
            json!({"prompt": [{"type": "text", "text": "hi"}]}),
        )
        .await;
    assert_eq!(error_code(&response), -32602, "{response}");
    assert!(
        response["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sessionId"),
        "the error names the missing field: {response}"
    );

    let response = editor
        .request(
            "tandem/prompt",
            json!({"sessionId": "nope", "prompt": [{"type": "text", "text": "hi"}]}),
        )
        .await;
    assert_eq!(error_code(&response), -32001, "{response}");
    assert_eq!(response["error"]["data"]["sessionId"], "nope");

    let response = editor
        .request(
            "tandem/newSession",
            json!({"config": {"model": {"modle": "x"}}}),
        )
        .await;
    assert_eq!(error_code(&response), -32003, "{response}");
    assert!(
        response["error"]["message"]
            .as_str()
            .unwrap()
            .contains("modle"),
        "{response}"
    );

    // Still serving.
    let response = editor.request("tandem/newSession", json!({})).await;
    assert!(response["result"]["sessionId"].is_string(), "{response}");
}

#[tokio::test]
async fn requests_before_initialize_are_refused_not_fatal() {
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn().await;
    let response = editor.request("tandem/newSession", json!({})).await;
    assert_eq!(error_code(&response), -32002, "{response}");
    editor.initialize(root.path()).await;
    let response = editor.request("tandem/newSession", json!({})).await;
    assert!(response["result"]["sessionId"].is_string(), "{response}");
}

#[tokio::test]
async fn stdout_carries_only_frames_even_with_debug_logging() {
    // The client's reader panics on anything that is not a frame; a whole
    // session with debug logs on must produce frames only.
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;
    editor.request("tandem/newSession", json!({})).await;
    let status = editor.shutdown_and_exit().await;
    assert!(status.success());
}

#[tokio::test]
async fn hostile_notifications_and_params_never_take_the_daemon_down() {
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;
    let ghost = format!("file://{}/ghost.rs", root.path().display());
    // Changes to a document that was never opened, out-of-range edits,
    // non-file URIs, bad params on notifications, junk folders.
    editor
        .notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": ghost, "version": 2},
                   "contentChanges": [{"range": {"start": {"line": 9, "character": 0}, "end": {"line": 9, "character": 1}}, "text": "x"}]}),
        )
        .await;
    editor
        .notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": "untitled:Untitled-1", "languageId": "rust", "version": 1, "text": "x"}}),
        )
        .await;
    editor
        .notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": ghost, "languageId": "rust", "version": 1, "text": "one line"}}),
        )
        .await;
    editor
        .notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": ghost, "version": 3},
                   "contentChanges": [{"range": {"start": {"line": 500, "character": 0}, "end": {"line": 501, "character": 0}}, "text": "x"}]}),
        )
        .await;
    editor
        .notify("textDocument/didClose", json!({"nonsense": true}))
        .await;
    editor
        .notify("tandem/cancel", json!({"sessionId": 42}))
        .await;
    editor
        .notify("tandem/cancel", json!({"sessionId": "no-such-session"}))
        .await;
    editor
        .notify(
            "workspace/didChangeWorkspaceFolders",
            json!({"event": {"added": [{"uri": "http://example.invalid/x", "name": "x"}], "removed": []}}),
        )
        .await;
    editor
        .notify("$/setTrace", json!({"value": "verbose"}))
        .await;
    editor.notify("some/unknownNotification", json!({})).await;

    let response = editor
        .request(
            "tandem/steer",
            json!({"sessionId": "nope", "prompt": [{"type": "text", "text": "x"}]}),
        )
        .await;
    assert_eq!(error_code(&response), -32001, "{response}");
    let response = editor
        .request("tandem/prompt", json!({"sessionId": "x", "prompt": []}))
        .await;
    assert_eq!(error_code(&response), -32602, "{response}");
    let response = editor
        .request(
            "tandem/newSession",
            json!({"workspaceFolder": "relative/path"}),
        )
        .await;
    assert_eq!(error_code(&response), -32602, "{response}");
    let response = editor
        .request(
            "tandem/prompt",
            json!({"sessionId": "x", "prompt": [{"type": "image", "data": "..."}]}),
        )
        .await;
    assert_eq!(error_code(&response), -32602, "{response}");

    // Still serving, and the open document kept its text despite the bad
    // change.
    let response = editor.request("tandem/newSession", json!({})).await;
    assert!(response["result"]["sessionId"].is_string(), "{response}");
    let status = editor.shutdown_and_exit().await;
    assert!(status.success());
}

#[tokio::test]
async fn a_notification_sent_with_an_id_is_answered_not_dropped() {
    let mut editor = Editor::spawn().await;
    let root = tempfile::tempdir().unwrap();
    editor.initialize(root.path()).await;
    for (method, params, code) in [
        ("$/setTrace", json!({"value": "off"}), -32600),
        ("$/cancelRequest", json!({"id": 99}), -32600),
        (
            "window/workDoneProgress/cancel",
            json!({"token": "t"}),
            -32600,
        ),
        ("$/somethingElse", json!({}), -32601),
    ] {
        let reply = editor.request(method, params).await;
        assert_eq!(reply["error"]["code"], code, "{method}: {reply}");
    }
    let listed = editor.request("tandem/listSessions", json!({})).await;
    assert!(listed["result"]["sessions"].is_array(), "{listed}");
}
