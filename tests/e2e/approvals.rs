//! Acting in the workspace, end to end through the real binary:
//! `exec_command`, the approval modes and permission prompts, `update_plan`
//! and `request_user_input`.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::client::{Editor, EditorOptions, WAIT};
use crate::support::model_server::{openai, ModelServer, RecordedRequest, Reply};

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

// ---------------------------------------------------------------------------
// exec_command in auto mode

#[tokio::test]
async fn exec_command_output_and_exit_code_are_returned_to_the_model() {
    let server = ModelServer::start().await;
    server.push(exec_call(
        "call_1",
        json!({"cmd": "echo to-stdout; echo to-stderr >&2"}),
    ));
    server.push(openai::text(["done"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = auto_session(&server, root.path()).await;

    let (response, updates) = editor.prompt(&session, "run it").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(result.starts_with("exit code 0\n"), "{result}");
    assert!(
        result.contains("to-stdout") && result.contains("to-stderr"),
        "{result}"
    );
    // The wire shows an execute call that completed with the same text.
    let call = updates
        .iter()
        .find(|u| u["update"]["sessionUpdate"] == "tool_call")
        .expect("tool_call update");
    assert_eq!(call["update"]["kind"], "execute");
    assert_eq!(
        call["update"]["rawInput"]["cmd"],
        "echo to-stdout; echo to-stderr >&2"
    );
    let last = updates
        .iter()
        .rfind(|u| u["update"]["toolCallId"] == "call_1")
        .unwrap();
    assert_eq!(last["update"]["status"], "completed");
    assert_eq!(last["update"]["content"][0]["content"]["text"], result);
}

#[tokio::test]
async fn exec_command_nonzero_exit_is_reported_with_its_code() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "echo failing; exit 3"})));
    server.push(openai::text(["noted"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = auto_session(&server, root.path()).await;

    let (response, _) = editor.prompt(&session, "fail").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert_eq!(result, "exit code 3\nfailing\n");
}

#[tokio::test]
async fn exec_command_output_over_the_cap_keeps_head_and_tail_with_an_elision_note() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "seq 1 100000"})));
    server.push(openai::text(["long"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = auto_session(&server, root.path()).await;

    let (response, _) = editor.prompt(&session, "count").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(
        result.starts_with("exit code 0\n1\n2\n3\n"),
        "{}",
        &result[..40]
    );
    assert!(
        result.ends_with("\n99999\n100000\n"),
        "{}",
        &result[result.len() - 40..]
    );
    assert!(
        result.contains(" bytes elided ...]"),
        "no elision note in a {}-byte result",
        result.len()
    );
    assert!(!result.contains("\n50000\n"), "the middle is elided");
    assert!(result.len() < 40 * 1024, "{} bytes", result.len());
}

#[tokio::test]
async fn exec_command_timeout_kills_the_command_and_says_so() {
    let server = ModelServer::start().await;
    server.push(exec_call(
        "call_1",
        json!({"cmd": "echo $$; exec sleep 30", "timeout_ms": 500}),
    ));
    server.push(openai::text(["too slow"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = auto_session(&server, root.path()).await;

    let started = Instant::now();
    let id = editor
        .start_request("tandem/prompt", start_prompt_params(&session, "wait"))
        .await;
    let pid = streamed_pid(&mut editor, "call_1").await;
    let (response, _) = editor.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the 30 s sleep was not cut short: {:?}",
        started.elapsed()
    );
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(
        result.starts_with("killed after timeout of 500ms"),
        "{result}"
    );
    wait_until_gone(pid).await;
}

#[tokio::test]
async fn exec_command_output_streams_as_tool_call_updates_before_the_call_completes() {
    let server = ModelServer::start().await;
    // The command prints, then waits for the test to create `go`: the
    // delta can only arrive before completion if it is streamed.
    server.push(exec_call(
        "call_1",
        json!({"cmd": "echo started; while [ ! -e go ]; do sleep 0.01; done; echo finished",
               "timeout_ms": 20000}),
    ));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = auto_session(&server, root.path()).await;

    let id = editor
        .start_request("tandem/prompt", start_prompt_params(&session, "stream"))
        .await;
    let first = editor
        .wait_notification("tandem/update", |p| {
            p["update"]["toolCallId"] == "call_1" && p["update"]["outputDelta"].is_string()
        })
        .await;
    assert_eq!(
        first["params"]["update"]["sessionUpdate"],
        "tool_call_update"
    );
    assert_eq!(first["params"]["update"]["outputDelta"], "started\n");
    assert!(
        !editor
            .received
            .iter()
            .any(|m| m["params"]["update"]["toolCallId"] == "call_1"
                && m["params"]["update"]["status"] == "completed"),
        "the call completed before its output was streamed"
    );
    std::fs::write(root.path().join("go"), "").unwrap();
    let (response, _) = editor.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let streamed: String = editor
        .received
        .iter()
        .filter(|m| m["params"]["update"]["toolCallId"] == "call_1")
        .filter_map(|m| m["params"]["update"]["outputDelta"].as_str())
        .collect();
    assert_eq!(streamed, "started\nfinished\n");
    let requests = server.wait_for_requests(2).await;
    assert_eq!(
        tool_result(&requests[1], "call_1"),
        "exit code 0\nstarted\nfinished\n"
    );
}

#[tokio::test]
async fn exec_command_streams_at_most_a_bounded_amount_of_output() {
    let server = ModelServer::start().await;
    // 2.5 MB of output: more than the editor and the log should take.
    server.push(exec_call(
        "call_1",
        json!({"cmd": "head -c 2500000 /dev/zero | tr '\\0' y; echo; echo the-end",
               "timeout_ms": 20000}),
    ));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = auto_session(&server, root.path()).await;

    let (response, updates) = editor.prompt(&session, "flood").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let streamed: String = updates
        .iter()
        .filter_map(|u| u["update"]["outputDelta"].as_str())
        .collect();
    assert!(
        streamed.len() <= (1 << 20) + 200,
        "{} bytes streamed",
        streamed.len()
    );
    assert!(
        streamed.ends_with("keeps the head and tail of the output ...]\n"),
        "{} bytes streamed, ending {:?}",
        streamed.len(),
        &streamed[streamed.len().saturating_sub(200)..]
    );
    let log = std::fs::metadata(editor.sessions_dir().join(format!("{session}.jsonl")))
        .unwrap()
        .len();
    assert!(log < 2 << 20, "the session log grew to {log} bytes");
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(result.ends_with("\nthe-end\n"), "the tail is kept");
    assert!(result.contains(" bytes elided ...]"));
}

#[tokio::test]
async fn exec_command_workdir_outside_the_workspace_is_refused_as_a_tool_error() {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("workspace");
    std::fs::create_dir(&root).unwrap();
    let server = ModelServer::start().await;
    server.push(exec_call(
        "call_1",
        json!({"cmd": "touch escaped", "workdir": "../"}),
    ));
    server.push(openai::text(["refused"]));
    let (mut editor, session) = auto_session(&server, &root).await;

    let (response, _) = editor.prompt(&session, "escape").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(result.starts_with("error:"), "{result}");
    assert!(result.contains("outside the workspace"), "{result}");
    assert!(!outer.path().join("escaped").exists(), "the command ran");
}

#[tokio::test]
async fn exec_command_children_do_not_see_secret_environment_variables() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "env"})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let options = EditorOptions {
        env: vec![
            ("FOO_API_KEY".to_string(), "sk-very-secret".to_string()),
            ("FOO_VISIBLE".to_string(), "plain-value".to_string()),
        ],
        ..EditorOptions::default()
    };
    let (mut editor, session) =
        session_in(&server, root.path(), "auto", Caps::default(), options).await;

    editor.prompt(&session, "env").await;
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(result.contains("FOO_VISIBLE=plain-value"), "{result}");
    assert!(!result.contains("FOO_API_KEY"), "{result}");
    assert!(!result.contains("sk-very-secret"), "{result}");
}

#[tokio::test]
async fn a_configured_allow_list_lets_a_secret_looking_variable_through() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "env"})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let mut editor = Editor::spawn_with(EditorOptions {
        env: vec![
            ("FOO_API_KEY".to_string(), "sk-allowed".to_string()),
            ("BAR_TOKEN".to_string(), "still-hidden".to_string()),
        ],
        ..EditorOptions::default()
    })
    .await;
    editor.initialize(root.path()).await;
    let mut config = config_for(&server, "auto");
    config["tools"] = json!({"exec_env_allow": ["FOO_API_KEY"]});
    let session = editor.new_session(config).await;
    editor.prompt(&session, "env").await;
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(result.contains("FOO_API_KEY=sk-allowed"), "{result}");
    assert!(!result.contains("still-hidden"), "{result}");
}

