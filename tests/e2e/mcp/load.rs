//! `tandem/loadSession`'s `config.mcpServers`: a client's list is never
//! logged, so an editor gives it again when it opens a session, over
//! stdio and through the serve (`tandem lsp --attach`).

use std::sync::Arc;

use serde_json::{json, Value};

use super::{call, config_with, everything, list_servers, session, tool_result};
use crate::serve::{attach_options, StopOnDrop};
use crate::support::client::{Editor, EditorOptions};
use crate::support::model_server::{openai, ModelServer};

/// A session made and left by one editor, loaded by a second one with the
/// everything server in `config.mcpServers`, whose echo is then called.
async fn load_with_servers(options: impl Fn() -> EditorOptions) {
    let Some(everything) = everything() else {
        return;
    };
    let server = ModelServer::start().await;
    server.push(openai::text(["hello"]));
    server.push(call(
        "c1",
        "mcp__everything__echo",
        json!({"message": "after load"}),
    ));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let (mut first, id) = session(
        root.path(),
        config_with(&server, "auto", json!({})),
        options(),
    )
    .await;
    first.prompt(&id, "hi").await;
    first.shutdown_and_exit().await;

    let mut editor = Editor::spawn_with(options()).await;
    editor.initialize(root.path()).await;
    let list = json!([{"name": "everything", "command": everything["command"], "args": everything["args"], "env": []}]);
    // Anything but `mcpServers` is refused: the rest is the log's.
    let refused = editor
        .request("tandem/loadSession", json!({"sessionId": id, "config": {"mcpServers": list, "approval": {"mode": "review"}}}))
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`approval`"),
        "{refused}"
    );
    let loaded = editor
        .request(
            "tandem/loadSession",
            json!({"sessionId": id, "config": {"mcpServers": list}}),
        )
        .await;
    assert_eq!(loaded["result"]["sessionId"], id, "{loaded}");
    let (receipt, _) = editor.prompt(&id, "echo").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    assert_eq!(tool_result(&server.requests()[2], "c1"), "Echo: after load");
    let servers: Value = list_servers(&mut editor, &id).await;
    assert_eq!(servers[0]["name"], "everything", "{servers}");
    assert_eq!(servers[0]["state"], "ready", "{servers}");
    // The list is not in the log.
    let log = editor.log_lines(&id);
    assert!(
        !log.iter().any(|e| e.to_string().contains("mcpServers")),
        "the client's list was logged"
    );
}

#[tokio::test]
async fn load_session_restores_a_config_mcp_servers_list_over_stdio() {
    let home = Arc::new(tempfile::tempdir().unwrap());
    load_with_servers(|| EditorOptions {
        home: Some(home.clone()),
        ..Default::default()
    })
    .await;
}

#[tokio::test]
async fn load_session_restores_a_config_mcp_servers_list_through_the_serve() {
    let home = Arc::new(tempfile::tempdir().unwrap());
    let _stop = StopOnDrop(home.path().to_path_buf());
    load_with_servers(|| attach_options(&home)).await;
}
