//! Keybinding tasks through `tandem lsp --attach`, as over stdio: code
//! actions from the asking window's unsaved buffer, `tandem.runTask` and
//! `tandem/runTask` reading that window's text, an inline edit proposed to
//! that window only (even with another window following the same task
//! session), `$/progress` titled with the task, and both cancels.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};

use super::{attach_options, StopOnDrop};
use crate::support::client::{agent_text, file_uri, Editor};
use crate::support::model_server::openai::{delta, text};
use crate::support::model_server::{ModelServer, Reply, SseStep};

/// On disk: one line. The windows' unsaved buffers differ from it.
const DISK: &str = "fn main() {}\n";
const UNSAVED_A: &str = "fn main() {\n    let x = 1;\n    println!(\"{x}\");\n}\n";
const UNSAVED_B: &str = "fn main() {\n    let y = 2;\n}\n";

fn range(a: (u32, u32), b: (u32, u32)) -> Value {
    json!({"start": {"line": a.0, "character": a.1}, "end": {"line": b.0, "character": b.1}})
}

/// A window like VS Code's through the shim: it reviews edits, answers
/// questions, shows progress, and has the scripted model in its
/// `initializationOptions` (task sessions are made by the serve).
async fn window(home: &Arc<tempfile::TempDir>, root: &Path, model: &ModelServer) -> Editor {
    let mut editor = Editor::spawn_with(attach_options(home)).await;
    let capabilities = json!({
        "workspace": {"applyEdit": true, "workspaceEdit": {"documentChanges": true,
            "changeAnnotationSupport": {"groupsOnLabel": true}}},
        "window": {"workDoneProgress": true},
        "experimental": {"tandem": {"requestUserInput": true, "requestPermission": true}},
    });
    let init = editor
        .initialize_with(
            root,
            json!({"capabilities": capabilities, "initializationOptions": model.session_config()}),
        )
        .await;
    let caps = &init["result"]["capabilities"];
    assert_eq!(
        caps["executeCommandProvider"]["commands"],
        json!(["tandem.runTask"]),
        "{init}"
    );
    assert!(caps["codeActionProvider"].is_object(), "{init}");
    editor
}

struct Setup {
    // Before `home`: fields drop in order, and the serve must be stopped
    // while its home (serve.json) still exists.
    _stop: StopOnDrop,
    home: Arc<tempfile::TempDir>,
    _dir: tempfile::TempDir,
    root: PathBuf,
    path: PathBuf,
    model: ModelServer,
}

async fn setup() -> Setup {
    let home = Arc::new(tempfile::tempdir().unwrap());
    let stop = StopOnDrop(home.path().to_path_buf());
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let path = root.join("src/main.rs");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, DISK).unwrap();
    Setup {
        home,
        _stop: stop,
        _dir: dir,
        root,
        path,
        model: ModelServer::start().await,
    }
}

async fn code_actions(editor: &mut Editor, path: &Path, range: Value) -> Vec<Value> {
    let response = editor
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": file_uri(path)}, "range": range,
                   "context": {"diagnostics": []}}),
        )
        .await;
    response["result"]
        .as_array()
        .unwrap_or_else(|| panic!("codeAction failed: {response}"))
        .clone()
}

/// A message `pred` accepts: one received already, else the next one.
async fn seen_or_next(editor: &mut Editor, pred: impl Fn(&Value) -> bool) -> Value {
    if let Some(seen) = editor.received.iter().find(|m| pred(m)) {
        return seen.clone();
    }
    loop {
        let message = editor.next_message().await;
        if pred(&message) {
            return message;
        }
    }
}

