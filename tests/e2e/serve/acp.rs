//! `tandem acp --attach`: an ACP client's turn runs in the serve.

use serde_json::json;

use super::{read_serve_json, StopOnDrop};
use crate::acp::{agent_text_of, update_kinds, AcpClient};
use crate::support::model_server::{openai, ModelServer};

#[tokio::test]
async fn acp_attach_runs_a_turn_with_a_permission_prompt_in_the_serve() {
    let server = ModelServer::start().await;
    server.push(openai::tool_calls(&[(
        "c1",
        "exec_command",
        r#"{"cmd":"touch made"}"#,
    )]));
    server.push(openai::text(["Made ", "it."]));
    let root = tempfile::tempdir().unwrap();
    let mut client = AcpClient::spawn(&["acp", "--attach"], &server).await;
    let _stop = StopOnDrop(client.home().to_path_buf());

    let (init, _) = client
        .request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
            "",
        )
        .await;
    assert_eq!(
        init["result"]["agentCapabilities"]["loadSession"], true,
        "{init}"
    );
    let (new, _) = client
        .request(
            "session/new",
            json!({"cwd": root.path(), "mcpServers": []}),
            "",
        )
        .await;
    let session = new["result"]["sessionId"]
        .as_str()
        .expect("sessionId")
        .to_string();
    assert!(
        read_serve_json(client.home()).is_some(),
        "the shim started a serve"
    );

    let (response, before) = client
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "make a file"}]}),
            "allow_once",
        )
        .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(root.path().join("made").exists(), "the allowed command ran");
    let permission = before
        .iter()
        .find(|m| m["method"] == "session/request_permission")
        .expect("a permission request");
    assert_eq!(permission["params"]["toolCall"]["toolCallId"], "c1");
    let kinds = update_kinds(&before);
    assert_eq!(kinds[0], "user_message_chunk", "{kinds:?}");
    assert!(
        !kinds
            .iter()
            .any(|k| k == "turn_end" || k == "usage" || k == "input_status"),
        "{kinds:?}"
    );
    assert_eq!(agent_text_of(&before), "Made it.");

    // A failed turn is an error, as in `tandem acp`.
    server.push(openai::error(401, "bad key"));
    let (reply, _) = client
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "again"}]}),
            "",
        )
        .await;
    assert_eq!(reply["error"]["code"], -32603, "{reply}");
}
