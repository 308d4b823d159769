//! Tool-call `locations` (issue 29): read_file's file and line, the
//! directories list_files walks, grep's hits, every file a patch changes
//! at its first changed line — in `tandem/update` over `tandem lsp` and
//! through the serve, in ACP's `tool_call_update`, and again in a replay.

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::acp::AcpClient;
use crate::serve::{attach_options, StopOnDrop};
use crate::support::client::{Editor, EditorOptions};
use crate::support::model_server::{openai, ModelServer};

const PATCH: &str =
    "*** Begin Patch\n*** Update File: b.txt\n@@\n one\n-two\n+TWO\n three\n*** End Patch\n";

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "first\nsecond\nthe needle\n").unwrap();
    std::fs::write(dir.path().join("b.txt"), "one\ntwo\nthree\n").unwrap();
    dir
}

/// The model reads, lists, greps and patches, then answers.
fn script(server: &ModelServer) {
    let calls = [
        (
            "r1",
            "read_file",
            json!({"path": "a.txt", "offset": 2}).to_string(),
        ),
        ("l1", "list_files", json!({}).to_string()),
        ("g1", "grep", json!({"pattern": "needle"}).to_string()),
        ("p1", "apply_patch", json!({"input": PATCH}).to_string()),
    ];
    let refs: Vec<(&str, &str, &str)> =
        calls.iter().map(|(i, n, a)| (*i, *n, a.as_str())).collect();
    server.push(openai::tool_calls(&refs));
    server.push(openai::text(["done"]));
}

/// Every call's locations, from `tool_call_update`s (`update` objects).
fn locations_of(updates: &[Value]) -> Vec<(String, Value)> {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u.get("locations").is_some())
        .map(|u| {
            (
                u["toolCallId"].as_str().unwrap().to_string(),
                u["locations"].clone(),
            )
        })
        .collect()
}

fn expected(root: &Path) -> Vec<(String, Value)> {
    let root = root.canonicalize().unwrap();
    let at = |name: &str, line: u32| json!({"path": root.join(name), "line": line});
    let mut want = vec![
        ("r1".to_string(), json!([at("a.txt", 2)])),
        ("l1".to_string(), json!([{"path": root}])),
        ("g1".to_string(), json!([at("a.txt", 3)])),
        ("p1".to_string(), json!([at("b.txt", 2)])),
    ];
    want.sort_by(|a, b| a.0.cmp(&b.0));
    want
}

fn sorted(mut found: Vec<(String, Value)>) -> Vec<(String, Value)> {
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

async fn lsp_locations(options: EditorOptions) {
    let server = ModelServer::start().await;
    let root = project();
    let mut editor = Editor::spawn_with(options).await;
    editor.initialize(root.path()).await;
    let mut config = server.session_config();
    config["approval"] = json!({"mode": "auto"});
    let session = editor.new_session(config).await;
    script(&server);
    let (receipt, _) = editor.prompt(&session, "look and fix").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    if !editor
        .updates_of(&session)
        .iter()
        .any(|u| u["update"]["sessionUpdate"] == "turn_end")
    {
        editor
            .wait_update(&session, |u| u["sessionUpdate"] == "turn_end")
            .await;
    }
    let live: Vec<Value> = editor
        .updates_of(&session)
        .iter()
        .map(|u| u["update"].clone())
        .collect();
    assert_eq!(
        sorted(locations_of(&live)),
        expected(root.path()),
        "{live:?}"
    );
    assert_eq!(
        std::fs::read_to_string(root.path().join("b.txt")).unwrap(),
        "one\nTWO\nthree\n"
    );

    // Logged, so a replay has them too.
    let logged = editor
        .log_lines(&session)
        .into_iter()
        .filter(|e| e["type"] == "tool_locations")
        .count();
    assert_eq!(logged, 4);
    let before = editor.updates_of(&session).len();
    editor
        .request("tandem/loadSession", json!({"sessionId": session}))
        .await;
    while editor.updates_of(&session).len() < before * 2 {
        editor.wait_update(&session, |_| true).await;
    }
    let replayed: Vec<Value> = editor.updates_of(&session)[before..]
        .iter()
        .map(|u| u["update"].clone())
        .collect();
    assert_eq!(locations_of(&replayed), locations_of(&live));
}

#[tokio::test]
async fn lsp_tool_calls_carry_locations() {
    lsp_locations(EditorOptions::default()).await;
}

#[tokio::test]
async fn lsp_attach_tool_calls_carry_locations() {
    let home = Arc::new(tempfile::tempdir().unwrap());
    let _stop = StopOnDrop(home.path().to_path_buf());
    lsp_locations(attach_options(&home)).await;
}

#[tokio::test]
async fn acp_tool_call_updates_carry_locations() {
    let server = ModelServer::start().await;
    let root = project();
    let mut client = AcpClient::spawn(&["acp"], &server).await;
    client
        .request("initialize", json!({"protocolVersion": 1}), "")
        .await;
    let (_, session) = client.new_session(root.path()).await;
    script(&server);
    let (answer, before) = client
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "look and fix"}]}),
            "allow_once",
        )
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let updates: Vec<Value> = before
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| m["params"]["update"].clone())
        .collect();
    assert_eq!(
        sorted(locations_of(&updates)),
        expected(root.path()),
        "{updates:?}"
    );
}
