//! Images in MCP tool results (issue 25): npm's everything server's
//! `get-tiny-image` reaches a model with vision as an image part right
//! after the block of results (a Chat Completions tool message holds only
//! text), is logged once by hash beside the session log, and comes back on
//! reload; a model configured without vision reads a notice instead.

use serde_json::{json, Value};

use super::{call, config_with, everything, session, tool_result};
use crate::support::client::EditorOptions;
use crate::support::model_server::{openai, ModelServer};

const TOOL: &str = "mcp__everything__get-tiny-image";

/// The messages of a recorded Chat Completions body.
fn messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn an_mcp_image_reaches_a_model_with_vision_as_an_image_part_after_the_results() {
    let Some(everything) = everything() else {
        return;
    };
    let server = ModelServer::start().await;
    server.push(call("call_1", TOOL, json!({})));
    server.push(openai::text(["It is the MCP logo."]));
    server.push(openai::text(["Still the logo."]));
    let root = tempfile::tempdir().unwrap();
    let config = config_with(&server, "auto", json!({"everything": everything}));
    let (mut editor, session) = session(root.path(), config, EditorOptions::default()).await;

    let (receipt, _) = editor.prompt(&session, "show me the tiny image").await;
    assert_eq!(
        receipt["result"]["stopReason"],
        "end_turn",
        "{receipt}\n{}",
        editor.stderr()
    );
    let requests = server.requests();
    let result = tool_result(&requests[1], "call_1");
    assert!(
        result.starts_with("Here's the image you requested:\n[image (image/png, ")
            && result
                .contains(": attached after the tool results]\nThe image above is the MCP logo."),
        "{result}"
    );
    // Right after the tool message: a user message with the image part.
    let sent = messages(&requests[1].body);
    let at = sent
        .iter()
        .position(|m| m["role"] == "tool")
        .expect("the tool message");
    let image_message = &sent[at + 1];
    assert_eq!(image_message["role"], "user", "{image_message}");
    assert_eq!(
        image_message["content"][0],
        json!({"type": "text", "text": "The image returned by tool call call_1:"})
    );
    let url = image_message["content"][1]["image_url"]["url"]
        .as_str()
        .unwrap_or_else(|| panic!("no image part in {image_message}"));
    assert!(
        url.starts_with("data:image/png;base64,iVBORw0KGgo"),
        "{url}"
    );

    // The log names the image by hash; its bytes are in the images folder.
    let log = editor.log_lines(&session);
    let logged = log
        .iter()
        .find(|e| e["type"] == "tool_image")
        .expect("a tool_image event");
    assert_eq!(logged["call_id"], "call_1");
    assert!(logged.get("data").is_none(), "{logged}");
    let sha = logged["sha256"].as_str().unwrap();
    let file = editor
        .sessions_dir()
        .join(format!("{session}.images/{sha}.png"));
    assert_eq!(
        std::fs::metadata(&file).unwrap().len(),
        logged["bytes"].as_u64().unwrap()
    );

    let replay = std::process::Command::new(crate::support::client::tandem_bin())
        .args(["replay", &session])
        .env("TANDEM_HOME", editor.home.path())
        .output()
        .unwrap();
    let replay = String::from_utf8_lossy(&replay.stdout);
    assert!(
        replay.contains(&format!("tool {TOOL} [call_1] returned image (png, ")),
        "{replay}"
    );

    // Reloaded, the history sends the same image message again.
    let home = editor.home.clone();
    editor.shutdown_and_exit().await;
    let mut again = crate::support::client::Editor::spawn_with(EditorOptions {
        home: Some(home),
        ..EditorOptions::default()
    })
    .await;
    again.initialize(root.path()).await;
    let loaded = again
        .request("tandem/loadSession", json!({"sessionId": session}))
        .await;
    assert!(loaded.get("error").is_none(), "{loaded}");
    again.prompt(&session, "and now?").await;
    let requests = server.wait_for_requests(3).await;
    let resent = messages(&requests[2].body);
    assert_eq!(resent[at + 1], *image_message);
}

#[tokio::test]
async fn an_mcp_image_for_a_model_without_vision_is_a_notice() {
    let Some(everything) = everything() else {
        return;
    };
    let server = ModelServer::start().await;
    server.push(call("call_1", TOOL, json!({})));
    server.push(openai::text(["I cannot see it."]));
    let root = tempfile::tempdir().unwrap();
    let mut config = config_with(&server, "auto", json!({"everything": everything}));
    config["model"]["vision"] = json!(false);
    let (mut editor, session) = session(root.path(), config, EditorOptions::default()).await;

    let (receipt, _) = editor.prompt(&session, "show me the tiny image").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    let requests = server.requests();
    let result = tool_result(&requests[1], "call_1");
    assert!(
        result.contains(
            "not shown; the model is configured without vision ([model] vision = false)]"
        ),
        "{result}"
    );
    let sent = messages(&requests[1].body);
    assert!(
        sent.iter().all(|m| !m["content"].is_array()),
        "no image part: {sent:?}"
    );
    assert!(editor
        .log_lines(&session)
        .iter()
        .all(|e| e["type"] != "tool_image"));
}
