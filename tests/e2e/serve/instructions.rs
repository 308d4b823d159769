//! Project instructions through `tandem serve`: the answers to
//! `tandem/newSession` and `tandem/loadSession` through `tandem lsp
//! --attach`, and to session/new and session/load through `tandem acp
//! --attach`, name the instruction files in force.

use std::path::PathBuf;

use serde_json::{json, Value};

use super::{attach_options, StopOnDrop};
use crate::acp::AcpClient;
use crate::support::client::Editor;
use crate::support::model_server::{openai, ModelServer};

fn paths(files: &Value) -> Vec<PathBuf> {
    files
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {files}"))
        .iter()
        .map(|f| PathBuf::from(f["path"].as_str().unwrap()))
        .collect()
}

#[tokio::test]
async fn the_serves_new_session_names_the_instruction_files_and_its_turns_get_them() {
    let model = ModelServer::start().await;
    model.push(openai::text(["ok"]));
    let home = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let _stop = StopOnDrop(home.path().to_path_buf());
    std::fs::write(home.path().join("AGENTS.md"), "SERVE USER RULE\n").unwrap();
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("AGENTS.md"), "SERVE ROOT RULE\n").unwrap();
    let mut editor = Editor::spawn_with(attach_options(&home)).await;
    editor.initialize(workspace.path()).await;
    let new = editor
        .request(
            "tandem/newSession",
            json!({"config": model.session_config()}),
        )
        .await;
    assert_eq!(
        paths(&new["result"]["instructions"]),
        [
            home.path().join("AGENTS.md"),
            workspace.path().join("AGENTS.md")
        ],
        "{new}"
    );
    assert_eq!(new["result"]["instructions"][1]["bytes"], 16);
    let session = new["result"]["sessionId"].as_str().unwrap().to_string();
    let (receipt, _) = editor.prompt(&session, "hello").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    let system = model.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        system.find("SERVE USER RULE").unwrap() < system.find("SERVE ROOT RULE").unwrap(),
        "{system}"
    );
    // Loading it again names them too.
    let loaded = editor
        .request("tandem/loadSession", json!({"sessionId": session}))
        .await;
    assert_eq!(
        paths(&loaded["result"]["instructions"]),
        [
            home.path().join("AGENTS.md"),
            workspace.path().join("AGENTS.md")
        ],
        "{loaded}"
    );
}

#[tokio::test]
async fn acp_attach_names_the_instruction_files_in_the_session_meta() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("AGENTS.md"), "ATTACHED RULE\n").unwrap();
    let mut client = AcpClient::spawn(&["acp", "--attach"], &server).await;
    let _stop = StopOnDrop(client.home().to_path_buf());
    client
        .request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
            "",
        )
        .await;
    let (new, session) = client.new_session(root.path()).await;
    let files = &new["result"]["_meta"]["tandem"]["instructions"];
    assert_eq!(paths(files), [root.path().join("AGENTS.md")], "{new}");
    assert_eq!(files[0]["bytes"], 14);
    assert_eq!(new["result"]["sessionId"], session.as_str());

    let (loaded, _) = client
        .request(
            "session/load",
            json!({"sessionId": session, "cwd": root.path(), "mcpServers": []}),
            "",
        )
        .await;
    assert_eq!(
        paths(&loaded["result"]["_meta"]["tandem"]["instructions"]),
        [root.path().join("AGENTS.md")],
        "{loaded}"
    );
}
