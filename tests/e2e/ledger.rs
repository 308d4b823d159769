//! The file ledger through the real binary: files read and patched are
//! listed verbatim in the compaction summary the model receives, by
//! `tandem replay --files`, and still after a restart and `loadSession`;
//! when summarizing fails, in the note that stands for the dropped messages.

use std::path::Path;

use serde_json::json;

use crate::support::client::{tandem_bin, Editor, EditorOptions};
use crate::support::model_server::{openai, ModelServer, RecordedRequest};

const BIG_LINE: &str = "the big file line\n";

async fn editor_in(home: Option<std::sync::Arc<tempfile::TempDir>>, root: &Path) -> Editor {
    let mut editor = Editor::spawn_with(EditorOptions {
        home,
        ..EditorOptions::default()
    })
    .await;
    editor.initialize(root).await;
    editor
}

fn request_text(request: &RecordedRequest) -> String {
    serde_json::to_string(&request.body["messages"]).unwrap()
}

/// The ledger lines this session must produce, as JSON-escaped in a request.
fn assert_ledger_in(text: &str) {
    let big = format!(
        "- big.txt — read at step 1 of t1, {} bytes",
        BIG_LINE.len() * 180
    );
    for needle in [
        "Files in this session:",
        big.as_str(),
        "- notes.md — edited at step 2 of t1, 6 bytes",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in {text}");
    }
}

/// A workspace with a big file and a scripted model that reads it (step 1)
/// and then adds `notes.md` (step 2): the read fills the history past the
/// threshold of [`compacting_config`], so step 3 compacts.
async fn read_then_patch() -> (ModelServer, tempfile::TempDir) {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("big.txt"), BIG_LINE.repeat(180)).unwrap();
    let patch = json!({"input": "*** Begin Patch\n*** Add File: notes.md\n+notes\n*** End Patch"});
    server.push(openai::tool_calls(&[(
        "call_read",
        "read_file",
        r#"{"path":"big.txt"}"#,
    )]));
    server.push(openai::tool_calls(&[(
        "call_patch",
        "apply_patch",
        &patch.to_string(),
    )]));
    (server, root)
}

/// Auto mode, a 4,000-token window and a low compaction threshold.
fn compacting_config(server: &ModelServer) -> serde_json::Value {
    let mut config =
        server.session_config_with(json!({"compact_threshold": 0.2, "compact_keep_ratio": 0.02}));
    config["approval"] = json!({"mode": "auto"});
    config["model"]["context_window"] = json!(4000);
    config
}

/// A new daemon on the same home loads the session and answers a prompt
/// in it, from the log alone.
async fn prompt_after_reload(home: std::sync::Arc<tempfile::TempDir>, root: &Path, session: &str) {
    let mut editor = editor_in(Some(home), root).await;
    let loaded = editor
        .request("tandem/loadSession", json!({"sessionId": session}))
        .await;
    assert!(loaded.get("error").is_none(), "{loaded}");
    let (response, _) = editor.prompt(session, "second prompt").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
}

#[tokio::test]
async fn the_compaction_summary_carries_the_file_ledger_across_a_restart() {
    let (server, root) = read_then_patch().await;
    // The read fills the history past `compact_threshold`: step 3
    // summarizes it (the patch, the newest step, is kept).
    server.push(openai::text(["SUMMARY: read big.txt"]));
    server.push(openai::text(["read and noted"]));
    server.push(openai::text(["after the restart"]));

    let mut editor = editor_in(None, root.path()).await;
    let session = editor.new_session(compacting_config(&server)).await;
    let (response, _) = editor.prompt(&session, "start here").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        std::fs::read_to_string(root.path().join("notes.md")).unwrap(),
        "notes\n"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert!(requests[2].body.get("tools").is_none(), "the summary call");
    let after_compaction = request_text(&requests[3]);
    assert!(after_compaction.contains("SUMMARY: read big.txt"));
    assert!(!after_compaction.contains("the big file line"));
    assert_ledger_in(&after_compaction);

    let home = editor.home.clone();
    editor.shutdown_and_exit().await;
    let output = std::process::Command::new(tandem_bin())
        .args(["replay", &session, "--files"])
        .env("TANDEM_HOME", home.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_ledger_in(&String::from_utf8(output.stdout).unwrap());

    prompt_after_reload(home, root.path(), &session).await;
    let requests = server.requests();
    assert_eq!(requests.len(), 5, "no new compaction after the reload");
    assert_ledger_in(&request_text(&requests[4]));
}

#[tokio::test]
async fn when_summarizing_fails_the_ledger_still_reaches_the_model() {
    let (server, root) = read_then_patch().await;
    // The summary call is refused: the old messages are dropped instead.
    server.push(openai::error(400, "this request cannot be summarized"));
    server.push(openai::text(["read and noted"]));

    let mut editor = editor_in(None, root.path()).await;
    // The user has big.txt open with a change not saved yet.
    let unsaved = format!("an unsaved first line\n{}", BIG_LINE.repeat(179));
    editor.open(&root.path().join("big.txt"), &unsaved).await;
    let session = editor.new_session(compacting_config(&server)).await;
    let (response, _) = editor.prompt(&session, "start here").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "no retry of a refused summary");
    assert!(
        request_text(&requests[1]).contains("an unsaved first line"),
        "the read saw the editor's text"
    );
    let big = format!(
        "- big.txt — read at step 1 of t1, {} bytes, unsaved changes in the editor",
        BIG_LINE.len() * 180
    );
    let after_drop = request_text(&requests[3]);
    assert!(after_drop.contains(&big), "{big:?}");
    assert!(
        after_drop.contains("earlier messages were removed to fit the context window"),
        "{after_drop}"
    );
    assert!(!after_drop.contains("the big file line"));
    assert_ledger_in(&after_drop);

    // And after a restart, from the log alone.
    let home = editor.home.clone();
    editor.shutdown_and_exit().await;
    server.push(openai::text(["after the restart"]));
    prompt_after_reload(home, root.path(), &session).await;
    assert_ledger_in(&request_text(&server.requests()[4]));
}
