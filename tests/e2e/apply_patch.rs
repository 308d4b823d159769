//! apply_patch end to end: the real binary, the scripted model server, and
//! a test editor that answers (or does not offer) `workspace/applyEdit`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::support::client::{file_uri, Editor};
use crate::support::model_server::{openai, ModelServer};

fn config_for(server: &ModelServer, mode: &str) -> Value {
    let mut config = server.session_config();
    config["approval"] = json!({"mode": mode});
    config
}

/// Client capabilities of an editor that reviews and applies workspace edits.
fn apply_edit_capabilities() -> Value {
    json!({"capabilities": {"workspace": {
        "applyEdit": true,
        "workspaceEdit": {
            "documentChanges": true,
            "resourceOperations": ["create", "rename", "delete"],
            "changeAnnotationSupport": {"groupsOnLabel": true},
        },
    }}})
}

/// The workspace root, as the daemon spells it (symlinks resolved).
fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(dir.path()).expect("canonicalize");
    (dir, root)
}

fn write(root: &Path, relative: &str, text: &str) -> PathBuf {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(&path, text).expect("write");
    path
}

fn read(root: &Path, relative: &str) -> String {
    std::fs::read_to_string(root.join(relative)).expect("read")
}

/// The model calls apply_patch with `patch`, then says "done".
fn script_patch(server: &ModelServer, patch: &str) {
    let args = json!({ "input": patch }).to_string();
    server.push(openai::tool_calls(&[("call_patch", "apply_patch", &args)]));
    server.push(openai::text(["done"]));
}

/// What the model was told about the patch: the tool message of the
/// request after the call.
async fn tool_result(server: &ModelServer) -> String {
    let requests = server.wait_for_requests(2).await;
    let messages = requests[1].tool_messages();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0].0, "call_patch");
    messages[0].1.clone()
}

/// Records the daemon's `workspace/applyEdit` params and answers `answer`.
fn answer_apply_edit(editor: &mut Editor, answer: Value) -> Arc<Mutex<Vec<Value>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    editor.on_request(move |method, params| {
        (method == "workspace/applyEdit").then(|| {
            record.lock().expect("lock").push(params.clone());
            answer.clone()
        })
    });
    seen
}

/// An editor that reviews edits (`workspace/applyEdit` with document
/// changes) and answers each with `answer`, in a `review` session on
/// `server`; with the edits it was sent.
async fn reviewing_editor(
    root: &Path,
    server: &ModelServer,
    answer: Value,
) -> (Editor, String, Arc<Mutex<Vec<Value>>>) {
    let mut editor = Editor::spawn().await;
    editor
        .initialize_with(root, apply_edit_capabilities())
        .await;
    let edits = answer_apply_edit(&mut editor, answer);
    let session = editor.new_session(config_for(server, "review")).await;
    (editor, session, edits)
}

/// Sends a prompt, and once the daemon's `workspace/applyEdit` has been
/// received (and answered by the handler) sends `then` as a
/// notification, as an editor applying the edit would; returns the
/// prompt's response.
async fn prompt_answering_edit(
    editor: &mut Editor,
    session: &str,
    then: Option<(&str, Value)>,
) -> Value {
    let id = editor
        .start_request(
            "tandem/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "patch it"}]}),
        )
        .await;
    loop {
        let message = editor.next_message().await;
        if message["method"] == "workspace/applyEdit" {
            break;
        }
        assert!(
            message.get("id") != Some(&json!(id)),
            "the turn ended without a workspace/applyEdit: {message}"
        );
    }
    if let Some((method, params)) = then {
        editor.notify(method, params).await;
    }
    editor.response(id).await.0
}

fn full_text_change(path: &Path, version: i32, text: &str) -> (&'static str, Value) {
    (
        "textDocument/didChange",
        json!({
            "textDocument": {"uri": file_uri(path), "version": version},
            "contentChanges": [{"text": text}],
        }),
    )
}

