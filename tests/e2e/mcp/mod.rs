//! MCP servers end to end through the real binary (LSP): real servers
//! nobody here wrote (npm's `@modelcontextprotocol/server-everything`,
//! PyPI's `mcp-server-time`, both installed by scripts/test), and a
//! scripted one of ours for faults (`tests/mcp/fault_server.py`).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::support::client::{Editor, EditorOptions};
use crate::support::model_server::{openai, ModelServer, RecordedRequest, Reply};

mod cli;
mod conformance;
mod faults;
mod http;
mod images;
mod load;
mod lsp;
mod serve;

/// `tests/mcp`, where the servers live.
fn mcp_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

/// A missing prerequisite: fails under `CI=true`, else says so and skips.
fn missing(what: &str) -> Option<Value> {
    let message = format!(
        "{what} is not installed; scripts/test installs it (npm ci in tests/mcp, pip install mcp-server-time)"
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{message}");
    }
    eprintln!("SKIPPED: {message}");
    None
}

/// The definition of npm's everything server, if it is installed.
fn everything() -> Option<Value> {
    let entry =
        mcp_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !entry.exists() {
        return missing("@modelcontextprotocol/server-everything");
    }
    // Generous: a loaded CI machine starts node slowly.
    Some(json!({"command": "node", "args": [entry, "stdio"], "startup_timeout_sec": 60}))
}

/// The definition of PyPI's time server, if it is installed.
fn time_server() -> Option<Value> {
    let found = std::process::Command::new("python3")
        .args(["-c", "import mcp_server_time"])
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        return missing("mcp-server-time (PyPI)");
    }
    Some(json!({
        "command": "python3",
        "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
        "startup_timeout_sec": 60,
    }))
}

/// Our fault server in `mode`, logging what it receives to `log`.
fn fault_server(mode: &str, log: &Path) -> Value {
    json!({
        "command": "python3",
        "args": [mcp_dir().join("fault_server.py"), mode, log],
        "startup_timeout_sec": 30,
    })
}

/// Lines of the fault server's log.
fn fault_log(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Waits (up to 10 s) until the fault server's log has a line `pred` accepts.
async fn wait_fault_log(log: &Path, pred: impl Fn(&str) -> bool) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let lines = fault_log(log);
        if lines.iter().any(|l| pred(l)) {
            return lines;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the fault server's log never had the line; it has {lines:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A session config for the scripted model with `servers` in `mode`.
fn config_with(server: &ModelServer, mode: &str, servers: Value) -> Value {
    let mut config = server.session_config();
    config["approval"] = json!({"mode": mode});
    config["mcp_servers"] = servers;
    config
}

/// An LSP editor (answering permission requests) with a session.
async fn session(root: &Path, config: Value, options: EditorOptions) -> (Editor, String) {
    let mut editor = Editor::spawn_with(options).await;
    editor
        .initialize_with(
            root,
            json!({"capabilities": {"experimental": {"tandem": {"requestPermission": true}}}}),
        )
        .await;
    let session = editor.new_session(config).await;
    (editor, session)
}

/// One scripted response calling `name` with `args`.
fn call(id: &str, name: &str, args: Value) -> Reply {
    openai::tool_calls(&[(id, name, &args.to_string())])
}

/// The content of the tool message answering `call_id` in a model request.
fn tool_result(request: &RecordedRequest, call_id: &str) -> String {
    request
        .tool_messages()
        .into_iter()
        .find(|(id, _)| id == call_id)
        .map(|(_, content)| content)
        .unwrap_or_else(|| panic!("no tool message for {call_id} in {}", request.body))
}

/// The tools a model request offers, by name.
fn offered(request: &RecordedRequest) -> Vec<Value> {
    request.body["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|t| t["function"].clone())
        .collect()
}

fn offered_names(request: &RecordedRequest) -> Vec<String> {
    offered(request)
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// `tandem/listMcpServers` of a session.
async fn list_servers(editor: &mut Editor, session: &str) -> Value {
    let answer = editor
        .request("tandem/listMcpServers", json!({"sessionId": session}))
        .await;
    answer["result"]["servers"].clone()
}
