//! Crash recovery of a log that never closed its turn.
//!
//! Invariant: recovery only appends. It never re-runs anything: a tool call
//! that started but has no result gets a synthetic `interrupted` result, an
//! open turn gets `turn_end: interrupted`, and queued prompts that never got
//! a turn are marked discarded — all recorded, each marked `recovered` with
//! where the log stood when the daemon stopped, so the next load finds a
//! closed log and does nothing, and a replay tells the crash from the load.

use std::collections::HashSet;

use crate::core::log::{LoggedEvent, Recovered, SessionLog};
use crate::vocab::event::{Event, StopReason, ToolStatus, Usage};

/// What a synthetic result of an interrupted call says.
pub const INTERRUPTED_RESULT: &str =
    "INTERRUPTED: the daemon stopped while this call was running. It was not \
     re-run; check its effects (files, processes) before running it again.";

/// Closes what a crash left open, appending the events that do so.
pub fn recover_interrupted(log: &SessionLog, events: &[LoggedEvent]) -> Vec<LoggedEvent> {
    let mut open_turn: Option<String> = None;
    let mut open_step: Option<u32> = None;
    let mut calls: Vec<(String, String)> = Vec::new();
    let mut results: HashSet<String> = HashSet::new();
    let mut queued: Vec<String> = Vec::new();
    let mut settled: HashSet<String> = HashSet::new();
    let mut usage = Usage::default();
    for logged in events {
        match &logged.event {
            Event::TurnStart { turn_id } => {
                open_turn = Some(turn_id.clone());
                usage = Usage::default();
            }
            Event::TurnEnd { .. } => {
                open_turn = None;
                open_step = None;
            }
            Event::StepStart { step, .. } => open_step = Some(*step),
            Event::StepEnd { .. } => open_step = None,
            Event::AssistantMessage { usage: u, .. } | Event::Compacted { usage: u, .. } => {
                usage.add(u)
            }
            Event::ToolCall {
                turn_id, call_id, ..
            } => calls.push((turn_id.clone(), call_id.clone())),
            Event::ToolResult { call_id, .. } => {
                results.insert(call_id.clone());
            }
            Event::InputQueued { message_id, .. } => queued.push(message_id.clone()),
            Event::UserMessage { message_id, .. } | Event::InputDiscarded { message_id, .. } => {
                settled.insert(message_id.clone());
            }
            _ => {}
        }
    }
    let Some(last) = events.last() else {
        return Vec::new();
    };
    let mark = Recovered {
        after_seq: last.seq,
        after_ts: last.ts.clone(),
    };
    let mut appended = Vec::new();
    for (turn_id, call_id) in calls {
        if !results.contains(&call_id) {
            appended.push(log.append_recovered(
                Event::ToolResult {
                    turn_id,
                    call_id,
                    status: ToolStatus::Aborted,
                    output: INTERRUPTED_RESULT.to_string(),
                },
                &mark,
            ));
        }
    }
    if let Some(turn_id) = open_turn {
        if let Some(step) = open_step {
            appended.push(log.append_recovered(
                Event::StepEnd {
                    turn_id: turn_id.clone(),
                    step,
                },
                &mark,
            ));
        }
        appended.push(log.append_recovered(
            Event::TurnEnd {
                turn_id,
                stop_reason: StopReason::Interrupted,
                message: Some("the daemon stopped before this turn ended".to_string()),
                usage,
                cost_usd: None,
            },
            &mark,
        ));
    }
    for message_id in queued {
        if !settled.contains(&message_id) {
            appended.push(log.append_recovered(
                Event::InputDiscarded {
                    message_id,
                    reason:
                        "the daemon stopped before this input was used; send it again".to_string(),
                },
                &mark,
            ));
        }
    }
    log.sync();
    if !appended.is_empty() {
        tracing::warn!(
            session = log.session_id(),
            events = appended.len(),
            "recovered an interrupted session"
        );
    }
    appended
}
