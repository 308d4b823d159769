//! Step overhead (issues 3 and 15): from the last tool result of a step
//! being ready to the first byte of the next model request reaching the
//! model server, with histories of 200, 1,000, 5,000 and 20,000 messages
//! side by side, and the daemon's RSS holding the 5,000-message session.
//!
//! In process: a daemon (`Daemon::new`, default durability unless stated),
//! a registered tool `stamp` that records `Instant::now()` as the last thing
//! before it returns, and the scripted model server on its own thread,
//! which records when each request's first bytes were read
//! (`RecordedRequest::arrived`).
//!
//! How the history is built: one prompt, then one turn of scripted steps.
//! "Bulk" steps each call `stamp` up to 49 times (50 messages per step:
//! the assistant message and 49 tool results; up to target/25 at 20,000, so
//! the model server does not hold hundreds of multi-megabyte requests) until
//! the history is 2 x the measured steps short of its target; then 60
//! measured steps (20 at 20,000) call it once each (2 messages per step),
//! so the measured requests straddle the target (the median is printed).
//! Every call has distinct arguments, so loop detection stays quiet. Tool
//! results are 200 bytes. `model.context_window` is raised to 100M tokens
//! so that neither compaction nor trimming cuts the 20,000 messages (6.5 MB
//! of request body) short.
//!
//! An event sink stamps `tool_result` and `step_start` (told after the log
//! write and its fsync), which splits each gap into: tool returned ->
//! next step started (the log: `tool_result`, `step_end`, `step_start`);
//! step started -> first byte at the server (repair, tool specs, body,
//! connect, send). That second part is then split further by timing its
//! pieces alone on a history of the same shape, growing it by one step
//! (2 messages) before each sample as the session does: the repair
//! pipeline, the request body, and sending those bytes until the first
//! byte reaches the server.
//!
//! Memory: the 5,000-message session is then loaded by the release binary
//! (`tandem lsp`, `tandem/loadSession`) and prompted once; its `VmRSS` is
//! read from `/proc` before loading and after the answer (once it holds
//! still), against the size of the request body it sent, and split into
//! anonymous memory (heap, stacks) and the binary's pages. A second daemon
//! loads and prompts a small session first, so that what the large one
//! adds is not the code it runs for the first time.
//!
//! `cargo bench --bench step_overhead`

#[path = "common/mod.rs"]
mod common;
#[path = "common/inproc.rs"]
mod inproc;
#[allow(dead_code)]
#[path = "../tests/support/model_server/mod.rs"]
mod model_server;
#[path = "common/stdio_editor.rs"]
mod stdio_editor;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tandem::config::ProviderKind;
use tandem::core::daemon::NewSession;
use tandem::core::log::Durability;
use tandem::core::projection::{Projection, RepairLimits};
use tandem::provider::ModelRequest;
use tandem::tools::{ApprovalClass, ExecMode, Tool, ToolContext, ToolError, ToolRegistry};
use tandem::vocab::approval::ApprovalMode;
use tandem::vocab::bridge::ClientAbilities;
use tandem::vocab::event::{
    Event, FinishReason, StopReason, ToolCallRequest, ToolStatus, Usage, UserContent,
};

use common::{fmt, ms, report, verdict, Stats};
use inproc::{daemon, model_server_thread, session_config, StampingSink};
use model_server::{openai, ModelServer, Reply};
use stdio_editor::{tandem_bin, Editor};

const BULK_CALLS: usize = 49;
const TARGETS: [usize; 4] = [200, 1_000, 5_000, 20_000];

/// Steps measured per case: fewer at 20,000, where each request is 6 MB.
fn measured_steps(target: usize) -> usize {
    if target > 10_000 {
        20
    } else {
        60
    }
}

/// Calls per bulk step.
fn bulk_calls(target: usize) -> usize {
    BULK_CALLS.max(target / 25)
}
const RESULT_BYTES: usize = 200;

/// Returns a fixed 200-byte result and records when it returned, by call id.
struct StampTool {
    returned: Mutex<HashMap<String, Instant>>,
    output: String,
}

