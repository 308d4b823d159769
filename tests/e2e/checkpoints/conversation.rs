//! Rewinding the conversation: the next request ends before the chosen
//! message, the log keeps everything, replay shows both.

use std::sync::Arc;

use serde_json::json;

use super::{auto, logged, message_id, rewind, workspace};
use crate::serve::{attach_options, StopOnDrop};
use crate::support::client::{tandem_bin, Editor, EditorOptions};
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

/// The windows of a session hear of a rewind: a `rewound` update with the
/// message it went back to and the user messages it dropped (the one named
/// and the later ones; none for files only). Through the serve a second
/// window that has the session loaded hears it live; a window that loads
/// the session later hears it in the replay.
async fn windows_hear_of_a_rewind(options: impl Fn() -> EditorOptions, serve: bool) {
    let server = ModelServer::start().await;
    let (_dir, root) = workspace();
    let mut editor = Editor::spawn_with(options()).await;
    editor.initialize(&root).await;
    let session = editor.new_session(auto(&server)).await;
    server.push(openai::text(["one"]));
    editor.prompt(&session, "first question").await;
    server.push(openai::text(["two"]));
    let (_, updates) = editor.prompt(&session, "second question").await;
    let second = message_id(&updates);
    server.push(openai::text(["three"]));
    let (_, updates) = editor.prompt(&session, "third question").await;
    let third = message_id(&updates);
    let mut watching = None;
    if serve {
        let mut other = Editor::spawn_with(options()).await;
        other.initialize(&root).await;
        load(&mut other, &session).await;
        watching = Some(other);
    }

    rewind(
        &mut editor,
        json!({"sessionId": session, "toMessageId": second, "files": true, "conversation": false}),
    )
    .await;
    // The update is sent before the answer.
    let files_only = rewound_updates(&editor, &session);
    assert_eq!(
        files_only[0]["update"],
        json!({"sessionUpdate": "rewound", "rewindId": "rw1", "toMessageId": second,
               "conversation": false, "droppedMessageIds": []})
    );
    let result = rewind(
        &mut editor,
        json!({"sessionId": session, "toMessageId": second, "files": false, "conversation": true}),
    )
    .await;
    assert_eq!(result["rewindId"], "rw2", "{result}");
    let expected = json!({"sessionUpdate": "rewound", "rewindId": "rw2", "toMessageId": second,
                          "conversation": true, "droppedMessageIds": [second, third]});
    let is_rw2 = |u: &serde_json::Value| u["sessionUpdate"] == "rewound" && u["rewindId"] == "rw2";
    let update = rewound_updates(&editor, &session)[1].clone();
    assert_eq!(update["update"], expected);
    assert!(update.get("turnId").is_none(), "{update}");
    if let Some(mut other) = watching {
        let live = other.wait_update(&session, is_rw2).await;
        assert_eq!(live["update"], expected, "the other window hears it live");
    }

    // A window that loads the session later hears both in the replay.
    let home = if serve {
        editor.home.clone()
    } else {
        editor.kill_9().await
    };
    let mut later = Editor::spawn_with(EditorOptions {
        home: Some(home),
        ..options()
    })
    .await;
    later.initialize(&root).await;
    load(&mut later, &session).await;
    let replayed: Vec<serde_json::Value> = rewound_updates(&later, &session)
        .into_iter()
        .map(|u| u["update"]["rewindId"].clone())
        .collect();
    assert_eq!(replayed, [json!("rw1"), json!("rw2")]);
}

#[tokio::test]
async fn a_rewind_is_sent_to_the_window_as_a_rewound_update() {
    windows_hear_of_a_rewind(EditorOptions::default, false).await;
}

#[tokio::test]
async fn a_rewind_through_the_serve_is_sent_to_every_window_of_the_session() {
    let home = Arc::new(tempfile::tempdir().unwrap());
    let _stop = StopOnDrop(home.path().to_path_buf());
    windows_hear_of_a_rewind(|| attach_options(&home), true).await;
}

async fn load(editor: &mut Editor, session: &str) {
    let loaded = editor
        .request("tandem/loadSession", json!({"sessionId": session}))
        .await;
    assert!(loaded.get("error").is_none(), "{loaded}");
}

/// The `rewound` updates `editor` has received for `session`.
fn rewound_updates(editor: &Editor, session: &str) -> Vec<serde_json::Value> {
    editor
        .updates_of(session)
        .into_iter()
        .filter(|u| u["update"]["sessionUpdate"] == "rewound")
        .collect()
}

/// A conversation rewind is undone by rewinding to its `rewindId` with
/// `conversation: true`: the dropped messages are back in the next request,
/// in log order, and the windows hear which came back. A files-only
/// rewind's id cannot be redone as a conversation.
#[tokio::test]
async fn a_conversation_rewind_is_redone_by_its_rewind_id() {
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
    let rewound = rewind(
        &mut editor,
        json!({"sessionId": session, "toMessageId": second, "files": false, "conversation": true}),
    )
    .await;
    assert_eq!(rewound["rewindId"], "rw1");
    server.push(openai::text(["three"]));
    editor.prompt(&session, "another try").await;
    let body = server.requests().last().unwrap().body["messages"].to_string();
    assert!(!body.contains("second question"), "{body}");

    let files_only = rewind(
        &mut editor,
        json!({"sessionId": session, "toMessageId": second, "files": true, "conversation": false}),
    )
    .await;
    assert_eq!(files_only["rewindId"], "rw2");
    let refused = editor
        .request(
            "tandem/rewind",
            json!({"sessionId": session, "toMessageId": "rw2", "files": false, "conversation": true}),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("toMessageId: `rw2` is a rewind of the files only"),
        "{refused}"
    );

    let redo = rewind(
        &mut editor,
        json!({"sessionId": session, "toMessageId": "rw1", "files": false, "conversation": true}),
    )
    .await;
    assert_eq!(redo["rewindId"], "rw3", "{redo}");
    let update = rewound_updates(&editor, &session).last().unwrap().clone();
    assert_eq!(
        update["update"],
        json!({"sessionUpdate": "rewound", "rewindId": "rw3", "toMessageId": "rw1",
               "conversation": true, "droppedMessageIds": [],
               "restoredMessageIds": [second]})
    );
    server.push(openai::text(["four"]));
    editor.prompt(&session, "after the redo").await;
    let requests = server.requests();
    let said: Vec<String> = requests.last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    let at = |needle: &str| {
        said.iter()
            .position(|t| t.contains(needle))
            .unwrap_or_else(|| panic!("{needle:?} in {said:?}"))
    };
    assert!(at("first question") < at("second question"), "{said:?}");
    assert!(at("second question") < at("another try"), "{said:?}");
    assert!(at("another try") < at("after the redo"), "{said:?}");
    assert_eq!(said.len(), 7, "{said:?}");
}
