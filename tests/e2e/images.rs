//! Images in prompts through the real binary (LSP and ACP): they reach the
//! scripted model server as image parts (Chat Completions `image_url`,
//! Messages API `image`), are refused whole and before any call when too
//! big or for a model without vision, are logged once by hash beside the
//! session log, and come back after a reload and in `tandem replay`.

use base64::Engine;
use serde_json::{json, Value};

use crate::acp::AcpClient;
use crate::support::client::{tandem_bin, Editor, EditorOptions};
use crate::support::model_server::{anthropic, openai, ModelServer};

/// A PNG-signed blob of `size` bytes and its base64.
fn png(size: usize) -> (Vec<u8>, String) {
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.extend((0..size.saturating_sub(8)).map(|i| (i % 251) as u8));
    let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
    (bytes, b64)
}

fn image_prompt(session: &str, text: &str, b64: &str) -> Value {
    json!({"sessionId": session, "prompt": [
        {"type": "text", "text": text},
        {"type": "image", "mimeType": "image/png", "data": b64},
    ]})
}

async fn editor(home: Option<std::sync::Arc<tempfile::TempDir>>, root: &std::path::Path) -> Editor {
    let mut editor = Editor::spawn_with(EditorOptions {
        home,
        ..EditorOptions::default()
    })
    .await;
    editor.initialize(root).await;
    editor
}

/// The last user message of a recorded Chat Completions body.
fn last_user(body: &Value) -> Value {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .cloned()
        .unwrap_or_else(|| panic!("no user message in {body}"))
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn replay(home: &std::path::Path, session: &str) -> String {
    let output = std::process::Command::new(tandem_bin())
        .args(["replay", session])
        .env("TANDEM_HOME", home)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test]
async fn an_lsp_image_reaches_the_model_as_an_image_url_part_is_stored_once_and_replays() {
    let server = ModelServer::start().await;
    server.push(openai::text(["a red square"]));
    server.push(openai::text(["still red"]));
    let root = tempfile::tempdir().unwrap();
    let mut editor = editor(None, root.path()).await;
    let session = editor.new_session(server.session_config()).await;
    let (bytes, b64) = png(120 * 1024);

    let response = editor
        .request(
            "tandem/prompt",
            image_prompt(&session, "what is this?", &b64),
        )
        .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.wait_for_requests(1).await;
    assert_eq!(
        last_user(&requests[0].body),
        json!({"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{b64}")}},
        ]})
    );

    // A second image-free prompt: the history still carries the image.
    editor.prompt(&session, "and now?").await;
    let requests = server.wait_for_requests(2).await;
    let history: Vec<&Value> = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .collect();
    assert_eq!(*history[0], last_user(&requests[0].body));

    // The log names the image by hash; its bytes are in one file beside it.
    let sessions = editor.sessions_dir();
    let log = std::fs::read_to_string(sessions.join(format!("{session}.jsonl"))).unwrap();
    let hash = sha256_hex(&bytes);
    assert!(!log.contains(&b64[..64]), "the log holds no image data");
    assert!(log.contains(&hash), "the log names the image by its hash");
    let images = sessions.join(format!("{session}.images"));
    let files: Vec<_> = std::fs::read_dir(&images)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(files, vec![format!("{hash}.png")]);
    assert_eq!(std::fs::read(images.join(&files[0])).unwrap(), bytes);

    let text = replay(editor.home.path(), &session);
    assert!(
        text.contains("what is this? [image (png, 120 KB)]"),
        "{text}"
    );
}

#[tokio::test]
async fn an_image_reaches_the_anthropic_server_as_an_image_block() {
    let server = ModelServer::start().await;
    server.push(anthropic::text(["a red square"]));
    let root = tempfile::tempdir().unwrap();
    let mut editor = editor(None, root.path()).await;
    let mut config = server.session_config();
    config["model"]["provider"] = json!("anthropic");
    let session = editor.new_session(config).await;
    let (_, b64) = png(2048);

    let response = editor
        .request(
            "tandem/prompt",
            image_prompt(&session, "what is this?", &b64),
        )
        .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.wait_for_requests(1).await;
    assert_eq!(requests[0].path, "/v1/messages");
    assert_eq!(
        requests[0].body["messages"][0],
        json!({"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64}},
        ]})
    );
}

