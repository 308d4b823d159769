//! Chunk latency (issue 2): the time from the model server writing an SSE
//! chunk to the editor reading the matching `tandem/update`, at 1,000
//! chunks/s, through the real release binary over stdio.
//!
//! The bench spawns `target/release/tandem lsp` (built by `cargo bench`,
//! since a bench target makes Cargo build the package's binaries), does the
//! LSP handshake, opens a session whose `model.base_url` is the scripted
//! server in this process, and prompts it with a script of deltas written
//! 1 ms apart. Delta `i` carries the text `"<i> "`, so the
//! i-th `agent_message_chunk` is matched to the i-th chunk write by its
//! content. Both instants are taken in this process: the server's just
//! before it writes the chunk to its socket (after the write would be too
//! late: on loopback the daemon can read the chunk before the writing
//! thread gets the CPU back), the editor's when the read that returned the
//! frame's last byte came back. The daemon runs with its
//! defaults (`TANDEM_FSYNC` unset: boundaries fsynced, chunks buffered).
//!
//! `cargo bench --bench chunk_latency`; `TANDEM_BENCH_CHUNKS` (default
//! 2000) and `TANDEM_BENCH_RUNS` (default 3) scale it, and
//! `TANDEM_BENCH_BIN=path/to/tandem` measures another build.

#[path = "common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../tests/support/model_server/mod.rs"]
mod model_server;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{ChildStdin, Command};
use tokio::sync::mpsc;

use common::{env_usize, fmt, ms, report, verdict, Stats};
use model_server::{openai, ModelServer, Reply, SseStep};

/// Guard against a hung daemon; never a way of waiting for something.
const WAIT: Duration = Duration::from_secs(60);

/// The binary under test: `TANDEM_BENCH_BIN` if set (to compare builds),
/// else the release binary. Cargo sets `CARGO_BIN_EXE_tandem` for bench
/// targets too; failing that, it sits next to `deps/`, where this bench's
/// executable is.
fn tandem_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("TANDEM_BENCH_BIN") {
        println!(
            "binary (TANDEM_BENCH_BIN): {}",
            PathBuf::from(&path).display()
        );
        return PathBuf::from(path);
    }
    if let Some(path) = option_env!("CARGO_BIN_EXE_tandem") {
        println!("binary (CARGO_BIN_EXE_tandem): {path}");
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("bench executable path");
    let path = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|dir| dir.join("tandem"))
        .expect("target/release/tandem");
    println!("binary (next to the bench): {}", path.display());
    path
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}

/// One frame from the daemon and when the read that completed it returned.
struct Received {
    at: Instant,
    body: Vec<u8>,
}

/// Splits stdout into frames, stamping them; parsing is left to the main
/// task so that this loop gets back to `read` at once.
async fn read_frames(mut stdout: tokio::process::ChildStdout, tx: mpsc::UnboundedSender<Received>) {
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match stdout.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let at = Instant::now();
        buf.extend_from_slice(&chunk[..n]);
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let header = String::from_utf8_lossy(&buf[..end]).to_string();
            let len: usize = header
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .and_then(|v| v.trim().parse().ok())
                .expect("frame with Content-Length");
            if buf.len() < end + 4 + len {
                break;
            }
            let body = buf[end + 4..end + 4 + len].to_vec();
            buf.drain(..end + 4 + len);
            if tx.send(Received { at, body }).is_err() {
                return;
            }
        }
    }
}

struct Editor {
    stdin: ChildStdin,
    incoming: mpsc::UnboundedReceiver<Received>,
    next_id: i64,
}

impl Editor {
    async fn send(&mut self, message: &Value) {
        let body = serde_json::to_vec(message).expect("serialize");
        self.stdin.write_all(&frame(&body)).await.expect("write");
        self.stdin.flush().await.expect("flush");
    }

    async fn start_request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// Every frame up to and including the response to `id`.
    async fn until_response(&mut self, id: i64) -> Vec<(Instant, Value)> {
        let mut frames = Vec::new();
        loop {
            let received = tokio::time::timeout(WAIT, self.incoming.recv())
                .await
                .expect("the daemon answered in time")
                .expect("the daemon kept stdout open");
            let value: Value = serde_json::from_slice(&received.body).expect("JSON frame");
            let done = value.get("id") == Some(&json!(id)) && value.get("method").is_none();
            frames.push((received.at, value));
            if done {
                return frames;
            }
        }
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.start_request(method, params).await;
        let frames = self.until_response(id).await;
        frames.last().expect("response").1.clone()
    }
}

/// `count` text deltas, one every `period`, then the usual ending. The
/// deltas are paced from the start of the reply (`SseStep::Until`), not by
/// a delay before each: tokio's timer rounds every sleep up to its next
/// 1 ms tick, so `Delay(1ms)` steps would stream at about 430/s.
fn paced_script(count: usize, period: Duration) -> Reply {
    let mut steps = Vec::with_capacity(2 * count + 3);
    for i in 0..count {
        steps.push(SseStep::Until(period * (i as u32 + 1)));
        steps.push(openai::delta(json!({"content": format!("{i} ")})));
    }
    steps.extend(openai::ending("stop"));
    Reply::Sse(steps)
}

