//! ACP has no requests for the editor's language servers: an ACP client,
//! however capable, is never offered the four tools.

use serde_json::json;

use super::offered_tools;
use crate::acp::AcpClient;
use crate::support::model_server::openai::text;
use crate::support::model_server::ModelServer;

#[tokio::test]
async fn an_acp_client_is_not_offered_the_language_tools() {
    let server = ModelServer::start().await;
    server.push(text(["hi"]));
    let root = tempfile::tempdir().unwrap();
    let mut client = AcpClient::spawn(&["acp"], &server).await;
    let capabilities = json!({
        "fs": {"readTextFile": true, "writeTextFile": true},
        "terminal": true,
        "_meta": {"tandem": {"languageFeatures": ["diagnostics", "definition", "references", "symbols"]}},
    });
    client
        .request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": capabilities}),
            "",
        )
        .await;
    let (_, session) = client.new_session(root.path()).await;
    let (response, _) = client
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "hello"}]}),
            "",
        )
        .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let offered = offered_tools(&server.wait_for_requests(1).await[0].body);
    assert!(offered.contains(&"read_file".to_string()), "{offered:?}");
    for tool in [
        "diagnostics",
        "definition",
        "references",
        "workspace_symbols",
    ] {
        assert!(
            !offered.contains(&tool.to_string()),
            "{tool} in {offered:?}"
        );
    }
}