// ---------------------------------------------------------------------------
// Cancelling a running command

#[tokio::test]
async fn cancel_during_a_running_command_kills_it_and_ends_the_turn_cancelled() {
    let server = ModelServer::start().await;
    server.push(exec_call(
        "call_1",
        json!({"cmd": "echo $$; exec sleep 30", "timeout_ms": 60000}),
    ));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = auto_session(&server, root.path()).await;

    let id = editor
        .start_request("tandem/prompt", start_prompt_params(&session, "sleep"))
        .await;
    let pid = streamed_pid(&mut editor, "call_1").await;
    assert!(process_exists(pid), "the command is running");
    let cancelled_at = Instant::now();
    editor
        .notify("tandem/cancel", json!({"sessionId": session}))
        .await;
    let (response, _) = editor.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(5),
        "cancel took {:?}",
        cancelled_at.elapsed()
    );
    wait_until_gone(pid).await;

    let results = logged(&editor, &session, "tool_result");
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["call_id"], "call_1");
    assert_eq!(results[0]["status"], "aborted", "{results:?}");
    assert_eq!(server.requests().len(), 1, "no model call after the cancel");
}

// ---------------------------------------------------------------------------
// Review mode: permission prompts

/// Answers every `tandem/requestPermission` with `option_id`.
fn answer_permission(editor: &mut Editor, option_id: &'static str) {
    editor.on_request(move |method, _| {
        (method == "tandem/requestPermission")
            .then(|| json!({"outcome": {"outcome": "selected", "optionId": option_id}}))
    });
}

