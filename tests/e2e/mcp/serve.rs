//! The serve's own copies of the methods: an MCP server from the session's
//! config and from `config.mcpServers`, through `tandem lsp --attach`.

use serde_json::json;

use super::{call, config_with, everything, list_servers, session, tool_result};
use crate::serve::{attach_options, StopOnDrop};
use crate::support::model_server::{openai, ModelServer};

#[tokio::test]
async fn through_the_serve_a_config_mcp_servers_list_is_called_and_listed() {
    let Some(everything) = everything() else {
        return;
    };
    let server = ModelServer::start().await;
    server.push(call(
        "c1",
        "mcp__everything__echo",
        json!({"message": "via the serve"}),
    ));
    server.push(openai::text(["ok"]));
    let home = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let _stop = StopOnDrop(home.path().to_path_buf());
    let root = tempfile::tempdir().unwrap();
    // ACP's list, as an editor passes it in `config.mcpServers`.
    let mut config = config_with(&server, "auto", json!({}));
    config["mcpServers"] = json!([{
        "name": "everything",
        "command": everything["command"],
        "args": everything["args"],
        "env": [],
    }]);
    let (mut editor, session) = session(root.path(), config, attach_options(&home)).await;
    editor.prompt(&session, "echo").await;
    assert_eq!(
        tool_result(&server.requests()[1], "c1"),
        "Echo: via the serve"
    );
    let servers = list_servers(&mut editor, &session).await;
    assert_eq!(servers[0]["name"], "everything", "{servers}");
    assert_eq!(servers[0]["state"], "ready", "{servers}");
    // The client's list is not in the session log's header.
    let header = &editor.log_lines(&session)[0];
    assert!(!header.to_string().contains("mcpServers"), "{header}");
}
