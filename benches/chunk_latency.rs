//! Chunk latency (issue 2): the time from the model server writing an SSE
//! chunk to the editor reading the matching `tandem/update`, at 1,000
//! chunks/s, through the real release binary over stdio.
//!
//! The bench spawns `target/release/tandem lsp` (built by `cargo bench`,
//! since a bench target makes Cargo build the package's binaries), does the
//! LSP handshake, opens a session whose `model.base_url` is the scripted
//! server in this process, and prompts it with a script of deltas written
//! 1 ms apart. Delta `i` carries the text `"<i> "`, so it is matched to
//! the i-th chunk write by its content (also when a loaded machine merged
//! it with its neighbours into one `agent_message_chunk`). Both instants
//! are taken in this process: the server's just before it writes the
//! chunk to its socket (after the write would be too late: on loopback the
//! daemon can read the chunk before the writing thread gets the CPU back),
//! the editor's when the read that returned the frame's last byte came
//! back. The daemon runs with its defaults (`TANDEM_FSYNC` unset:
//! boundaries fsynced, chunks buffered).
//!
//! `cargo bench --bench chunk_latency`; `TANDEM_BENCH_CHUNKS` (default
//! 2000) and `TANDEM_BENCH_RUNS` (default 3) scale it, and
//! `TANDEM_BENCH_BIN=path/to/tandem` measures another build;
//! `TANDEM_STDIO_RUNTIME=multi` (passed on to the daemon) runs it on
//! tokio's worker pool instead of one thread.

#[path = "common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../tests/support/model_server/mod.rs"]
mod model_server;
#[path = "common/stdio_editor.rs"]
mod stdio_editor;

use std::time::Duration;

use serde_json::json;

use common::{env_usize, fmt, ms, report, verdict, Stats};
use model_server::ModelServer;
use stdio_editor::{paced_script, tandem_bin, Editor};

#[tokio::main]
async fn main() {
    common::print_machine();
    let chunks = env_usize("TANDEM_BENCH_CHUNKS", 2000);
    let runs = env_usize("TANDEM_BENCH_RUNS", 3);
    let server = ModelServer::start().await;
    let home = tempfile::tempdir().expect("temp home");
    let root = tempfile::tempdir().expect("temp workspace");
    let bin = tandem_bin();
    let mut editor = Editor::spawn(&bin, &["lsp"], home.path());

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
        // A loaded machine may merge adjacent chunks into one frame (issue
        // 13: the editor is never flooded); each delta counts from its own
        // write to the read of the frame that carried it.
        latencies.extend(stdio_editor::latencies(&frames, written));
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

    editor.shutdown().await;
}