#[tokio::test]
async fn permission_request_has_the_acp_shape_and_follows_a_waiting_for_permission_update() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "touch ran"})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), PERMISSION).await;
    answer_permission(&mut editor, "allow_once");

    editor.prompt(&session, "run").await;
    let asked = requests_of(&editor, "tandem/requestPermission");
    assert_eq!(asked.len(), 1);
    let request = &asked[0];
    assert!(
        request["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("tandem-")),
        "{request}"
    );
    let params = &request["params"];
    assert_eq!(params["sessionId"], session.as_str());
    assert_eq!(params["toolCall"]["toolCallId"], "call_1");
    assert_eq!(params["toolCall"]["kind"], "execute");
    assert_eq!(params["toolCall"]["rawInput"]["cmd"], "touch ran");
    assert!(
        params["toolCall"]["title"]
            .as_str()
            .unwrap()
            .contains("touch ran"),
        "{params}"
    );
    let options: Vec<(&str, &str)> = params["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["optionId"].as_str().unwrap(), o["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        options,
        vec![
            ("allow_once", "allow_once"),
            ("allow_always", "allow_always"),
            ("reject_once", "reject_once"),
            ("reject_always", "reject_always"),
        ]
    );
    assert!(params["options"]
        .as_array()
        .unwrap()
        .iter()
        .all(|o| o["name"].as_str().is_some_and(|n| !n.is_empty())));

    let waiting = position(&editor, |m| {
        m["method"] == "tandem/update"
            && m["params"]["update"]["toolCallId"] == "call_1"
            && m["params"]["update"]["waitingFor"] == "permission"
    })
    .expect("a waitingFor: permission update");
    let asked_at = position(&editor, |m| m["method"] == "tandem/requestPermission").unwrap();
    assert!(
        waiting < asked_at,
        "waiting at {waiting}, request at {asked_at}"
    );
    assert_eq!(
        editor.received[waiting]["params"]["update"]["sessionUpdate"],
        "tool_call_update"
    );
}

