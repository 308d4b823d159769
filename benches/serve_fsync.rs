//! A serve that never stalls (issue 28): chunk latency of session B while
//! session A fsyncs its log in a loop, against B alone, in one `tandem
//! serve` reached by two windows (`tandem lsp --attach` each), with fsync
//! on (the default durability, on this machine's disk).
//!
//! Session A runs tool steps (`read_file`, a different `limit` each time
//! so the loop detector lets it be): every step fsyncs its calls before
//! they run and its results after, about two fsyncs a step. A's model
//! reads each request and drops its body (a real one parses it on another
//! machine; here parsing and keeping them took most of the two cores).
//! B's chunks are paced at 1,000/s and timed as in `serve_latency` (the model server's
//! write → the editor's read of the `tandem/update`). Goal: B's p99 under
//! A's fsyncs within 1 ms of B's p99 alone.
//!
//! On a shared machine the load moves B's p99 by milliseconds from one
//! minute to the next, so the two are never compared across minutes: each
//! *pair* is one run of B alone, then at once one run of B while A loops
//! (A's turn is started for it and cancelled after), and the figure is the
//! median over the pairs of (loaded p99 − alone p99). Three serves run
//! side by side and their pairs alternate, round after round:
//!
//! - `pool`: the serve as shipped (fsyncs on the blocking pool);
//! - `inline`: `TANDEM_SERVE_INLINE_FSYNC=1`, fsyncs on the serve's own
//!   thread as before issue 28;
//! - `control`: `TANDEM_FSYNC=0`, no fsync at all: what A's steps cost B
//!   without any fsync, the floor the first two are read against;
//! - `multi` (not by default): `TANDEM_SERVE_RUNTIME=multi`, the serve on
//!   tokio's worker pool instead of one thread.
//!
//! `cargo bench --bench serve_fsync`; `TANDEM_BENCH_ROUNDS` (default 7),
//! `TANDEM_BENCH_CHUNKS` (default 2000 per run) and `TANDEM_BENCH_MODES`
//! (default `pool,inline,control`) scale it.

#[path = "common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../tests/support/model_server/mod.rs"]
mod model_server;
#[path = "common/stdio_editor.rs"]
mod stdio_editor;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{env_usize, fmt, ms, percentile, verdict};
use model_server::{openai, ModelServer};
use serde_json::json;
use stdio_editor::{latencies, paced_script, tandem_bin, Editor};

/// Tool steps queued for session A: more than all its loaded runs use.
const A_STEPS: usize = 50_000;

/// One serve, its two windows and what its pairs measured.
struct Serve {
    mode: &'static str,
    process: std::process::Child,
    home: tempfile::TempDir,
    /// Session A's model: it reads each request and drops its body.
    model_a: ModelServer,
    model_b: ModelServer,
    window_a: Editor,
    window_b: Editor,
    session_a: String,
    session_b: String,
    /// Per pair: B's p99 alone, B's p99 while A looped, A's steps/s.
    pairs: Vec<(Duration, Duration, f64)>,
}

impl Serve {
    async fn start(mode: &'static str, bin: &Path, root: &Path) -> Serve {
        // Under the target dir, not /tmp: on a real disk, so fsync costs
        // what it costs.
        let home = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp home");
        let mut command = std::process::Command::new(bin);
        command
            .arg("serve")
            .env("TANDEM_HOME", home.path())
            .env_remove("TANDEM_LOG")
            .env_remove("TANDEM_FSYNC")
            .env_remove("TANDEM_SERVE_INLINE_FSYNC")
            .env_remove("TANDEM_SERVE_RUNTIME")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        match mode {
            "inline" => command.env("TANDEM_SERVE_INLINE_FSYNC", "1"),
            "control" => command.env("TANDEM_FSYNC", "0"),
            "multi" => command.env("TANDEM_SERVE_RUNTIME", "multi"),
            _ => &mut command,
        };
        let process = command.spawn().expect("spawn tandem serve");
        while !home.path().join("serve.json").exists() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let (model_a, model_b) = (ModelServer::start().await, ModelServer::start().await);
        // A's requests grow to hundreds of KB and come ~500 a second;
        // parsing and keeping each one here took a core of the two the
        // serve runs on (measured with perf), a cost of the bench's model,
        // not of the serve.
        model_a.discard_bodies();
        let mut window_b = Editor::spawn(bin, &["lsp", "--attach"], home.path());
        window_b.handshake(root).await;
        let session_b = window_b
            .new_session(&model_b.base_url(), model_server::MODEL_NAME)
            .await;
        let mut window_a = Editor::spawn(bin, &["lsp", "--attach"], home.path());
        window_a.handshake(root).await;
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
        for n in 0..A_STEPS {
            model_a.push(openai::tool_calls(&[(
                &format!("call_{n}"),
                "read_file",
                &json!({"path": "notes.txt", "limit": n % 1000 + 1, "offset": n / 1000 + 1})
                    .to_string(),
            )]));
        }
        // Warm-up: connections, allocations, the log files.
        model_b.push(paced_script(100, Duration::from_millis(1)));
        window_b.prompt(&session_b, "warm up").await;
        Serve {
            mode,
            process,
            home,
            model_a,
            model_b,
            window_a,
            window_b,
            session_a,
            session_b,
            pairs: Vec::new(),
        }
    }

