//! A stdio editor for the benches that drive the release binary: spawns
//! `tandem` with given arguments, stamps each LSP frame it reads, and
//! scripts paced replies. Include with
//! `#[path = "common/stdio_editor.rs"] mod stdio_editor;` next to
//! `mod model_server`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use crate::model_server::{openai, Reply, SseStep};

/// Guard against a hung daemon; never a way of waiting for something.
pub const WAIT: Duration = Duration::from_secs(60);

/// The binary under test: `TANDEM_BENCH_BIN` if set (to compare builds),
/// else the release binary. Cargo sets `CARGO_BIN_EXE_tandem` for bench
/// targets too; failing that, it sits next to `deps/`, where this bench's
/// executable is.
pub fn tandem_bin() -> PathBuf {
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

pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}

/// One frame from the daemon and when the read that completed it returned.
pub struct Received {
    pub at: Instant,
    pub body: Vec<u8>,
}

/// Splits stdout into frames, stamping them; parsing is left to the main
/// task so that this loop gets back to `read` at once.
pub async fn read_frames(
    mut stdout: tokio::process::ChildStdout,
    tx: mpsc::UnboundedSender<Received>,
) {
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

pub struct Editor {
    pub child: Child,
    stdin: ChildStdin,
    incoming: mpsc::UnboundedReceiver<Received>,
    next_id: i64,
    /// Responses to other requests that [`Editor::timed_request`] read
    /// while it waited for its own (a prompt's, when its turn ended
    /// meanwhile), for [`Editor::until_response`].
    early: Vec<(Instant, Value)>,
}

impl Editor {
    pub async fn send(&mut self, message: &Value) {
        let body = serde_json::to_vec(message).expect("serialize");
        self.stdin.write_all(&frame(&body)).await.expect("write");
        self.stdin.flush().await.expect("flush");
    }

    pub async fn start_request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// Every frame up to and including the response to `id` (only the
    /// response if a timed request already read it).
    pub async fn until_response(&mut self, id: i64) -> Vec<(Instant, Value)> {
        if let Some(at) = self
            .early
            .iter()
            .position(|(_, v)| v.get("id") == Some(&json!(id)))
        {
            return vec![self.early.remove(at)];
        }
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

    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.start_request(method, params).await;
        let frames = self.until_response(id).await;
        frames.last().expect("response").1.clone()
    }
}

/// `count` text deltas, one every `period`, then the usual ending. The
/// deltas are paced from the start of the reply (`SseStep::Until`), not by
/// a delay before each: tokio's timer rounds every sleep up to its next
/// 1 ms tick, so `Delay(1ms)` steps would stream at about 430/s.
pub fn paced_script(count: usize, period: Duration) -> Reply {
    let mut steps = Vec::with_capacity(2 * count + 3);
    for i in 0..count {
        steps.push(SseStep::Until(period * (i as u32 + 1)));
        steps.push(openai::delta(json!({"content": format!("{i} ")})));
    }
    steps.extend(openai::ending("stop"));
    Reply::Sse(steps)
}

impl Editor {
    /// Spawns `bin args...` with `$TANDEM_HOME` = `home` and the daemon's
    /// default durability, its stderr in `home/stderr.log`.
    pub fn spawn(bin: &Path, args: &[&str], home: &Path) -> Editor {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(home.join("stderr.log"))
            .expect("stderr log");
        let mut child = Command::new(bin)
            .args(args)
            .env("TANDEM_HOME", home)
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
        Editor {
            stdin: child.stdin.take().expect("stdin"),
            child,
            incoming,
            next_id: 1,
            early: Vec::new(),
        }
    }

    /// `initialize` + `initialized` with `root` as the workspace folder.
    pub async fn handshake(&mut self, root: &Path) {
        let uri = format!("file://{}", root.display());
        let init = self
            .request(
                "initialize",
                json!({"processId": null, "rootUri": uri, "capabilities": {},
                       "workspaceFolders": [{"uri": uri, "name": "root"}]}),
            )
            .await;
        assert!(init.get("result").is_some(), "initialize failed: {init}");
        self.send(&json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
            .await;
    }

    /// A session whose model is the scripted server at `base_url`.
    pub async fn new_session(&mut self, base_url: &str, model: &str) -> String {
        let created = self
            .request(
                "tandem/newSession",
                json!({"config": {"model": {"base_url": base_url, "name": model,
                                            "api_key_env": "TANDEM_BENCH_NO_SUCH_KEY"}}}),
            )
            .await;
        created["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("newSession failed: {created}"))
            .to_string()
    }

    /// Prompts and returns every frame up to the answer, stamped.
    pub async fn prompt(&mut self, session: &str, text: &str) -> Vec<(Instant, Value)> {
        let id = self
            .start_request(
                "tandem/prompt",
                json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
            )
            .await;
        let frames = self.until_response(id).await;
        let response = &frames.last().expect("response").1;
        assert_eq!(
            response["result"]["stopReason"], "end_turn",
            "prompt failed: {response}"
        );
        frames
    }

    /// Sends one request and waits for its answer, timing from just before
    /// its frame is written to the read that returned the answer; the other
    /// frames read meanwhile (updates of a streaming session) are counted
    /// in `other` and dropped.
    pub async fn timed_request(
        &mut self,
        method: &str,
        params: &Value,
        other: &mut usize,
    ) -> (Duration, Value) {
        let id = self.next_id;
        self.next_id += 1;
        let body = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
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
            let value: Value = serde_json::from_slice(&received.body).expect("JSON frame");
            let response = value.get("id").is_some() && value.get("method").is_none();
            if response && value.get("id") == Some(&json!(id)) {
                return (received.at.saturating_duration_since(sent), value);
            }
            if response {
                self.early.push((received.at, value));
            }
            *other += 1;
        }
    }

    pub async fn shutdown(mut self) {
        let id = self.start_request("shutdown", Value::Null).await;
        self.until_response(id).await;
        self.send(&json!({"jsonrpc": "2.0", "method": "exit"}))
            .await;
        let _ = tokio::time::timeout(WAIT, self.child.wait()).await;
    }
}

/// The chunk latencies of one prompt's frames: delta `i` (text `"<i> "`)
/// against the i-th chunk write, read when the frame holding it was read.
/// A loaded machine may merge adjacent chunks into one frame (a slow
/// editor is never flooded); each delta in it counts from its own write.
pub fn latencies(frames: &[(Instant, Value)], written: &[Instant]) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(written.len());
    for (at, m) in frames {
        if m["method"] != "tandem/update"
            || m["params"]["update"]["sessionUpdate"] != "agent_message_chunk"
        {
            continue;
        }
        let text = m["params"]["update"]["content"]["text"]
            .as_str()
            .unwrap_or_default();
        for piece in text.split_inclusive(' ') {
            let i = samples.len();
            assert_eq!(piece, format!("{i} "), "delta {i} out of order");
            assert!(i < written.len(), "more deltas than were written");
            samples.push(at.saturating_duration_since(written[i]));
        }
    }
    assert_eq!(samples.len(), written.len(), "every delta arrived");
    samples
}
