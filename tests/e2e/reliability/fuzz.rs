//! Wire fuzzing: seeded cases thrown at one running `tandem lsp`, at a
//! `tandem serve` through `tandem lsp --attach`, and at one `tandem acp` —
//! broken frames and lines (bad or missing Content-Length,
//! truncated and oversized bodies, non-JSON, non-UTF-8, batches, odd ids)
//! and well-framed messages to every method of the wire surface with
//! params mutated (wrong types, missing, huge, 10,000 deep). After every
//! hundred cases a valid request must be answered; at the end the daemon
//! must still run, its stderr must hold no panic, and no answer may be an
//! internal error. `TANDEM_FUZZ_CASES` sets the number of cases (CI:
//! 10,000 per frontend), `TANDEM_FUZZ_SEED` replays a run.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

use super::fuzz_cases::{acp_case, acp_methods, lsp_case, lsp_methods, Case, Surface};
use super::gen::{self, Gen};
use crate::support::client::{file_uri, frame, tandem_bin, Editor, EditorOptions, WAIT};
use crate::support::model_server::{openai, ModelServer};

/// A valid request is sent, and must be answered, after this many cases.
const PROBE_EVERY: usize = 100;

/// At the end of a daemon's cases, every request that reached it whole
/// must have been answered within this.
const ANSWER_ALL_WITHIN: Duration = Duration::from_secs(10);

/// The cases aim at a fresh session after this many, so that a long run
/// does not spend its time on one ever longer history.
const SESSION_EVERY: usize = 1000;

/// Error codes the daemon may answer with (protocol.md, "Errors").
const DOCUMENTED_CODES: &[i64] = &[
    -32700, -32600, -32601, -32602, -32603, -32800, -32801, -32002, -32001, -32003, -32004,
];

fn case_count() -> usize {
    std::env::var("TANDEM_FUZZ_CASES")
        .ok()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(10_000)
}

/// Requests that reached the daemon whole and are not answered yet: id →
/// method.
#[derive(Default)]
struct Unanswered(BTreeMap<i64, String>);

impl Unanswered {
    /// Notes the case's request, if it reached the daemon whole with the
    /// plain id `id` (odd ids are answered or refused in other ways).
    fn expect(&mut self, case: &Case, id: i64) {
        let Some(message) = case.intact.as_deref() else {
            return;
        };
        let Ok(value) = serde_json::from_str::<Value>(message) else {
            return;
        };
        if value["id"] == id {
            let method = value["method"].as_str().unwrap_or("?").to_string();
            self.0.insert(id, method);
        }
    }

    fn answered(&mut self, message: &Value) {
        if message.get("method").is_none() {
            if let Some(id) = message["id"].as_i64() {
                self.0.remove(&id);
            }
        }
    }
}

/// What the daemon answered over a run, for the figures.
#[derive(Default)]
struct Tally {
    by_code: BTreeMap<i64, usize>,
    results: usize,
    unanswered: Unanswered,
}

impl Tally {
    /// Counts a message; fails on an undocumented code or an internal error.
    fn record(&mut self, message: &Value, seed: u64) {
        self.unanswered.answered(message);
        if message.get("method").is_some() || message.get("id").is_none() {
            return;
        }
        let Some(error) = message.get("error") else {
            self.results += 1;
            return;
        };
        let code = error["code"].as_i64().unwrap_or(0);
        assert!(
            DOCUMENTED_CODES.contains(&code),
            "seed {seed}: undocumented error code in {message}"
        );
        let text = error["message"].as_str().unwrap_or_default();
        assert!(
            !(code == -32603 && text.starts_with("internal error in")),
            "seed {seed}: a handler panicked: {message}"
        );
        *self.by_code.entry(code).or_default() += 1;
    }
}

fn assert_no_panic(stderr: &str, seed: u64) {
    if let Some(at) = stderr.find("panicked") {
        let from = stderr[..at].rfind('\n').map_or(0, |n| n + 1);
        let excerpt: String = stderr[from..].chars().take(2000).collect();
        panic!("seed {seed}: the daemon panicked:\n{excerpt}");
    }
}