    /// A's steps so far: one model request each. (Counting `step_end`s in
    /// A's log read a log of tens of MB every 5 ms.)
    fn steps_of_a(&self) -> usize {
        self.model_a.request_count()
    }

    /// One run of B: `chunks` paced chunks; B's p99.
    async fn run_b(&mut self, chunks: usize, label: &str) -> Duration {
        let offset = self.model_b.chunk_write_times().len();
        self.model_b
            .push(paced_script(chunks, Duration::from_millis(1)));
        let frames = self.window_b.prompt(&self.session_b, label).await;
        let written = self.model_b.chunk_write_times();
        let mut samples = latencies(&frames, &written[offset..offset + chunks]);
        samples.sort();
        percentile(&samples, 99.0)
    }

    /// B alone, then B while A loops (A started for it, cancelled after).
    async fn pair(&mut self, chunks: usize, round: usize) {
        let alone = self.run_b(chunks, &format!("alone {round}")).await;
        let prompt_a = self
            .window_a
            .start_request(
                "tandem/prompt",
                json!({"sessionId": self.session_a,
                       "prompt": [{"type": "text", "text": format!("loop {round}")}]}),
            )
            .await;
        let before = self.steps_of_a();
        while self.steps_of_a() < before + 10 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let (started, from) = (Instant::now(), self.steps_of_a());
        let loaded = self.run_b(chunks, &format!("loaded {round}")).await;
        let rate = (self.steps_of_a() - from) as f64 / started.elapsed().as_secs_f64();
        self.window_a
            .send(&json!({"jsonrpc": "2.0", "method": "tandem/cancel",
                          "params": {"sessionId": self.session_a}}))
            .await;
        self.window_a.until_response(prompt_a).await;
        println!(
            "{:>7} round {round}: B p99 alone {}, while A loops {} ({:+.3} ms); A {rate:.0} steps/s",
            self.mode,
            fmt(alone),
            fmt(loaded),
            ms(loaded) - ms(alone)
        );
        self.pairs.push((alone, loaded, rate));
    }

    async fn stop(mut self, bin: &Path) {
        self.window_a.shutdown().await;
        self.window_b.shutdown().await;
        let _ = std::process::Command::new(bin)
            .args(["serve", "--stop"])
            .env("TANDEM_HOME", self.home.path())
            .status();
        let _ = self.process.wait();
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

#[tokio::main]
async fn main() {
    common::print_machine();
    let chunks = env_usize("TANDEM_BENCH_CHUNKS", 2000);
    let rounds = env_usize("TANDEM_BENCH_ROUNDS", 7);
    let modes: Vec<&'static str> = std::env::var("TANDEM_BENCH_MODES")
        .unwrap_or_else(|_| "pool,inline,control".to_string())
        .split(',')
        .map(|m| match m.trim() {
            "pool" => "pool",
            "inline" => "inline",
            "control" => "control",
            "multi" => "multi",
            other => panic!("unknown mode `{other}` (pool, inline, control, multi)"),
        })
        .collect();
    let bin = tandem_bin();
    let root = tempfile::tempdir().expect("temp workspace");
    std::fs::write(
        root.path().join("notes.txt"),
        "a line of notes\n".repeat(2000),
    )
    .unwrap();
    let mut serves = Vec::new();
    for mode in &modes {
        serves.push(Serve::start(mode, &bin, root.path()).await);
    }
    println!("load average at the start: {}", load_average());
    for round in 0..rounds {
        for serve in &mut serves {
            serve.pair(chunks, round).await;
        }
    }
    println!("load average at the end: {}", load_average());
    println!("per mode, medians over {rounds} pairs of {chunks} chunks each way:");
    for serve in &serves {
        let growth = median(
            serve
                .pairs
                .iter()
                .map(|(alone, loaded, _)| ms(*loaded) - ms(*alone))
                .collect(),
        );
        let alone = median(serve.pairs.iter().map(|p| ms(p.0)).collect());
        let loaded = median(serve.pairs.iter().map(|p| ms(p.1)).collect());
        let rate = median(serve.pairs.iter().map(|p| p.2).collect());
        let within = serve
            .pairs
            .iter()
            .filter(|(alone, loaded, _)| ms(*loaded) - ms(*alone) <= 1.0)
            .count();
        let figure = format!(
            "{growth:+.3} ms (p99 alone {alone:.3} ms, while A loops {loaded:.3} ms; \
             {within} of {} pairs within 1 ms; A {rate:.0} steps/s)",
            serve.pairs.len()
        );
        if serve.mode == "pool" {
            // A run alone that the machine stalled makes a pair's growth
            // negative; the median alone cannot carry the verdict.
            verdict(
                "pool: B's p99 growth while A fsyncs, median of pairs",
                &figure,
                "at most +1 ms, in at least half the pairs",
                growth <= 1.0 && within * 2 >= serve.pairs.len(),
            );
        } else {
            println!("{}: B's p99 growth, median of pairs: {figure}", serve.mode);
        }
    }
    for serve in serves {
        serve.stop(&bin).await;
    }
}
