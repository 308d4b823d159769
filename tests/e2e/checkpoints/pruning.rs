//! The store's bound over many turns, through the real binary.

use serde_json::json;

use super::{auto, message_id, put, rewind, script_call, statuses, workspace};
use crate::support::client::Editor;
use crate::support::model_server::ModelServer;

fn line(i: usize) -> String {
    format!("{i:0999}")
}

fn store_bytes(home: &std::path::Path) -> u64 {
    let mut total = 0;
    for dir in std::fs::read_dir(home.join("checkpoints/objects"))
        .unwrap()
        .flatten()
    {
        for file in std::fs::read_dir(dir.path()).unwrap().flatten() {
            total += file.metadata().unwrap().len();
        }
    }
    total
}

#[tokio::test]
async fn pruning_keeps_the_store_under_max_bytes_over_many_turns_and_kept_checkpoints_restore() {
    const MAX: u64 = 6_000;
    let server = ModelServer::start().await;
    let (_dir, root) = workspace();
    put(&root, "big.txt", format!("{}\n", line(0)).as_bytes(), 0o644);
    let mut editor = Editor::spawn().await;
    editor.initialize(&root).await;
    let mut config = auto(&server);
    config["checkpoints"] = json!({"max_bytes": MAX});
    let session = editor.new_session(config).await;
    let mut messages = Vec::new();
    for i in 0..12 {
        let patch = format!(
            "*** Begin Patch\n*** Update File: big.txt\n@@\n-{}\n+{}\n*** End Patch",
            line(i),
            line(i + 1)
        );
        script_call(
            &server,
            &format!("call_{i}"),
            "apply_patch",
            json!({ "input": patch }),
        );
        let (receipt, updates) = editor.prompt(&session, &format!("turn {i}")).await;
        assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
        messages.push(message_id(&updates));
        assert!(store_bytes(editor.home.path()) <= MAX, "after turn {i}");
    }
    // The oldest checkpoints are gone, and say so; every kept one restores.
    let first = rewind(
        &mut editor,
        json!({"sessionId": session, "toMessageId": messages[0], "files": true,
               "conversation": false, "dryRun": true}),
    )
    .await;
    assert_eq!(
        statuses(&first),
        [("big.txt".into(), "unrestorable".into())]
    );
    assert!(
        first["files"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("pruned"),
        "{first}"
    );
    let mut kept = 0;
    for (i, message) in messages.iter().enumerate().rev() {
        let dry = rewind(
            &mut editor,
            json!({"sessionId": session, "toMessageId": message, "files": true,
                   "conversation": false, "dryRun": true}),
        )
        .await;
        if statuses(&dry) == [("big.txt".to_string(), "restore".to_string())] {
            kept += 1;
        } else {
            // Once one is pruned, every older one is too.
            assert!(i < messages.len() - 1, "the newest checkpoint was pruned");
            break;
        }
    }
    assert!(kept >= 2, "{kept}");
    let last = messages[messages.len() - kept].clone();
    let done = rewind(
        &mut editor,
        json!({"sessionId": session, "toMessageId": last, "files": true, "conversation": false}),
    )
    .await;
    assert_eq!(statuses(&done), [("big.txt".into(), "restored".into())]);
    assert_eq!(
        std::fs::read_to_string(root.join("big.txt")).unwrap(),
        format!("{}\n", line(12 - kept))
    );
}