async fn model_server() -> ModelServer {
    let server = ModelServer::start().await;
    server.respond_with(|_| openai::text(["fuzzed ", "answer"]));
    server
}

fn workspace() -> (tempfile::TempDir, String) {
    let root = tempfile::tempdir().expect("workspace");
    let file = root.path().join("notes.txt");
    std::fs::write(&file, "first line\nsecond line\n").expect("notes.txt");
    let file = file_uri(&file);
    (root, file)
}

/// A long run spreads its cases over daemons of this many cases each: a
/// daemon's home fills with the sessions the cases create, and listing
/// them (every probe does) grows with their number.
const CASES_PER_DAEMON: usize = 20_000;

/// A new session whose configuration is mutated (a limit negative, huge,
/// of the wrong type...), so that the next cases' turns run under odd
/// settings; a plain one when the daemon refuses the configuration.
async fn fuzzed_session(g: &mut Gen, editor: &mut Editor, server: &ModelServer) -> String {
    let limits = json!({
        "max_iterations": 5, "max_tokens": 100000, "idle_timeout_secs": 30.0,
        "activity_timeout_secs": 60.0, "first_token_timeout_secs": 5.0,
        "first_token_secs_per_1k": 1.0, "first_token_timeout_cap_secs": 10.0,
        "chunk_timeout_secs": 5.0, "max_retries_per_turn": 2, "parallel_tools": 2,
        "activity_recent_secs": 5.0, "max_input_chars": 100000, "compact_threshold": 0.8,
        "compact_keep_ratio": 0.4, "max_compactions_without_progress": 2,
    });
    let mut config = server.session_config_with(limits);
    config["model"]["context_window"] = json!(128000);
    config["model"]["max_output_tokens"] = json!(4096);
    let mut params = json!({"config": config});
    for _ in 0..g.below(4) + 1 {
        params = g.mutate(&params);
    }
    let answer = editor.request("tandem/newSession", params).await;
    match answer["result"]["sessionId"].as_str() {
        Some(session) => session.to_string(),
        None => editor.new_session(server.session_config()).await,
    }
}

/// How a run went, for the figures.
fn report(frontend: &str, cases: usize, seed: u64, elapsed: std::time::Duration, tally: &Tally) {
    eprintln!(
        "fuzz {frontend}: {cases} cases in {elapsed:.1?}, seed {seed}; answers: {} results, errors by code {:?}",
        tally.results, tally.by_code
    );
}

/// The frontend a fuzz run drives.
#[derive(Clone, Copy)]
enum Frontend {
    Lsp,
    Acp,
}

/// Every case of the run against `frontend`, a fresh daemon (or, with
/// `attach`, a fresh serve through the shim) per [`CASES_PER_DAEMON`].
async fn fuzz_run(frontend: Frontend, attach: bool) {
    let name = match (frontend, attach) {
        (Frontend::Lsp, false) => "lsp",
        (Frontend::Lsp, true) => "lsp --attach",
        (Frontend::Acp, false) => "acp",
        (Frontend::Acp, true) => "acp --attach",
    };
    let mut g = Gen::for_suite(&format!("reliability::fuzz {name}"));
    let cases = case_count();
    let server = model_server().await;
    let started = Instant::now();
    let mut tally = Tally::default();
    let mut done = 0;
    while done < cases {
        let batch = (cases - done).min(CASES_PER_DAEMON);
        match frontend {
            Frontend::Lsp => {
                fuzz_one_lsp_daemon(&mut g, done, batch, &server, &mut tally, attach).await
            }
            Frontend::Acp => {
                fuzz_one_acp_agent(&mut g, done, batch, &server, &mut tally, attach).await
            }
        }
        done += batch;
    }
    report(name, cases, g.seed, started.elapsed(), &tally);
}