#[async_trait::async_trait]
impl Tool for StampTool {
    fn name(&self) -> &'static str {
        "stamp"
    }
    fn description(&self) -> &'static str {
        "Returns a fixed text (benchmark tool)."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer"}}})
    }
    fn mode(&self) -> ExecMode {
        ExecMode::Parallel
    }
    fn approval(&self) -> ApprovalClass {
        ApprovalClass::Read
    }
    fn kind(&self) -> &'static str {
        "read"
    }
    fn title(&self, _args: &Value) -> String {
        "Stamp".to_string()
    }
    async fn run(&self, _args: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let output = self.output.clone();
        let now = Instant::now();
        self.returned
            .lock()
            .unwrap()
            .insert(ctx.call_id.clone(), now);
        Ok(output)
    }
}

fn calls_reply(ids: &[String], first_n: usize) -> Reply {
    let args: Vec<String> = (0..ids.len())
        .map(|k| json!({"n": first_n + k}).to_string())
        .collect();
    let calls: Vec<(&str, &str, &str)> = ids
        .iter()
        .zip(&args)
        .map(|(id, a)| (id.as_str(), "stamp", a.as_str()))
        .collect();
    openai::tool_calls(&calls)
}

struct Scenario {
    label: String,
    stats: Stats,
    median_messages: usize,
    median_body: usize,
    /// Tool returned -> next `step_start` logged.
    log: Duration,
    /// `step_start` -> first byte at the server.
    step_to_request: Duration,
    /// Where the session's log is, for the memory measurement.
    home: tempfile::TempDir,
    session_id: String,
}

async fn run(server: &Arc<ModelServer>, target: usize, durability: Durability) -> Scenario {
    let home = tempfile::tempdir().expect("temp home");
    let sink =
        StampingSink::new(|e| matches!(e, Event::ToolResult { .. } | Event::StepStart { .. }));
    let daemon = daemon(home.path(), durability, sink.clone());
    let tool = Arc::new(StampTool {
        returned: Mutex::new(HashMap::new()),
        output: "x".repeat(RESULT_BYTES),
    });
    daemon.register_tool(tool.clone());

    // System prompt and user message, then bulk steps of up to 50
    // messages until the history is the measured steps short of the target,
    // then 2 per measured step: the measured requests straddle the target.
    let measured = measured_steps(target);
    let mut bulk = target.saturating_sub(measured + 2);
    let mut bulk_calls = Vec::new();
    while bulk >= 2 {
        let calls = (bulk - 1).min(self::bulk_calls(target));
        bulk_calls.push(calls);
        bulk -= calls + 1;
    }
    let bulk_steps = bulk_calls.len();
    let requests_before = server.requests().len();
    let mut n = 0;
    for (step, &calls) in bulk_calls.iter().enumerate() {
        let ids: Vec<String> = (0..calls).map(|k| format!("b{step}_{k}")).collect();
        server.push(calls_reply(&ids, n));
        n += calls;
    }
    let measured_ids: Vec<String> = (0..measured).map(|i| format!("m{i}")).collect();
    for id in &measured_ids {
        server.push(calls_reply(std::slice::from_ref(id), n));
        n += 1;
    }
    server.push(openai::text(["done"]));

    let total_steps = bulk_steps + measured + 1;
    let session = daemon
        .new_session(NewSession {
            config: Some(session_config(
                server,
                json!({"context_window": 100_000_000}),
                json!({"max_iterations": total_steps + 10}),
            )),
            ..NewSession::default()
        })
        .expect("new session");
    let (_, receipt) = daemon
        .prompt(
            &session.id,
            vec![UserContent::Text {
                text: "build a long history".to_string(),
            }],
        )
        .expect("prompt");
    let receipt = receipt.await.expect("receipt");
    assert_eq!(receipt.stop_reason, StopReason::EndTurn, "{receipt:?}");
    daemon.shutdown().await;

    let requests = server.requests();
    let requests = &requests[requests_before..];
    assert_eq!(requests.len(), total_steps, "one request per step");
    let returned = tool.returned.lock().unwrap().clone();
    let events = sink.take();
    let logged_at: HashMap<&str, Instant> = events
        .iter()
        .filter_map(|s| match &s.event {
            Event::ToolResult { call_id, .. } => Some((call_id.as_str(), s.at)),
            _ => None,
        })
        .collect();
    let step_started: HashMap<u32, Instant> = events
        .iter()
        .filter_map(|s| match &s.event {
            Event::StepStart { step, .. } => Some((*step, s.at)),
            _ => None,
        })
        .collect();

    let mut gaps = Vec::new();
    let mut messages = Vec::new();
    let mut bodies = Vec::new();
    let (mut a, mut c) = (Vec::new(), Vec::new());
    for (i, id) in measured_ids.iter().enumerate() {
        // The request after measured step i is step bulk + i + 2 (1-based).
        let step = (bulk_steps + i + 2) as u32;
        let request = &requests[step as usize - 1];
        let ready = returned[id.as_str()];
        let logged = logged_at[id.as_str()];
        let started = step_started[&step];
        gaps.push(request.arrived.duration_since(ready));
        assert!(logged <= started);
        a.push(started.duration_since(ready));
        c.push(request.arrived.duration_since(started));
        messages.push(request.body["messages"].as_array().map_or(0, Vec::len));
        bodies.push(request.raw_body.len());
    }
    messages.sort();
    bodies.sort();
    let label = format!(
        "{target} messages, {}",
        match durability {
            Durability::Fsync => "fsync (default)",
            Durability::Flush => "TANDEM_FSYNC=0",
        }
    );
    Scenario {
        stats: Stats::of(&gaps),
        median_messages: messages[messages.len() / 2],
        median_body: bodies[bodies.len() / 2],
        log: Stats::of(&a).median,
        step_to_request: Stats::of(&c).median,
        label,
        home,
        session_id: session.id.clone(),
    }
}