#[tokio::test]
async fn auto_mode_without_apply_edit_writes_every_file_of_the_patch_and_tells_the_model() {
    let (_dir, root) = workspace();
    write(
        &root,
        "src/lib.rs",
        "fn one() {}\nfn two() {}\nfn three() {}\n",
    );
    write(&root, "old_name.rs", "moved\n");
    write(&root, "gone.txt", "bye\n");
    let server = ModelServer::start().await;
    script_patch(
        &server,
        "*** Begin Patch
*** Add File: docs/added.md
+# fresh
*** Update File: src/lib.rs
@@
-fn one() {}
+fn one() { 1 }
@@
-fn three() {}
+fn three() { 3 }
*** Update File: old_name.rs
*** Move to: moved/new_name.rs
@@
-moved
+moved and changed
*** Delete File: gone.txt
*** End Patch",
    );
    let mut editor = Editor::spawn().await;
    editor.initialize(&root).await;
    let session = editor.new_session(config_for(&server, "auto")).await;

    let (response, updates) = editor.prompt(&session, "patch it").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(read(&root, "docs/added.md"), "# fresh\n");
    assert_eq!(
        read(&root, "src/lib.rs"),
        "fn one() { 1 }\nfn two() {}\nfn three() { 3 }\n"
    );
    assert_eq!(read(&root, "moved/new_name.rs"), "moved and changed\n");
    assert!(!root.join("old_name.rs").exists());
    assert!(!root.join("gone.txt").exists());
    assert_eq!(
        tool_result(&server).await,
        "The patch was applied:\n\
         - docs/added.md: created\n\
         - src/lib.rs: hunks 1, 2 applied\n\
         - old_name.rs -> moved/new_name.rs: moved; hunk 1 applied\n\
         - gone.txt: deleted"
    );
    let call = updates
        .iter()
        .find(|u| u["update"]["sessionUpdate"] == "tool_call")
        .expect("tool_call update");
    assert_eq!(call["update"]["kind"], "edit");
    assert_eq!(
        call["update"]["title"],
        "Patch: Add docs/added.md, update src/lib.rs (2 hunks), \
         move old_name.rs to moved/new_name.rs (1 hunk), delete gone.txt"
    );
    // Nothing was left behind by the atomic writes.
    let mut names: Vec<String> = std::fs::read_dir(&root)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, vec!["docs", "moved", "src"]);
}