#[tokio::test]
async fn review_mode_allow_once_runs_the_command() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "touch ran"})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), PERMISSION).await;
    answer_permission(&mut editor, "allow_once");

    let (response, _) = editor.prompt(&session, "run").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(root.path().join("ran").exists(), "the command did not run");
    let requests = server.wait_for_requests(2).await;
    assert_eq!(tool_result(&requests[1], "call_1"), "exit code 0");
    let decisions = logged(&editor, &session, "approval_decided");
    assert_eq!(decisions.len(), 1);
    assert_eq!(decisions[0]["decision"], "allow_once");
    assert!(decisions[0].get("scope").is_none(), "{decisions:?}");
}

#[tokio::test]
async fn a_rejection_reason_reaches_the_model() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "touch ran"})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), PERMISSION).await;
    editor.on_request(|_, _| {
        Some(json!({"outcome": {"outcome": "selected", "optionId": "reject_once", "reason": "use the Makefile"}}))
    });
    editor.prompt(&session, "run").await;
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(result.starts_with("rejected:"), "{result}");
    assert!(result.contains("they said: use the Makefile"), "{result}");
    assert!(!root.path().join("ran").exists());
}

#[tokio::test]
async fn review_mode_reject_once_does_not_run_the_command_and_tells_the_model() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "touch ran"})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), PERMISSION).await;
    answer_permission(&mut editor, "reject_once");

    let (response, updates) = editor.prompt(&session, "run").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(!root.path().join("ran").exists(), "a rejected command ran");
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(result.starts_with("rejected:"), "{result}");
    assert!(result.contains("touch ran"), "{result}");
    let last = updates
        .iter()
        .rfind(|u| u["update"]["toolCallId"] == "call_1")
        .unwrap();
    assert_eq!(last["update"]["status"], "failed");
    assert!(
        !updates.iter().any(
            |u| u["update"]["toolCallId"] == "call_1" && u["update"]["status"] == "in_progress"
        ),
        "a rejected call never starts"
    );
    let decisions = logged(&editor, &session, "approval_decided");
    assert_eq!(decisions[0]["decision"], "reject_once");
}

#[tokio::test]
async fn review_mode_allow_always_remembers_the_command_prefix_in_later_turns() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "ls -a"})));
    server.push(openai::text(["first"]));
    server.push(exec_call("call_2", json!({"cmd": "ls -l"})));
    server.push(openai::text(["second"]));
    server.push(exec_call("call_3", json!({"cmd": "touch other"})));
    server.push(openai::text(["third"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), PERMISSION).await;
    editor.on_request(|method, params| {
        let choice = match params["toolCall"]["rawInput"]["cmd"].as_str() {
            Some("ls -a") => "allow_always",
            _ => "reject_once",
        };
        (method == "tandem/requestPermission")
            .then(|| json!({"outcome": {"outcome": "selected", "optionId": choice}}))
    });

    let (first, _) = editor.prompt(&session, "list").await;
    assert_eq!(first["result"]["stopReason"], "end_turn", "{first}");
    let (second, _) = editor.prompt(&session, "list again").await;
    assert_eq!(second["result"]["stopReason"], "end_turn", "{second}");
    assert_eq!(
        requests_of(&editor, "tandem/requestPermission").len(),
        1,
        "`ls -l` is covered by the `ls` allowed always"
    );
    let requests = server.wait_for_requests(4).await;
    assert!(tool_result(&requests[1], "call_1").starts_with("exit code 0"));
    assert!(tool_result(&requests[3], "call_2").starts_with("exit code 0"));

    // Another program is not covered: it asks again.
    editor.prompt(&session, "touch").await;
    let asked = requests_of(&editor, "tandem/requestPermission");
    assert_eq!(asked.len(), 2);
    assert_eq!(
        asked[1]["params"]["toolCall"]["rawInput"]["cmd"],
        "touch other"
    );
    assert!(!root.path().join("other").exists());

    let decisions: Vec<(String, Value)> = logged(&editor, &session, "approval_decided")
        .iter()
        .map(|d| {
            (
                d["decision"].as_str().unwrap().to_string(),
                d["scope"].clone(),
            )
        })
        .collect();
    assert_eq!(
        decisions,
        vec![
            ("allow_always".to_string(), json!("ls")),
            ("allowed_by_rule".to_string(), json!("ls")),
            ("reject_once".to_string(), Value::Null),
        ]
    );
    // Persisting the rule across a reload is tandem/loadSession's (issue
    // 5); the decision it will rebuild from is in the log above.
}

