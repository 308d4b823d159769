//! Keybinding tasks end to end (issue 11): `textDocument/codeAction`,
//! `workspace/executeCommand` `tandem.runTask`, `tandem/runTask`, inline
//! edits and `[tasks.<id>]` configuration, through the real binary against
//! the scripted model server.

mod code_actions;
mod config;
mod inline_edit;
mod run_task;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::support::client::{file_uri, Editor};
use crate::support::model_server::ModelServer;

/// An editor with a workspace, connected to a daemon whose model is the
/// scripted server (through `initializationOptions`, since task sessions
/// are made by the daemon, not by `tandem/newSession`).
pub struct Fixture {
    pub editor: Editor,
    pub server: ModelServer,
    pub root: PathBuf,
    _dir: tempfile::TempDir,
}

/// Capabilities of an editor like VS Code: it reviews workspace edits,
/// answers questions and shows progress.
pub fn full_capabilities() -> Value {
    json!({
        "workspace": {
            "applyEdit": true,
            "workspaceEdit": {"documentChanges": true, "changeAnnotationSupport": {"groupsOnLabel": true}},
        },
        "window": {"workDoneProgress": true},
        "experimental": {"tandem": {"requestUserInput": true, "requestPermission": true}},
    })
}

impl Fixture {
    /// `options` is merged into the scripted server's configuration and
    /// sent as `initializationOptions`.
    pub async fn start(options: Value) -> Fixture {
        Fixture::start_with(options, full_capabilities()).await
    }

    pub async fn start_with(options: Value, capabilities: Value) -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("canonicalize");
        let server = ModelServer::start().await;
        let mut init = server.session_config();
        merge(&mut init, options);
        let mut editor = Editor::spawn().await;
        editor
            .initialize_with(
                &root,
                json!({"capabilities": capabilities, "initializationOptions": init}),
            )
            .await;
        Fixture {
            editor,
            server,
            root,
            _dir: dir,
        }
    }

    /// Writes `relative` on disk and opens it in the editor (version 1).
    pub async fn open(&mut self, relative: &str, text: &str) -> PathBuf {
        let path = self.root.join(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, text).expect("write");
        self.editor.open(&path, text).await;
        path
    }

    /// A `textDocument/didChange` with one ranged change.
    pub async fn change(&mut self, path: &Path, version: i32, range: Value, text: &str) {
        self.editor
            .notify(
                "textDocument/didChange",
                json!({
                    "textDocument": {"uri": file_uri(path), "version": version},
                    "contentChanges": [{"range": range, "text": text}],
                }),
            )
            .await;
    }

    pub async fn code_actions(&mut self, path: &Path, range: Value, diagnostics: Value) -> Value {
        let response = self
            .editor
            .request(
                "textDocument/codeAction",
                json!({
                    "textDocument": {"uri": file_uri(path)},
                    "range": range,
                    "context": {"diagnostics": diagnostics},
                }),
            )
            .await;
        response
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("codeAction failed: {response}"))
    }

    /// Sends `tandem/runTask` without waiting; returns the request id.
    pub async fn start_run_task(&mut self, params: Value) -> i64 {
        self.editor.start_request("tandem/runTask", params).await
    }

    pub async fn run_task(&mut self, params: Value) -> Value {
        self.editor.request("tandem/runTask", params).await
    }

    /// A `tandem/update` of `session` whose `update` `pred` accepts: one
    /// received already, else the next one.
    pub async fn update(&mut self, session: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let seen = self
            .editor
            .updates_of(session)
            .into_iter()
            .find(|u| pred(&u["update"]));
        match seen {
            Some(update) => update,
            None => self.editor.wait_update(session, pred).await,
        }
    }

    /// The task sessions in `tandem/listSessions`.
    pub async fn task_sessions(&mut self) -> Vec<Value> {
        let listed = self.editor.request("tandem/listSessions", json!({})).await;
        listed["result"]["sessions"]
            .as_array()
            .expect("sessions")
            .iter()
            .filter(|s| s["kind"] == "task")
            .cloned()
            .collect()
    }
}

pub fn range(a: (u32, u32), b: (u32, u32)) -> Value {
    json!({"start": {"line": a.0, "character": a.1}, "end": {"line": b.0, "character": b.1}})
}

pub fn diagnostic(a: (u32, u32), b: (u32, u32), message: &str) -> Value {
    json!({"range": range(a, b), "message": message, "severity": 1, "source": "rustc", "code": "E0308"})
}

/// The text of the user message of the model request (its last `user`
/// message).
pub fn last_user_message(body: &Value) -> String {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(base), Value::Object(extra)) => {
            for (k, v) in extra {
                merge(base.entry(k).or_insert(Value::Null), v);
            }
        }
        (base, extra) => *base = extra,
    }
}
