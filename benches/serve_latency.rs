//! Chunk latency through `tandem serve` (issue 14): SSE chunk written by the
//! model server -> `tandem/update` read by the editor, once through
//! `tandem lsp --attach` (stdio -> shim -> WebSocket -> serve and back) and
//! once through plain `tandem lsp` over stdio, in the same run, alternating
//! runs so that both see the same machine load. Goal: the serve path within
//! 1.2x of the direct one.
//!
//! Both instants are taken in this process, as in `chunk_latency`: the
//! server's just before it writes the chunk, the editor's when the read
//! that completed the frame returned. Deltas are paced at 1,000/s.
//!
//! `cargo bench --bench serve_latency`; `TANDEM_BENCH_CHUNKS` (default
//! 2000) and `TANDEM_BENCH_RUNS` (default 3, per path) scale it. The shim
//! links to the serve over its Unix socket; `TANDEM_ATTACH_TCP=1` makes it
//! take the loopback TCP port instead (to compare the two).

#[path = "common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../tests/support/model_server/mod.rs"]
mod model_server;
#[path = "common/stdio_editor.rs"]
mod stdio_editor;

use std::time::Duration;

use common::{env_usize, fmt, ms, report, verdict, Stats};
use model_server::ModelServer;
use stdio_editor::{latencies, paced_script, tandem_bin, Editor};

struct Path {
    name: &'static str,
    editor: Editor,
    session: String,
    samples: Vec<Duration>,
}

#[tokio::main]
async fn main() {
    common::print_machine();
    let chunks = env_usize("TANDEM_BENCH_CHUNKS", 2000);
    let runs = env_usize("TANDEM_BENCH_RUNS", 3);
    let server = ModelServer::start().await;
    let bin = tandem_bin();
    let root = tempfile::tempdir().expect("temp workspace");
    let direct_home = tempfile::tempdir().expect("temp home");
    let serve_home = tempfile::tempdir().expect("temp home");

    let mut paths = Vec::new();
    for (name, args, home) in [
        ("direct stdio", &["lsp"][..], direct_home.path()),
        ("serve + shim", &["lsp", "--attach"][..], serve_home.path()),
    ] {
        let mut editor = Editor::spawn(&bin, args, home);
        editor.handshake(root.path()).await;
        let session = editor
            .new_session(&server.base_url(), model_server::MODEL_NAME)
            .await;
        // Warm-up: connections, allocations, the log file.
        server.push(paced_script(100, Duration::from_millis(1)));
        editor.prompt(&session, "warm up").await;
        paths.push(Path {
            name,
            editor,
            session,
            samples: Vec::new(),
        });
    }

    println!("serve + shim link: {}", shim_link(serve_home.path()));

    for run in 0..runs {
        for path in paths.iter_mut() {
            let offset = server.chunk_write_times().len();
            server.push(paced_script(chunks, Duration::from_millis(1)));
            let frames = path
                .editor
                .prompt(&path.session, &format!("run {run}"))
                .await;
            let written = server.chunk_write_times();
            let run_samples = latencies(&frames, &written[offset..offset + chunks]);
            report(
                &format!("{} run {run}", path.name),
                &Stats::of(&run_samples),
            );
            path.samples.extend(run_samples);
        }
    }

    println!("chunk -> tandem/update latency, {runs} runs x {chunks} chunks per path:");
    let stats: Vec<Stats> = paths.iter().map(|p| Stats::of(&p.samples)).collect();
    for (path, stats) in paths.iter().zip(&stats) {
        report(path.name, stats);
    }
    let ratio = ms(stats[1].median) / ms(stats[0].median);
    verdict(
        "serve + shim median vs direct stdio",
        &format!(
            "{} vs {} = {ratio:.2}x",
            fmt(stats[1].median),
            fmt(stats[0].median)
        ),
        "within 1.2x",
        ratio <= 1.2,
    );
    let p99_ratio = ms(stats[1].p99) / ms(stats[0].p99);
    println!(
        "p99: serve + shim {} vs direct {} = {p99_ratio:.2}x",
        fmt(stats[1].p99),
        fmt(stats[0].p99)
    );

    for path in paths {
        path.editor.shutdown().await;
    }
    // The serve the shim started outlives it, by design: stop it.
    let _ = std::process::Command::new(&bin)
        .args(["serve", "--stop"])
        .env("TANDEM_HOME", serve_home.path())
        .status();
}

/// What the shim reaches the serve over: its Unix socket unless
/// `TANDEM_ATTACH_TCP=1` (inherited by the shim) forces the TCP port.
fn shim_link(home: &std::path::Path) -> String {
    let socket = std::fs::read_to_string(home.join("serve.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|info| info["socket"].as_str().map(String::from));
    let forced = std::env::var("TANDEM_ATTACH_TCP").is_ok_and(|v| v == "1");
    match (socket, forced) {
        (_, true) => "loopback TCP (TANDEM_ATTACH_TCP=1)".into(),
        (Some(path), false) => format!("Unix socket {path}"),
        (None, false) => "loopback TCP (the serve has no socket)".into(),
    }
}
