//! Rewinding files: exact bytes and modes, conflicts, force, redo, a kill
//! in the middle, over stdio and through the serve.

use std::sync::Arc;

use serde_json::json;

use super::{auto, logged, message_id, put, rewind, script_call, statuses, tree, workspace};
use crate::serve::{attach_options, StopOnDrop};
use crate::support::client::{Editor, EditorOptions};
use crate::support::model_server::ModelServer;

const PATCH: &str = "*** Begin Patch
*** Update File: a.txt
@@
-alpha
+ALPHA
*** Update File: b.txt
@@
 one
-two
+TWO
*** Update File: run.sh
@@
-echo old
+echo new
*** Add File: new.txt
+brand new
*** Delete File: gone.txt
*** End Patch";

/// A workspace of four files (one executable, one private, one without a
/// final newline) and a turn whose patch updates three, creates one and
/// deletes one.
async fn patched_turn(
    editor: &mut Editor,
    server: &ModelServer,
    root: &std::path::Path,
) -> (String, String) {
    put(root, "a.txt", b"alpha\n", 0o644);
    put(root, "b.txt", b"one\ntwo\nthree", 0o640);
    put(root, "run.sh", b"#!/bin/sh\necho old\n", 0o755);
    put(root, "gone.txt", "private\r\nbytes é\n".as_bytes(), 0o600);
    editor.initialize(root).await;
    let session = editor.new_session(auto(server)).await;
    script_call(
        server,
        "call_patch",
        "apply_patch",
        json!({ "input": PATCH }),
    );
    let (receipt, updates) = editor.prompt(&session, "change them").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    (session, message_id(&updates))
}

async fn five_files_restore_exactly_and_redo_brings_them_back(options: EditorOptions) {
    let server = ModelServer::start().await;
    let (_dir, root) = workspace();
    let mut editor = Editor::spawn_with(options).await;
    put(&root, "keep.txt", b"untouched", 0o644);
    let before = {
        // The tree before the turn, as patched_turn writes it.
        let (_d2, r2) = workspace();
        put(&r2, "keep.txt", b"untouched", 0o644);
        put(&r2, "a.txt", b"alpha\n", 0o644);
        put(&r2, "b.txt", b"one\ntwo\nthree", 0o640);
        put(&r2, "run.sh", b"#!/bin/sh\necho old\n", 0o755);
        put(&r2, "gone.txt", "private\r\nbytes é\n".as_bytes(), 0o600);
        tree(&r2)
    };
    let (session, message) = patched_turn(&mut editor, &server, &root).await;
    let agents = tree(&root);
    assert_ne!(agents, before);
    assert!(root.join("new.txt").exists() && !root.join("gone.txt").exists());

    // A dry run says what would happen and changes nothing.
    let dry = rewind(
        &mut editor,
        json!({"sessionId": session, "toMessageId": message, "files": true,
               "conversation": false, "dryRun": true}),
    )
    .await;
    assert_eq!(
        statuses(&dry),
        [
            ("a.txt".into(), "restore".into()),
            ("b.txt".into(), "restore".into()),
            ("gone.txt".into(), "restore".into()),
            ("new.txt".into(), "restore".into()),
            ("run.sh".into(), "restore".into()),
        ]
    );
    assert!(dry.get("rewindId").is_none(), "{dry}");
    assert_eq!(tree(&root), agents);

    // The rewind: all five exactly as before, bytes and modes.
    let done = rewind(
        &mut editor,
        json!({"sessionId": session, "toMessageId": message, "files": true, "conversation": false}),
    )
    .await;
    assert!(
        statuses(&done).iter().all(|(_, s)| s == "restored"),
        "{done}"
    );
    assert_eq!(tree(&root), before);
    let rewind_id = done["rewindId"].as_str().expect("rewindId").to_string();
    let rewound = logged(&editor, &session, "rewound");
    assert_eq!(rewound.len(), 1, "{rewound:?}");
    assert_eq!(rewound[0]["restored"].as_array().unwrap().len(), 5);
    assert_eq!(logged(&editor, &session, "rewind_file").len(), 5);

    // Redo: rewinding to the rewind brings the agent's version back.
    let redo = rewind(
        &mut editor,
        json!({"sessionId": session, "toMessageId": rewind_id, "files": true, "conversation": false}),
    )
    .await;
    assert!(
        statuses(&redo).iter().all(|(_, s)| s == "restored"),
        "{redo}"
    );
    assert_eq!(tree(&root), agents);

    // The store lives in $TANDEM_HOME, the workspace has no trace of it.
    assert!(editor.home.path().join("checkpoints/manifests").is_dir());
    assert!(!root.join(".git").exists());
}

#[tokio::test]
async fn a_rewind_restores_five_files_exactly_and_redo_brings_the_agents_version_back() {
    five_files_restore_exactly_and_redo_brings_them_back(EditorOptions::default()).await;
}