#[tokio::test]
async fn lsp_frontend_survives_fuzzed_frames_and_answers_every_probe() {
    fuzz_run(Frontend::Lsp, false).await;
}

/// The same cases through `tandem lsp --attach` to a serve it starts: the
/// shim carries the bytes as they come, and the serve's tunnel runs the
/// same frontend; the serve must keep serving and log no panic.
#[tokio::test]
async fn lsp_through_the_serve_survives_fuzzed_frames_and_answers_every_probe() {
    fuzz_run(Frontend::Lsp, true).await;
}

/// Stops the serve a shim started in `home`, however the run ended.
struct StopServe(std::path::PathBuf);

impl Drop for StopServe {
    fn drop(&mut self) {
        let _ = std::process::Command::new(tandem_bin())
            .args(["serve", "--stop"])
            .env("TANDEM_HOME", &self.0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Cases `first..first + count` against one fresh `tandem lsp` (with
/// `attach`: one fresh serve, through `tandem lsp --attach`).
async fn fuzz_one_lsp_daemon(
    g: &mut Gen,
    first: usize,
    count: usize,
    server: &ModelServer,
    tally: &mut Tally,
    attach: bool,
) {
    let seed = g.seed;
    let (root, file) = workspace();
    let home = std::sync::Arc::new(tempfile::tempdir().expect("home"));
    let _stop = attach.then(|| StopServe(home.path().to_path_buf()));
    let args = if attach {
        vec!["lsp".into(), "--attach".into()]
    } else {
        vec!["lsp".into()]
    };
    let mut editor = Editor::spawn_with(EditorOptions {
        env: vec![
            ("TANDEM_BASE_URL".into(), server.base_url()),
            ("TANDEM_MODEL".into(), "scripted-model".into()),
            ("TANDEM_LOG".into(), "warn".into()),
        ],
        args,
        home: Some(home.clone()),
    })
    .await;
    editor.initialize(root.path()).await;
    let session = editor.new_session(server.session_config()).await;
    editor
        .open(
            Path::new(file.trim_start_matches("file://")),
            "fn main() {}\n",
        )
        .await;
    let mut surface = Surface {
        session,
        root: file_uri(root.path()),
        file,
    };
    let mut methods = lsp_methods(&surface);
    let mut debt = 0;
    for case in first..first + count {
        let id = 1000 + case as i64;
        let sent = lsp_case(g, &methods, &surface.file, id, &mut debt);
        tally.unanswered.expect(&sent, id);
        for piece in &sent.writes {
            editor.send_raw(piece).await;
        }
        let last = case + 1 == first + count;
        if (case + 1) % PROBE_EVERY == 0 || last {
            if debt > 0 {
                editor.send_raw(&vec![b' '; debt]).await;
                debt = 0;
            }
            let id = format!("probe-{case}");
            let probe = gen::message(
                Some(&format!("\"{id}\"")),
                "tandem/listSessions",
                Some("{}"),
            );
            editor.send_raw(&frame(probe.as_bytes())).await;
            loop {
                let message = editor.next_message().await;
                tally.record(&message, seed);
                if message["id"] == id.as_str() && message.get("method").is_none() {
                    assert!(
                        message["result"]["sessions"].is_array(),
                        "seed {seed}: probe after case {case} failed: {message}"
                    );
                    break;
                }
            }
            editor.received.clear();
            assert!(
                editor.is_running(),
                "seed {seed}: the daemon died by case {case}"
            );
            if (case + 1) % SESSION_EVERY == 0 && !last {
                surface.session = fuzzed_session(g, &mut editor, server).await;
                methods = lsp_methods(&surface);
                // Answers to earlier cases that arrived meanwhile.
                for message in std::mem::take(&mut editor.received) {
                    tally.record(&message, seed);
                }
            }
        }
    }
    // Every request that arrived whole is answered.
    let drained = tokio::time::timeout(ANSWER_ALL_WITHIN, async {
        while !tally.unanswered.0.is_empty() {
            let message = editor.next_message().await;
            tally.record(&message, seed);
        }
    })
    .await;
    assert!(
        drained.is_ok(),
        "seed {seed}: requests never answered (id: method): {:?}",
        tally.unanswered.0
    );
    assert_no_panic(&editor.stderr(), seed);
    // A frame cut short by the end of input ends the daemon cleanly.
    editor
        .send_raw(b"Content-Length: 40\r\n\r\n{\"jsonrpc\"")
        .await;
    let (status, _) = editor.close_stdin_collect().await;
    assert!(status.success(), "seed {seed}: exit status {status}");
    let stderr = std::fs::read_to_string(home.path().join("stderr.log")).unwrap_or_default();
    assert_no_panic(&stderr, seed);
    if attach {
        assert_serve_answers(home.path(), seed);
    }
}

/// `tandem acp` as a raw line pipe: every line it writes must be JSON.
struct AcpPipe {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::UnboundedReceiver<Value>,
    home: tempfile::TempDir,
}

impl AcpPipe {
    /// `tandem acp`, or with `attach` `tandem acp --attach` (which starts
    /// a serve in the same home).
    async fn spawn(server: &ModelServer, attach: bool) -> AcpPipe {
        let home = tempfile::tempdir().expect("home");
        let stderr = std::fs::File::create(home.path().join("stderr.log")).expect("stderr log");
        let args: &[&str] = if attach {
            &["acp", "--attach"]
        } else {
            &["acp"]
        };
        let mut child = tokio::process::Command::new(tandem_bin())
            .args(args)
            .env("TANDEM_HOME", home.path())
            .env("TANDEM_BASE_URL", server.base_url())
            .env("TANDEM_MODEL", "scripted-model")
            .env("TANDEM_LOG", "warn")
            .env("TANDEM_FSYNC", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .kill_on_drop(true)
            .spawn()
            .expect("spawn tandem acp");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                let value: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("tandem acp wrote a line that is not JSON ({e}): {line}")
                });
                if tx.send(value).is_err() {
                    return;
                }
            }
        });
        AcpPipe {
            child,
            stdin,
            lines,
            home,
        }
    }

