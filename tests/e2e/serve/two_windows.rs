//! Two editor windows attached to one `tandem serve` through
//! `tandem lsp --attach`, each with its own unsaved buffer of the same
//! file, run turns in two sessions at the same time: each turn's
//! `read_file` reads the buffer of the window whose prompt opened it (the
//! model's next request shows which text the tool returned).

use std::sync::Arc;

use serde_json::{json, Value};

use super::{attach_options, StopOnDrop};
use crate::support::client::Editor;
use crate::support::model_server::openai::{delta, ending, text};
use crate::support::model_server::{ModelServer, RecordedRequest, Reply, SseStep};

const UNSAVED_A: &str = "unsaved in window A\n";
const UNSAVED_B: &str = "unsaved in window B\n";

/// A `read_file` call of `a.txt` that is sent only once the model has
/// been asked twice: the two turns are both waiting on it, at once.
fn read_once_both_asked(call_id: &str) -> Reply {
    let arguments = json!({"path": "a.txt"}).to_string();
    let mut steps = vec![
        delta(json!({"role": "assistant", "content": ""})),
        SseStep::AwaitRequests(2),
        delta(
            json!({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
            "function": {"name": "read_file", "arguments": arguments}}]}),
        ),
    ];
    steps.extend(ending("tool_calls"));
    Reply::Sse(steps)
}

/// Which window's prompt a model request belongs to.
fn window_of(request: &RecordedRequest) -> &'static str {
    let asked = |who: &str| {
        request.body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|m| m["role"] == "user" && m["content"].as_str() == Some(who))
    };
    match (asked("window A: read a.txt"), asked("window B: read a.txt")) {
        (true, false) => "A",
        (false, true) => "B",
        _ => panic!("a request of neither or both windows: {}", request.body),
    }
}

#[tokio::test]
async fn two_windows_run_turns_at_once_and_each_turn_reads_its_own_windows_unsaved_buffer() {
    let home = Arc::new(tempfile::tempdir().unwrap());
    let _stop = StopOnDrop(home.path().to_path_buf());
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let path = root.join("a.txt");
    std::fs::write(&path, "on disk\n").unwrap();
    let model = ModelServer::start().await;
    model.push(read_once_both_asked("call_1"));
    model.push(read_once_both_asked("call_2"));
    model.push(text(["read it"]));
    model.push(text(["read it"]));

    // The first shim starts the serve; the second attaches to it.
    let mut a = Editor::spawn_with(attach_options(&home)).await;
    let init_a = a.initialize(&root).await;
    let mut b = Editor::spawn_with(attach_options(&home)).await;
    let init_b = b.initialize(&root).await;
    a.open(&path, UNSAVED_A).await;
    b.open(&path, UNSAVED_B).await;
    let session_a = a.new_session(model.session_config()).await;
    let session_b = b.new_session(model.session_config()).await;
    let serve =
        |init: &Value| init["result"]["capabilities"]["experimental"]["tandem"]["serve"].clone();
    assert!(serve(&init_a)["pid"].is_u64(), "{init_a}");
    assert_eq!(serve(&init_a), serve(&init_b), "one serve");

    let prompt_a = a.start_prompt(&session_a, "window A: read a.txt").await;
    let prompt_b = b.start_prompt(&session_b, "window B: read a.txt").await;
    let (answer_a, _) = a.response(prompt_a).await;
    let (answer_b, _) = b.response(prompt_b).await;
    assert_eq!(answer_a["result"]["stopReason"], "end_turn", "{answer_a}");
    assert_eq!(answer_b["result"]["stopReason"], "end_turn", "{answer_b}");

    let requests = model.wait_for_requests(4).await;
    assert_eq!(requests.len(), 4, "two steps per turn");
    // The first reply waited for the second request: both turns asked
    // before either could go on.
    let mut first: Vec<&str> = requests[..2].iter().map(window_of).collect();
    first.sort();
    assert_eq!(first, ["A", "B"], "each turn's first request came first");
    for request in &requests[2..] {
        let (own, other) = match window_of(request) {
            "A" => (UNSAVED_A, UNSAVED_B),
            _ => (UNSAVED_B, UNSAVED_A),
        };
        let results = request.tool_messages();
        let (_, read) = results
            .last()
            .unwrap_or_else(|| panic!("no read_file result: {}", request.body));
        assert!(read.contains(own.trim()), "{read}");
        assert!(!read.contains(other.trim()), "{read}");
        assert!(!read.contains("on disk"), "{read}");
    }
}