#[tokio::test]
async fn allow_always_for_a_shell_command_does_not_allow_other_shell_commands() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "sh -c 'echo hi'"})));
    server.push(openai::text(["first"]));
    server.push(exec_call("call_2", json!({"cmd": "sh -c 'touch pwned'"})));
    server.push(openai::text(["second"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), PERMISSION).await;
    editor.on_request(|method, params| {
        let choice = match params["toolCall"]["rawInput"]["cmd"].as_str() {
            Some("sh -c 'echo hi'") => "allow_always",
            _ => "reject_once",
        };
        (method == "tandem/requestPermission")
            .then(|| json!({"outcome": {"outcome": "selected", "optionId": choice}}))
    });

    editor.prompt(&session, "hi").await;
    editor.prompt(&session, "something else").await;
    let asked = requests_of(&editor, "tandem/requestPermission");
    assert_eq!(
        asked.len(),
        2,
        "a shell runs anything: each new script asks"
    );
    assert!(
        !root.path().join("pwned").exists(),
        "the second script ran unasked"
    );
    let label = asked[0]["params"]["options"][1]["name"].as_str().unwrap();
    assert!(label.contains("sh -c 'echo hi'"), "{label}");
    let decisions = logged(&editor, &session, "approval_decided");
    assert_eq!(decisions[0]["scope"], "sh -c 'echo hi'");
}

#[tokio::test]
async fn review_mode_reject_always_blocks_the_command_prefix_without_asking_again() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "rm -f one"})));
    server.push(openai::text(["first"]));
    server.push(exec_call("call_2", json!({"cmd": "rm -f two"})));
    server.push(openai::text(["second"]));
    let root = tempfile::tempdir().unwrap();
    for name in ["one", "two"] {
        std::fs::write(root.path().join(name), "keep me").unwrap();
    }
    let (mut editor, session) = review_session(&server, root.path(), PERMISSION).await;
    answer_permission(&mut editor, "reject_always");

    editor.prompt(&session, "one").await;
    let (second, _) = editor.prompt(&session, "two").await;
    assert_eq!(second["result"]["stopReason"], "end_turn", "{second}");
    assert_eq!(
        requests_of(&editor, "tandem/requestPermission").len(),
        1,
        "`rm -f two` is covered by the `rm` rejected always"
    );
    assert!(root.path().join("one").exists() && root.path().join("two").exists());
    let requests = server.wait_for_requests(4).await;
    assert!(tool_result(&requests[1], "call_1").starts_with("rejected:"));
    let blocked = tool_result(&requests[3], "call_2");
    assert!(blocked.starts_with("rejected:"), "{blocked}");
    let decisions: Vec<(String, Value)> = logged(&editor, &session, "approval_decided")
        .iter()
        .map(|d| {
            (
                d["decision"].as_str().unwrap().to_string(),
                d["scope"].clone(),
            )
        })
        .collect();
    assert_eq!(
        decisions,
        vec![
            ("reject_always".to_string(), json!("rm")),
            ("rejected_by_rule".to_string(), json!("rm")),
        ]
    );
}

#[tokio::test]
async fn review_mode_without_the_permission_capability_counts_as_rejection_and_asks_nothing() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "touch ran"})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), Caps::default()).await;
    answer_permission(&mut editor, "allow_once");

    let (response, updates) = editor.prompt(&session, "run").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(requests_of(&editor, "tandem/requestPermission").is_empty());
    assert!(!root.path().join("ran").exists(), "the command ran");
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(result.starts_with("rejected:"), "{result}");
    assert!(
        !updates
            .iter()
            .any(|u| u["update"]["waitingFor"].is_string()),
        "nobody is asked, so nothing waits for the user: {updates:?}"
    );
}

