//! Checkpoints and `tandem/rewind` (issue 26), end to end: the real binary,
//! the scripted model server, files on disk and in an LSP buffer.

mod commands;
mod conversation;
mod files;
mod pruning;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::support::client::Editor;
use crate::support::model_server::{openai, ModelServer};

/// A workspace root as the daemon spells it (symlinks resolved).
pub fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(dir.path()).expect("canonicalize");
    (dir, root)
}

/// Writes a file with a mode.
pub fn put(root: &Path, name: &str, bytes: &[u8], mode: u32) {
    let path = root.join(name);
    std::fs::write(&path, bytes).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Every file under `root` (not hidden) with its bytes and mode.
pub fn tree(root: &Path) -> Vec<(String, Vec<u8>, u32)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root).expect("read_dir") {
        let entry = entry.expect("entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !entry.file_type().expect("type").is_file() {
            continue;
        }
        let meta = entry.metadata().expect("meta");
        out.push((
            name,
            std::fs::read(entry.path()).expect("read"),
            meta.permissions().mode() & 0o7777,
        ));
    }
    out.sort();
    out
}

/// An `auto` session's config.
pub fn auto(server: &ModelServer) -> Value {
    let mut config = server.session_config();
    config["approval"] = json!({"mode": "auto"});
    config
}

/// The model calls `tool` with `args`, then says "done".
pub fn script_call(server: &ModelServer, id: &str, tool: &str, args: Value) {
    server.push(openai::tool_calls(&[(id, tool, &args.to_string())]));
    server.push(openai::text(["done"]));
}

/// The `messageId` of the user message of the prompt whose updates these are.
pub fn message_id(updates: &[Value]) -> String {
    updates
        .iter()
        .find(|u| u["update"]["sessionUpdate"] == "user_message")
        .and_then(|u| u["update"]["messageId"].as_str())
        .unwrap_or_else(|| panic!("no user_message in {updates:?}"))
        .to_string()
}

/// `tandem/rewind`, answered.
pub async fn rewind(editor: &mut Editor, params: Value) -> Value {
    let answer = editor.request("tandem/rewind", params).await;
    assert!(answer.get("error").is_none(), "{answer}");
    answer["result"].clone()
}

/// `status` of each file of a rewind's result, by file name.
pub fn statuses(result: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = result["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| {
            let path = f["path"].as_str().expect("path");
            let name = Path::new(path)
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            (name, f["status"].as_str().expect("status").to_string())
        })
        .collect();
    out.sort();
    out
}

/// The log's events of `kind`.
pub fn logged(editor: &Editor, session: &str, kind: &str) -> Vec<Value> {
    editor
        .log_lines(session)
        .into_iter()
        .filter(|e| e["type"] == kind)
        .collect()
}