#[tokio::test]
async fn a_rewind_through_the_serve_restores_files_and_redoes() {
    let home = Arc::new(tempfile::tempdir().unwrap());
    let _stop = StopOnDrop(home.path().to_path_buf());
    five_files_restore_exactly_and_redo_brings_them_back(attach_options(&home)).await;
}

#[tokio::test]
async fn a_file_the_user_changed_on_disk_or_in_a_buffer_is_a_conflict_until_forced() {
    let server = ModelServer::start().await;
    let (_dir, root) = workspace();
    let mut editor = Editor::spawn().await;
    let (session, message) = patched_turn(&mut editor, &server, &root).await;
    // The user edits b.txt on disk, and a.txt in the editor without saving.
    std::fs::write(root.join("b.txt"), "one\nTWO\nthree\nmine").unwrap();
    editor
        .open(&root.join("a.txt"), "ALPHA\nunsaved line\n")
        .await;
    let disk_a = std::fs::read(root.join("a.txt")).unwrap();

    let result = rewind(
        &mut editor,
        json!({"sessionId": session, "toMessageId": message, "files": true, "conversation": false}),
    )
    .await;
    assert_eq!(
        statuses(&result),
        [
            ("a.txt".into(), "conflict".into()),
            ("b.txt".into(), "conflict".into()),
            ("gone.txt".into(), "restored".into()),
            ("new.txt".into(), "restored".into()),
            ("run.sh".into(), "restored".into()),
        ]
    );
    let b = result["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with("b.txt"))
        .unwrap();
    let diff = b["diff"].as_str().unwrap();
    assert!(diff.contains("+mine"), "{diff}");
    let a = result["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with("a.txt"))
        .unwrap();
    assert!(a["diff"].as_str().unwrap().contains("+unsaved line"), "{a}");
    // Untouched: the user's disk edit, and the disk under the buffer.
    assert_eq!(
        std::fs::read_to_string(root.join("b.txt")).unwrap(),
        "one\nTWO\nthree\nmine"
    );
    assert_eq!(std::fs::read(root.join("a.txt")).unwrap(), disk_a);
    let rewound = logged(&editor, &session, "rewound");
    assert_eq!(rewound[0]["conflicts"].as_array().unwrap().len(), 2);

    // Forced for b.txt only: b goes back, a stays a conflict.
    let b_path = root.join("b.txt").display().to_string();
    let forced = rewind(
        &mut editor,
        json!({"sessionId": session, "toMessageId": message, "files": true,
               "conversation": false, "force": [b_path]}),
    )
    .await;
    let forced = statuses(&forced);
    assert!(
        forced.contains(&("b.txt".into(), "restored".into())),
        "{forced:?}"
    );
    assert!(
        forced.contains(&("a.txt".into(), "conflict".into())),
        "{forced:?}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("b.txt")).unwrap(),
        "one\ntwo\nthree"
    );
}

#[tokio::test]
async fn a_rewind_is_refused_while_a_turn_runs_and_names_an_unknown_message() {
    use crate::support::model_server::{openai, Reply, SseStep};
    let server = ModelServer::start().await;
    let (_dir, root) = workspace();
    let mut editor = Editor::spawn().await;
    let (session, message) = patched_turn(&mut editor, &server, &root).await;
    let unknown = editor
        .request(
            "tandem/rewind",
            json!({"sessionId": session, "toMessageId": "m999", "files": true, "conversation": true}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(unknown["error"]["message"]
        .as_str()
        .unwrap()
        .contains("toMessageId"));
    let bad = editor
        .request(
            "tandem/rewind",
            json!({"sessionId": session, "toMessageId": message}),
        )
        .await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");

    server.push(Reply::Sse(vec![
        openai::delta(json!({"role": "assistant", "content": "working"})),
        SseStep::Stall,
    ]));
    let prompt = editor.start_prompt(&session, "keep going").await;
    server.wait_for_requests(3).await;
    let agents = tree(&root);
    let busy = editor
        .request(
            "tandem/rewind",
            json!({"sessionId": session, "toMessageId": message, "files": true, "conversation": false}),
        )
        .await;
    assert_eq!(busy["error"]["code"], -32005, "{busy}");
    assert_eq!(tree(&root), agents);
    editor
        .notify("tandem/cancel", json!({"sessionId": session}))
        .await;
    let (answer, _) = editor.response(prompt).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
}

#[tokio::test]
async fn kill_9_during_a_rewind_leaves_each_file_restored_or_untouched_and_the_log_says_which() {
    let server = ModelServer::start().await;
    let (_dir, root) = workspace();
    let mut editor = Editor::spawn_with(EditorOptions {
        env: vec![("TANDEM_TEST_REWIND_PAUSE_MS".into(), "3000".into())],
        ..EditorOptions::default()
    })
    .await;
    let (session, message) = patched_turn(&mut editor, &server, &root).await;
    let agents = tree(&root);
    editor
        .start_request(
            "tandem/rewind",
            json!({"sessionId": session, "toMessageId": message, "files": true, "conversation": false}),
        )
        .await;
    // Killed once the first file is restored (the daemon pauses after it).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while logged(&editor, &session, "rewind_file").is_empty() {
        assert!(std::time::Instant::now() < deadline, "no file restored");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let lines = editor.log_lines(&session);
    let home = editor.kill_9().await;
    let started: Vec<_> = lines
        .iter()
        .filter(|e| e["type"] == "rewind_started")
        .collect();
    assert_eq!(started.len(), 1);
    assert_eq!(started[0]["files"].as_array().unwrap().len(), 5);
    let restored: Vec<String> = lines
        .iter()
        .filter(|e| e["type"] == "rewind_file")
        .map(|e| e["path"].as_str().unwrap().to_string())
        .collect();
    assert!(lines.iter().all(|e| e["type"] != "rewound"));
    // Each file is wholly the agent's or wholly restored, as the log says.
    let now = tree(&root);
    let originals = [
        ("a.txt", b"alpha\n".to_vec()),
        ("b.txt", b"one\ntwo\nthree".to_vec()),
        ("run.sh", b"#!/bin/sh\necho old\n".to_vec()),
        ("gone.txt", "private\r\nbytes é\n".as_bytes().to_vec()),
    ];
    for (name, original) in originals {
        let path = root.join(name).display().to_string();
        let current = now
            .iter()
            .find(|(n, ..)| n == name)
            .map(|(_, b, _)| b.clone());
        let agent = agents
            .iter()
            .find(|(n, ..)| n == name)
            .map(|(_, b, _)| b.clone());
        if restored.contains(&path) {
            assert_eq!(current, Some(original), "{name} restored");
        } else {
            assert_eq!(current, agent, "{name} untouched");
        }
    }
    assert_eq!(restored.len(), 1, "{restored:?}");
    // No temporary file is left beside them.
    let names: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains(".tandem-")), "{names:?}");

    // The next daemon to load the session closes the rewind in the log,
    // saying which files were restored and which were not written.
    let mut again = Editor::spawn_with(EditorOptions {
        home: Some(home),
        ..EditorOptions::default()
    })
    .await;
    again.initialize(&root).await;
    let loaded = again
        .request("tandem/loadSession", json!({"sessionId": session}))
        .await;
    assert!(loaded.get("error").is_none(), "{loaded}");
    let rewound = logged(&again, &session, "rewound");
    assert_eq!(rewound.len(), 1, "{rewound:?}");
    assert!(rewound[0]["recovered"].is_object(), "{rewound:?}");
    assert_eq!(rewound[0]["restored"], json!(restored));
    assert_eq!(rewound[0]["untouched"].as_array().unwrap().len(), 4);
    assert_eq!(tree(&root), now, "recovery writes no file");
}

#[tokio::test]
async fn an_open_buffer_is_restored_through_workspace_apply_edit_not_the_disk() {
    let server = ModelServer::start().await;
    let (_dir, root) = workspace();
    let mut editor = Editor::spawn().await;
    let edits = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = edits.clone();
    editor.on_request(move |method, params| {
        (method == "workspace/applyEdit").then(|| {
            seen.lock().unwrap().push(params.clone());
            json!({"applied": true})
        })
    });
    put(&root, "a.txt", b"alpha\n", 0o644);
    editor
        .initialize_with(
            &root,
            json!({"capabilities": {"workspace": {"applyEdit": true,
                "workspaceEdit": {"documentChanges": true,
                                  "resourceOperations": ["create", "rename", "delete"]}}}}),
        )
        .await;
    let session = editor.new_session(auto(&server)).await;
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n*** End Patch";
    script_call(
        &server,
        "call_patch",
        "apply_patch",
        json!({ "input": patch }),
    );
    let (_, updates) = editor.prompt(&session, "shout").await;
    let message = message_id(&updates);
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "ALPHA\n"
    );
    // The user opens the file the agent wrote.
    editor.open(&root.join("a.txt"), "ALPHA\n").await;
    let result = rewind(
        &mut editor,
        json!({"sessionId": session, "toMessageId": message, "files": true, "conversation": false}),
    )
    .await;
    assert_eq!(statuses(&result), [("a.txt".into(), "restored".into())]);
    let edits = edits.lock().unwrap().clone();
    let last = edits.last().expect("an applyEdit");
    let change = &last["edit"]["documentChanges"][0];
    assert_eq!(change["edits"][0]["newText"], "alpha\n", "{last}");
    assert_eq!(change["textDocument"]["version"], 1, "{last}");
    assert_eq!(
        change["edits"][0]["range"],
        json!({"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}})
    );
    // The disk is the editor's to save: untouched.
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "ALPHA\n"
    );
}
