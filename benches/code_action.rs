//! Code actions under load (issue 11): the round trip of
//! `textDocument/codeAction` on a 10,000-line buffer with 50 diagnostics,
//! through the real release binary over stdio, with the daemon idle and
//! while another session's turn streams 1,000 chunks/s.
//!
//! The bench spawns `target/release/tandem lsp`, opens a generated
//! 10,000-line Rust-like document (`didOpen`), and sends code action
//! requests one after the other for a 20-line selection, each with all 50
//! diagnostics in `context.diagnostics` (the worst case: editors usually
//! send only the ones at the cursor). A request's time runs from just
//! before its frame is written to the daemon's stdin to the read that
//! returned its response's last byte; the figure therefore includes both
//! pipes and this process's own scheduling, an upper bound of the time in
//! the daemon. Every response is checked (five actions, `Fix` first and
//! preferred). Then the same while a prompt in another session streams
//! deltas 1 ms apart from the scripted model server in this process.
//!
//! The daemon's own share is measured apart, in process: the same
//! handler (`frontend::lsp::tasks::code_actions`) on a `Daemon` holding the
//! same document, timed around the call (the request's JSON already
//! parsed, the answer not yet serialized).
//!
//! `cargo bench --bench code_action`; `TANDEM_BENCH_REQUESTS` (default
//! 2000) scales the idle part and `TANDEM_BENCH_CHUNKS` (default 3000) the
//! streaming part; `TANDEM_BENCH_BIN=path/to/tandem` measures another
//! build.

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

const LINES: usize = 10_000;
const DIAGNOSTICS: usize = 50;

/// A 10,000-line Rust-like document.
fn document() -> String {
    let mut text = String::with_capacity(LINES * 40);
    for i in 0..LINES {
        if i % 20 == 0 {
            text.push_str(&format!("fn function_{i}(x: u32) -> u32 {{\n"));
        } else if i % 20 == 19 {
            text.push_str("}\n");
        } else {
            text.push_str(&format!("    let value_{i} = x.wrapping_mul({i}) + 1;\n"));
        }
    }
    text
}

/// 50 diagnostics spread over the document, one at line 5,010 (inside the
/// selection).
fn diagnostics() -> Vec<Value> {
    (0..DIAGNOSTICS)
        .map(|i| {
            let line = 10 + i * (LINES / DIAGNOSTICS);
            json!({
                "range": {"start": {"line": line, "character": 8}, "end": {"line": line, "character": 16}},
                "message": format!("unused variable `value_{line}`"),
                "severity": 2,
                "source": "rustc",
                "code": "unused_variables",
            })
        })
        .collect()
}

impl Editor {
    /// Sends one code action request and waits for its answer; returns the
    /// round trip and the answer. Other frames (updates of the streaming
    /// session) are counted and dropped.
    async fn code_action(&mut self, params: &Value, other: &mut usize) -> (Duration, Value) {
        let id = self.next_id;
        self.next_id += 1;
        let body = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": "textDocument/codeAction", "params": params}),
        )
        .expect("serialize");
        let bytes = frame(&body);
        let sent = Instant::now();
        self.stdin.write_all(&bytes).await.expect("write");
        self.stdin.flush().await.expect("flush");
        loop {
            let received = tokio::time::timeout(WAIT, self.incoming.recv())
                .await
                .expect("the daemon answered in time")
                .expect("the daemon kept stdout open");
            // Cheap check first: most frames while streaming are updates.
            let value: Value = serde_json::from_slice(&received.body).expect("JSON frame");
            if value.get("id") == Some(&json!(id)) && value.get("method").is_none() {
                return (received.at.saturating_duration_since(sent), value);
            }
            *other += 1;
        }
    }
}

/// The handler alone, in process: what the daemon spends on a request
/// between tower-lsp's parse and its serialization.
fn in_process(
    root: &std::path::Path,
    path: &std::path::Path,
    text: &str,
    params: &Value,
    n: usize,
) -> Stats {
    use std::sync::Arc;
    use tandem::core::daemon::{Daemon, DaemonOptions};
    use tandem::core::log::{Durability, NullSink};
    use tandem::vocab::bridge::NoClient;
    let home = tempfile::tempdir().expect("temp home");
    let daemon = Daemon::new(DaemonOptions {
        home: home.path().to_path_buf(),
        durability: Durability::Flush,
        sink: Arc::new(NullSink),
        bridge: Arc::new(NoClient),
    });
    daemon.workspace().set_roots(vec![root.to_path_buf()]);
    daemon.buffers().open(path.to_path_buf(), 1, text);
    let params: tower_lsp::lsp_types::CodeActionParams =
        serde_json::from_value(params.clone()).expect("CodeActionParams");
    let mut times = Vec::with_capacity(n);
    for i in 0..n + 200 {
        let params = params.clone();
        let start = Instant::now();
        let actions = tandem::frontend::lsp::tasks::code_actions(&daemon, params)
            .expect("code actions")
            .expect("some");
        let took = start.elapsed();
        assert_eq!(actions.len(), 5);
        if i >= 200 {
            times.push(took);
        }
    }
    Stats::of(&times)
}

fn check(answer: &Value) {
    let actions = answer["result"]
        .as_array()
        .unwrap_or_else(|| panic!("codeAction failed: {answer}"));
    assert_eq!(actions.len(), 5, "{answer}");
    assert_eq!(actions[0]["title"], "tandem: Fix");
    assert_eq!(actions[0]["isPreferred"], true);
}

