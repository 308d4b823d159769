//! Never flood a slow editor, the memory half: while the editor reads
//! nothing, the daemon stops reading the model's stream once its pending
//! output reaches the cap, so the model server's writes back up (its
//! socket buffers fill) and the daemon's memory stays bounded; when the
//! editor reads again, the turn goes on and the text arrives whole and in
//! order.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::BufReader;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::slow_reader::{initialize, new_session, read_until_response, send};
use crate::support::client::tandem_bin;
use crate::support::model_server::{openai, ModelServer, Reply};

/// 32 MiB of answer: far more than the output cap (1 MiB) and the
/// loopback socket buffers between the daemon and the model server.
pub(crate) const CHUNKS: usize = 4096;
pub(crate) const CHUNK_BYTES: usize = 8192;

pub(crate) fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS of the daemon")
}

/// A daemon whose editor stopped reading while the model streams 32 MiB,
/// once the model server's writes have stalled.
struct Stalled {
    _server: ModelServer,
    _child: Child,
    _home: tempfile::TempDir,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    session: String,
    log: std::path::PathBuf,
    pieces: Vec<String>,
    /// SSE events the model server had begun to write when it stalled.
    written: usize,
    rss_before_kib: u64,
    rss_peak_kib: u64,
}

async fn stall_the_model_stream() -> Stalled {
    let server = ModelServer::start().await;
    let pieces: Vec<String> = (0..CHUNKS)
        .map(|i| format!("<{i:05}>{}", "x".repeat(CHUNK_BYTES - 7)))
        .collect();
    let mut steps = vec![openai::delta(json!({"role": "assistant", "content": ""}))];
    steps.extend(pieces.iter().map(|p| openai::delta(json!({"content": p}))));
    steps.extend(openai::ending("stop"));
    server.push(Reply::Sse(steps));
    let home = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let mut child = Command::new(tandem_bin())
        .arg("lsp")
        .env("TANDEM_HOME", home.path())
        .env("TANDEM_FSYNC", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    initialize(&mut stdin, &mut stdout, root.path()).await;
    let session = new_session(&mut stdin, &mut stdout, server.session_config()).await;
    let before = rss_kib(pid);

    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tandem/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "talk"}]}}),
    )
    .await;
    // The editor reads nothing.
    let (seen, peak) = wait_until_stream_blocked(&server, pid, "the daemon").await;
    Stalled {
        log: home
            .path()
            .join("sessions")
            .join(format!("{session}.jsonl")),
        _server: server,
        _child: child,
        _home: home,
        stdin,
        stdout,
        session,
        pieces,
        written: seen,
        rss_before_kib: before,
        rss_peak_kib: peak,
    }
}

/// Waits until the model server, streaming [`CHUNKS`] chunks as fast as its
/// socket lets it, has written nothing for a second: its writes are
/// blocked because `reader` (pid `pid`) stopped reading the stream. Fails
/// if the whole stream was read, or if writing goes on for a minute.
/// Returns the chunks written and `pid`'s peak RSS (KiB) meanwhile.
pub(crate) async fn wait_until_stream_blocked(
    server: &ModelServer,
    pid: u32,
    reader: &str,
) -> (usize, u64) {
    let started = Instant::now();
    let (mut seen, mut since, mut peak) = (0, Instant::now(), 0);
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        peak = peak.max(rss_kib(pid));
        let written = server.chunk_write_times().len();
        assert!(
            written < CHUNKS,
            "{reader} read the whole {} MiB stream while nothing read its output",
            (CHUNKS * CHUNK_BYTES) >> 20
        );
        if written != seen {
            (seen, since) = (written, Instant::now());
        } else if seen > 0 && since.elapsed() >= Duration::from_secs(1) {
            return (seen, peak);
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the model server kept writing ({written} chunks) for a minute"
        );
    }
}

#[tokio::test]
async fn an_editor_that_stops_reading_stops_the_model_stream_and_memory_stays_bounded() {
    let mut stalled = stall_the_model_stream().await;
    let (seen, before, peak) = (
        stalled.written,
        stalled.rss_before_kib,
        stalled.rss_peak_kib,
    );
    let grew_mib = peak.saturating_sub(before) as f64 / 1024.0;
    println!("paused: {seen} of {CHUNKS} chunks written by the model server, daemon grew {grew_mib:.1} MiB");
    assert!(
        grew_mib < 16.0,
        "the daemon grew by {grew_mib:.1} MiB while its editor read nothing \
         ({seen} of {CHUNKS} chunks of {CHUNK_BYTES} bytes taken)"
    );

    // The editor reads again: the turn goes on to its end, and nothing
    // was lost or reordered.
    let frames = read_until_response(&mut stalled.stdout, 3).await;
    let updates: Vec<&Value> = frames
        .iter()
        .filter(|m| m["method"] == "tandem/update")
        .map(|m| &m["params"]["update"])
        .collect();
    let text: String = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect();
    assert!(text == stalled.pieces.concat(), "the exact text, in order");
    assert_eq!(updates.last().unwrap()["sessionUpdate"], "turn_end");
    assert_eq!(frames.last().unwrap()["result"]["stopReason"], "end_turn");
}

#[tokio::test]
async fn a_cancel_ends_a_turn_that_waits_for_the_editor_to_read() {
    let mut stalled = stall_the_model_stream().await;
    send(
        &mut stalled.stdin,
        json!({"jsonrpc": "2.0", "method": "tandem/cancel",
               "params": {"sessionId": stalled.session}}),
    )
    .await;
    // The turn ends while the editor still reads nothing.
    let mut polls = 0;
    while !std::fs::read_to_string(&stalled.log)
        .unwrap_or_default()
        .contains("\"type\":\"turn_end\"")
    {
        polls += 1;
        assert!(polls < 1000, "the cancel did not end the waiting turn");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let frames = read_until_response(&mut stalled.stdout, 3).await;
    assert_eq!(frames.last().unwrap()["result"]["stopReason"], "cancelled");
    let text: String = frames
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|m| m["params"]["update"]["content"]["text"].as_str().unwrap())
        .collect();
    assert!(
        stalled.pieces.concat().starts_with(&text) && text.len() < CHUNKS * CHUNK_BYTES,
        "a prefix of the answer, in order ({} bytes)",
        text.len()
    );
}
