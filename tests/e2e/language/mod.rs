//! The editor's language servers as the agent's eyes, through the real
//! binary over stdio and through `tandem serve` (`tandem lsp --attach`):
//! a test editor that answers `tandem/diagnostics`, `tandem/definition`,
//! `tandem/references` and `tandem/workspaceSymbols` and reports its
//! diagnostics with `tandem/diagnosticsChanged`.

mod acp;
mod after_edit;
mod tools;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::serve::{attach_options, StopOnDrop};
use crate::support::client::{file_uri, Editor};
use crate::support::model_server::ModelServer;

/// How the test editor reaches the daemon.
#[derive(Debug, Clone, Copy)]
pub enum Wire {
    Stdio,
    Serve,
}

/// An editor connected over `wire`; the serve (if any) stops when dropped.
pub struct Connected {
    pub editor: Editor,
    /// The answer to `initialize`.
    pub init: Value,
    _stop: Option<StopOnDrop>,
}

/// Every language feature, and `workspace/applyEdit` with file operations.
pub fn capabilities(features: &[&str]) -> Value {
    json!({"capabilities": {
        "experimental": {"tandem": {"languageFeatures": features}},
        "workspace": {
            "applyEdit": true,
            "workspaceEdit": {
                "documentChanges": true,
                "resourceOperations": ["create", "rename", "delete"],
                "changeAnnotationSupport": {"groupsOnLabel": true},
            },
        },
    }})
}

pub const ALL: [&str; 4] = ["diagnostics", "definition", "references", "symbols"];

pub async fn connect(wire: Wire, root: &Path, caps: Value) -> Connected {
    let (mut editor, stop) = match wire {
        Wire::Stdio => (Editor::spawn().await, None),
        Wire::Serve => {
            let home = Arc::new(tempfile::tempdir().expect("temp home"));
            let stop = StopOnDrop(home.path().to_path_buf());
            (Editor::spawn_with(attach_options(&home)).await, Some(stop))
        }
    };
    let init = editor.initialize_with(root, caps).await;
    Connected {
        editor,
        init,
        _stop: stop,
    }
}

/// The workspace root, as the daemon spells it (symlinks resolved).
pub fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(dir.path()).expect("canonicalize");
    (dir, root)
}

pub fn write(root: &Path, relative: &str, text: &str) -> PathBuf {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(&path, text).expect("write");
    path
}

/// A session config for `server` in `mode`, with `tools` as its `[tools]`.
pub fn config(server: &ModelServer, mode: &str, tools: Value) -> Value {
    let mut config = server.session_config();
    config["approval"] = json!({"mode": mode});
    config["tools"] = tools;
    config
}

/// An LSP diagnostic.
pub fn diagnostic(line: u32, from: u32, to: u32, severity: u32, message: &str) -> Value {
    json!({
        "range": {"start": {"line": line, "character": from}, "end": {"line": line, "character": to}},
        "severity": severity,
        "message": message,
        "source": "Pyright",
        "code": "reportUndefinedVariable",
    })
}

/// `tandem/diagnosticsChanged` params.
pub fn diagnostics_changed(path: &Path, version: i32, diagnostics: Vec<Value>) -> Value {
    json!({"uri": file_uri(path), "version": version, "diagnostics": diagnostics})
}

/// The names of the tools the model was offered in `request`.
pub fn offered_tools(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}
