//! The ordering guarantees of protocol.md hold through `tandem lsp
//! --attach` as over stdio: the editor's notifications are handled, in
//! order, before a request that follows them, and a prompt's answer comes
//! after every update of its turn.

use std::sync::Arc;

use serde_json::{json, Value};

use super::{attach_options, StopOnDrop};
use crate::support::client::{file_uri, Editor};
use crate::support::model_server::openai::{text, tool_calls};
use crate::support::model_server::ModelServer;

#[tokio::test]
async fn notifications_written_with_a_prompt_are_handled_in_order_before_it() {
    let model = ModelServer::start().await;
    model.push(tool_calls(&[(
        "call_1",
        "read_file",
        r#"{"path":"a.txt"}"#,
    )]));
    model.push(text(["read it"]));
    let home = Arc::new(tempfile::tempdir().unwrap());
    let _stop = StopOnDrop(home.path().to_path_buf());
    let root = tempfile::tempdir().unwrap();
    let path = root.path().join("a.txt");
    std::fs::write(&path, "on disk\n").unwrap();
    let mut editor = Editor::spawn_with(attach_options(&home)).await;
    editor.initialize(root.path()).await;
    let session = editor.new_session(model.session_config()).await;

    // One write: didOpen, 30 incremental didChanges (each inserting a line
    // at the top, so applying them out of order gives other text), then
    // the prompt, which attaches the file without its text.
    let uri = file_uri(&path);
    let mut messages = vec![json!({"jsonrpc": "2.0", "method": "textDocument/didOpen",
        "params": {"textDocument": {"uri": uri, "languageId": "plaintext", "version": 1,
            "text": "end\n"}}})];
    for i in 0..30 {
        messages.push(json!({"jsonrpc": "2.0", "method": "textDocument/didChange",
            "params": {"textDocument": {"uri": uri, "version": i + 2},
                "contentChanges": [{"range": {"start": {"line": 0, "character": 0},
                    "end": {"line": 0, "character": 0}}, "text": format!("line {i}\n")}]}}));
    }
    messages.push(
        json!({"jsonrpc": "2.0", "id": 900, "method": "tandem/prompt",
        "params": {"sessionId": session, "prompt": [
            {"type": "text", "text": "read a.txt"},
            {"type": "resource_link", "uri": uri, "name": "a.txt"}]}}),
    );
    editor.send_together(&messages).await;
    let (response, at) = editor.response(900).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");

    let expected: String = (0..30)
        .rev()
        .map(|i| format!("line {i}\n"))
        .chain(["end\n".to_string()])
        .collect();
    let requests = model.wait_for_requests(2).await;
    let first = requests[0].body.to_string();
    let escaped = serde_json::to_string(&expected).unwrap();
    assert!(
        first.contains(&escaped[1..escaped.len() - 1]),
        "the attached file is not the edited buffer: {first}"
    );
    let read = &requests[1].tool_messages()[0].1;
    for (i, line) in expected.lines().enumerate() {
        assert!(read.contains(line), "line {i} `{line}` missing: {read}");
    }
    let positions: Vec<usize> = expected
        .lines()
        .map(|line| read.find(&format!("{line}\n")).unwrap_or(usize::MAX))
        .collect();
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "lines out of order: {read}"
    );

    // The answer follows every update of its turn, turn_end included.
    let updates_after: Vec<&Value> = editor.received[at..]
        .iter()
        .filter(|m| m["method"] == "tandem/update")
        .collect();
    assert!(updates_after.is_empty(), "{updates_after:?}");
    let end = editor
        .updates_of(&session)
        .into_iter()
        .rfind(|u| u["update"]["sessionUpdate"] == "turn_end")
        .expect("turn_end before the answer");
    assert_eq!(end["update"]["stopReason"], "end_turn");
}