/// The events of a history shaped like the benchmark's: a user message,
/// then steps of up to 49 calls with their 200-byte results.
fn history_events(target: usize) -> Vec<Event> {
    let turn_id = "t1".to_string();
    let mut events = vec![Event::UserMessage {
        turn_id: turn_id.clone(),
        message_id: "m1".into(),
        content: vec![UserContent::Text {
            text: "build a long history".into(),
        }],
    }];
    let mut left = target.saturating_sub(2);
    let mut n = 0;
    while left >= 2 {
        let calls = (left - 1).min(bulk_calls(target));
        let tool_calls: Vec<ToolCallRequest> = (0..calls)
            .map(|k| ToolCallRequest {
                id: format!("c{}", n + k),
                name: "stamp".into(),
                arguments: json!({"n": n + k}).to_string(),
            })
            .collect();
        events.push(Event::AssistantMessage {
            turn_id: turn_id.clone(),
            step: 1,
            attempt: 1,
            provider: "openai".into(),
            model: model_server::MODEL_NAME.into(),
            text: String::new(),
            thinking: None,
            tool_calls: tool_calls.clone(),
            finish_reason: FinishReason::ToolCalls,
            usage: Usage::default(),
        });
        for call in tool_calls {
            events.push(Event::ToolResult {
                turn_id: turn_id.clone(),
                call_id: call.id,
                status: ToolStatus::Completed,
                output: "x".repeat(RESULT_BYTES),
            });
        }
        n += calls;
        left -= calls + 1;
    }
    events
}

/// One step's two messages: an assistant message calling `stamp` once
/// and its 200-byte result.
fn step_events(n: usize) -> [Event; 2] {
    let id = format!("s{n}");
    [
        Event::AssistantMessage {
            turn_id: "t1".into(),
            step: 1,
            attempt: 1,
            provider: "openai".into(),
            model: model_server::MODEL_NAME.into(),
            text: String::new(),
            thinking: None,
            tool_calls: vec![ToolCallRequest {
                id: id.clone(),
                name: "stamp".into(),
                arguments: json!({"n": n}).to_string(),
            }],
            finish_reason: FinishReason::ToolCalls,
            usage: Usage::default(),
        },
        Event::ToolResult {
            turn_id: "t1".into(),
            call_id: id,
            status: ToolStatus::Completed,
            output: "x".repeat(RESULT_BYTES),
        },
    ]
}