#[tokio::main]
async fn main() {
    common::print_machine();
    let chunks = env_usize("TANDEM_BENCH_CHUNKS", 2000);
    let runs = env_usize("TANDEM_BENCH_RUNS", 3);
    let server = ModelServer::start().await;
    let home = tempfile::tempdir().expect("temp home");
    let root = tempfile::tempdir().expect("temp workspace");
    let bin = tandem_bin();
    let stderr = std::fs::File::create(home.path().join("stderr.log")).expect("stderr log");
    let mut child = Command::new(&bin)
        .arg("lsp")
        .env("TANDEM_HOME", home.path())
        .env_remove("TANDEM_LOG")
        .env_remove("TANDEM_FSYNC")
        .env_remove("TANDEM_BASE_URL")
        .env_remove("TANDEM_MODEL")
        .env_remove("TANDEM_PROVIDER")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr))
        .kill_on_drop(true)
        .spawn()
        .expect("spawn tandem (run through `cargo bench`, which builds it)");
    let (tx, incoming) = mpsc::unbounded_channel();
    tokio::spawn(read_frames(child.stdout.take().expect("stdout"), tx));
    let mut editor = Editor {
        stdin: child.stdin.take().expect("stdin"),
        incoming,
        next_id: 1,
    };

    let uri = format!("file://{}", root.path().display());
    let init = editor
        .request(
            "initialize",
            json!({"processId": null, "rootUri": uri, "capabilities": {},
                   "workspaceFolders": [{"uri": uri, "name": "root"}]}),
        )
        .await;
    assert!(init.get("result").is_some(), "initialize failed: {init}");
    editor
        .send(&json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        .await;
    let created = editor
        .request(
            "tandem/newSession",
            json!({"config": {"model": {"base_url": server.base_url(), "name": model_server::MODEL_NAME,
                                        "api_key_env": "TANDEM_BENCH_NO_SUCH_KEY"}}}),
        )
        .await;
    let session = created["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("newSession failed: {created}"))
        .to_string();

    // Warm-up: connections, allocations, the log file.
    server.push(paced_script(100, Duration::from_millis(1)));
    let id = editor
        .start_request(
            "tandem/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "warm up"}]}),
        )
        .await;
    editor.until_response(id).await;

    let mut latencies = Vec::with_capacity(chunks * runs);
    let mut rates = Vec::new();
    for run in 0..runs {
        let offset = server.chunk_write_times().len();
        server.push(paced_script(chunks, Duration::from_millis(1)));
        let id = editor
            .start_request(
                "tandem/prompt",
                json!({"sessionId": session, "prompt": [{"type": "text", "text": format!("run {run}")}]}),
            )
            .await;
        let frames = editor.until_response(id).await;
        let response = &frames.last().expect("response").1;
        assert_eq!(
            response["result"]["stopReason"], "end_turn",
            "prompt failed: {response}"
        );
        let written = server.chunk_write_times();
        let written = &written[offset..offset + chunks];
        let read: Vec<(Instant, &Value)> = frames
            .iter()
            .filter(|(_, m)| {
                m["method"] == "tandem/update"
                    && m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            })
            .map(|(at, m)| (*at, &m["params"]["update"]["content"]["text"]))
            .collect();
        assert_eq!(read.len(), chunks, "one update per delta");
        for (i, (at, text)) in read.iter().enumerate() {
            assert_eq!(text.as_str(), Some(format!("{i} ").as_str()), "update {i}");
            latencies.push(at.saturating_duration_since(written[i]));
        }
        let span = written[chunks - 1].duration_since(written[0]);
        let rate = (chunks - 1) as f64 / span.as_secs_f64();
        rates.push(rate);
        let stats = Stats::of(&latencies[latencies.len() - chunks..]);
        report(&format!("run {run}: {rate:.0} chunks/s"), &stats);
    }

    let stats = Stats::of(&latencies);
    println!(
        "chunk -> tandem/update latency, {runs} runs x {chunks} chunks, {:.0} chunks/s average:",
        rates.iter().sum::<f64>() / rates.len() as f64
    );
    report("all", &stats);
    verdict(
        "median",
        &fmt(stats.median),
        "< 0.5 ms",
        ms(stats.median) < 0.5,
    );
    verdict("p99", &fmt(stats.p99), "< 2 ms", ms(stats.p99) < 2.0);

    let id = editor.start_request("shutdown", Value::Null).await;
    editor.until_response(id).await;
    editor
        .send(&json!({"jsonrpc": "2.0", "method": "exit"}))
        .await;
    let _ = tokio::time::timeout(WAIT, child.wait()).await;
}
