//! What commands change: restored when tandem held the file's content
//! before the command, listed as unrestorable when it did not.

use serde_json::json;

use super::{auto, logged, message_id, put, rewind, script_call, statuses, workspace};
use crate::support::client::{file_uri, tandem_bin, Editor};
use crate::support::model_server::{openai, ModelServer};

#[tokio::test]
async fn a_command_made_change_is_restored_or_listed_as_unrestorable() {
    let server = ModelServer::start().await;
    let (_dir, root) = workspace();
    put(&root, "known.txt", b"v1\n", 0o644);
    put(&root, "other.txt", b"theirs\n", 0o644);
    put(&root, "open.txt", b"shown\n", 0o644);
    std::fs::write(root.join(".gitignore"), "build/\n").unwrap();
    std::fs::create_dir(root.join("build")).unwrap();
    let mut editor = Editor::spawn().await;
    editor.initialize(&root).await;
    editor.open(&root.join("open.txt"), "shown\n").await;
    let session = editor.new_session(auto(&server)).await;

    // Turn 1 patches known.txt: its content is now in the store.
    let patch = "*** Begin Patch\n*** Update File: known.txt\n@@\n-v1\n+v2\n*** End Patch";
    script_call(&server, "call_1", "apply_patch", json!({ "input": patch }));
    let (receipt, _) = editor.prompt(&session, "bump it").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");

    // Turn 2 runs a command that changes four files and an ignored one.
    let cmd = "printf more >> known.txt; printf more >> other.txt; printf more >> open.txt; \
               printf fresh > made.txt; printf o > build/out.o";
    script_call(&server, "call_2", "exec_command", json!({ "cmd": cmd }));
    let (receipt, updates) = editor.prompt(&session, "run it").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    let second = message_id(&updates);
    // The editor reloads the clean buffer the command changed.
    editor
        .notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": file_uri(&root.join("open.txt")), "version": 2},
                   "contentChanges": [{"text": "shown\nmore"}]}),
        )
        .await;
    assert_eq!(
        std::fs::read_to_string(root.join("known.txt")).unwrap(),
        "v2\nmore"
    );
    let checkpoint = logged(&editor, &session, "checkpoint");
    let by_command: Vec<&serde_json::Value> = checkpoint
        .iter()
        .flat_map(|c| c["files"].as_array().unwrap())
        .filter(|f| f["by_command"] == true)
        .collect();
    assert_eq!(by_command.len(), 4, "{checkpoint:?}");

    let result = rewind(
        &mut editor,
        json!({"sessionId": session, "toMessageId": second, "files": true, "conversation": false}),
    )
    .await;
    assert_eq!(
        statuses(&result),
        [
            ("known.txt".into(), "restored".into()),
            ("made.txt".into(), "restored".into()),
            ("open.txt".into(), "restored".into()),
            ("other.txt".into(), "unrestorable".into()),
        ]
    );
    let other = result["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with("other.txt"))
        .unwrap();
    assert!(
        other["reason"]
            .as_str()
            .unwrap()
            .contains("changed by a command, cannot be restored"),
        "{other}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("known.txt")).unwrap(),
        "v2\n"
    );
    assert!(!root.join("made.txt").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("other.txt")).unwrap(),
        "theirs\nmore"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("build/out.o")).unwrap(),
        "o"
    );
    let rewound = logged(&editor, &session, "rewound");
    assert_eq!(rewound[0]["unrestorable"].as_array().unwrap().len(), 1);

    // `tandem replay --checkpoints` lists the two turns and the rewind.
    let listing = std::process::Command::new(tandem_bin())
        .args(["replay", &session, "--checkpoints"])
        .env("TANDEM_HOME", editor.home.path())
        .output()
        .unwrap();
    assert!(listing.status.success());
    let listing = String::from_utf8_lossy(&listing.stdout);
    for expected in [
        "t1 ",
        ": bump it",
        "t2 ",
        &format!("rewind with toMessageId {second}: run it"),
        "other.txt  changed by a command, cannot be restored",
        "made.txt  created by a command",
        "known.txt  changed by a command, restorable",
        "rw1 ",
        "rewind with toMessageId rw1",
    ] {
        assert!(listing.contains(expected), "{expected:?} in\n{listing}");
    }
}

#[tokio::test]
async fn scan_commands_false_turns_the_scan_off() {
    let server = ModelServer::start().await;
    let (_dir, root) = workspace();
    let mut editor = Editor::spawn().await;
    editor.initialize(&root).await;
    let mut config = auto(&server);
    config["checkpoints"] = json!({"scan_commands": false});
    let session = editor.new_session(config).await;
    script_call(
        &server,
        "call_1",
        "exec_command",
        json!({ "cmd": "printf x > made.txt" }),
    );
    let (receipt, _) = editor.prompt(&session, "run it").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    assert!(root.join("made.txt").exists());
    assert!(logged(&editor, &session, "checkpoint").is_empty());
}

/// The scan is incremental within a turn: the second command reuses the
/// walk after the first, and the file a patch changed between them is
/// compared by a fresh stat. Every change is still found and restored.
#[tokio::test]
async fn two_commands_and_a_patch_in_one_turn_are_all_restored() {
    let server = ModelServer::start().await;
    let (_dir, root) = workspace();
    put(&root, "k.txt", b"k1\n", 0o644);
    put(&root, "u.txt", b"theirs\n", 0o644);
    let mut editor = Editor::spawn().await;
    editor.initialize(&root).await;
    let session = editor.new_session(auto(&server)).await;
    let first = json!({ "cmd": "printf a > a.txt; printf more >> u.txt" });
    let patch = "*** Begin Patch\n*** Update File: k.txt\n@@\n-k1\n+k2\n*** End Patch";
    let second = json!({ "cmd": "printf more >> k.txt; printf b > b.txt; printf aa > a.txt" });
    server.push(openai::tool_calls(&[(
        "call_1",
        "exec_command",
        &first.to_string(),
    )]));
    server.push(openai::tool_calls(&[(
        "call_2",
        "apply_patch",
        &json!({ "input": patch }).to_string(),
    )]));
    server.push(openai::tool_calls(&[(
        "call_3",
        "exec_command",
        &second.to_string(),
    )]));
    server.push(openai::text(["done"]));
    let (receipt, updates) = editor.prompt(&session, "three calls").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    assert_eq!(
        std::fs::read_to_string(root.join("k.txt")).unwrap(),
        "k2\nmore"
    );
    let by_command: Vec<String> = logged(&editor, &session, "checkpoint")
        .iter()
        .flat_map(|c| c["files"].as_array().unwrap().clone())
        .filter(|f| f["by_command"] == true)
        .map(|f| {
            f["path"]
                .as_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(by_command, ["a.txt", "u.txt", "b.txt"]);

    let result = rewind(
        &mut editor,
        json!({"sessionId": session, "toMessageId": message_id(&updates),
               "files": true, "conversation": false}),
    )
    .await;
    assert_eq!(
        statuses(&result),
        [
            ("a.txt".into(), "restored".into()),
            ("b.txt".into(), "restored".into()),
            ("k.txt".into(), "restored".into()),
            ("u.txt".into(), "unrestorable".into()),
        ]
    );
    assert!(!root.join("a.txt").exists());
    assert!(!root.join("b.txt").exists());
    assert_eq!(std::fs::read_to_string(root.join("k.txt")).unwrap(), "k1\n");
    assert_eq!(
        std::fs::read_to_string(root.join("u.txt")).unwrap(),
        "theirs\nmore"
    );
}