    async fn write(&mut self, bytes: &[u8]) {
        self.stdin
            .write_all(bytes)
            .await
            .expect("write to tandem acp");
        self.stdin.flush().await.expect("flush to tandem acp");
    }

    /// The next message; requests of the agent's are refused on the way.
    async fn next(&mut self) -> Value {
        let message = tokio::time::timeout(WAIT, self.lines.recv())
            .await
            .unwrap_or_else(|_| panic!("no line from tandem acp within {WAIT:?}"))
            .unwrap_or_else(|| panic!("tandem acp closed stdout; stderr:\n{}", self.stderr()));
        if message.get("method").is_some() && message.get("id").is_some() {
            let refusal = json!({"jsonrpc": "2.0", "id": message["id"],
                                 "error": {"code": -32601, "message": "not offered by this client"}});
            self.write(format!("{refusal}\n").as_bytes()).await;
        }
        message
    }

    /// Sends a request (string id) and waits for its response, recording
    /// everything before it in `tally`.
    async fn request(
        &mut self,
        id: &str,
        method: &str,
        params: Value,
        tally: &mut Tally,
        seed: u64,
    ) -> Value {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.write(format!("{request}\n").as_bytes()).await;
        loop {
            let message = self.next().await;
            tally.record(&message, seed);
            if message["id"] == id && message.get("method").is_none() {
                return message;
            }
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.home.path().join("stderr.log")).unwrap_or_default()
    }
}

#[tokio::test]
async fn acp_frontend_survives_fuzzed_lines_and_answers_every_probe() {
    fuzz_run(Frontend::Acp, false).await;
}

/// The same cases through `tandem acp --attach` to a serve it starts.
#[tokio::test]
async fn acp_through_the_serve_survives_fuzzed_lines_and_answers_every_probe() {
    fuzz_run(Frontend::Acp, true).await;
}