/// The request path's pieces, each timed alone (medians of 20).
struct Split {
    repair: Duration,
    body: Duration,
    send: Duration,
    body_bytes: usize,
}

/// Splits "step start -> first byte" of a `target`-message history into
/// the repair pipeline, the request body and sending it, each timed alone.
/// Before each sample the history grows by one step, as in a session.
async fn split_request_path(server: &Arc<ModelServer>, target: usize) -> Split {
    let events = history_events(target);
    let mut projection = Projection::from_events("You are tandem.".to_string(), &events);
    let limits = RepairLimits {
        context_window: 100_000_000,
        ..RepairLimits::default()
    };
    let mut tools = ToolRegistry::for_session();
    tools.register(Arc::new(StampTool {
        returned: Mutex::new(HashMap::new()),
        output: String::new(),
    }));
    let specs = tools.offered(ApprovalMode::Review, ClientAbilities::default());
    let provider = tandem::provider::from_config(&server.model_config(ProviderKind::Openai));
    // A client like the providers' own: no pool (the server closes every
    // connection), no Nagle.
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .expect("client");
    let url = format!("{}/chat/completions", server.base_url());
    // The first request builds whatever is built once; then the samples.
    let _ = projection.repair(limits);
    let mut body = provider.request_body(ModelRequest {
        messages: projection.messages(),
        tools: &specs,
        max_output_tokens: None,
    });
    let (mut repairs, mut bodies, mut sends) = (Vec::new(), Vec::new(), Vec::new());
    let before = server.requests().len();
    for n in 0..20 {
        for event in step_events(n) {
            projection.apply(&event);
        }
        let start = Instant::now();
        let repaired = projection.repair(limits);
        repairs.push(start.elapsed());
        assert!(repaired.is_empty(), "the history needs no repair");
        let start = Instant::now();
        body = provider.request_body(ModelRequest {
            messages: projection.messages(),
            tools: &specs,
            max_output_tokens: None,
        });
        bodies.push(start.elapsed());
        server.push(openai::text(["ok"]));
        let bytes = body.clone();
        let start = Instant::now();
        let response = client
            .post(&url)
            .header("content-type", "application/json")
            .body(bytes)
            .send()
            .await
            .expect("the model server answers");
        drop(response);
        sends.push(start);
    }
    let requests = server.requests();
    let send_times: Vec<Duration> = requests[before..]
        .iter()
        .zip(&sends)
        .map(|(request, start)| request.arrived.duration_since(*start))
        .collect();
    Split {
        repair: Stats::of(&repairs).median,
        body: Stats::of(&bodies).median,
        send: Stats::of(&send_times).median,
        body_bytes: body.len(),
    }
}

/// The floor under any request: a raw TCP connect and a one-line write
/// from this runtime until the server thread reads it, median of 20.
async fn raw_request_floor(server: &Arc<ModelServer>) -> Duration {
    use tokio::io::AsyncWriteExt;
    let before = server.requests().len();
    let mut sent = Vec::new();
    for _ in 0..20 {
        server.push(openai::text(["ok"]));
        let start = Instant::now();
        let mut socket = tokio::net::TcpStream::connect(server.addr())
            .await
            .expect("connect");
        socket.set_nodelay(true).expect("nodelay");
        socket
            .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
            .await
            .expect("write");
        sent.push(start);
        // Read the reply to its end so the next connection starts afresh.
        let mut sink = Vec::new();
        let _ = tokio::io::AsyncReadExt::read_to_end(&mut socket, &mut sink).await;
    }
    let requests = server.requests();
    let times: Vec<Duration> = requests[before..]
        .iter()
        .zip(&sent)
        .map(|(request, start)| request.arrived.duration_since(*start))
        .collect();
    Stats::of(&times).median
}

/// `VmRSS` of a process, in bytes.
fn rss_bytes(pid: u32) -> usize {
    rss_parts(pid).0
}

