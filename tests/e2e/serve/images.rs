//! Images in prompts through `tandem serve`: behind `tandem lsp --attach`
//! and `tandem acp --attach` an image reaches the model server as an image
//! part, and an oversize one is refused with nothing sent.

use base64::Engine;
use serde_json::json;

use super::{attach_options, StopOnDrop};
use crate::acp::AcpClient;
use crate::support::client::Editor;
use crate::support::model_server::{openai, ModelServer};

fn png(size: usize) -> String {
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.resize(size, 7);
    base64::engine::general_purpose::STANDARD.encode(&bytes)
}

fn prompt(session: &str, b64: &str) -> serde_json::Value {
    json!({"sessionId": session, "prompt": [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "mimeType": "image/png", "data": b64},
    ]})
}

#[tokio::test]
async fn an_image_through_lsp_attach_reaches_the_model_and_an_oversize_one_is_refused() {
    let model = ModelServer::start().await;
    model.push(openai::text(["a square"]));
    let home = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let _stop = StopOnDrop(home.path().to_path_buf());
    let workspace = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn_with(attach_options(&home)).await;
    editor.initialize(workspace.path()).await;
    let session = editor
        .new_session(model.session_config_with(json!({"max_image_bytes": 4096})))
        .await;

    let b64 = png(4096);
    let receipt = editor
        .request("tandem/prompt", prompt(&session, &b64))
        .await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    let requests = model.wait_for_requests(1).await;
    assert_eq!(
        requests[0].body["messages"][1]["content"][1]["image_url"]["url"],
        format!("data:image/png;base64,{b64}")
    );

    let refused = editor
        .request("tandem/prompt", prompt(&session, &png(4097)))
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("over the 4 KB limit"),
        "{refused}"
    );
    assert_eq!(model.requests().len(), 1);
}

#[tokio::test]
async fn an_image_through_acp_attach_reaches_the_model() {
    let model = ModelServer::start().await;
    model.push(openai::text(["a square"]));
    let root = tempfile::tempdir().unwrap();
    let mut client = AcpClient::spawn(&["acp", "--attach"], &model).await;
    let _stop = StopOnDrop(client.home().to_path_buf());
    let (init, _) = client
        .request("initialize", json!({"protocolVersion": 1}), "")
        .await;
    assert_eq!(
        init["result"]["agentCapabilities"]["promptCapabilities"]["image"], true,
        "{init}"
    );
    let (_, session) = client.new_session(root.path()).await;
    let b64 = png(2000);
    let (answer, _) = client
        .request("session/prompt", prompt(&session, &b64), "")
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let requests = model.wait_for_requests(1).await;
    assert_eq!(
        requests[0].body["messages"][1]["content"][1]["image_url"]["url"],
        format!("data:image/png;base64,{b64}")
    );
}
