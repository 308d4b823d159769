//! Whose turn it is: a turn reads the documents of the window whose prompt
//! opened it, even while another window runs a turn on the same file, and
//! the file on disk once that window is gone; its edits go to that window
//! even after another window prompted the session.

use std::time::Duration;

use serde_json::{json, Value};

use super::control::Control;
use super::{Serve, Ws};
use crate::support::client::file_uri;
use crate::support::model_server::openai::{delta, ending, text};
use crate::support::model_server::{ModelServer, Reply, SseStep};

/// A `read_file` call of `path`, streamed after `delay` (so two turns
/// started together are both waiting on their model at once).
fn read_file_after(delay: Duration, call_id: &str, path: &str) -> Reply {
    let mut steps = vec![
        delta(json!({"role": "assistant", "content": ""})),
        SseStep::Delay(delay),
    ];
    let arguments = json!({ "path": path }).to_string();
    steps.push(delta(
        json!({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
        "function": {"name": "read_file", "arguments": arguments}}]}),
    ));
    steps.extend(ending("tool_calls"));
    Reply::Sse(steps)
}

/// A window on `root` with `a.txt` open (unsaved) as `text`.
async fn window(serve: &Serve, root: &std::path::Path, text: &str, caps: Value) -> Ws {
    let mut ws = serve.client().await;
    ws.initialize(root, caps).await;
    // A notification: a connection's messages apply in wire order, so the
    // prompt that follows finds the document open.
    ws.send(json!({"jsonrpc": "2.0", "method": "textDocument/didOpen",
        "params": {"textDocument": {"uri": file_uri(&root.join("a.txt")),
            "languageId": "plaintext", "version": 1, "text": text}}}))
        .await;
    ws
}

/// The result `read_file` gave in the `n`th request (0-based) of `model`.
async fn read_result(model: &ModelServer, n: usize) -> String {
    let requests = model.wait_for_requests(n + 1).await;
    let results = requests[n].tool_messages();
    results
        .last()
        .unwrap_or_else(|| panic!("request {n} has no tool result: {}", requests[n].body))
        .1
        .clone()
}

#[tokio::test]
async fn concurrent_turns_read_their_own_windows_buffers_and_disk_once_the_window_is_gone() {
    let serve = Serve::start().await;
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("a.txt"), "on disk\n").unwrap();
    let (model_a, model_b) = (ModelServer::start().await, ModelServer::start().await);
    let delay = Duration::from_millis(300);
    model_a.push(read_file_after(delay, "call_a", "a.txt"));
    model_a.push(text(["read a"]));
    model_b.push(read_file_after(delay, "call_b", "a.txt"));
    model_b.push(text(["read b"]));

    let mut a = window(&serve, workspace.path(), "unsaved in window A\n", json!({})).await;
    let mut b = window(&serve, workspace.path(), "unsaved in window B\n", json!({})).await;
    // Each window follows the session it made.
    let session_a = a.new_session(model_a.session_config()).await;
    let session_b = b.new_session(model_b.session_config()).await;

    // Both turns run at once; B prompted last.
    let prompt_a = a.start_prompt(&session_a, "read a.txt").await;
    let prompt_b = b.start_prompt(&session_b, "read a.txt").await;
    assert_eq!(
        a.response(prompt_a).await["result"]["stopReason"],
        "end_turn"
    );
    assert_eq!(
        b.response(prompt_b).await["result"]["stopReason"],
        "end_turn"
    );
    let (read_a, read_b) = (
        read_result(&model_a, 1).await,
        read_result(&model_b, 1).await,
    );
    assert!(read_a.contains("unsaved in window A"), "{read_a}");
    assert!(read_b.contains("unsaved in window B"), "{read_b}");

    // Window A's next turn waits for permission to run a command; A goes
    // away; another window answers, and the turn's read finds the disk.
    model_a.push(crate::support::model_server::openai::tool_calls(&[(
        "call_x",
        "exec_command",
        r#"{"cmd":"true"}"#,
    )]));
    model_a.push(read_file_after(Duration::ZERO, "call_a2", "a.txt"));
    model_a.push(text(["read disk"]));
    let caps = json!({"experimental": {"tandem": {"requestPermission": true}}});
    let mut c = serve.client().await;
    c.initialize(workspace.path(), caps).await;
    c.attach(&session_a).await;
    a.start_prompt(&session_a, "run true, then read a.txt")
        .await;
    let asked = c
        .wait_for(|m| m["method"] == "tandem/requestPermission")
        .await;
    let mut control = Control::connect(&serve).await;
    let before = control.clients().await;
    a.close().await;
    let deadline = tokio::time::Instant::now() + crate::support::client::WAIT;
    while control.clients().await != before - 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "window A never left"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    c.answer(
        &asked["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
    )
    .await;
    // The answer counted: the command ran, and the turn went on to read.
    let ran = read_result(&model_a, 3).await;
    assert!(ran.contains("exit code 0"), "{ran}");
    let read_disk = read_result(&model_a, 4).await;
    assert!(read_disk.contains("on disk"), "{read_disk}");
    assert!(!read_disk.contains("window"), "{read_disk}");
    b.close().await;
}