#[tokio::test]
async fn an_oversize_image_or_a_model_without_vision_is_refused_before_any_call() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let mut editor = editor(None, root.path()).await;

    // The default cap: 5 MiB of decoded bytes.
    let session = editor.new_session(server.session_config()).await;
    let (_, big) = png(5 * 1024 * 1024 + 1);
    let response = editor
        .request("tandem/prompt", image_prompt(&session, "look", &big))
        .await;
    assert_eq!(response["error"]["code"], -32602, "{response}");
    let message = response["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(
            "over the 5.0 MB limit (`[limits] max_image_bytes = 5242880`); nothing was sent"
        ),
        "{message}"
    );

    // A configured cap.
    let limited = editor
        .new_session(server.session_config_with(json!({"max_image_bytes": 1000})))
        .await;
    let (_, small) = png(1001);
    let response = editor
        .request("tandem/prompt", image_prompt(&limited, "look", &small))
        .await;
    assert_eq!(response["error"]["code"], -32602, "{response}");
    assert!(
        response["error"]["message"]
            .as_str()
            .unwrap()
            .contains("over the 1000 B limit"),
        "{response}"
    );

    // A model without vision.
    let mut config = server.session_config();
    config["model"]["vision"] = json!(false);
    let blind = editor.new_session(config).await;
    let response = editor
        .request("tandem/prompt", image_prompt(&blind, "look", &small))
        .await;
    assert_eq!(response["error"]["code"], -32602, "{response}");
    assert!(
        response["error"]["message"].as_str().unwrap().contains(
            "the model `scripted-model` is configured without vision (`[model] vision = false`)"
        ),
        "{response}"
    );

    // Nothing was sent, queued or stored, and the daemon keeps serving.
    assert!(server.requests().is_empty());
    for id in [&session, &limited, &blind] {
        let events = editor.log_lines(id);
        assert!(
            events.iter().all(|e| e["type"] != "input_queued"),
            "{events:?}"
        );
        assert!(!editor.sessions_dir().join(format!("{id}.images")).exists());
    }
    server.push(openai::text(["fine"]));
    let (response, _) = editor.prompt(&blind, "just text").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
}

#[tokio::test]
async fn a_reloaded_session_sends_its_image_again_byte_for_byte() {
    let server = ModelServer::start().await;
    server.push(openai::text(["a red square"]));
    server.push(openai::text(["still red"]));
    let root = tempfile::tempdir().unwrap();
    let mut first = editor(None, root.path()).await;
    let session = first.new_session(server.session_config()).await;
    let (_, b64) = png(4096);
    first
        .request(
            "tandem/prompt",
            image_prompt(&session, "what is this?", &b64),
        )
        .await;
    let home = first.home.clone();
    first.shutdown_and_exit().await;

    let mut second = editor(Some(home), root.path()).await;
    let loaded = second
        .request("tandem/loadSession", json!({"sessionId": session}))
        .await;
    assert!(loaded.get("error").is_none(), "{loaded}");
    // The replayed user message carries the image read back from its file.
    let replayed = second
        .updates_of(&session)
        .into_iter()
        .find(|u| u["update"]["sessionUpdate"] == "user_message")
        .expect("the user message is replayed");
    assert_eq!(
        replayed["update"]["content"][1],
        json!({"type": "image", "mimeType": "image/png", "data": b64})
    );
    second.prompt(&session, "and now?").await;
    let requests = server.wait_for_requests(2).await;
    let messages = |r: usize| requests[r].body["messages"].as_array().unwrap().clone();
    assert_eq!(
        messages(0)[1],
        messages(1)[1],
        "the image's message is the same after reload"
    );
    // Byte-identical, not only equal as JSON.
    let raw = |r: usize| {
        let body = &requests[r].raw_body;
        let start = body.find("{\"role\":\"user\"").unwrap();
        let end = start + body[start..].find("]}").unwrap() + 2;
        body[start..end].to_string()
    };
    assert_eq!(raw(0), raw(1));
}

#[tokio::test]
async fn an_acp_image_reaches_the_model_and_an_oversize_one_is_refused() {
    let server = ModelServer::start().await;
    server.push(openai::text(["a red square"]));
    let root = tempfile::tempdir().unwrap();
    let mut client = AcpClient::spawn(&["acp"], &server).await;
    let (init, _) = client
        .request("initialize", json!({"protocolVersion": 1}), "")
        .await;
    assert_eq!(
        init["result"]["agentCapabilities"]["promptCapabilities"]["image"], true,
        "{init}"
    );
    let (_, session) = client.new_session(root.path()).await;
    let (_, b64) = png(3000);
    let (answer, _) = client
        .request(
            "session/prompt",
            image_prompt(&session, "what is this?", &b64),
            "",
        )
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let requests = server.wait_for_requests(1).await;
    assert_eq!(
        last_user(&requests[0].body)["content"][1],
        json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{b64}")}})
    );

    let (_, big) = png(5 * 1024 * 1024 + 10);
    let (answer, _) = client
        .request(
            "session/prompt",
            image_prompt(&session, "and this?", &big),
            "",
        )
        .await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nothing was sent"),
        "{answer}"
    );
    assert_eq!(server.requests().len(), 1);

    // `session/load` in a new agent replays the image read back from its file.
    let home = client.shared_home();
    client.kill().await;
    let mut again = AcpClient::spawn_in(&["acp"], &server, home).await;
    again
        .request("initialize", json!({"protocolVersion": 1}), "")
        .await;
    let (loaded, replayed) = again
        .request(
            "session/load",
            json!({"sessionId": session, "cwd": root.path(), "mcpServers": []}),
            "",
        )
        .await;
    assert!(loaded.get("error").is_none(), "{loaded}");
    let chunks: Vec<&Value> = replayed
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "user_message_chunk")
        .map(|m| &m["params"]["update"]["content"])
        .collect();
    assert_eq!(
        chunks,
        [
            &json!({"type": "text", "text": "what is this?"}),
            &json!({"type": "image", "data": b64, "mimeType": "image/png"}),
        ]
    );
}