#[tokio::test]
async fn review_mode_method_not_found_answer_counts_as_rejection() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "touch ran"})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    // Declares the capability, then answers -32601 (no handler).
    let (mut editor, session) = review_session(&server, root.path(), PERMISSION).await;

    let (response, _) = editor.prompt(&session, "run").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(requests_of(&editor, "tandem/requestPermission").len(), 1);
    assert!(!root.path().join("ran").exists(), "the command ran");
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(result.starts_with("rejected:"), "{result}");
}

#[tokio::test]
async fn review_mode_cancelled_permission_outcome_counts_as_rejection() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "touch ran"})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), PERMISSION).await;
    editor.on_request(|method, _| {
        (method == "tandem/requestPermission").then(|| json!({"outcome": {"outcome": "cancelled"}}))
    });

    let (response, _) = editor.prompt(&session, "run").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(!root.path().join("ran").exists(), "the command ran");
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(result.starts_with("rejected:"), "{result}");
    assert_eq!(
        logged(&editor, &session, "approval_decided")[0]["decision"],
        "dismissed"
    );
}

#[tokio::test]
async fn cancel_while_permission_is_pending_withdraws_the_request_and_runs_nothing() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "touch ran"})));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), PERMISSION).await;
    editor.hold_requests("tandem/requestPermission");

    let id = editor
        .start_request("tandem/prompt", start_prompt_params(&session, "run"))
        .await;
    let asked = next_request(&mut editor, "tandem/requestPermission").await;
    editor
        .notify("tandem/cancel", json!({"sessionId": session}))
        .await;
    let withdrawn = editor
        .wait_notification("$/cancelRequest", |p| p["id"] == asked["id"])
        .await;
    let (response, at) = editor.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    let withdrawn_at = editor
        .received
        .iter()
        .position(|m| *m == withdrawn)
        .unwrap();
    assert!(withdrawn_at < at, "withdrawn before the prompt is answered");
    assert!(!root.path().join("ran").exists(), "the command ran");
    let results = logged(&editor, &session, "tool_result");
    assert_eq!(results[0]["status"], "not_run", "{results:?}");
}

// ---------------------------------------------------------------------------
// Read-only mode

fn assert_no_acting_tools(request: &RecordedRequest) {
    let tools = offered_tools(request);
    assert!(tools.contains(&"read_file".to_string()), "{tools:?}");
    assert!(
        !tools
            .iter()
            .any(|t| t == "exec_command" || t == "apply_patch"),
        "{tools:?}"
    );
}

#[tokio::test]
async fn read_only_mode_offers_no_acting_tools_and_refuses_a_call_anyway() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "touch ran"})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = session_in(
        &server,
        root.path(),
        "read-only",
        PERMISSION,
        EditorOptions::default(),
    )
    .await;
    answer_permission(&mut editor, "allow_once");

    let (response, _) = editor.prompt(&session, "run").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.wait_for_requests(2).await;
    assert_no_acting_tools(&requests[0]);
    assert_no_acting_tools(&requests[1]);
    let result = tool_result(&requests[1], "call_1");
    assert!(result.starts_with("error:"), "{result}");
    assert!(!root.path().join("ran").exists(), "the command ran");
    assert!(requests_of(&editor, "tandem/requestPermission").is_empty());
}