/// Cases `first..first + count` against one fresh `tandem acp` (with
/// `attach`: one fresh serve, through `tandem acp --attach`).
async fn fuzz_one_acp_agent(
    g: &mut Gen,
    first: usize,
    count: usize,
    server: &ModelServer,
    tally: &mut Tally,
    attach: bool,
) {
    let seed = g.seed;
    let (root, file) = workspace();
    let mut acp = AcpPipe::spawn(server, attach).await;
    let _stop = attach.then(|| StopServe(acp.home.path().to_path_buf()));
    let init = json!({"protocolVersion": 1, "clientCapabilities": {}});
    let answer = acp.request("init", "initialize", init, tally, seed).await;
    assert!(answer["result"].is_object(), "{answer}");
    let cwd = root.path().display().to_string();
    let new_session = json!({"cwd": cwd, "mcpServers": []});
    let answer = acp
        .request("new", "session/new", new_session.clone(), tally, seed)
        .await;
    let session = answer["result"]["sessionId"]
        .as_str()
        .expect("session id")
        .to_string();
    let mut surface = Surface {
        session,
        root: file_uri(root.path()),
        file,
    };
    let mut methods = acp_methods(&surface);
    for case in first..first + count {
        let id = 1000 + case as i64;
        let sent = acp_case(g, &methods, id);
        tally.unanswered.expect(&sent, id);
        for piece in &sent.writes {
            acp.write(piece).await;
        }
        let last = case + 1 == first + count;
        if (case + 1) % PROBE_EVERY == 0 || last {
            let id = format!("probe-{case}");
            let answer = acp
                .request(&id, "session/list", json!({}), tally, seed)
                .await;
            assert!(
                answer["result"]["sessions"].is_array(),
                "seed {seed}: probe after case {case} failed: {answer}"
            );
            assert!(
                matches!(acp.child.try_wait(), Ok(None)),
                "seed {seed}: tandem acp died by case {case}"
            );
            if (case + 1) % SESSION_EVERY == 0 && !last {
                let answer = acp
                    .request("rotate", "session/new", new_session.clone(), tally, seed)
                    .await;
                surface.session = answer["result"]["sessionId"]
                    .as_str()
                    .expect("session id")
                    .to_string();
                methods = acp_methods(&surface);
            }
        }
    }
    // Every request that arrived whole is answered.
    let drained = tokio::time::timeout(ANSWER_ALL_WITHIN, async {
        while !tally.unanswered.0.is_empty() {
            let message = acp.next().await;
            tally.record(&message, seed);
        }
    })
    .await;
    assert!(
        drained.is_ok(),
        "seed {seed}: requests never answered (id: method): {:?}",
        tally.unanswered.0
    );
    assert_no_panic(&acp.stderr(), seed);
    // A line cut short by the end of input ends the agent cleanly.
    acp.write(b"{\"jsonrpc\":\"2.0\",\"id\":1,").await;
    // `home` stays in `acp`, so the serve is stopped before it goes.
    let AcpPipe {
        mut child, stdin, ..
    } = acp;
    let home = &acp.home;
    drop(stdin);
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("tandem acp did not exit on EOF")
        .expect("wait");
    assert!(status.success(), "seed {seed}: exit status {status}");
    let stderr = std::fs::read_to_string(home.path().join("stderr.log")).unwrap_or_default();
    assert_no_panic(&stderr, seed);
    if attach {
        assert_serve_answers(home.path(), seed);
    }
}

/// The serve a shim started in `home` logged no panic and still answers.
fn assert_serve_answers(home: &Path, seed: u64) {
    let serve_log = std::fs::read_to_string(home.join("logs/serve.log")).unwrap_or_default();
    assert_no_panic(&serve_log, seed);
    let status = std::process::Command::new(tandem_bin())
        .args(["serve", "--status"])
        .env("TANDEM_HOME", home)
        .output()
        .expect("tandem serve --status");
    assert!(
        status.status.success(),
        "seed {seed}: the serve stopped answering: {status:?}\n{serve_log}"
    );
}
