//! The check after an edit: apply_patch's result names the errors the
//! editor reports in the changed lines for the patched version, omits
//! those that were there before, and an editor that never reports costs
//! at most `[tools] diagnostics_settle_ms`.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{
    capabilities, config, connect, diagnostic, diagnostics_changed, workspace, write, Connected,
    Wire, ALL,
};
use crate::support::client::file_uri;
use crate::support::model_server::openai::{text, tool_calls};
use crate::support::model_server::ModelServer;

const BEFORE: &str = "import os\ndef f():\n    return undefined_old\ndef g():\n    return 1\n";
const AFTER: &str =
    "import os\ndef f():\n    return undefined_old\ndef g():\n    return missing_name\n";
const PATCH: &str = "*** Begin Patch\n*** Update File: app.py\n@@ def g():\n-    return 1\n+    return missing_name\n*** End Patch";

fn script_patch(server: &ModelServer) {
    let args = json!({ "input": PATCH }).to_string();
    server.push(tool_calls(&[("call_patch", "apply_patch", &args)]));
    server.push(text(["done"]));
}

/// Starts the prompt and waits until the daemon asks to apply the edit
/// (answered `applied` by the handler); returns the prompt's id.
async fn prompt_until_apply_edit(c: &mut Connected, session: &str) -> i64 {
    let id = c
        .editor
        .start_request(
            "tandem/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "patch it"}]}),
        )
        .await;
    loop {
        let message = c.editor.next_message().await;
        if message["method"] == "workspace/applyEdit" {
            return id;
        }
        assert!(
            message.get("id") != Some(&json!(id)),
            "the turn ended without a workspace/applyEdit: {message}"
        );
    }
}

fn applies_edits(method: &str, _: &Value) -> Option<Value> {
    (method == "workspace/applyEdit").then(|| json!({"applied": true}))
}

async fn the_patch_result_names_only_the_new_error(wire: Wire, mode: &str) {
    let (_dir, root) = workspace();
    let app = write(&root, "app.py", BEFORE);
    let server = ModelServer::start().await;
    script_patch(&server);
    let mut c = connect(wire, &root, capabilities(&ALL)).await;
    c.editor.on_request(applies_edits);
    c.editor.open(&app, BEFORE).await;
    let old_error = diagnostic(2, 11, 24, 1, "\"undefined_old\" is not defined");
    c.editor
        .notify(
            "tandem/diagnosticsChanged",
            diagnostics_changed(&app, 1, vec![old_error.clone()]),
        )
        .await;
    let session = c.editor.new_session(config(&server, mode, json!({}))).await;
    let prompt = prompt_until_apply_edit(&mut c, &session).await;
    // The editor applies the edit, then its language server reports on
    // the new version: the old error, a new one in the patched line, and
    // one outside the changed lines.
    c.editor
        .notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": file_uri(&app), "version": 2},
                   "contentChanges": [{"text": AFTER}]}),
        )
        .await;
    c.editor
        .notify(
            "tandem/diagnosticsChanged",
            diagnostics_changed(
                &app,
                2,
                vec![
                    diagnostic(0, 7, 9, 1, "\"os\" is not accessed"),
                    old_error,
                    diagnostic(4, 11, 23, 1, "\"missing_name\" is not defined"),
                ],
            ),
        )
        .await;
    let receipt = c.editor.response(prompt).await.0;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    let result = &server.wait_for_requests(2).await[1].tool_messages()[0].1;
    assert_eq!(
        result,
        "The patch was applied:\n\
         - app.py: hunk 1 applied\n\
         The editor reports 1 new error in the changed lines:\n\
         app.py:5:12: error: \"missing_name\" is not defined (Pyright reportUndefinedVariable)\n\
         \x20    5\t    return missing_name"
    );
}

#[tokio::test]
async fn apply_patch_names_a_new_error_and_omits_the_old_ones_over_stdio() {
    the_patch_result_names_only_the_new_error(Wire::Stdio, "auto").await;
}