/// The last user message of a model request.
fn asked(body: &Value) -> String {
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

#[tokio::test]
async fn code_actions_offer_tasks_for_the_selection_of_the_asking_windows_unsaved_buffer() {
    let s = setup().await;
    let mut a = window(&s.home, &s.root, &s.model).await;
    let mut b = window(&s.home, &s.root, &s.model).await;
    a.open(&s.path, UNSAVED_A).await;

    // A cursor on line 2 of A's buffer (blank on disk: the file has one
    // line) works on that whole line, at A's version.
    let actions = code_actions(&mut a, &s.path, range((1, 6), (1, 6))).await;
    let titles: Vec<&str> = actions.iter().filter_map(|a| a["title"].as_str()).collect();
    assert_eq!(
        titles,
        [
            "tandem: Explain",
            "tandem: Edit selection…",
            "tandem: Document",
            "tandem: Write tests"
        ]
    );
    let args = &actions[0]["command"]["arguments"][0];
    assert_eq!(actions[0]["command"]["command"], "tandem.runTask");
    assert_eq!(args["version"], 1, "{args}");
    assert_eq!(args["range"], range((1, 0), (1, 14)), "{args}");

    // B has not opened the file: no version, the range as asked.
    let actions = code_actions(&mut b, &s.path, range((1, 6), (1, 6))).await;
    let args = &actions[0]["command"]["arguments"][0];
    assert_eq!(args["version"], Value::Null, "{args}");
    assert_eq!(args["range"], range((1, 6), (1, 6)), "{args}");

    // A bad task is refused as over stdio, and makes no task session.
    let refused = a
        .request(
            "tandem/runTask",
            json!({"task": "refactr", "textDocument": {"uri": file_uri(&s.path)},
                   "range": range((1, 0), (2, 0))}),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("unknown task `refactr`; the tasks are: fix, explain"),
        "{refused}"
    );
    let listed = a.request("tandem/listSessions", json!({})).await;
    assert_eq!(listed["result"]["sessions"], json!([]), "{listed}");
}

#[tokio::test]
async fn an_inline_edit_task_reads_the_asking_windows_unsaved_text_and_proposes_to_that_window_only(
) {
    let s = setup().await;
    let mut a = window(&s.home, &s.root, &s.model).await;
    let mut b = window(&s.home, &s.root, &s.model).await;
    a.open(&s.path, UNSAVED_A).await;
    b.open(&s.path, UNSAVED_B).await;
    a.on_request(|method, _| match method {
        "workspace/applyEdit" => Some(json!({"applied": true})),
        "window/workDoneProgress/create" => Some(Value::Null),
        _ => None,
    });
    b.on_request(|method, _| (method == "window/workDoneProgress/create").then_some(Value::Null));

    // B runs a task first, so B follows the folder's task session too.
    s.model.push(text(["y is two"]));
    let explained = b
        .request(
            "tandem/runTask",
            json!({"task": "explain", "textDocument": {"uri": file_uri(&s.path), "version": 1},
                   "range": range((1, 0), (2, 0))}),
        )
        .await;
    assert_eq!(explained["result"]["stopReason"], "end_turn", "{explained}");
    let session = explained["result"]["sessionId"]
        .as_str()
        .expect("sessionId")
        .to_string();
    assert!(asked(&s.model.wait_for_requests(1).await[0].body).contains("let y = 2;"));
    assert_eq!(agent_text(&b.updates_of(&session)), "y is two");

    // A's task, as a code action's command.
    s.model
        .push(text(["```rust\n", "    let x = 42;\n", "```"]));
    let started = a
        .request(
            "workspace/executeCommand",
            json!({"command": "tandem.runTask", "arguments": [{
                "task": "edit", "uri": file_uri(&s.path), "range": range((1, 0), (2, 0)),
                "version": 1, "diagnostics": [], "instruction": "use 42"}]}),
        )
        .await;
    assert_eq!(
        started["result"],
        json!({"sessionId": session, "turnId": "t2"}),
        "{started}"
    );
    let edit = loop {
        let message = a.next_message().await;
        if message["method"] == "workspace/applyEdit" {
            break message["params"].clone();
        }
    };
    let annotation = format!("tandem-task-{session}-t2");
    assert_eq!(
        edit["edit"]["documentChanges"],
        json!([{
            "textDocument": {"uri": file_uri(&s.path), "version": 1},
            "edits": [{"range": range((1, 0), (2, 0)), "newText": "    let x = 42;\n",
                       "annotationId": annotation}],
        }])
    );
    assert_eq!(
        edit["edit"]["changeAnnotations"][&annotation]["needsConfirmation"],
        true
    );
    // The editor applies it; the model will hear it was accepted.
    a.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": file_uri(&s.path), "version": 2},
               "contentChanges": [{"range": range((1, 0), (2, 0)), "text": "    let x = 42;\n"}]}),
    )
    .await;
    let told = a
        .wait_update(&session, |u| {
            u["sessionUpdate"] == "input_status" && u["queue"] == "next_step"
        })
        .await;
    assert_eq!(told["update"]["status"], "pending", "{told}");
    let log = std::fs::read_to_string(
        s.home
            .path()
            .join("sessions")
            .join(format!("{session}.jsonl")),
    )
    .unwrap();
    assert!(log.contains("was accepted by the user"), "{log}");

    // The model read A's unsaved text, not B's and not the disk's.
    let request = asked(&s.model.wait_for_requests(2).await[1].body);
    assert!(request.contains("let x = 1;"), "{request}");
    assert!(request.starts_with("use 42"), "{request}");
    // A saw its task's turn: its updates and its progress, titled.
    assert_eq!(
        agent_text(
            &a.updates_of(&session)
                .into_iter()
                .filter(|u| u["turnId"] == "t2")
                .collect::<Vec<_>>()
        ),
        "```rust\n    let x = 42;\n```"
    );
    assert!(
        !a.updates_of(&session).iter().any(|u| u["turnId"] == "t1"),
        "A got a replay of B's task"
    );
    // Progress begins once A has answered its create request, which may
    // come after the updates above: read on until it has.
    let begin = seen_or_next(&mut a, |m| {
        m["method"] == "$/progress" && m["params"]["value"]["kind"] == "begin"
    })
    .await;
    assert_eq!(begin["params"]["value"]["title"], "Edit selection…");
    // B follows the session, yet the edit went to A alone.
    b.wait_update(&session, |u| {
        u["sessionUpdate"] == "input_status" && u["queue"] == "next_step"
    })
    .await;
    assert!(
        !b.received
            .iter()
            .any(|m| m["method"] == "workspace/applyEdit"),
        "window B got A's inline edit"
    );
}

