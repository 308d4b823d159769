//! Session log (issue 5): appending 100,000 chunk events at over 100,000
//! events/s, and loading a 100,000-event session in under 300 ms.
//!
//! Append: `SessionLog::create` in a temp dir on this machine's disk with
//! the default durability (`Durability::Fsync`: boundaries are fsynced,
//! chunks are buffered), then 100,000 `assistant_chunk` events of a few
//! bytes each (one token's text), timed from the first `append` to the
//! return of the last; the final `sync` (fsync) is timed
//! separately. Once with `NullSink`, once with a sink that renders each
//! event as the LSP frontend does (`update_notification`: the
//! `tandem/update` JSON serialized to bytes), which is what a live daemon
//! pays per chunk besides the log.
//!
//! Load: there is no `tandem/loadSession` replay over the wire yet, so the
//! figure is what loading will do first: `read_log` (read, split, parse
//! every line) and fold the events into the model's context
//! (`Projection::from_events`). Measured on the 100,000-chunk log above,
//! and on a 100,000-event log shaped like real sessions (turns of 4 steps,
//! each with 30 chunks, the completion anchor, a usage update, one tool
//! call and a 1.5 KB result; written with `Durability::Flush` to save
//! time, which does not change the file). For the second also: rendering
//! every event as its `tandem/update` body, which a replay to the editor
//! will add. Medians of 5 runs each.
//!
//! `cargo bench --bench session_log`

#[path = "common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tandem::core::log::{
    now_rfc3339, read_log, Durability, EventSink, LogHeader, LoggedEvent, NullSink, SessionLog,
    LOG_VERSION,
};
use tandem::core::projection::Projection;
use tandem::frontend::updates::update_notification;
use tandem::vocab::event::{
    Event, FinishReason, InputQueue, StopReason, ToolCallRequest, ToolStatus, Usage, UserContent,
};

use common::{fmt, ms, report, verdict, Stats};

const EVENTS: usize = 100_000;
const RUNS: usize = 5;

/// Renders every event as the LSP frontend's sink does, then drops it.
struct RenderingSink;

impl EventSink for RenderingSink {
    fn on_event(&self, session_id: &str, event: &LoggedEvent) {
        if let Some(body) = update_notification(session_id, event) {
            std::hint::black_box(body);
        }
    }
}

fn header(id: &str) -> LogHeader {
    LogHeader {
        tandem_log: LOG_VERSION,
        session_id: id.to_string(),
        created: now_rfc3339(),
        title: Some("bench".into()),
        workspace: vec![PathBuf::from("/work/project")],
        workspace_folder: None,
        config: None,
        kind: None,
    }
}

fn chunk(i: usize) -> Event {
    Event::AssistantChunk {
        turn_id: "t1".into(),
        step: 1,
        attempt: 1,
        text: format!(" tok{}", i % 1000),
    }
}

/// Appends `EVENTS` chunks; returns (append time, flush time, path).
fn append_chunks(dir: &Path, id: &str, sink: Arc<dyn EventSink>) -> (Duration, Duration, PathBuf) {
    let log = SessionLog::create(dir, &header(id), Durability::Fsync, sink).expect("create log");
    let start = Instant::now();
    for i in 0..EVENTS {
        log.append(chunk(i));
    }
    let appended = start.elapsed();
    let start = Instant::now();
    log.sync();
    (appended, start.elapsed(), log.path().to_path_buf())
}

/// A session shaped like real ones, `EVENTS` events long.
fn realistic_events() -> Vec<Event> {
    let mut events = Vec::with_capacity(EVENTS + 64);
    let mut turn = 0;
    while events.len() < EVENTS {
        turn += 1;
        let turn_id = format!("t{turn}");
        let message_id = format!("m{turn}");
        let prompt = vec![UserContent::Text {
            text: format!("Please look at module {turn} and fix the failing test."),
        }];
        events.push(Event::InputQueued {
            message_id: message_id.clone(),
            queue: InputQueue::NextTurn,
            content: prompt.clone(),
        });
        events.push(Event::TurnStart {
            turn_id: turn_id.clone(),
        });
        events.push(Event::InputClaimed {
            turn_id: turn_id.clone(),
            message_ids: vec![message_id.clone()],
        });
        events.push(Event::UserMessage {
            turn_id: turn_id.clone(),
            message_id,
            content: prompt,
        });
        for step in 1..=4u32 {
            let last = step == 4;
            events.push(Event::StepStart {
                turn_id: turn_id.clone(),
                step,
            });
            let mut text = String::new();
            for c in 0..30 {
                let piece = format!(" word{c}");
                text.push_str(&piece);
                events.push(Event::AssistantChunk {
                    turn_id: turn_id.clone(),
                    step,
                    attempt: 1,
                    text: piece,
                });
            }
            let call_id = format!("call_{turn}_{step}");
            let tool_calls = if last {
                Vec::new()
            } else {
                vec![ToolCallRequest {
                    id: call_id.clone(),
                    name: "read_file".into(),
                    arguments: json!({"path": format!("src/mod_{turn}.rs"), "offset": step * 100})
                        .to_string(),
                }]
            };
            let usage = Usage {
                input_tokens: 4000 + u64::from(step) * 500,
                output_tokens: 60,
                cached_tokens: 3500,
            };
            events.push(Event::AssistantMessage {
                turn_id: turn_id.clone(),
                step,
                attempt: 1,
                provider: "openai".into(),
                model: "gpt-test".into(),
                text,
                thinking: None,
                tool_calls,
                finish_reason: if last {
                    FinishReason::Stop
                } else {
                    FinishReason::ToolCalls
                },
                usage,
            });
            events.push(Event::UsageUpdate {
                turn_id: turn_id.clone(),
                call: usage,
                turn: usage,
                session: usage,
                cost: None,
                context: None,
            });
            if !last {
                events.push(Event::ToolCall {
                    turn_id: turn_id.clone(),
                    call_id: call_id.clone(),
                    name: "read_file".into(),
                    arguments: json!({"path": format!("src/mod_{turn}.rs"), "offset": step * 100}),
                    title: format!("Read src/mod_{turn}.rs"),
                    kind: tandem::vocab::tool_call::ToolKind::Read,
                    mcp: None,
                });
                events.push(Event::ToolStarted {
                    turn_id: turn_id.clone(),
                    call_id: call_id.clone(),
                });
                let output: String = (0..30)
                    .map(|l| format!("{:>6}\tlet value_{l} = compute(input, {l});\n", l + 1))
                    .collect();
                events.push(Event::ToolResult {
                    turn_id: turn_id.clone(),
                    call_id,
                    status: ToolStatus::Completed,
                    output,
                });
            }
            events.push(Event::StepEnd {
                turn_id: turn_id.clone(),
                step,
            });
        }
        events.push(Event::TurnEnd {
            turn_id,
            stop_reason: StopReason::EndTurn,
            message: None,
            usage: Usage::default(),
            cost_usd: None,
        });
    }
    events.truncate(EVENTS);
    events
}

