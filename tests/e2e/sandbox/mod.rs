//! The exec sandbox, end to end through the real binary on this machine's
//! kernel (Landlock, user and network namespaces): what a command may
//! write, its network, the fallback when the sandbox is missing
//! (simulated), the permission to run one command unconfined, and
//! `tandem exec`.
//!
//! Workspaces and "outside" directories live in `/var/tmp`: the system
//! temp dir (`/tmp`) is writable in the sandbox, and `..` from a workspace
//! there would land in it. As root, file permissions allow every write, so
//! a denial here can only come from Landlock.

use std::path::Path;

use serde_json::{json, Value};

use crate::support::client::{Editor, EditorOptions};
use crate::support::model_server::{openai, ModelServer, RecordedRequest, Reply};

mod cli;
mod fallback;
mod filesystem;
mod network;
mod no_namespaces;

/// The daemon's environment variable that simulates a machine without the
/// sandbox.
const SIMULATE_UNAVAILABLE: &str = "TANDEM_SANDBOX_SIMULATE_UNAVAILABLE";

/// The daemon's test-only switch that reports user namespaces as blocked,
/// so the Landlock + seccomp network fallback confines commands.
const SIMULATE_NO_NAMESPACES: &str = "TANDEM_SANDBOX_SIMULATE_NO_NAMESPACES";

/// Whether this kernel's Landlock has network rules (ABI 4, Linux 6.7),
/// which the fallback without namespaces needs. Under `CI=true` a kernel
/// without them fails the test that asks, saying so.
fn kernel_has_landlock_network() -> bool {
    let abi = landlock_abi();
    if abi >= 4 {
        return true;
    }
    let why = format!(
        "this kernel lacks Landlock ABI 4 (it answers {abi}): the sandbox without user namespaces cannot be tested"
    );
    if std::env::var_os("CI").is_some_and(|v| v == "true") {
        panic!("{why}");
    }
    eprintln!("not run: {why}");
    false
}

/// The kernel's Landlock ABI version, or a negative errno-ish value.
fn landlock_abi() -> i64 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with this flag the call reads no memory and returns a number.
    unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    }
}

/// Whether this kernel can sandbox, checked without tandem: Landlock
/// answers its ABI version and `unshare -rn true` works. Tests of the real
/// sandbox say they did not run when not (this machine and CI can); under
/// `CI=true` such a kernel fails the test instead, so a skip never passes
/// silently there.
fn kernel_can_sandbox() -> bool {
    static CAN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let can = *CAN.get_or_init(probe_kernel);
    assert!(
        can || std::env::var("CI").as_deref() != Ok("true"),
        "CI=true: this kernel cannot sandbox (Landlock and `unshare -rn`), so the sandbox test cannot run"
    );
    can
}

fn probe_kernel() -> bool {
    let abi = landlock_abi();
    let namespaces = std::process::Command::new("unshare")
        .args(["-rn", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if abi < 1 || !namespaces {
        eprintln!(
            "not run: this kernel cannot sandbox (Landlock ABI: {abi}, `unshare -rn true` works: {namespaces})"
        );
    }
    abi >= 1 && namespaces
}

/// A directory outside the temp dir, removed at the end of the test.
fn var_tmp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("tandem-sandbox-")
        .tempdir_in("/var/tmp")
        .unwrap()
}

/// Session config pointing at `server`, in approval `mode`, with `sandbox`
/// as the `[sandbox]` table.
fn config(server: &ModelServer, mode: &str, sandbox: Value) -> Value {
    let mut config = server.session_config();
    config["approval"] = json!({"mode": mode});
    config["sandbox"] = sandbox;
    config
}

/// An editor that can answer permission requests, initialized on `root`,
/// with `env` for the daemon; returns it and the `initialize` response.
async fn editor_on(root: &Path, env: &[(&str, &str)]) -> (Editor, Value) {
    let mut editor = Editor::spawn_with(EditorOptions {
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..EditorOptions::default()
    })
    .await;
    let init = editor
        .initialize_with(
            root,
            json!({"capabilities": {"experimental": {"tandem": {"requestPermission": true}}}}),
        )
        .await;
    (editor, init)
}

/// One scripted model response calling `exec_command` with `args`.
fn exec_call(id: &str, args: Value) -> Reply {
    openai::tool_calls(&[(id, "exec_command", &args.to_string())])
}

/// Runs one prompt whose model calls `exec_command` with `args` once, then ends;
/// returns the tool result the model read.
async fn run_one(server: &ModelServer, editor: &mut Editor, session: &str, args: Value) -> String {
    let before = server.requests().len();
    // Unique in the session: later requests carry the earlier results.
    let call_id = format!("call_{before}");
    server.push(exec_call(&call_id, args));
    server.push(openai::text(["done"]));
    let (response, _) = editor.prompt(session, "run it").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.wait_for_requests(before + 2).await;
    tool_result(&requests[before + 1], &call_id)
}

/// What follows the `exit code N` line of a failed command's result. The code
/// itself is the shell's (dash and bash differ on a failed redirect), so only
/// its being non-zero is checked.
fn after_failure(result: &str) -> &str {
    let (first, rest) = result.split_once('\n').unwrap_or((result, ""));
    let code = first
        .strip_prefix("exit code ")
        .unwrap_or_else(|| panic!("{result}"));
    assert_ne!(code, "0", "the command should have failed: {result}");
    rest
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

/// Answers every `tandem/requestPermission` with `option_id`.
fn answer_permission(editor: &mut Editor, option_id: &'static str) {
    editor.on_request(move |method, _| {
        (method == "tandem/requestPermission")
            .then(|| json!({"outcome": {"outcome": "selected", "optionId": option_id}}))
    });
}

/// The daemon's permission requests so far.
fn permission_requests(editor: &Editor) -> Vec<Value> {
    editor
        .received
        .iter()
        .filter(|m| m["method"] == "tandem/requestPermission" && m.get("id").is_some())
        .cloned()
        .collect()
}

/// The option ids a permission request offers.
fn option_ids(request: &Value) -> Vec<String> {
    request["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["optionId"].as_str().unwrap().to_string())
        .collect()
}

/// The session log's `approval_decided` events.
fn decisions(editor: &Editor, session: &str) -> Vec<Value> {
    editor
        .log_lines(session)
        .into_iter()
        .filter(|e| e["type"] == "approval_decided")
        .collect()
}