#[tokio::test]
async fn run_task_answers_at_turn_end_and_its_question_goes_to_the_asking_window() {
    let s = setup().await;
    let mut a = window(&s.home, &s.root, &s.model).await;
    a.open(&s.path, UNSAVED_A).await;
    a.on_request(|method, params| match method {
        "tandem/requestUserInput" => {
            assert_eq!(params["questions"][0]["id"], "instruction");
            Some(json!({"answers": "rename x"}))
        }
        "workspace/applyEdit" => Some(json!({"applied": false, "failureReason": "keep x"})),
        "window/workDoneProgress/create" => Some(Value::Null),
        _ => None,
    });
    s.model.push(text(["    let renamed = 1;\n"]));
    let response = a
        .request(
            "tandem/runTask",
            json!({"task": "edit", "textDocument": {"uri": file_uri(&s.path), "version": 1},
                   "range": range((1, 0), (2, 0))}),
        )
        .await;
    let result = &response["result"];
    assert_eq!(result["stopReason"], "end_turn", "{response}");
    assert_eq!(result["turnId"], "t1");
    assert_eq!(result["edit"]["outcome"], "rejected", "{response}");
    assert!(
        result["edit"]["message"]
            .as_str()
            .unwrap()
            .contains("Their comment: keep x"),
        "{response}"
    );
    let request = asked(&s.model.wait_for_requests(1).await[0].body);
    assert!(request.starts_with("rename x"), "{request}");
    assert!(request.contains("let x = 1;"), "{request}");
    let session = result["sessionId"].as_str().unwrap();
    assert_eq!(agent_text(&a.updates_of(session)), "    let renamed = 1;\n");
}

#[tokio::test]
async fn a_task_is_cancelled_by_cancel_request_and_by_its_progress_token() {
    let s = setup().await;
    let mut a = window(&s.home, &s.root, &s.model).await;
    a.open(&s.path, UNSAVED_A).await;
    a.on_request(|method, _| (method == "window/workDoneProgress/create").then_some(Value::Null));
    let stall = || {
        Reply::Sse(vec![
            delta(json!({"role": "assistant", "content": ""})),
            delta(json!({"content": "Let me"})),
            SseStep::Stall,
        ])
    };

    // `$/cancelRequest` on tandem/runTask: answered `cancelled` after the
    // turn's last update.
    s.model.push(stall());
    let id = a
        .start_request(
            "tandem/runTask",
            json!({"task": "explain", "textDocument": {"uri": file_uri(&s.path)},
                   "range": range((1, 0), (2, 0))}),
        )
        .await;
    a.wait_notification("tandem/update", |p| {
        p["update"]["sessionUpdate"] == "agent_message_chunk"
    })
    .await;
    a.notify("$/cancelRequest", json!({"id": id})).await;
    let (response, at) = a.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    let session = response["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        a.received[..at]
            .iter()
            .any(|m| m["method"] == "tandem/update"
                && m["params"]["update"]["sessionUpdate"] == "turn_end"),
        "the answer came before the turn's end"
    );

    // The progress token of a `tandem.runTask`'s turn cancels that turn.
    s.model.push(stall());
    let started = a
        .request(
            "workspace/executeCommand",
            json!({"command": "tandem.runTask", "arguments": [{
                "task": "tests", "uri": file_uri(&s.path), "range": range((0, 0), (4, 0))}]}),
        )
        .await;
    assert_eq!(started["result"]["turnId"], "t2", "{started}");
    let token = json!(format!("tandem/{session}/t2"));
    let begin = seen_or_next(&mut a, |m| {
        m["method"] == "$/progress"
            && m["params"]["value"]["kind"] == "begin"
            && m["params"]["token"] == token
    })
    .await;
    assert_eq!(begin["params"]["value"]["title"], "Write tests");
    seen_or_next(&mut a, |m| {
        m["method"] == "tandem/update"
            && m["params"]["turnId"] == "t2"
            && m["params"]["update"]["content"]["text"] == "Let me"
    })
    .await;
    a.notify("window/workDoneProgress/cancel", json!({"token": token}))
        .await;
    let end = seen_or_next(&mut a, |m| {
        m["method"] == "tandem/update"
            && m["params"]["turnId"] == "t2"
            && m["params"]["update"]["sessionUpdate"] == "turn_end"
    })
    .await;
    assert_eq!(end["params"]["update"]["stopReason"], "cancelled", "{end}");
}