#[tokio::test]
async fn the_tool_call_update_carries_each_files_diff() {
    let (_dir, root) = workspace();
    write(&root, "a.txt", "alpha\n");
    let server = ModelServer::start().await;
    script_patch(
        &server,
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n*** Add File: b.txt\n+bravo\n*** End Patch",
    );
    let mut editor = Editor::spawn().await;
    editor.initialize(&root).await;
    let session = editor.new_session(config_for(&server, "auto")).await;

    let (_, updates) = editor.prompt(&session, "patch it").await;
    // ACP diff content names files by absolute path, and ACP clients
    // replace a call's content: one update carries every file.
    let real = root.canonicalize().unwrap();
    let with_diffs = updates
        .iter()
        .filter(|u| {
            u["update"]["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["type"] == "diff"))
        })
        .count();
    assert_eq!(with_diffs, 1);
    let diffs: Vec<&Value> = updates
        .iter()
        .filter(|u| {
            u["update"]["sessionUpdate"] == "tool_call_update"
                && u["update"]["toolCallId"] == "call_patch"
        })
        .flat_map(|u| u["update"]["content"].as_array().into_iter().flatten())
        .filter(|c| c["type"] == "diff")
        .collect();
    assert_eq!(
        diffs,
        vec![
            &json!({"type": "diff", "path": real.join("a.txt"), "oldText": "alpha\n", "newText": "ALPHA\n"}),
            &json!({"type": "diff", "path": real.join("b.txt"), "newText": "bravo\n"}),
        ]
    );
}

#[tokio::test]
async fn review_mode_sends_a_patch_on_an_unsaved_buffer_as_a_versioned_edit_that_asks_for_confirmation(
) {
    let (_dir, root) = workspace();
    let file = write(&root, "src/lib.rs", "// the disk version\n");
    let server = ModelServer::start().await;
    // The context is the unsaved text, not the disk's.
    script_patch(
        &server,
        "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n fn greet() {\n-    println!(\"hi 😀\");\n+    println!(\"hello 😀\");\n }\n*** End Patch",
    );
    let (mut editor, session, edits) =
        reviewing_editor(&root, &server, json!({"applied": true})).await;
    editor.open(&file, "fn main() {}\n").await;
    editor
        .notify(
            "textDocument/didChange",
            json!({
                "textDocument": {"uri": file_uri(&file), "version": 2},
                "contentChanges": [{"text": "// 日本\nfn greet() {\n    println!(\"hi 😀\");\n}\n"}],
            }),
        )
        .await;

    let patched = "// 日本\nfn greet() {\n    println!(\"hello 😀\");\n}\n";
    let response = prompt_answering_edit(
        &mut editor,
        &session,
        Some(full_text_change(&file, 3, patched)),
    )
    .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        tool_result(&server).await,
        "The patch was applied:\n- src/lib.rs: hunk 1 applied"
    );
    assert_eq!(read(&root, "src/lib.rs"), "// the disk version\n");

    let edits = edits.lock().expect("lock");
    assert_eq!(edits.len(), 1);
    let params = &edits[0];
    assert_eq!(params["label"], "Update src/lib.rs (1 hunk)");
    let edit = &params["edit"];
    assert_eq!(
        edit["changeAnnotations"],
        json!({"tandem-patch-call_patch": {
            "label": "Update src/lib.rs (1 hunk)",
            "needsConfirmation": true,
            "description": "Proposed by the tandem agent (apply_patch)",
        }})
    );
    assert_eq!(
        edit["documentChanges"],
        json!([{
            "textDocument": {"uri": file_uri(&file), "version": 2},
            "edits": [{
                // Line 2 of the unsaved buffer; 😀 is two UTF-16 units.
                "range": {"start": {"line": 2, "character": 0}, "end": {"line": 2, "character": 22}},
                "newText": "    println!(\"hello 😀\");",
                "annotationId": "tandem-patch-call_patch",
            }],
        }])
    );
}

#[tokio::test]
async fn review_mode_rejection_reaches_the_model_with_the_users_comment() {
    let (_dir, root) = workspace();
    write(&root, "a.txt", "alpha\n");
    let server = ModelServer::start().await;
    script_patch(
        &server,
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n*** Add File: b.txt\n+bravo\n*** End Patch",
    );
    let (mut editor, session, edits) = reviewing_editor(
        &root,
        &server,
        json!({"applied": false, "failureReason": "not like this"}),
    )
    .await;

    let response = prompt_answering_edit(&mut editor, &session, None).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        tool_result(&server).await,
        "rejected: The user rejected the patch; nothing was changed.\nTheir comment: not like this"
    );
    let log = editor.log_lines(&session);
    let result = log
        .iter()
        .find(|e| e["type"] == "tool_result" && e["call_id"] == "call_patch")
        .expect("a logged result");
    assert_eq!(
        result["status"], "rejected",
        "the log says what happened: {result}"
    );
    assert_eq!(read(&root, "a.txt"), "alpha\n");
    assert!(!root.join("b.txt").exists());
    // A closed file's edit is unversioned; the new file is created by the editor.
    let edit = &edits.lock().expect("lock")[0]["edit"];
    assert_eq!(
        edit["documentChanges"][0]["textDocument"],
        json!({"uri": file_uri(&root.join("a.txt")), "version": null})
    );
    assert_eq!(edit["documentChanges"][1]["kind"], "create");
}