/// `read_log` + `Projection::from_events`; returns the time and the
/// number of model messages.
fn load(path: &Path) -> (Duration, Duration, usize) {
    let start = Instant::now();
    let (_, events) = read_log(path).expect("read the log");
    let read = start.elapsed();
    assert_eq!(events.len(), EVENTS);
    let projection = Projection::from_events(
        "You are tandem.".to_string(),
        events.iter().map(|e| &e.event),
    );
    let total = start.elapsed();
    (read, total, projection.messages().len())
}

fn main() {
    common::print_machine();
    let dir = tempfile::tempdir().expect("temp dir");

    println!("append {EVENTS} assistant_chunk events, Durability::Fsync (default):");
    let mut appends = Vec::new();
    let mut flushes = Vec::new();
    let mut chunk_log = PathBuf::new();
    for run in 0..RUNS {
        let (appended, flushed, path) =
            append_chunks(dir.path(), &format!("chunks{run}"), Arc::new(NullSink));
        appends.push(appended);
        flushes.push(flushed);
        chunk_log = path;
    }
    let append = Stats::of(&appends);
    let rate = EVENTS as f64 / append.median.as_secs_f64();
    report("  append, NullSink", &append);
    report("  final sync (fsync)", &Stats::of(&flushes));
    println!(
        "  {:.0} events/s; log file {:.1} MB",
        rate,
        std::fs::metadata(&chunk_log).map_or(0, |m| m.len()) as f64 / 1e6
    );
    let mut rendered = Vec::new();
    for run in 0..RUNS {
        let (appended, _, _) = append_chunks(
            dir.path(),
            &format!("rendered{run}"),
            Arc::new(RenderingSink),
        );
        rendered.push(appended);
    }
    let rendered = Stats::of(&rendered);
    report("  append + LSP update rendering", &rendered);
    println!(
        "  {:.0} events/s",
        EVENTS as f64 / rendered.median.as_secs_f64()
    );

    let mut chunk_loads = Vec::new();
    for _ in 0..RUNS {
        chunk_loads.push(load(&chunk_log).1);
    }
    let chunk_load = Stats::of(&chunk_loads);
    report(
        &format!("load the {EVENTS}-chunk log (read_log + Projection::from_events)"),
        &chunk_load,
    );

    let events = realistic_events();
    let real_log = {
        let log = SessionLog::create(
            dir.path(),
            &header("realistic"),
            Durability::Flush,
            Arc::new(NullSink),
        )
        .expect("create log");
        for event in events {
            log.append(event);
        }
        log.sync();
        log.path().to_path_buf()
    };
    let (mut reads, mut loads, mut renders) = (Vec::new(), Vec::new(), Vec::new());
    let mut messages = 0;
    for _ in 0..RUNS {
        let (read, total, count) = load(&real_log);
        reads.push(read);
        loads.push(total);
        messages = count;
        let (_, logged) = read_log(&real_log).expect("read the log");
        let start = Instant::now();
        let mut bytes = 0;
        for event in &logged {
            if let Some(body) = update_notification("realistic", event) {
                bytes += body.len();
            }
        }
        std::hint::black_box(bytes);
        renders.push(start.elapsed());
    }
    let real_load = Stats::of(&loads);
    println!(
        "load a realistic {EVENTS}-event session ({:.1} MB, {messages} model messages):",
        std::fs::metadata(&real_log).map_or(0, |m| m.len()) as f64 / 1e6
    );
    report("  read_log", &Stats::of(&reads));
    report("  read_log + Projection::from_events", &real_load);
    report(
        "  (replay would add) rendering every tandem/update",
        &Stats::of(&renders),
    );

    verdict(
        "append 100,000 chunks",
        &format!("{rate:.0} events/s"),
        "> 100,000 events/s",
        rate > 100_000.0,
    );
    let worst = chunk_load.median.max(real_load.median);
    verdict(
        "load a 100,000-event session (read + fold), median, worse of the two logs",
        &fmt(worst),
        "< 300 ms",
        ms(worst) < 300.0,
    );
}