#[tokio::test]
async fn set_mode_read_only_hides_the_acting_tools_from_the_next_prompt() {
    let server = ModelServer::start().await;
    server.push(exec_call("call_1", json!({"cmd": "touch ran"})));
    server.push(openai::text(["refused"]));
    server.push(openai::text(["back in auto"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = auto_session(&server, root.path()).await;

    let response = editor
        .request(
            "tandem/setMode",
            json!({"sessionId": session, "mode": "read-only"}),
        )
        .await;
    assert_eq!(response["result"]["mode"], "read-only", "{response}");
    let update = editor
        .received
        .iter()
        .find(|m| m["params"]["update"]["sessionUpdate"] == "current_mode_update")
        .expect("a current_mode_update");
    assert_eq!(update["params"]["update"]["currentModeId"], "read-only");
    assert_eq!(update["params"]["sessionId"], session.as_str());

    editor.prompt(&session, "run").await;
    let requests = server.wait_for_requests(2).await;
    assert_no_acting_tools(&requests[0]);
    assert!(tool_result(&requests[1], "call_1").starts_with("error:"));
    assert!(!root.path().join("ran").exists(), "the command ran");

    editor
        .request(
            "tandem/setMode",
            json!({"sessionId": session, "mode": "auto"}),
        )
        .await;
    editor.prompt(&session, "again").await;
    let requests = server.wait_for_requests(3).await;
    assert!(offered_tools(&requests[2]).contains(&"exec_command".to_string()));
}

#[tokio::test]
async fn set_mode_with_an_unknown_mode_is_invalid_params() {
    let root = tempfile::tempdir().unwrap();
    let server = ModelServer::start().await;
    let (mut editor, session) = auto_session(&server, root.path()).await;
    let response = editor
        .request(
            "tandem/setMode",
            json!({"sessionId": session, "mode": "yolo"}),
        )
        .await;
    assert_eq!(response["error"]["code"], -32602, "{response}");
    assert!(response["error"]["message"]
        .as_str()
        .unwrap()
        .contains("yolo"));
}

// ---------------------------------------------------------------------------
// update_plan

#[tokio::test]
async fn update_plan_sends_a_plan_update_with_acp_entries() {
    let server = ModelServer::start().await;
    let plan = json!({"explanation": "small steps", "plan": [
        {"step": "read the code", "status": "completed"},
        {"step": "write the test", "status": "in_progress"},
        {"step": "fix the bug", "status": "pending"},
    ]});
    server.push(openai::tool_calls(&[(
        "call_1",
        "update_plan",
        &plan.to_string(),
    )]));
    server.push(openai::text(["planned"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), Caps::default()).await;

    let (response, updates) = editor.prompt(&session, "plan").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let plan_update = updates
        .iter()
        .find(|u| u["update"]["sessionUpdate"] == "plan")
        .expect("a plan update");
    assert_eq!(plan_update["turnId"], "t1");
    assert_eq!(
        plan_update["update"]["entries"],
        json!([
            {"content": "read the code", "priority": "medium", "status": "completed"},
            {"content": "write the test", "priority": "medium", "status": "in_progress"},
            {"content": "fix the bug", "priority": "medium", "status": "pending"},
        ])
    );
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(!result.starts_with("error:"), "{result}");
    let plans = logged(&editor, &session, "plan");
    assert_eq!(plans.len(), 1, "the plan is logged");
}

#[tokio::test]
async fn a_plan_with_two_steps_in_progress_is_a_tool_error_the_model_reads() {
    let server = ModelServer::start().await;
    let plan = json!({"plan": [
        {"step": "one", "status": "in_progress"},
        {"step": "two", "status": "in_progress"},
    ]});
    server.push(openai::tool_calls(&[(
        "call_1",
        "update_plan",
        &plan.to_string(),
    )]));
    server.push(openai::text(["oops"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), Caps::default()).await;

    let (response, updates) = editor.prompt(&session, "plan").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        !updates
            .iter()
            .any(|u| u["update"]["sessionUpdate"] == "plan"),
        "a bad plan is not shown"
    );
    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(result.starts_with("error:"), "{result}");
    assert!(
        result.contains("at most one step may be in_progress"),
        "{result}"
    );
}

// ---------------------------------------------------------------------------
// request_user_input

const QUESTIONS: &str = r#"{"questions":[{"id":"db","question":"Which database?","options":[{"label":"sqlite"},{"label":"postgres","description":"the server"}]}]}"#;

#[tokio::test]
async fn request_user_input_is_offered_only_to_a_client_that_declares_it() {
    let server = ModelServer::start().await;
    server.push(openai::text(["hi"]));
    server.push(openai::tool_calls(&[(
        "call_1",
        "request_user_input",
        QUESTIONS,
    )]));
    server.push(openai::text(["cannot ask"]));
    let root = tempfile::tempdir().unwrap();

    let (mut declaring, session) = review_session(&server, root.path(), USER_INPUT).await;
    declaring.prompt(&session, "hi").await;
    let requests = server.wait_for_requests(1).await;
    assert!(offered_tools(&requests[0]).contains(&"request_user_input".to_string()));

    let (mut silent, session) = review_session(&server, root.path(), Caps::default()).await;
    silent.prompt(&session, "ask").await;
    let requests = server.wait_for_requests(3).await;
    assert!(!offered_tools(&requests[1]).contains(&"request_user_input".to_string()));
    // Called anyway: refused, and nothing is sent to the editor.
    let result = tool_result(&requests[2], "call_1");
    assert!(result.starts_with("error:"), "{result}");
    assert!(requests_of(&silent, "tandem/requestUserInput").is_empty());
}

#[tokio::test]
async fn request_user_input_answers_become_the_tool_result() {
    let server = ModelServer::start().await;
    server.push(openai::tool_calls(&[(
        "call_1",
        "request_user_input",
        QUESTIONS,
    )]));
    server.push(openai::text(["thanks"]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), USER_INPUT).await;
    editor.on_request(|method, _| {
        (method == "tandem/requestUserInput")
            .then(|| json!({"answers": {"db": {"answers": ["postgres"]}}}))
    });

    let (response, _) = editor.prompt(&session, "ask me").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let asked = requests_of(&editor, "tandem/requestUserInput");
    assert_eq!(asked.len(), 1);
    let params = &asked[0]["params"];
    assert!(asked[0]["id"].as_str().unwrap().starts_with("tandem-"));
    assert_eq!(params["sessionId"], session.as_str());
    assert_eq!(params["toolCallId"], "call_1");
    assert_eq!(
        params["questions"],
        serde_json::from_str::<Value>(QUESTIONS).unwrap()["questions"]
    );
    let waiting = position(&editor, |m| {
        m["params"]["update"]["toolCallId"] == "call_1"
            && m["params"]["update"]["waitingFor"] == "input"
    })
    .expect("a waitingFor: input update");
    let asked_at = position(&editor, |m| m["method"] == "tandem/requestUserInput").unwrap();
    assert!(waiting < asked_at);

    let requests = server.wait_for_requests(2).await;
    let result = tool_result(&requests[1], "call_1");
    assert!(!result.starts_with("error:"), "{result}");
    assert!(
        result.contains(r#"{"db":{"answers":["postgres"]}}"#),
        "{result}"
    );
}

#[tokio::test]
async fn cancel_while_a_question_is_pending_withdraws_it_and_ends_the_turn_cancelled() {
    let server = ModelServer::start().await;
    server.push(openai::tool_calls(&[(
        "call_1",
        "request_user_input",
        QUESTIONS,
    )]));
    let root = tempfile::tempdir().unwrap();
    let (mut editor, session) = review_session(&server, root.path(), USER_INPUT).await;
    editor.hold_requests("tandem/requestUserInput");

    let id = editor
        .start_request("tandem/prompt", start_prompt_params(&session, "ask"))
        .await;
    let asked = next_request(&mut editor, "tandem/requestUserInput").await;
    editor
        .notify("tandem/cancel", json!({"sessionId": session}))
        .await;
    let (response, at) = editor.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    let withdrawn = position(&editor, |m| {
        m["method"] == "$/cancelRequest" && m["params"]["id"] == asked["id"]
    })
    .unwrap_or_else(|| panic!("no $/cancelRequest for {}", asked["id"]));
    assert!(withdrawn < at, "withdrawn before the prompt is answered");
    assert_eq!(server.requests().len(), 1, "no model call after the cancel");
    let results = logged(&editor, &session, "tool_result");
    assert_eq!(results[0]["status"], "aborted", "{results:?}");

    // The session is usable afterwards, and the withdrawn question does not
    // linger: a late answer to it is ignored.
    editor
        .send(&json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"answers": {"db": "late"}}}))
        .await;
    server.push(openai::text(["fresh"]));
    let (next, _) = editor.prompt(&session, "again").await;
    assert_eq!(next["result"]["stopReason"], "end_turn", "{next}");
}