#[tokio::test]
async fn review_mode_partial_acceptance_tells_the_model_which_hunks_landed() {
    let (_dir, root) = workspace();
    let text = "fn one() {}\nfn two() {}\nfn three() {}\n";
    let file = write(&root, "src/lib.rs", text);
    let server = ModelServer::start().await;
    script_patch(
        &server,
        "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-fn one() {}\n+fn one() { 1 }\n@@\n-fn three() {}\n+fn three() { 3 }\n*** End Patch",
    );
    let (mut editor, session, _edits) =
        reviewing_editor(&root, &server, json!({"applied": true})).await;
    editor.open(&file, text).await;

    // The user kept the first hunk and declined the second.
    let only_first = "fn one() { 1 }\nfn two() {}\nfn three() {}\n";
    let response = prompt_answering_edit(
        &mut editor,
        &session,
        Some(full_text_change(&file, 2, only_first)),
    )
    .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let told = tool_result(&server).await;
    assert!(
        told.starts_with("The patch was applied only in part"),
        "{told}"
    );
    assert!(
        told.contains("- src/lib.rs: hunk 1 applied; hunk 2 rejected by the user"),
        "{told}"
    );
}

#[tokio::test]
async fn review_mode_without_apply_edit_asks_permission_and_a_rejection_changes_nothing() {
    let (_dir, root) = workspace();
    write(&root, "a.txt", "alpha\n");
    let server = ModelServer::start().await;
    script_patch(
        &server,
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n*** End Patch",
    );
    let mut editor = Editor::spawn().await;
    editor
        .initialize_with(
            &root,
            json!({"capabilities": {"experimental": {"tandem": {"requestPermission": true}}}}),
        )
        .await;
    let asked = Arc::new(Mutex::new(Vec::new()));
    let record = asked.clone();
    editor.on_request(move |method, params| {
        record
            .lock()
            .expect("lock")
            .push((method.to_string(), params.clone()));
        (method == "tandem/requestPermission")
            .then(|| json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}}))
    });
    let session = editor.new_session(config_for(&server, "review")).await;

    let (response, updates) = editor.prompt(&session, "patch it").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        tool_result(&server).await,
        "rejected: The user rejected the patch; nothing was changed."
    );
    assert_eq!(read(&root, "a.txt"), "alpha\n");
    let asked = asked.lock().expect("lock");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0].0, "tandem/requestPermission");
    assert_eq!(asked[0].1["toolCall"]["kind"], "edit");
    assert!(updates
        .iter()
        .any(|u| u["update"]["waitingFor"] == "permission"));
}

#[tokio::test]
async fn a_patch_whose_second_file_does_not_match_changes_nothing_and_names_the_file_and_hunk() {
    let (_dir, root) = workspace();
    write(&root, "a.txt", "alpha\n");
    write(&root, "b.txt", "bravo\n");
    let server = ModelServer::start().await;
    script_patch(
        &server,
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n*** Update File: b.txt\n@@\n-charlie\n+CHARLIE\n*** End Patch",
    );
    let mut editor = Editor::spawn().await;
    editor.initialize(&root).await;
    let session = editor.new_session(config_for(&server, "auto")).await;

    let (response, updates) = editor.prompt(&session, "patch it").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let told = tool_result(&server).await;
    assert!(told.starts_with("error:"), "{told}");
    assert!(told.contains("b.txt: hunk 1 of 1 did not match"), "{told}");
    assert!(told.contains("nothing was changed"), "{told}");
    assert_eq!(read(&root, "a.txt"), "alpha\n");
    assert_eq!(read(&root, "b.txt"), "bravo\n");
    let status = updates
        .iter()
        .filter(|u| u["update"]["toolCallId"] == "call_patch")
        .filter_map(|u| u["update"]["status"].as_str())
        .next_back();
    assert_eq!(status, Some("failed"));
}

#[tokio::test]
async fn a_malformed_apply_edit_answer_is_named_to_the_model_and_changes_nothing() {
    let (_dir, root) = workspace();
    write(&root, "a.txt", "alpha\n");
    let server = ModelServer::start().await;
    script_patch(
        &server,
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n*** End Patch",
    );
    let (mut editor, session, _edits) =
        reviewing_editor(&root, &server, json!({"applied": "yes"})).await;

    let response = prompt_answering_edit(&mut editor, &session, None).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let told = tool_result(&server).await;
    assert!(
        told.contains(
            "the editor's answer to workspace/applyEdit was malformed: \
             invalid type: string \"yes\", expected a boolean"
        ),
        "{told}"
    );
    assert_eq!(read(&root, "a.txt"), "alpha\n");
}
