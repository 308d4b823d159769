//! A serve that never stalls (issue 28): chunk latency of session B while
//! session A fsyncs its log in a loop, against B alone, in one `tandem
//! serve` reached by two windows (`tandem lsp --attach` each), with fsync
//! on (the default durability, on this machine's disk).
//!
//! Session A runs one long turn of tool steps (`read_file`, a different
//! `limit` each time so the loop detector lets it be): every step fsyncs
//! its calls before they run and its results after, about two fsyncs a
//! step, for as long as B streams. B's chunks are paced at 1,000/s and
//! timed as in `serve_latency` (the model server's write → the editor's
//! read of the `tandem/update`). Goal: B's p99 under A's fsyncs within
//! 1 ms of B's p99 alone.
//!
//! `cargo bench --bench serve_fsync`; `TANDEM_BENCH_CHUNKS` (default
//! 2000) and `TANDEM_BENCH_RUNS` (default 3, per phase) scale it.
//! `TANDEM_SERVE_INLINE_FSYNC=1` makes the serve fsync on its own thread as
//! it did before, for the comparison; `TANDEM_BENCH_FSYNC=0` runs it
//! without fsync at all (the control: what A's steps cost B without any
//! fsync). The bench starts the serve itself, with that environment, and
//! the two windows attach to it.

#[path = "common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../tests/support/model_server/mod.rs"]
mod model_server;
#[path = "common/stdio_editor.rs"]
mod stdio_editor;

use std::time::{Duration, Instant};

use common::{env_usize, fmt, ms, report, verdict, Stats};
use model_server::{openai, ModelServer};
use serde_json::json;
use stdio_editor::{latencies, paced_script, tandem_bin, Editor};

/// Tool steps queued for session A: more than B's runs can use up.
const A_STEPS: usize = 20_000;

