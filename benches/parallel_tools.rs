//! Parallel tools (issue 3): four parallel-safe tools that each take
//! 200 ms, called in one model response, finish in under 250 ms.
//!
//! In process: a daemon with the default durability, a registered
//! parallel tool `nap` that sleeps 200 ms (`tokio::time::sleep`), and the
//! scripted model server on its own thread. Each turn's first reply calls
//! `nap` four times; its second ends the turn. An event sink stamps the
//! events as they are logged; the figure is, per turn, from the first
//! `tool_started` to the last `tool_result` (which the driver records,
//! in model order and each fsynced, once the whole batch has finished).
//!
//! `cargo bench --bench parallel_tools`; `TANDEM_BENCH_RUNS` (default 20).

#[path = "common/mod.rs"]
mod common;
#[path = "common/inproc.rs"]
mod inproc;
#[allow(dead_code)]
#[path = "../tests/support/model_server/mod.rs"]
mod model_server;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tandem::core::daemon::NewSession;
use tandem::core::log::Durability;
use tandem::tools::{ApprovalClass, ExecMode, Tool, ToolContext, ToolError};
use tandem::vocab::event::{Event, StopReason, UserContent};

use common::{env_usize, fmt, ms, report, verdict, Stats};
use inproc::{daemon, model_server_thread, session_config, StampingSink};
use model_server::openai;

const NAP: Duration = Duration::from_millis(200);
const CALLS: usize = 4;

struct Nap;

#[async_trait::async_trait]
impl Tool for Nap {
    fn name(&self) -> &'static str {
        "nap"
    }
    fn description(&self) -> &'static str {
        "Sleeps 200 ms (benchmark tool)."
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
    fn kind(&self) -> tandem::vocab::tool_call::ToolKind {
        tandem::vocab::tool_call::ToolKind::Other
    }
    fn title(&self, _args: &Value) -> String {
        "Nap".to_string()
    }
    async fn run(&self, _args: Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        tokio::time::sleep(NAP).await;
        Ok("rested".to_string())
    }
}

#[tokio::main]
async fn main() {
    common::print_machine();
    let runs = env_usize("TANDEM_BENCH_RUNS", 20);
    let server = model_server_thread();
    let home = tempfile::tempdir().expect("temp home");
    let sink =
        StampingSink::new(|e| matches!(e, Event::ToolStarted { .. } | Event::ToolResult { .. }));
    let daemon = daemon(home.path(), Durability::Fsync, sink.clone());
    let client = inproc::headless_client(&daemon);
    daemon.register_tool(Arc::new(Nap));
    let session = daemon
        .new_session(
            &client,
            NewSession {
                config: Some(session_config(&server, json!({}), json!({}))),
                ..NewSession::default()
            },
        )
        .expect("new session");

    let mut spans = Vec::new();
    // One extra turn first, as a warm-up.
    for run in 0..=runs {
        let ids: Vec<String> = (0..CALLS).map(|k| format!("r{run}_{k}")).collect();
        let args: Vec<String> = (0..CALLS)
            .map(|k| json!({"n": run * CALLS + k}).to_string())
            .collect();
        let calls: Vec<(&str, &str, &str)> = ids
            .iter()
            .zip(&args)
            .map(|(id, a)| (id.as_str(), "nap", a.as_str()))
            .collect();
        server.push(openai::tool_calls(&calls));
        server.push(openai::text(["done"]));
        sink.take();
        let (_, receipt) = daemon
            .prompt(
                &client,
                &session.id,
                vec![UserContent::Text {
                    text: format!("nap four times ({run})"),
                }],
            )
            .expect("prompt");
        let receipt = receipt.await.expect("receipt");
        assert_eq!(receipt.stop_reason, StopReason::EndTurn, "{receipt:?}");
        let events = sink.take();
        let started: Vec<_> = events
            .iter()
            .filter(|s| matches!(s.event, Event::ToolStarted { .. }))
            .map(|s| s.at)
            .collect();
        let finished: Vec<_> = events
            .iter()
            .filter(|s| matches!(s.event, Event::ToolResult { .. }))
            .map(|s| s.at)
            .collect();
        assert_eq!((started.len(), finished.len()), (CALLS, CALLS));
        let first = started.iter().min().expect("a start");
        let last = finished.iter().max().expect("a result");
        if run > 0 {
            spans.push(last.duration_since(*first));
        }
    }
    daemon.shutdown().await;

    let stats = Stats::of(&spans);
    println!(
        "{CALLS} parallel {} tools, first tool_started -> last tool_result, {runs} turns:",
        fmt(NAP)
    );
    report("span", &stats);
    verdict(
        "four parallel 200 ms tools, median",
        &fmt(stats.median),
        "< 250 ms",
        ms(stats.median) < 250.0,
    );
    verdict(
        "four parallel 200 ms tools, slowest",
        &fmt(stats.max),
        "< 250 ms",
        ms(stats.max) < 250.0,
    );
}