#[tokio::main]
async fn main() {
    common::print_machine();
    let requests = env_usize("TANDEM_BENCH_REQUESTS", 2000);
    let chunks = env_usize("TANDEM_BENCH_CHUNKS", 3000);
    let server = ModelServer::start().await;
    let home = tempfile::tempdir().expect("temp home");
    let root = tempfile::tempdir().expect("temp workspace");
    let root_path = std::fs::canonicalize(root.path()).expect("canonical root");
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

    let root_uri = format!("file://{}", root_path.display());
    let init = editor
        .request(
            "initialize",
            json!({"processId": null, "rootUri": root_uri, "capabilities": {},
                   "workspaceFolders": [{"uri": root_uri, "name": "root"}]}),
        )
        .await;
    assert!(init.get("result").is_some(), "initialize failed: {init}");
    editor
        .send(&json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        .await;
    let path = root_path.join("src/big.rs");
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    let text = document();
    std::fs::write(&path, &text).expect("write document");
    let uri = format!("file://{}", path.display());
    editor
        .send(
            &json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
            "textDocument": {"uri": uri, "languageId": "rust", "version": 1, "text": text}}}),
        )
        .await;
    println!(
        "document: {LINES} lines, {} KB; {DIAGNOSTICS} diagnostics in every request",
        text.len() / 1024
    );
    let params = json!({
        "textDocument": {"uri": uri},
        "range": {"start": {"line": 5000, "character": 0}, "end": {"line": 5020, "character": 0}},
        "context": {"diagnostics": diagnostics()},
    });

    let handler = in_process(&root_path, &path, &text, &params, requests);
    report("handler in process (the daemon's own work)", &handler);

    let mut other = 0;
    // Warm-up: the catalog cache, allocations.
    for _ in 0..200 {
        let (_, answer) = editor.code_action(&params, &mut other).await;
        check(&answer);
    }

    // The plumbing alone: a code action for a document that is not a file
    // is answered `[]` before any work.
    let empty = json!({
        "textDocument": {"uri": "untitled:Untitled-1"},
        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
        "context": {"diagnostics": []},
    });
    let mut plumbing = Vec::with_capacity(requests);
    for _ in 0..requests {
        let (took, answer) = editor.code_action(&empty, &mut other).await;
        assert_eq!(answer["result"], json!([]), "{answer}");
        plumbing.push(took);
    }
    report(
        "baseline: the same round trip answered [] at once (untitled: document)",
        &Stats::of(&plumbing),
    );
    let mut heavy = empty.clone();
    heavy["context"]["diagnostics"] = json!(diagnostics());
    let mut sized = Vec::with_capacity(requests);
    for _ in 0..requests {
        let (took, answer) = editor.code_action(&heavy, &mut other).await;
        assert_eq!(answer["result"], json!([]), "{answer}");
        sized.push(took);
    }
    report(
        "baseline with the 50 diagnostics in the request, answered [] at once",
        &Stats::of(&sized),
    );

    let mut idle = Vec::with_capacity(requests);
    for _ in 0..requests {
        let (took, answer) = editor.code_action(&params, &mut other).await;
        check(&answer);
        idle.push(took);
    }
    let idle = Stats::of(&idle);
    report("codeAction, daemon idle", &idle);

    // Another session streams 1,000 chunks/s meanwhile.
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
    let offset = server.chunk_write_times().len();
    server.push(paced_script(chunks, Duration::from_millis(1)));
    let prompt = editor
        .start_request(
            "tandem/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "stream"}]}),
        )
        .await;
    // Start measuring once the stream has started.
    while server.chunk_write_times().len() < offset + 10 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let mut busy = Vec::new();
    other = 0;
    while server.chunk_write_times().len() < offset + chunks {
        let (took, answer) = editor.code_action(&params, &mut other).await;
        check(&answer);
        busy.push(took);
    }
    let written = server.chunk_write_times();
    let span = written[offset + chunks - 1].duration_since(written[offset]);
    let rate = (chunks - 1) as f64 / span.as_secs_f64();
    println!(
        "stream: {chunks} chunks at {rate:.0} chunks/s; {other} other frames read between the answers"
    );
    let busy = Stats::of(&busy);
    report("codeAction, another turn streaming", &busy);
    // Drain the prompt's response.
    loop {
        let received = tokio::time::timeout(WAIT, editor.incoming.recv())
            .await
            .expect("the prompt ended in time")
            .expect("stdout open");
        let value: Value = serde_json::from_slice(&received.body).expect("JSON frame");
        if value.get("id") == Some(&json!(prompt)) && value.get("method").is_none() {
            break;
        }
    }

    verdict(
        "p99, handler in the daemon",
        &fmt(handler.p99),
        "< 1 ms",
        ms(handler.p99) < 1.0,
    );
    verdict(
        "p99, idle, through the wire",
        &fmt(idle.p99),
        "< 1 ms",
        ms(idle.p99) < 1.0,
    );
    verdict(
        "p99, through the wire while a turn streams 1k chunks/s",
        &fmt(busy.p99),
        "< 1 ms",
        ms(busy.p99) < 1.0,
    );

    let id = editor.start_request("shutdown", Value::Null).await;
    editor.until_response(id).await;
    editor
        .send(&json!({"jsonrpc": "2.0", "method": "exit"}))
        .await;
    let _ = tokio::time::timeout(WAIT, child.wait()).await;
}
