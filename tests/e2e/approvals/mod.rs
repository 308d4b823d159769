//! Acting in the workspace, end to end through the real binary:
//! `exec_command`, the approval modes and permission prompts, `update_plan`
//! and `request_user_input`.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::client::{Editor, EditorOptions, WAIT};
use crate::support::model_server::{openai, ModelServer, RecordedRequest, Reply};

mod exec_command;
mod malformed_answers;
mod permission;
mod read_only;
mod request_user_input;
mod update_plan;

/// Session config pointing at the scripted server, in approval `mode`.
fn config_for(server: &ModelServer, mode: &str) -> Value {
    let mut config = server.session_config();
    config["approval"] = json!({"mode": mode});
    config
}

/// What the test editor says it can answer (`experimental.tandem`).
#[derive(Clone, Copy, Default)]
struct Caps {
    request_permission: bool,
    request_user_input: bool,
}

const PERMISSION: Caps = Caps {
    request_permission: true,
    request_user_input: false,
};

const USER_INPUT: Caps = Caps {
    request_permission: false,
    request_user_input: true,
};

async fn session_in(
    server: &ModelServer,
    root: &Path,
    mode: &str,
    caps: Caps,
    options: EditorOptions,
) -> (Editor, String) {
    let mut editor = Editor::spawn_with(options).await;
    editor
        .initialize_with(
            root,
            json!({"capabilities": {"experimental": {"tandem": {
                "requestPermission": caps.request_permission,
                "requestUserInput": caps.request_user_input,
            }}}}),
        )
        .await;
    let session = editor.new_session(config_for(server, mode)).await;
    (editor, session)
}

async fn auto_session(server: &ModelServer, root: &Path) -> (Editor, String) {
    session_in(
        server,
        root,
        "auto",
        Caps::default(),
        EditorOptions::default(),
    )
    .await
}

async fn review_session(server: &ModelServer, root: &Path, caps: Caps) -> (Editor, String) {
    session_in(server, root, "review", caps, EditorOptions::default()).await
}

/// One scripted model response calling `exec_command` with `args`.
fn exec_call(id: &str, args: Value) -> Reply {
    openai::tool_calls(&[(id, "exec_command", &args.to_string())])
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

/// The names of the tools a model request offers.
fn offered_tools(request: &RecordedRequest) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| {
                    t["function"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The daemon's requests of `method` the editor has received so far.
fn requests_of(editor: &Editor, method: &str) -> Vec<Value> {
    editor
        .received
        .iter()
        .filter(|m| m["method"] == method && m.get("id").is_some())
        .cloned()
        .collect()
}

/// Where in `received` the first message `pred` accepts arrived.
fn position(editor: &Editor, pred: impl Fn(&Value) -> bool) -> Option<usize> {
    editor.received.iter().position(pred)
}

/// The session log's events of `kind`.
fn logged(editor: &Editor, session: &str, kind: &str) -> Vec<Value> {
    editor
        .log_lines(session)
        .into_iter()
        .filter(|e| e["type"] == kind)
        .collect()
}

/// Receives messages until a request of `method` from the daemon arrives.
async fn next_request(editor: &mut Editor, method: &str) -> Value {
    loop {
        let message = editor.next_message().await;
        if message["method"] == method && message.get("id").is_some() {
            return message;
        }
    }
}

fn start_prompt_params(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

/// Waits for the `outputDelta` that starts with the pid a command printed
/// (`echo $$; exec ...`) and returns it.
async fn streamed_pid(editor: &mut Editor, call_id: &str) -> u32 {
    let update = editor
        .wait_notification("tandem/update", |p| {
            p["update"]["toolCallId"] == call_id && p["update"]["outputDelta"].is_string()
        })
        .await;
    let delta = update["params"]["update"]["outputDelta"].as_str().unwrap();
    delta
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in the first output: {delta:?}"))
}

fn process_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Waits until `/proc/<pid>` is gone (killed and reaped). The kernel gives
/// no event for another process's reaping, so this checks every 10 ms, up
/// to a deadline that only guards against a hang.
async fn wait_until_gone(pid: u32) {
    let deadline = Instant::now() + WAIT;
    while process_exists(pid) {
        assert!(
            Instant::now() < deadline,
            "process {pid} still exists after {WAIT:?}: {}",
            std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Answers every `tandem/requestPermission` with `option_id`.
/// Answers `allow_always` for the one command line `cmd`, `reject_once` for
/// every other.
fn allow_always_only(editor: &mut Editor, cmd: &'static str) {
    editor.on_request(move |method, params| {
        let choice = if params["toolCall"]["rawInput"]["cmd"] == cmd {
            "allow_always"
        } else {
            "reject_once"
        };
        (method == "tandem/requestPermission")
            .then(|| json!({"outcome": {"outcome": "selected", "optionId": choice}}))
    });
}

/// The session's `approval_decided` events as (decision, scope) pairs.
fn decisions_with_scopes(editor: &Editor, session: &str) -> Vec<(String, Value)> {
    logged(editor, session, "approval_decided")
        .iter()
        .map(|d| {
            (
                d["decision"].as_str().unwrap().to_string(),
                d["scope"].clone(),
            )
        })
        .collect()
}

fn answer_permission(editor: &mut Editor, option_id: &'static str) {
    editor.on_request(move |method, _| {
        (method == "tandem/requestPermission")
            .then(|| json!({"outcome": {"outcome": "selected", "optionId": option_id}}))
    });
}
