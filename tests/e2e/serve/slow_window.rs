//! Never flood a slow window, through `tandem serve`: a window attached
//! with `tandem lsp --attach` that reads its stdout slowly gets fewer,
//! larger chunks with the exact text and every other update in order; one
//! that stops reading makes the serve stop reading the model's stream
//! (its memory stays bounded); and once it closes, the turn runs on to
//! its end for the other window.

use std::process::Stdio;
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::io::BufReader;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::{attach_options, Serve};
use crate::guards::output_cap::{rss_kib, wait_until_stream_blocked, CHUNKS, CHUNK_BYTES};
use crate::guards::slow_reader::{
    initialize, new_session, read_until_response, send, wait_for_turn_end,
};
use crate::support::client::{agent_text, tandem_bin, Editor};
use crate::support::model_server::{openai, ModelServer, Reply};

/// A window whose stdout the test reads when it chooses to.
struct Window {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Window {
    /// `tandem lsp --attach` on `home`'s serve, initialized.
    async fn open(home: &std::path::Path, root: &std::path::Path) -> Window {
        let mut child = Command::new(tandem_bin())
            .args(["lsp", "--attach"])
            .env("TANDEM_HOME", home)
            .env("TANDEM_FSYNC", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut window = Window {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
        };
        initialize(&mut window.stdin, &mut window.stdout, root).await;
        window
    }

    async fn send(&mut self, message: Value) {
        send(&mut self.stdin, message).await;
    }

    async fn new_session(&mut self, config: Value) -> String {
        new_session(&mut self.stdin, &mut self.stdout, config).await
    }

    async fn prompt(&mut self, session: &str) {
        self.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tandem/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": "talk"}]}}))
            .await;
    }
}

/// The text of the chunks among `updates`.
fn text_of(updates: &[&Value]) -> String {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn a_window_that_reads_slowly_gets_fewer_larger_chunks_and_every_other_update_in_order() {
    // Far more chunk frames (each ~350 bytes on the serve's socket) than
    // the pipe and the loopback socket between the serve and the shim
    // hold, and far less text than the output cap.
    const CHUNKS: usize = 20_000;
    let model = ModelServer::start().await;
    let before: Vec<String> = (0..CHUNKS).map(|i| format!("b{i:05};")).collect();
    let after: Vec<String> = (0..CHUNKS).map(|i| format!("a{i:05};")).collect();
    // Step 1: text, then a plan; step 2: more text.
    let mut steps = vec![openai::delta(json!({"role": "assistant", "content": ""}))];
    steps.extend(before.iter().map(|p| openai::delta(json!({"content": p}))));
    steps.push(openai::delta(
        json!({"tool_calls": [{"index": 0, "id": "p1",
        "type": "function", "function": {"name": "update_plan",
        "arguments": r#"{"plan":[{"step":"read","status":"in_progress"}]}"#}}]}),
    ));
    steps.extend(openai::ending("tool_calls"));
    model.push(Reply::Sse(steps));
    let mut steps = vec![openai::delta(json!({"role": "assistant", "content": ""}))];
    steps.extend(after.iter().map(|p| openai::delta(json!({"content": p}))));
    steps.extend(openai::ending("stop"));
    model.push(Reply::Sse(steps));

    let home = Arc::new(tempfile::tempdir().unwrap());
    let _serve = Serve::start_logging(home.clone(), "info").await;
    let root = tempfile::tempdir().unwrap();
    let mut window = Window::open(home.path(), root.path()).await;
    let session = window.new_session(model.session_config()).await;
    window.prompt(&session).await;
    // The window reads nothing until the turn has ended.
    wait_for_turn_end(home.path(), &session).await;

    let frames = read_until_response(&mut window.stdout, 3).await;
    assert_eq!(
        frames.last().unwrap()["result"]["stopReason"],
        "end_turn",
        "{:?}",
        frames.last()
    );
    let updates: Vec<&Value> = frames
        .iter()
        .filter(|m| m["method"] == "tandem/update")
        .map(|m| &m["params"]["update"])
        .collect();
    let chunks = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .count();
    // The pipe and the loopback socket hold some thousands of frames as
    // they were sent; the rest waited in the serve, merged.
    let merged = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter(|u| u["content"]["text"].as_str().unwrap().len() > before[0].len())
        .count();
    println!(
        "{chunks} chunk frames ({merged} merged) for {} chunks",
        2 * CHUNKS
    );
    assert!(
        merged > 0 && chunks < 2 * CHUNKS * 3 / 4,
        "{chunks} chunk frames ({merged} merged) for {} chunks: nothing merged for the slow window",
        2 * CHUNKS
    );
    // Every other update in its place: the plan between the two steps'
    // text, the turn's end last.
    let plan = updates
        .iter()
        .position(|u| u["sessionUpdate"] == "plan")
        .expect("the plan update");
    assert_eq!(
        text_of(&updates[..plan]),
        before.concat(),
        "step 1's text, exact"
    );
    assert_eq!(
        text_of(&updates[plan..]),
        after.concat(),
        "step 2's text, exact"
    );
    let others: Vec<&str> = updates
        .iter()
        .map(|u| u["sessionUpdate"].as_str().unwrap())
        .filter(|k| *k != "agent_message_chunk")
        .collect();
    assert_eq!(others.last(), Some(&"turn_end"), "{others:?}");
    assert_eq!(
        others.iter().filter(|k| **k == "plan").count(),
        1,
        "{others:?}"
    );
}

#[tokio::test]
async fn a_window_that_stops_reading_pauses_the_model_stream_until_it_closes() {
    // 32 MiB of answer: far more than the output cap (1 MiB) and every
    // socket buffer on the way.
    let model = ModelServer::start().await;
    let pieces: Vec<String> = (0..CHUNKS)
        .map(|i| format!("<{i:05}>{}", "x".repeat(CHUNK_BYTES - 7)))
        .collect();
    let mut steps = vec![openai::delta(json!({"role": "assistant", "content": ""}))];
    steps.extend(pieces.iter().map(|p| openai::delta(json!({"content": p}))));
    steps.extend(openai::ending("stop"));
    model.push(Reply::Sse(steps));

    let home = Arc::new(tempfile::tempdir().unwrap());
    let serve = Serve::start_logging(home.clone(), "info").await;
    let serve_pid = serve.info["pid"].as_u64().unwrap() as u32;
    let root = tempfile::tempdir().unwrap();
    let mut stalled = Window::open(home.path(), root.path()).await;
    let session = stalled.new_session(model.session_config()).await;
    // A second window follows the session and reads everything.
    let mut other = Editor::spawn_with(attach_options(&home)).await;
    other.initialize(root.path()).await;
    let loaded = other
        .request("tandem/loadSession", json!({"sessionId": session}))
        .await;
    assert_eq!(loaded["result"]["sessionId"], session, "{loaded}");
    let rss_before = rss_kib(serve_pid);

    stalled.prompt(&session).await;
    // The first window reads nothing.
    let (seen, peak) = wait_until_stream_blocked(&model, serve_pid, "the serve").await;
    let grew_mib = peak.saturating_sub(rss_before) as f64 / 1024.0;
    println!("paused: {seen} of {CHUNKS} chunks written, the serve grew {grew_mib:.1} MiB");
    assert!(
        grew_mib < 24.0,
        "the serve grew by {grew_mib:.1} MiB while a window read nothing"
    );

    // The stalled window closes: it holds the turn no more, which runs on
    // to its end for the other window, whole and in order.
    stalled.child.kill().await.unwrap();
    let end = other
        .wait_update(&session, |u| u["sessionUpdate"] == "turn_end")
        .await;
    assert_eq!(end["update"]["stopReason"], "end_turn", "{end}");
    assert!(
        agent_text(&other.updates_of(&session)) == pieces.concat(),
        "the other window got the exact text, in order"
    );
}