#[tokio::main]
async fn main() {
    common::print_machine();
    let chunks = env_usize("TANDEM_BENCH_CHUNKS", 2000);
    let runs = env_usize("TANDEM_BENCH_RUNS", 3);
    let inline = std::env::var("TANDEM_SERVE_INLINE_FSYNC").is_ok_and(|v| v == "1");
    let no_fsync = std::env::var("TANDEM_BENCH_FSYNC").is_ok_and(|v| v == "0");
    println!(
        "serve fsyncs: {}",
        match (no_fsync, inline) {
            (true, _) => "never (TANDEM_BENCH_FSYNC=0, the control)",
            (false, true) => "on its thread (TANDEM_SERVE_INLINE_FSYNC=1)",
            (false, false) => "on the blocking pool",
        }
    );
    let bin = tandem_bin();
    let root = tempfile::tempdir().expect("temp workspace");
    std::fs::write(
        root.path().join("notes.txt"),
        "a line of notes\n".repeat(50),
    )
    .unwrap();
    // Under the target dir, not /tmp: on a real disk, so fsync costs what
    // it costs.
    let home = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp home");

    let mut serve = std::process::Command::new(&bin);
    serve
        .arg("serve")
        .env("TANDEM_HOME", home.path())
        .env_remove("TANDEM_LOG")
        .env_remove("TANDEM_FSYNC")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    if no_fsync {
        serve.env("TANDEM_FSYNC", "0");
    }
    let mut serve = serve.spawn().expect("spawn tandem serve");
    while !home.path().join("serve.json").exists() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (model_a, model_b) = (ModelServer::start().await, ModelServer::start().await);
    let mut window_b = Editor::spawn(&bin, &["lsp", "--attach"], home.path());
    window_b.handshake(root.path()).await;
    let session_b = window_b
        .new_session(&model_b.base_url(), model_server::MODEL_NAME)
        .await;
    let mut window_a = Editor::spawn(&bin, &["lsp", "--attach"], home.path());
    window_a.handshake(root.path()).await;
    let created = window_a
        .request(
            "tandem/newSession",
            json!({"config": {
                "model": {"base_url": model_a.base_url(), "name": model_server::MODEL_NAME,
                          "api_key_env": "TANDEM_BENCH_NO_SUCH_KEY"},
                "limits": {"max_iterations": A_STEPS + 10}}}),
        )
        .await;
    let session_a = created["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("newSession failed: {created}"))
        .to_string();
    // Warm-up: connections, allocations, the log files.
    model_b.push(paced_script(100, Duration::from_millis(1)));
    window_b.prompt(&session_b, "warm up").await;

    let mut idle = Vec::new();
    let mut loaded = Vec::new();
    let measure =
        |server: &ModelServer, frames: &[(std::time::Instant, serde_json::Value)], offset| {
            let written = server.chunk_write_times();
            latencies(frames, &written[offset..offset + chunks])
        };
    for run in 0..runs {
        let offset = model_b.chunk_write_times().len();
        model_b.push(paced_script(chunks, Duration::from_millis(1)));
        let frames = window_b.prompt(&session_b, &format!("idle {run}")).await;
        let samples = measure(&model_b, &frames, offset);
        report(&format!("B alone, run {run}"), &Stats::of(&samples));
        idle.extend(samples);
    }

    // Session A's loop: tool steps until it is cancelled.
    for n in 0..A_STEPS {
        model_a.push(openai::tool_calls(&[(
            &format!("call_{n}"),
            "read_file",
            &json!({"path": "notes.txt", "limit": n + 1}).to_string(),
        )]));
    }
    let prompt_a = window_a
        .start_request(
            "tandem/prompt",
            json!({"sessionId": session_a, "prompt": [{"type": "text", "text": "loop"}]}),
        )
        .await;
    let log_a = home
        .path()
        .join("sessions")
        .join(format!("{session_a}.jsonl"));
    let steps_of_a = || {
        std::fs::read_to_string(&log_a)
            .map(|t| t.matches("\"type\":\"step_end\"").count())
            .unwrap_or(0)
    };
    while steps_of_a() < 20 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (started, steps_before) = (Instant::now(), steps_of_a());
    for run in 0..runs {
        let offset = model_b.chunk_write_times().len();
        model_b.push(paced_script(chunks, Duration::from_millis(1)));
        let frames = window_b.prompt(&session_b, &format!("loaded {run}")).await;
        let samples = measure(&model_b, &frames, offset);
        report(
            &format!("B while A fsyncs, run {run}"),
            &Stats::of(&samples),
        );
        loaded.extend(samples);
    }
    let (elapsed, steps) = (started.elapsed(), steps_of_a() - steps_before);
    window_a
        .send(&json!({"jsonrpc": "2.0", "method": "tandem/cancel", "params": {"sessionId": session_a}}))
        .await;
    let answer = window_a.until_response(prompt_a).await;
    let answer = &answer.last().expect("answer").1;
    let fsyncs = if no_fsync {
        "no fsyncs".to_string()
    } else {
        format!("about {} fsyncs", 2 * steps)
    };
    println!(
        "session A: {steps} tool steps ({fsyncs}) in {:.2} s while B streamed, {:.0} steps/s; its turn ended {}",
        elapsed.as_secs_f64(),
        steps as f64 / elapsed.as_secs_f64(),
        answer["result"]["stopReason"]
    );
    assert!(steps > 0, "session A made no step while B streamed");

    println!("chunk -> tandem/update latency of B, {runs} runs x {chunks} chunks per phase:");
    let (idle, loaded) = (Stats::of(&idle), Stats::of(&loaded));
    report("B alone", &idle);
    report("B while A fsyncs", &loaded);
    let grew = ms(loaded.p99) - ms(idle.p99);
    verdict(
        "B's p99 while A fsyncs vs alone",
        &format!("{} vs {} = {grew:+.3} ms", fmt(loaded.p99), fmt(idle.p99)),
        "at most +1 ms",
        grew <= 1.0,
    );

    window_a.shutdown().await;
    window_b.shutdown().await;
    let _ = std::process::Command::new(&bin)
        .args(["serve", "--stop"])
        .env("TANDEM_HOME", home.path())
        .status();
    let _ = serve.wait();
}