/// What an editor that reviews workspace edits declares (and, with
/// `ask`, answers permission requests).
fn edit_caps(ask: bool) -> Value {
    json!({"workspace": {"applyEdit": true, "workspaceEdit": {"documentChanges": true,
            "changeAnnotationSupport": {"groupsOnLabel": true}}},
           "experimental": {"tandem": {"requestPermission": ask}}})
}

#[tokio::test]
async fn a_turns_edit_goes_to_the_window_that_opened_it_even_after_another_window_prompted() {
    let serve = Serve::start().await;
    let workspace = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(workspace.path()).unwrap();
    std::fs::write(root.join("a.txt"), "alpha\n").unwrap();
    let model = ModelServer::start().await;
    model.push(crate::support::model_server::openai::tool_calls(&[(
        "call_x",
        "exec_command",
        r#"{"cmd":"true"}"#,
    )]));
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n*** End Patch";
    model.push(crate::support::model_server::openai::tool_calls(&[(
        "call_patch",
        "apply_patch",
        &json!({ "input": patch }).to_string(),
    )]));
    model.push(text(["first done"]));
    model.push(text(["second done"]));

    let mut a = serve.client().await;
    a.initialize(&root, edit_caps(true)).await;
    let mut config = model.session_config();
    config["approval"] = json!({"mode": "review"});
    let session = a.new_session(config).await;
    let mut b = serve.client().await;
    b.initialize(&root, edit_caps(false)).await;
    b.attach(&session).await;

    // A's turn waits for A's permission; meanwhile B prompts the session.
    let first = a.start_prompt(&session, "run true, then edit a.txt").await;
    let asked = a
        .wait_for(|m| m["method"] == "tandem/requestPermission")
        .await;
    let second = b.start_prompt(&session, "and then this").await;
    b.wait_update(&session, |u| {
        u["sessionUpdate"] == "input_status"
            && u["status"] == "pending"
            && u["messageIds"] == json!(["m2"])
    })
    .await;
    a.answer(
        &asked["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
    )
    .await;

    // The edit of A's turn goes to A, never to B.
    let edit = a.wait_for(|m| m["method"] == "workspace/applyEdit").await;
    a.answer(
        &edit["id"],
        json!({"applied": false, "failureReason": "not now"}),
    )
    .await;
    assert_eq!(a.response(first).await["result"]["stopReason"], "end_turn");
    assert_eq!(b.response(second).await["result"]["stopReason"], "end_turn");
    assert!(
        !b.received
            .iter()
            .any(|m| m["method"] == "workspace/applyEdit"),
        "window B got A's edit"
    );
    let results = model.wait_for_requests(3).await[2].tool_messages();
    assert!(results.last().unwrap().1.contains("not now"), "{results:?}");
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "alpha\n"
    );
}