/// `VmRSS` once it holds still: the daemon gives freed memory back when
/// its stdout writer goes idle, which may be just after the frame that
/// answered (a trim takes milliseconds). Read every 20 ms until two reads
/// agree, for at most a second.
async fn settled_rss(pid: u32) -> usize {
    let mut last = rss_bytes(pid);
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let now = rss_bytes(pid);
        if now == last {
            break;
        }
        last = now;
    }
    last
}

/// `VmRSS`, `RssAnon` and `RssFile` of a process, in bytes: the heap and
/// stacks apart from the binary's pages read in from disk (code that ran).
fn rss_parts(pid: u32) -> (usize, usize, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let field = |name: &str| -> usize {
        let kb: usize = status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} line"));
        kb * 1024
    };
    (field("VmRSS:"), field("RssAnon:"), field("RssFile:"))
}

/// A small session (one prompt and its answer) written to `home` by a
/// daemon of its own: loading and prompting it first warms the measured
/// daemon's code (the binary's pages it reads in) and allocator, so what
/// loading the large session adds after it is what holding it costs.
async fn small_session(server: &Arc<ModelServer>, home: &Path) -> String {
    let root = tempfile::tempdir().expect("workspace");
    let mut editor = Editor::spawn(&tandem_bin(), &["lsp"], home);
    editor.handshake(root.path()).await;
    let id = editor
        .new_session(&server.base_url(), model_server::MODEL_NAME)
        .await;
    server.push(openai::text(["ok"]));
    editor.prompt(&id, "hello").await;
    editor.shutdown().await;
    id
}

/// The release binary loads the session in `home` and answers one prompt
/// in it: (RSS before loading, after loading, after the answer, the body
/// it sent). Then, in a second daemon warmed by loading and prompting a
/// small session first, what the large one adds to that (printed, and
/// returned last).
async fn daemon_rss(
    server: &Arc<ModelServer>,
    home: &Path,
    session_id: &str,
) -> (usize, usize, usize, usize, usize) {
    let measured = cold_daemon_rss(server, home, session_id).await;
    let small = small_session(server, home).await;
    let root = tempfile::tempdir().expect("workspace");
    let mut editor = Editor::spawn(&tandem_bin(), &["lsp"], home);
    editor.handshake(root.path()).await;
    let pid = editor.child.id().expect("daemon pid");
    let mut after = Vec::new();
    for (id, text) in [(small.as_str(), "warm"), (session_id, "one more")] {
        let loaded = editor
            .request("tandem/loadSession", json!({"sessionId": id}))
            .await;
        assert!(
            loaded.get("result").is_some(),
            "loadSession failed: {loaded}"
        );
        server.push(openai::text(["ok"]));
        editor.prompt(id, text).await;
        settled_rss(pid).await;
        after.push(rss_parts(pid));
    }
    probe_heap(pid, home);
    let ((warm, warm_anon, warm_file), (held, held_anon, held_file)) = (after[0], after[1]);
    println!(
        "  warm daemon (a small session loaded and prompted first): RSS {} MB, then {} MB holding the 5,000-message session after a prompt: +{} MB = +{} MB anonymous + {} MB of the binary ({:.2}x the request)",
        mb(warm),
        mb(held),
        mb(held.saturating_sub(warm)),
        mb(held_anon.saturating_sub(warm_anon)),
        mb(held_file.saturating_sub(warm_file)),
        held.saturating_sub(warm) as f64 / measured.3 as f64
    );
    editor.shutdown().await;
    let (idle, after_load, cold_held, body) = measured;
    (idle, after_load, cold_held, body, held.saturating_sub(warm))
}

