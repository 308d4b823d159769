//! Rewinding the conversation: the next request ends before the chosen
//! message, the log keeps everything, replay shows both.

use serde_json::json;

use super::{auto, logged, message_id, rewind, workspace};
use crate::support::client::{tandem_bin, Editor};
use crate::support::model_server::{openai, ModelServer};

#[tokio::test]
async fn a_conversation_rewind_ends_the_next_request_before_the_chosen_message() {
    let server = ModelServer::start().await;
    let (_dir, root) = workspace();
    let mut editor = Editor::spawn().await;
    editor.initialize(&root).await;
    let session = editor.new_session(auto(&server)).await;
    server.push(openai::text(["one"]));
    editor.prompt(&session, "first question").await;
    server.push(openai::text(["two"]));
    let (_, updates) = editor.prompt(&session, "second question").await;
    let second = message_id(&updates);
    server.push(openai::text(["three"]));
    editor.prompt(&session, "third question").await;

    let result = rewind(
        &mut editor,
        json!({"sessionId": session, "toMessageId": second, "files": false, "conversation": true}),
    )
    .await;
    assert_eq!(result["conversation"], true, "{result}");
    assert_eq!(result["files"], json!([]), "{result}");

    server.push(openai::text(["four"]));
    let (receipt, _) = editor.prompt(&session, "another try").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    let requests = server.requests();
    let last = &requests.last().unwrap().body["messages"];
    let said: Vec<(String, String)> = last
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let texts: Vec<&str> = said.iter().map(|(_, t)| t.as_str()).collect();
    assert!(texts[0].contains("first question"), "{said:?}");
    assert_eq!(texts[1], "one", "{said:?}");
    assert!(texts[2].contains("another try"), "{said:?}");
    assert_eq!(said.len(), 3, "{said:?}");

    // The log keeps everything; replay shows the dropped turns and the rewind.
    let users = logged(&editor, &session, "user_message");
    assert_eq!(users.len(), 4);
    assert_eq!(logged(&editor, &session, "rewound").len(), 1);
    let replay = std::process::Command::new(tandem_bin())
        .args(["replay", &session])
        .env("TANDEM_HOME", editor.home.path())
        .output()
        .unwrap();
    let replay = String::from_utf8_lossy(&replay.stdout);
    assert!(replay.contains("second question"), "{replay}");
    assert!(replay.contains("third question"), "{replay}");
    assert!(
        replay.contains(&format!("the conversation now ends before {second}")),
        "{replay}"
    );

    // A daemon that loads the session again builds the same context.
    let home = editor.kill_9().await;
    let mut again = Editor::spawn_with(crate::support::client::EditorOptions {
        home: Some(home),
        ..Default::default()
    })
    .await;
    again.initialize(&root).await;
    let loaded = again
        .request("tandem/loadSession", json!({"sessionId": session}))
        .await;
    assert!(loaded.get("error").is_none(), "{loaded}");
    server.push(openai::text(["five"]));
    again.prompt(&session, "after reload").await;
    let requests = server.requests();
    let body = requests.last().unwrap().body["messages"].to_string();
    assert!(
        !body.contains("second question") && !body.contains("third question"),
        "{body}"
    );
    assert!(
        body.contains("another try") && body.contains("after reload"),
        "{body}"
    );
}
