//! Step overhead (issue 3): from the last tool result of a step being
//! ready to the first byte of the next model request reaching the model
//! server, with a 200-message and a 5,000-message history.
//!
//! In process: a daemon (`Daemon::new`, default durability unless stated),
//! a registered tool `stamp` that records `Instant::now()` as the last thing
//! before it returns, and the scripted model server on its own thread,
//! which records when each request's first bytes were read
//! (`RecordedRequest::arrived`).
//!
//! How the history is built: one prompt, then one turn of scripted steps.
//! "Bulk" steps each call `stamp` up to 49 times (50 messages per step:
//! the assistant message and 49 tool results) until the history is 60
//! messages short of its target; then 60 measured steps call it once each (2
//! messages per step), so the measured requests carry the target size
//! ± 60 messages (the median is printed). Every call has distinct
//! arguments, so loop detection stays quiet. Tool results are 200 bytes.
//! `model.context_window` is raised to 1M tokens so that trimming does not
//! cut the 5,000 messages (about 1.1 MB of request body) short.
//!
//! An event sink stamps `tool_result` and `step_start` (told after the log
//! write and its fsync), which splits each gap into: tool returned ->
//! result logged; result logged -> next step started (`step_end`,
//! `step_start`); step started -> first byte at the server (repair, tool
//! specs, body serialization, connect, send).
//!
//! `cargo bench --bench step_overhead`

#[path = "common/mod.rs"]
mod common;
#[path = "common/inproc.rs"]
mod inproc;
#[allow(dead_code)]
#[path = "../tests/support/model_server/mod.rs"]
mod model_server;

use std::collections::HashMap;
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

const MEASURED_STEPS: usize = 60;
const BULK_CALLS: usize = 49;
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
    tool_to_logged: Duration,
    logged_to_step: Duration,
    step_to_request: Duration,
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
    // messages until the history is MEASURED_STEPS short of the target,
    // then 2 per measured step: the measured requests straddle the target.
    let mut bulk = target.saturating_sub(MEASURED_STEPS + 2);
    let mut bulk_calls = Vec::new();
    while bulk >= 2 {
        let calls = (bulk - 1).min(BULK_CALLS);
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
    let measured_ids: Vec<String> = (0..MEASURED_STEPS).map(|i| format!("m{i}")).collect();
    for id in &measured_ids {
        server.push(calls_reply(std::slice::from_ref(id), n));
        n += 1;
    }
    server.push(openai::text(["done"]));

    let total_steps = bulk_steps + MEASURED_STEPS + 1;
    let session = daemon
        .new_session(NewSession {
            config: Some(session_config(
                server,
                json!({"context_window": 1_000_000}),
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
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for (i, id) in measured_ids.iter().enumerate() {
        // The request after measured step i is step bulk + i + 2 (1-based).
        let step = (bulk_steps + i + 2) as u32;
        let request = &requests[step as usize - 1];
        let ready = returned[id.as_str()];
        let logged = logged_at[id.as_str()];
        let started = step_started[&step];
        gaps.push(request.arrived.duration_since(ready));
        a.push(logged.duration_since(ready));
        b.push(started.duration_since(logged));
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
        tool_to_logged: Stats::of(&a).median,
        logged_to_step: Stats::of(&b).median,
        step_to_request: Stats::of(&c).median,
        label,
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
        let calls = (left - 1).min(BULK_CALLS);
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

/// Splits "step start -> first byte" of a `target`-message history into
/// the repair pipeline and the provider call (request body serialization,
/// connect, send), each timed alone, medians of 20.
async fn split_request_path(server: &Arc<ModelServer>, target: usize) -> (Duration, Duration) {
    let events = history_events(target);
    let mut projection = Projection::from_events("You are tandem.".to_string(), &events);
    let limits = RepairLimits {
        context_window: 1_000_000,
        ..RepairLimits::default()
    };
    let mut repairs = Vec::new();
    for _ in 0..20 {
        let start = Instant::now();
        let repaired = projection.repair(limits);
        repairs.push(start.elapsed());
        assert!(repaired.is_empty(), "the history needs no repair");
    }
    let mut tools = ToolRegistry::for_session();
    tools.register(Arc::new(StampTool {
        returned: Mutex::new(HashMap::new()),
        output: String::new(),
    }));
    let specs = tools.offered(ApprovalMode::Review, ClientAbilities::default());
    let provider = tandem::provider::from_config(&server.model_config(ProviderKind::Openai));
    let before = server.requests().len();
    let mut sent = Vec::new();
    for _ in 0..20 {
        server.push(openai::text(["ok"]));
        let start = Instant::now();
        let stream = provider
            .stream(ModelRequest {
                messages: projection.messages(),
                tools: &specs,
                max_output_tokens: None,
            })
            .await
            .expect("the model server answers");
        drop(stream);
        sent.push(start);
    }
    let requests = server.requests();
    let provider_times: Vec<Duration> = requests[before..]
        .iter()
        .zip(&sent)
        .map(|(request, start)| request.arrived.duration_since(*start))
        .collect();
    (
        Stats::of(&repairs).median,
        Stats::of(&provider_times).median,
    )
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

#[tokio::main]
async fn main() {
    common::print_machine();
    let server = model_server_thread();
    // Warm-up: the first daemon pays for lazy initialisation.
    run(&server, 100, Durability::Fsync).await;
    let mut scenarios = Vec::new();
    // `TANDEM_BENCH_ONLY=5000-flush` (or `200-fsync`, ...) runs one case.
    let only = std::env::var("TANDEM_BENCH_ONLY").unwrap_or_default();
    for target in [200, 5000] {
        for durability in [Durability::Fsync, Durability::Flush] {
            let name = match durability {
                Durability::Fsync => format!("{target}-fsync"),
                Durability::Flush => format!("{target}-flush"),
            };
            if !only.is_empty() && only != name {
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
                "  median split: tool returned -> result logged {}; -> next step_start {}; -> first byte at server {}",
                fmt(scenario.tool_to_logged),
                fmt(scenario.logged_to_step),
                fmt(scenario.step_to_request)
            );
            scenarios.push((target, durability, scenario));
        }
    }
    println!(
        "  floor: raw TCP connect + write until the server reads it {}",
        fmt(raw_request_floor(&server).await)
    );
    for target in [2, 200, 5000] {
        let (repair, provider) = split_request_path(&server, target).await;
        println!(
            "  {target} messages, timed alone: repair pipeline {}; provider.stream until first byte at server {}",
            fmt(repair),
            fmt(provider)
        );
    }
    for (target, durability, scenario) in &scenarios {
        if *durability != Durability::Fsync {
            println!(
                "(with TANDEM_FSYNC=0, {target} messages: median {})",
                fmt(scenario.stats.median)
            );
            continue;
        }
        let (limit, text) = if *target == 200 {
            (1.0, "< 1 ms")
        } else {
            (10.0, "< 10 ms")
        };
        verdict(
            &format!("step overhead, median, {target} messages"),
            &fmt(scenario.stats.median),
            text,
            ms(scenario.stats.median) < limit,
        );
    }
}