/// `TANDEM_BENCH_TRIM=1`: how much of the daemon's heap is in use and how
/// much the allocator holds free, by gdb calling `malloc_stats()` (its
/// output goes to the daemon's stderr log, printed here) and then
/// `malloc_trim(0)` in the daemon.
fn probe_heap(pid: u32, home: &Path) {
    if !std::env::var("TANDEM_BENCH_TRIM").is_ok_and(|v| v == "1") {
        return;
    }
    let stderr = home.join("stderr.log");
    let seen = std::fs::metadata(&stderr).map_or(0, |m| m.len() as usize);
    let probed = std::process::Command::new("gdb")
        .args(["-p", &pid.to_string(), "-batch"])
        .args(["-ex", "call (void)malloc_stats()"])
        .args(["-ex", "call (int)malloc_trim(0)"])
        .output();
    match probed {
        Ok(out) if out.status.success() => {
            let log = std::fs::read(&stderr).unwrap_or_default();
            let stats = String::from_utf8_lossy(log.get(seen..).unwrap_or_default());
            let lines: Vec<&str> = stats.lines().map(str::trim).collect();
            println!("    malloc_stats: {}", lines.join("; "));
            let (all, anon, _) = rss_parts(pid);
            println!(
                "  after malloc_trim(0) in the daemon: RSS {} MB ({} MB anonymous)",
                mb(all),
                mb(anon)
            );
        }
        _ => println!("  TANDEM_BENCH_TRIM: gdb could not attach; not measured"),
    }
}

/// [`daemon_rss`]'s measurement in a fresh daemon.
async fn cold_daemon_rss(
    server: &Arc<ModelServer>,
    home: &Path,
    session_id: &str,
) -> (usize, usize, usize, usize) {
    let root = tempfile::tempdir().expect("workspace");
    let mut editor = Editor::spawn(&tandem_bin(), &["lsp"], home);
    editor.handshake(root.path()).await;
    let pid = editor.child.id().expect("daemon pid");
    let idle = rss_bytes(pid);
    let show = |when: &str| {
        let (all, anon, file) = rss_parts(pid);
        println!(
            "  RSS {when}: {} MB = {} MB anonymous (heap, stacks) + {} MB of the binary and libraries",
            mb(all),
            mb(anon),
            mb(file)
        );
    };
    show("idle");
    let loaded = editor
        .request("tandem/loadSession", json!({"sessionId": session_id}))
        .await;
    assert!(
        loaded.get("result").is_some(),
        "loadSession failed: {loaded}"
    );
    let after_load = settled_rss(pid).await;
    show("after loadSession");
    let before = server.requests().len();
    server.push(openai::text(["ok"]));
    editor.prompt(session_id, "one more").await;
    let held = settled_rss(pid).await;
    show("holding the session after a prompt");
    probe_heap(pid, home);
    let body = server.requests()[before..]
        .last()
        .expect("the prompt reached the model server")
        .raw_body
        .len();
    editor.shutdown().await;
    (idle, after_load, held, body)
}

