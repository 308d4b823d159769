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
//! The idle and the streaming parts alternate over `TANDEM_BENCH_ROUNDS`
//! rounds (default 3) on the one daemon; the verdicts take the median of
//! the rounds' p99s and name the worst.
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
#[path = "common/stdio_editor.rs"]
mod stdio_editor;

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use common::{env_usize, fmt, ms, report, verdict, Stats};
use model_server::ModelServer;
use stdio_editor::{paced_script, tandem_bin, Editor};

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
    use tandem::core::client::OneBridge;
    use tandem::core::daemon::{Daemon, DaemonOptions};
    use tandem::core::log::{Durability, NullSink};
    use tandem::core::tasks::TaskOrigin;
    use tandem::vocab::bridge::NoClient;
    let home = tempfile::tempdir().expect("temp home");
    let daemon = Daemon::new(DaemonOptions {
        home: home.path().to_path_buf(),
        durability: Durability::Flush,
        sink: Arc::new(NullSink),
    });
    let client = daemon.connect(Arc::new(OneBridge(Arc::new(NoClient))));
    client.workspace().set_roots(vec![root.to_path_buf()]);
    client.buffers().open(path.to_path_buf(), 1, text);
    let params: tower_lsp::lsp_types::CodeActionParams =
        serde_json::from_value(params.clone()).expect("CodeActionParams");
    let mut times = Vec::with_capacity(n);
    for i in 0..n + 200 {
        let params = params.clone();
        let start = Instant::now();
        // As `tandem lsp` does: its client's origin, made per request.
        let origin = TaskOrigin::of(&client);
        let actions = tandem::frontend::lsp::tasks::code_actions(&daemon, &origin, params)
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

/// The median and the worst of the rounds' p99s, printed with the
/// rounds' medians.
fn across(rounds: &[Stats], what: &str) -> (Duration, Duration) {
    let mut p99s: Vec<Duration> = rounds.iter().map(|r| r.p99).collect();
    let mut medians: Vec<Duration> = rounds.iter().map(|r| r.median).collect();
    p99s.sort();
    medians.sort();
    let list = |v: &[Duration]| v.iter().map(|d| fmt(*d)).collect::<Vec<_>>().join(", ");
    println!(
        "codeAction, {what}, {} rounds: median {} (rounds: {}); p99 {} (rounds: {})",
        rounds.len(),
        fmt(medians[medians.len() / 2]),
        list(&medians),
        fmt(p99s[p99s.len() / 2]),
        list(&p99s),
    );
    (p99s[p99s.len() / 2], p99s[p99s.len() - 1])
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
    let rounds = env_usize("TANDEM_BENCH_ROUNDS", 3).max(1);
    let server = ModelServer::start().await;
    let home = tempfile::tempdir().expect("temp home");
    let root = tempfile::tempdir().expect("temp workspace");
    let root_path = std::fs::canonicalize(root.path()).expect("canonical root");
    let bin = tandem_bin();
    let mut editor = Editor::spawn(&bin, &["lsp"], home.path());
    editor.handshake(&root_path).await;
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
        let (_, answer) = editor
            .timed_request("textDocument/codeAction", &params, &mut other)
            .await;
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
        let (took, answer) = editor
            .timed_request("textDocument/codeAction", &empty, &mut other)
            .await;
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
        let (took, answer) = editor
            .timed_request("textDocument/codeAction", &heavy, &mut other)
            .await;
        assert_eq!(answer["result"], json!([]), "{answer}");
        sized.push(took);
    }
    report(
        "baseline with the 50 diagnostics in the request, answered [] at once",
        &Stats::of(&sized),
    );

    // Rounds that alternate the two conditions on the same daemon, so a
    // change in the machine's load falls on both alike: each round runs
    // `requests` requests idle, then requests for as long as another
    // session's prompt streams `chunks` deltas 1 ms apart (1,000 chunks/s).
    let session = editor
        .new_session(&server.base_url(), model_server::MODEL_NAME)
        .await;
    let mut idle_rounds = Vec::with_capacity(rounds);
    let mut busy_rounds = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let mut idle = Vec::with_capacity(requests);
        for _ in 0..requests {
            let (took, answer) = editor
                .timed_request("textDocument/codeAction", &params, &mut other)
                .await;
            check(&answer);
            idle.push(took);
        }
        let idle = Stats::of(&idle);
        report(&format!("round {round}: codeAction, daemon idle"), &idle);
        idle_rounds.push(idle);

        let offset = server.chunk_write_times().len();
        server.push(paced_script(chunks, Duration::from_millis(1)));
        let prompt = editor
            .start_request(
                "tandem/prompt",
                json!({"sessionId": session, "prompt": [{"type": "text", "text": format!("stream {round}")}]}),
            )
            .await;
        // Start measuring once the stream has started.
        while server.chunk_write_times().len() < offset + 10 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let mut busy = Vec::new();
        other = 0;
        while server.chunk_write_times().len() < offset + chunks {
            let (took, answer) = editor
                .timed_request("textDocument/codeAction", &params, &mut other)
                .await;
            check(&answer);
            busy.push(took);
        }
        let written = server.chunk_write_times();
        let span = written[offset + chunks - 1].duration_since(written[offset]);
        let rate = (chunks - 1) as f64 / span.as_secs_f64();
        let busy = Stats::of(&busy);
        report(
            &format!("round {round}: codeAction, another turn streaming {rate:.0} chunks/s ({other} other frames read between the answers)"),
            &busy,
        );
        busy_rounds.push(busy);
        // Drain the prompt's response before the next round.
        editor.until_response(prompt).await;
    }
    let (idle_p99, idle_worst) = across(&idle_rounds, "idle");
    let (busy_p99, busy_worst) = across(&busy_rounds, "another turn streaming");

    verdict(
        "p99, handler in the daemon",
        &fmt(handler.p99),
        "< 1 ms",
        ms(handler.p99) < 1.0,
    );
    verdict(
        &format!(
            "p99, idle, through the wire (median of {rounds} rounds; worst {})",
            fmt(idle_worst)
        ),
        &fmt(idle_p99),
        "< 1 ms",
        ms(idle_p99) < 1.0,
    );
    verdict(
        &format!("p99, through the wire while a turn streams 1k chunks/s (median of {rounds} rounds; worst {})", fmt(busy_worst)),
        &fmt(busy_p99),
        "< 1 ms",
        ms(busy_p99) < 1.0,
    );

    editor.shutdown().await;
}
