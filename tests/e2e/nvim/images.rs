//! `:TandemPrompt` with `@path/to/image.png`: the file reaches the model
//! server as an image part, the chat names the image, and a file that
//! cannot be read is an error that sends nothing.

use base64::Engine;
use serde_json::json;

use super::harness::{config, run, Workspace};
use crate::support::model_server::{openai, ModelServer};

#[tokio::test]
async fn an_at_image_in_tandem_prompt_reaches_the_model_as_an_image_part() {
    if !super::harness::enabled() {
        return;
    }
    let server = ModelServer::start().await;
    server.push(openai::text(["A red dot."]));
    let ws = Workspace::new();
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend((0..3000u32).map(|i| (i % 256) as u8));
    std::fs::create_dir_all(ws.path("shots")).unwrap();
    std::fs::write(ws.path("shots/dot.png"), &png).unwrap();
    let got = run(
        &ws,
        &config(&server, "read-only"),
        r#"
T.setup()
local errors = {}
local notify = vim.notify
vim.notify = function(msg, level)
  table.insert(errors, msg)
end
vim.cmd('TandemPrompt @shots/missing.png what is this?')
T.put('errors', errors)
vim.notify = notify
vim.cmd('TandemPrompt what is in @shots/dot.png ?')
T.turn(1)
T.put('chat', T.chat_lines())
"#,
    )
    .await;
    let errors = got.get("errors").to_string();
    assert!(
        errors.contains("cannot read the image @shots/missing.png"),
        "{errors}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "the unreadable image sent nothing");
    let user = requests[0].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "user")
        .unwrap()
        .clone();
    let b64 = base64::engine::general_purpose::STANDARD.encode(&png);
    assert_eq!(
        user["content"],
        json!([
            {"type": "text", "text": "what is in @shots/dot.png ?"},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{b64}")}},
        ])
    );
    let chat = got.lines("chat").join("\n");
    assert!(chat.contains("_with an image (png)_"), "{chat}");
    assert!(chat.contains("A red dot."), "{chat}");
}