#[tokio::main]
async fn main() {
    common::print_machine();
    let server = model_server_thread();
    // Warm-up: the first daemon pays for lazy initialisation.
    run(&server, 100, Durability::Fsync).await;
    // `TANDEM_BENCH_ONLY=5000-flush` (or `200-fsync`, ...) runs one case;
    // `TANDEM_BENCH_FLUSH=1` adds the `TANDEM_FSYNC=0` cases.
    let only = std::env::var("TANDEM_BENCH_ONLY").unwrap_or_default();
    let flush = std::env::var("TANDEM_BENCH_FLUSH").is_ok_and(|v| v == "1");
    let mut scenarios = Vec::new();
    for target in TARGETS {
        for durability in [Durability::Fsync, Durability::Flush] {
            let name = match durability {
                Durability::Fsync => format!("{target}-fsync"),
                Durability::Flush => format!("{target}-flush"),
            };
            let wanted = if only.is_empty() {
                durability == Durability::Fsync || flush
            } else {
                only == name
            };
            if !wanted {
                continue;
            }
            let scenario = run(&server, target, durability).await;
            report(
                &format!(
                    "{} (median request: {} messages, {} KB)",
                    scenario.label,
                    scenario.median_messages,
                    scenario.median_body / 1024
                ),
                &scenario.stats,
            );
            println!(
                "  median split: tool returned -> next step_start logged {}; -> first byte at server {}",
                fmt(scenario.log),
                fmt(scenario.step_to_request)
            );
            scenarios.push((target, durability, scenario));
        }
    }
    println!(
        "floor: raw TCP connect + write until the server reads it {}",
        fmt(raw_request_floor(&server).await)
    );
    println!("step start -> first byte, its pieces timed alone (medians of 20, history growing a step each):");
    println!("| messages | body | repair | request body | send until first byte |");
    println!("|---|---|---|---|---|");
    // One case asked for: its pieces only.
    for target in TARGETS {
        if !only.is_empty() && !only.starts_with(&format!("{target}-")) {
            continue;
        }
        let split = split_request_path(&server, target).await;
        println!(
            "| {target} | {} KB | {} | {} | {} |",
            split.body_bytes / 1024,
            fmt(split.repair),
            fmt(split.body),
            fmt(split.send)
        );
    }
    println!("side by side (default durability), medians:");
    println!("| messages | request | step overhead | log | step start -> first byte |");
    println!("|---|---|---|---|---|");
    for (target, durability, scenario) in &scenarios {
        if *durability == Durability::Fsync {
            println!(
                "| {target} | {} KB | {} | {} | {} |",
                scenario.median_body / 1024,
                fmt(scenario.stats.median),
                fmt(scenario.log),
                fmt(scenario.step_to_request)
            );
        }
    }
    if let Some((_, _, scenario)) = scenarios
        .iter()
        .find(|(t, d, _)| *t == 5_000 && *d == Durability::Fsync)
    {
        let log_path = scenario
            .home
            .path()
            .join("sessions")
            .join(format!("{}.jsonl", scenario.session_id));
        let log_bytes = std::fs::metadata(&log_path).map_or(0, |m| m.len() as usize);
        let (idle, after_load, held, body, warm_growth) =
            daemon_rss(&server, scenario.home.path(), &scenario.session_id).await;
        println!(
            "memory, release binary: RSS {} MB idle, {} MB after loadSession, {} MB holding the 5,000-message session (+{} MB) after a request of {} MB (its log: {} MB)",
            mb(idle),
            mb(after_load),
            mb(held),
            mb(held.saturating_sub(idle)),
            mb(body),
            mb(log_bytes)
        );
        verdict(
            "daemon RSS growth holding 5,000 messages, vs the serialized session",
            &format!("{:.2}x", held.saturating_sub(idle) as f64 / body as f64),
            "< 2x",
            held.saturating_sub(idle) < 2 * body,
        );
        verdict(
            "the same, in a warm daemon (its code already paged in by a small session)",
            &format!("{:.2}x", warm_growth as f64 / body as f64),
            "< 2x",
            warm_growth < 2 * body,
        );
    }
    let median = |t: usize| {
        scenarios
            .iter()
            .find(|(target, d, _)| *target == t && *d == Durability::Fsync)
            .map(|(_, _, s)| s)
    };
    for (target, limit, text) in [(200, 0.5, "< 0.5 ms"), (5_000, 2.0, "< 2 ms")] {
        if let Some(scenario) = median(target) {
            verdict(
                &format!("step overhead, median, {target} messages"),
                &fmt(scenario.stats.median),
                text,
                ms(scenario.stats.median) < limit,
            );
        }
    }
    if let (Some(small), Some(large)) = (median(5_000), median(20_000)) {
        // The copy of the extra bytes, timed here: the floor of the growth.
        let bytes = vec![b'x'; large.median_body];
        let start = Instant::now();
        let copy = std::hint::black_box(bytes.clone());
        let copied = start.elapsed() * 2 * (large.median_body - small.median_body) as u32
            / large.median_body as u32;
        drop(copy);
        let growth = large.stats.median.saturating_sub(small.stats.median);
        println!(
            "growth 5,000 -> 20,000: {} (copying the {} extra KB twice, into the body and the socket: {})",
            fmt(growth),
            (large.median_body - small.median_body) / 1024,
            fmt(copied)
        );
    }
}

fn mb(bytes: usize) -> String {
    format!("{:.1}", bytes as f64 / (1024.0 * 1024.0))
}
