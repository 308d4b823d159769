//! Session titles, `tandem/renameSession`, `tandem/closeSession` and
//! `tandem/deleteSession` (issue 29), over `tandem lsp` and through the
//! serve (`tandem lsp --attach`): the same answers, updates and logs.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::serve::{attach_options, StopOnDrop};
use crate::support::client::{tandem_bin, Editor, EditorOptions};
use crate::support::model_server::{openai, ModelServer, Reply, SseStep};

/// Every `session_info` update of `session` so far, by title.
fn titles(editor: &Editor, session: &str) -> Vec<String> {
    editor
        .updates_of(session)
        .iter()
        .filter(|u| u["update"]["sessionUpdate"] == "session_info")
        .map(|u| u["update"]["title"].as_str().unwrap().to_string())
        .collect()
}

async fn listed_title(editor: &mut Editor, session: &str) -> Option<String> {
    let list = editor.request("tandem/listSessions", json!({})).await;
    list["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionId"] == session)
        .map(|s| s["title"].as_str().unwrap().to_string())
}

async fn titles_renames_close_and_delete(options: EditorOptions) {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn_with(options).await;
    editor.initialize(root.path()).await;
    let home = editor.home.path().to_path_buf();
    let log = |id: &str| home.join("sessions").join(format!("{id}.jsonl"));
    let session = editor.new_session(server.session_config()).await;

    // The first line of the first prompt, before the prompt's answer.
    server.push(openai::text(["ok"]));
    let (receipt, updates) = editor
        .prompt(&session, "  Fix the parser\nit drops the last token")
        .await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    assert!(
        updates
            .iter()
            .any(|u| u["update"]
                == json!({"sessionUpdate": "session_info", "title": "Fix the parser"})),
        "{updates:?}"
    );
    assert_eq!(
        listed_title(&mut editor, &session).await.as_deref(),
        Some("Fix the parser")
    );

    // Renamed: answered with the title kept, told as an update, logged.
    let renamed = editor
        .request(
            "tandem/renameSession",
            json!({"sessionId": session, "title": "  Parser work "}),
        )
        .await;
    assert_eq!(
        renamed["result"],
        json!({"title": "Parser work"}),
        "{renamed}"
    );
    // Through the serve the update may follow the answer.
    if titles(&editor, &session).len() < 2 {
        editor
            .wait_notification("tandem/update", |p| {
                p["sessionId"] == session.as_str() && p["update"]["title"] == "Parser work"
            })
            .await;
    }
    assert_eq!(titles(&editor, &session), ["Fix the parser", "Parser work"]);
    assert_eq!(
        listed_title(&mut editor, &session).await.as_deref(),
        Some("Parser work")
    );
    let logged: Vec<Value> = editor
        .log_lines(&session)
        .into_iter()
        .filter(|e| e["type"] == "title_changed")
        .collect();
    assert_eq!(logged.len(), 2, "{logged:?}");
    assert_eq!(logged[1]["renamed"], true);
    let replay = std::process::Command::new(tandem_bin())
        .args(["replay", &session])
        .env("TANDEM_HOME", &home)
        .output()
        .unwrap();
    let replay = String::from_utf8_lossy(&replay.stdout);
    assert!(
        replay.contains("session titled: Fix the parser"),
        "{replay}"
    );
    assert!(replay.contains("session renamed: Parser work"), "{replay}");

    // Bad titles and unknown sessions are specific errors.
    let empty = editor
        .request(
            "tandem/renameSession",
            json!({"sessionId": session, "title": "  "}),
        )
        .await;
    assert_eq!(empty["error"]["code"], -32602, "{empty}");
    assert!(empty["error"]["message"]
        .as_str()
        .unwrap()
        .contains("title"));
    let unknown = editor
        .request(
            "tandem/renameSession",
            json!({"sessionId": "nosuch", "title": "x"}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], -32001, "{unknown}");

    // A turn running: delete is refused; close cancels it and keeps the log.
    server.push(Reply::Sse(vec![
        openai::delta(json!({"role": "assistant", "content": "working"})),
        SseStep::Stall,
    ]));
    let prompt = editor.start_prompt(&session, "keep going").await;
    server.wait_for_requests(2).await;
    let refused = editor
        .request("tandem/deleteSession", json!({"sessionId": session}))
        .await;
    assert_eq!(refused["error"]["code"], -32005, "{refused}");
    assert!(log(&session).exists());
    let closed = editor
        .request("tandem/closeSession", json!({"sessionId": session}))
        .await;
    assert_eq!(closed["result"], json!({}), "{closed}");
    let (answer, _) = editor.response(prompt).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    assert!(log(&session).exists(), "a closed session keeps its log");
    let gone = editor
        .request(
            "tandem/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}),
        )
        .await;
    assert_eq!(gone["error"]["code"], -32001, "closed: {gone}");

    // Deleted: the log goes, and listings no longer have it.
    let deleted = editor
        .request("tandem/deleteSession", json!({"sessionId": session}))
        .await;
    assert_eq!(deleted["result"], json!({}), "{deleted}");
    assert!(!log(&session).exists());
    assert_eq!(listed_title(&mut editor, &session).await, None);
    // Already deleted: still fine.
    let again = editor
        .request("tandem/deleteSession", json!({"sessionId": session}))
        .await;
    assert_eq!(again["result"], json!({}), "{again}");

    // A session no prompt reached is dropped on close.
    let unused = editor.new_session(server.session_config()).await;
    assert!(log(&unused).exists());
    editor
        .request("tandem/closeSession", json!({"sessionId": unused}))
        .await;
    assert!(
        !log(&unused).exists(),
        "an empty session is dropped on close"
    );
}

#[tokio::test]
async fn lsp_titles_renames_closes_and_deletes_sessions() {
    titles_renames_close_and_delete(EditorOptions::default()).await;
}

#[tokio::test]
async fn lsp_attach_titles_renames_closes_and_deletes_sessions_in_the_serve() {
    let home = Arc::new(tempfile::tempdir().unwrap());
    let _stop = StopOnDrop(home.path().to_path_buf());
    titles_renames_close_and_delete(attach_options(&home)).await;
}