#[tokio::test]
async fn after_the_user_accepts_a_reviewed_patch_its_new_error_is_named() {
    the_patch_result_names_only_the_new_error(Wire::Stdio, "review").await;
}

#[tokio::test]
async fn apply_patch_names_a_new_error_and_omits_the_old_ones_through_the_serve() {
    the_patch_result_names_only_the_new_error(Wire::Serve, "auto").await;
}

#[tokio::test]
async fn an_editor_that_never_reports_diagnostics_costs_at_most_the_settle_cap() {
    const CAP_MS: u64 = 600;
    let (_dir, root) = workspace();
    let app = write(&root, "app.py", BEFORE);
    let server = ModelServer::start().await;
    script_patch(&server);
    let mut c = connect(Wire::Stdio, &root, capabilities(&ALL)).await;
    c.editor.on_request(applies_edits);
    // It never answers `tandem/diagnostics` and never reports.
    c.editor.hold_requests("tandem/diagnostics");
    c.editor.open(&app, BEFORE).await;
    let tools = json!({"diagnostics_settle_ms": CAP_MS});
    let session = c.editor.new_session(config(&server, "auto", tools)).await;
    let started = Instant::now();
    let prompt = prompt_until_apply_edit(&mut c, &session).await;
    c.editor
        .notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": file_uri(&app), "version": 2},
                   "contentChanges": [{"text": AFTER}]}),
        )
        .await;
    let receipt = c.editor.response(prompt).await.0;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    let requests = server.wait_for_requests(2).await;
    // From the prompt to the model's second request: the cap, plus the
    // model's first answer, the edit and the overhead (well under 1 s here).
    let waited = requests[1].received_at.duration_since(started);
    assert!(
        waited < Duration::from_millis(CAP_MS + 900),
        "the check waited {waited:?} with a cap of {CAP_MS} ms"
    );
    assert!(
        waited >= Duration::from_millis(CAP_MS),
        "the check did not wait for the editor: {waited:?}"
    );
    let result = &requests[1].tool_messages()[0].1;
    assert_eq!(
        result,
        &format!(
            "The patch was applied:\n\
             - app.py: hunk 1 applied\n\
             The editor reported no diagnostics for app.py within {CAP_MS} ms; not checked."
        )
    );
    // The unanswered request was withdrawn.
    let asked = c
        .editor
        .received
        .iter()
        .find(|m| m["method"] == "tandem/diagnostics")
        .expect("the daemon asked for the diagnostics before the patch")
        .clone();
    assert!(
        c.editor
            .received
            .iter()
            .any(|m| m["method"] == "$/cancelRequest" && m["params"]["id"] == asked["id"]),
        "the unanswered tandem/diagnostics was not withdrawn"
    );
}

#[tokio::test]
async fn the_check_is_off_when_config_says_so() {
    let (_dir, root) = workspace();
    let app = write(&root, "app.py", BEFORE);
    let server = ModelServer::start().await;
    script_patch(&server);
    let mut c = connect(Wire::Stdio, &root, capabilities(&ALL)).await;
    c.editor.on_request(applies_edits);
    c.editor.open(&app, BEFORE).await;
    let tools = json!({"diagnostics_after_edit": false});
    let session = c.editor.new_session(config(&server, "auto", tools)).await;
    let prompt = prompt_until_apply_edit(&mut c, &session).await;
    c.editor
        .notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": file_uri(&app), "version": 2},
                   "contentChanges": [{"text": AFTER}]}),
        )
        .await;
    c.editor.response(prompt).await;
    let result = &server.wait_for_requests(2).await[1].tool_messages()[0].1;
    assert_eq!(result, "The patch was applied:\n- app.py: hunk 1 applied");
    assert!(
        !c.editor
            .received
            .iter()
            .any(|m| m["method"] == "tandem/diagnostics"),
        "asked for diagnostics with the check off"
    );
}
