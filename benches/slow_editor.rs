//! A slow editor (issue 13): the editor reads 10 frames/s while the model
//! streams 1,000 chunks/s for 30 s, through the real release binary over
//! stdio. Measured: the daemon's peak RSS (sampled from `/proc` every
//! 50 ms), whether the text the editor got is complete and in order, how
//! many chunk frames carried it, and how long after the model's last chunk
//! (the last SSE event the model server wrote, stamped just before its
//! write) the prompt's answer was read — the latency target — and, for
//! the record, how long after the last chunk frame was read.
//!
//! The editor reads its stdout through a 4 KiB buffer and takes 100 ms per
//! frame, so the daemon's pipe fills and its writer blocks, as with an
//! editor busy rendering.
//!
//! `cargo bench --bench slow_editor`; `TANDEM_BENCH_SECONDS` (default 30),
//! `TANDEM_BENCH_RATE` (chunks/s, default 1000) and `TANDEM_BENCH_FRAMES`
//! (frames read per second, default 10) scale it; `TANDEM_BENCH_BIN`
//! measures another build.

#[path = "common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../tests/support/model_server/mod.rs"]
mod model_server;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout, Command};

use common::{env_usize, fmt, verdict};
use model_server::{openai, ModelServer, Reply, SseStep};

fn tandem_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("TANDEM_BENCH_BIN") {
        return PathBuf::from(path);
    }
    if let Some(path) = option_env!("CARGO_BIN_EXE_tandem") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("bench executable path");
    exe.parent()
        .and_then(|deps| deps.parent())
        .map(|dir| dir.join("tandem"))
        .expect("target/release/tandem")
}

async fn send(stdin: &mut ChildStdin, message: Value) {
    let body = message.to_string();
    let frame = format!("Content-Length: {}\r\n\r\n{body}", body.len());
    stdin.write_all(frame.as_bytes()).await.expect("write");
    stdin.flush().await.expect("flush");
}

async fn read_frame(stdout: &mut BufReader<ChildStdout>) -> Value {
    let mut header = Vec::new();
    while !header.ends_with(b"\r\n\r\n") {
        header.push(stdout.read_u8().await.expect("daemon stdout"));
    }
    let header = String::from_utf8(header).expect("header");
    let len: usize = header
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.trim().parse().ok())
        .expect("Content-Length");
    let mut body = vec![0; len];
    stdout.read_exact(&mut body).await.expect("body");
    serde_json::from_slice(&body).expect("JSON frame")
}

/// Frames up to the response to `id`, `pause` after each.
async fn until_response(
    stdout: &mut BufReader<ChildStdout>,
    id: i64,
    pause: Duration,
) -> Vec<(Instant, Value)> {
    let mut frames = Vec::new();
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(600), read_frame(stdout))
            .await
            .expect("a frame in time");
        let done = frame["id"] == id && frame.get("method").is_none();
        frames.push((Instant::now(), frame));
        if done {
            return frames;
        }
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    }
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[tokio::main]
async fn main() {
    common::print_machine();
    let seconds = env_usize("TANDEM_BENCH_SECONDS", 30);
    let rate = env_usize("TANDEM_BENCH_RATE", 1000);
    let frames_per_sec = env_usize("TANDEM_BENCH_FRAMES", 10).max(1);
    let chunks = seconds * rate;
    let period = Duration::from_secs_f64(1.0 / rate as f64);
    let pieces: Vec<String> = (0..chunks).map(|i| format!("{i} ")).collect();
    let mut steps = Vec::with_capacity(2 * chunks + 3);
    for (i, piece) in pieces.iter().enumerate() {
        steps.push(SseStep::Until(period * (i as u32 + 1)));
        steps.push(openai::delta(json!({"content": piece})));
    }
    steps.extend(openai::ending("stop"));

    let server = ModelServer::start().await;
    server.push(Reply::Sse(steps));
    let home = tempfile::tempdir().expect("temp home");
    let root = tempfile::tempdir().expect("temp workspace");
    let mut child = Command::new(tandem_bin())
        .arg("lsp")
        .env("TANDEM_HOME", home.path())
        .env_remove("TANDEM_LOG")
        .env_remove("TANDEM_FSYNC")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn tandem (run through `cargo bench`, which builds it)");
    let pid = child.id().expect("pid");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::with_capacity(4096, child.stdout.take().expect("stdout"));

    let uri = format!("file://{}", root.path().display());
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"processId": null, "rootUri": uri, "capabilities": {}}}),
    )
    .await;
    until_response(&mut stdout, 1, Duration::ZERO).await;
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}),
    )
    .await;
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tandem/newSession",
        "params": {"config": server.session_config()}}),
    )
    .await;
    let created = until_response(&mut stdout, 2, Duration::ZERO).await;
    let session = created.last().expect("response").1["result"]["sessionId"]
        .as_str()
        .expect("sessionId")
        .to_string();

    let peak = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (peak.clone(), done.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let before = rss_kib(pid);
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tandem/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "stream"}]}}),
    )
    .await;
    let pause = Duration::from_secs_f64(1.0 / frames_per_sec as f64);
    let frames = until_response(&mut stdout, 3, pause).await;
    done.store(true, Ordering::Relaxed);
    let _ = sampler.await;

    let answered_at = frames.last().expect("response").0;
    let stream_end = *server.chunk_write_times().last().expect("chunks written");
    let chunk_texts: Vec<&str> = frames
        .iter()
        .filter(|(_, m)| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|(_, m)| {
            m["params"]["update"]["content"]["text"]
                .as_str()
                .unwrap_or_default()
        })
        .collect();
    let complete = chunk_texts.concat() == pieces.concat();
    let peak_mib = peak.load(Ordering::Relaxed) as f64 / 1024.0;
    let lag = answered_at.saturating_duration_since(stream_end);
    let last_chunk_read = frames
        .iter()
        .rev()
        .find(|(_, m)| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|(at, _)| *at)
        .expect("chunk frames");
    let after_last_chunk = frames
        .iter()
        .filter(|(at, _)| *at > last_chunk_read)
        .count();
    println!(
        "{chunks} chunks at {rate}/s read at {frames_per_sec} frames/s: {} chunk frames, {} frames in all",
        chunk_texts.len(),
        frames.len()
    );
    println!(
        "daemon RSS: {:.1} MiB before the prompt, peak {peak_mib:.1} MiB",
        before as f64 / 1024.0
    );
    println!("model's last chunk -> prompt answer read: {}", fmt(lag));
    println!(
        "last chunk frame read -> prompt answer read: {} ({after_last_chunk} frames after it, the answer included)",
        fmt(answered_at.saturating_duration_since(last_chunk_read))
    );
    verdict(
        "peak RSS",
        &format!("{peak_mib:.1} MiB"),
        "< 50 MB",
        peak_mib * 1.048_576 < 50.0,
    );
    verdict(
        "text complete and in order",
        if complete { "yes" } else { "no" },
        "yes",
        complete,
    );
    verdict(
        "answer after the last chunk",
        &fmt(lag),
        "<= 1 s",
        lag <= Duration::from_secs(1),
    );
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 4, "method": "shutdown"}),
    )
    .await;
    until_response(&mut stdout, 4, Duration::ZERO).await;
    send(&mut stdin, json!({"jsonrpc": "2.0", "method": "exit"})).await;
    let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
}
