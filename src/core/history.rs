//! Reading sessions back: crash recovery of a log that never closed its
//! turn, summaries for `listSessions`, and the human trajectory printed by
//! `tandem replay`.
//!
//! Invariant: recovery only appends. It never re-runs anything: a tool call
//! that started but has no result gets a synthetic `interrupted` result, an
//! open turn gets `turn_end: interrupted`, and queued prompts that never got
//! a turn are marked discarded — all recorded, so the next load finds a
//! closed log and does nothing.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use super::log::{read_log_contents, LogError, LoggedEvent, SessionLog};
use super::projection::render_user_content;
use crate::vocab::event::{Event, StopReason, ToolStatus, Usage, UserContent};

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
    let mut appended = Vec::new();
    for (turn_id, call_id) in calls {
        if !results.contains(&call_id) {
            appended.push(log.append(Event::ToolResult {
                turn_id,
                call_id,
                status: ToolStatus::Aborted,
                output: INTERRUPTED_RESULT.to_string(),
            }));
        }
    }
    if let Some(turn_id) = open_turn {
        if let Some(step) = open_step {
            appended.push(log.append(Event::StepEnd {
                turn_id: turn_id.clone(),
                step,
            }));
        }
        appended.push(log.append(Event::TurnEnd {
            turn_id,
            stop_reason: StopReason::Interrupted,
            message: Some("the daemon stopped before this turn ended".to_string()),
            usage,
            cost_usd: None,
        }));
    }
    for message_id in queued {
        if !settled.contains(&message_id) {
            appended.push(log.append(Event::InputDiscarded {
                message_id,
                reason: "the daemon stopped before this input was used; send it again".to_string(),
            }));
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

/// One line of `tandem/listSessions`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    pub session_id: String,
    /// The header's title, else the start of the first prompt.
    pub title: String,
    pub workspace: Vec<String>,
    pub created: String,
    pub updated: String,
    /// `running` (a turn is running in this daemon), `idle`, `interrupted`
    /// (its log ends inside a turn), or `unreadable`.
    pub state: String,
    pub turn_count: usize,
    /// `chat`, or `task` for the session keybinding tasks run in.
    pub kind: String,
}

/// Summaries of the logs in a directory, newest first; `running` says
/// which sessions this daemon has loaded and whether a turn runs.
pub fn list_session_logs(dir: &Path, running: &HashMap<String, bool>) -> Vec<SessionSummary> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        match summarize(&path, running) {
            Ok(summary) => out.push(summary),
            Err(e) => {
                let id = path
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or_default()
                    .to_string();
                out.push(SessionSummary {
                    session_id: id,
                    title: e.to_string(),
                    workspace: Vec::new(),
                    created: String::new(),
                    updated: String::new(),
                    state: "unreadable".to_string(),
                    turn_count: 0,
                    kind: "chat".to_string(),
                });
            }
        }
    }
    out.sort_by(|a, b| b.updated.cmp(&a.updated));
    out
}

fn summarize(path: &Path, running: &HashMap<String, bool>) -> Result<SessionSummary, LogError> {
    let contents = read_log_contents(path)?;
    let header = contents.header;
    let mut turns = 0;
    let mut open = false;
    let mut first_prompt = None;
    for logged in &contents.events {
        match &logged.event {
            Event::TurnStart { .. } => {
                turns += 1;
                open = true;
            }
            Event::TurnEnd { .. } => open = false,
            Event::UserMessage { content, .. } if first_prompt.is_none() => {
                first_prompt = Some(render_user_content(content));
            }
            _ => {}
        }
    }
    let title = header
        .title
        .clone()
        .or_else(|| first_prompt.map(|p| shorten(&p, 80)))
        .unwrap_or_else(|| "(no prompt yet)".to_string());
    let state = match running.get(&header.session_id) {
        Some(true) => "running",
        Some(false) => "idle",
        None if open => "interrupted",
        None => "idle",
    };
    Ok(SessionSummary {
        session_id: header.session_id,
        title,
        workspace: header
            .workspace
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        updated: contents
            .events
            .last()
            .map(|e| e.ts.clone())
            .unwrap_or_else(|| header.created.clone()),
        created: header.created,
        state: state.to_string(),
        turn_count: turns,
        kind: header.kind.unwrap_or_else(|| "chat".to_string()),
    })
}

/// The first line of `text`, at most `max` characters (with `…` when cut).
pub fn shorten(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() <= max {
        line.to_string()
    } else {
        let cut: String = line.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

fn content_text(content: &[UserContent]) -> String {
    shorten(&render_user_content(content), 200)
}

/// A session's trajectory for people: turns, steps, tool calls paired with
/// their results, stop reasons and usage.
pub fn render_trajectory(events: &[LoggedEvent]) -> String {
    let mut out = String::new();
    let mut names: HashMap<String, (String, String)> = HashMap::new();
    for logged in events {
        let ts = &logged.ts;
        match &logged.event {
            Event::InputQueued {
                message_id,
                queue,
                content,
            } => {
                let _ = writeln!(
                    out,
                    "{ts} queued {message_id} ({queue:?}): {}",
                    content_text(content)
                );
            }
            Event::InputDiscarded { message_id, reason } => {
                let _ = writeln!(out, "{ts} discarded {message_id}: {reason}");
            }
            Event::TurnStart { turn_id } => {
                let _ = writeln!(out, "\n{ts} == turn {turn_id}");
            }
            Event::UserMessage {
                message_id,
                content,
                ..
            } => {
                let _ = writeln!(out, "{ts}   user ({message_id}): {}", content_text(content));
            }
            Event::StepStart { step, .. } => {
                let _ = writeln!(out, "{ts}   step {step}");
            }
            Event::AttemptFailed {
                attempt,
                error_kind,
                message,
                retry,
                ..
            } => {
                let then = if *retry { "retrying" } else { "giving up" };
                let _ = writeln!(
                    out,
                    "{ts}     attempt {attempt} failed ({error_kind}): {message}; {then}"
                );
            }
            Event::AssistantMessage {
                model,
                text,
                tool_calls,
                finish_reason,
                usage,
                ..
            } => {
                let _ = writeln!(
                    out,
                    "{ts}     model {model}: finish {finish_reason:?}, {} in / {} out / {} cached tokens",
                    usage.input_tokens, usage.output_tokens, usage.cached_tokens
                );
                if !text.is_empty() {
                    let _ = writeln!(out, "{ts}     answer: {}", shorten(text, 200));
                }
                for call in tool_calls {
                    names.insert(call.id.clone(), (call.name.clone(), call.arguments.clone()));
                }
            }
            Event::ToolResult {
                call_id,
                status,
                output,
                ..
            } => {
                let (name, args) = names.get(call_id).cloned().unwrap_or_default();
                let _ = writeln!(
                    out,
                    "{ts}     tool {name} {args} [{call_id}] -> {status:?}: {}",
                    shorten(output, 160)
                );
            }
            Event::ApprovalDecided {
                call_id,
                decision,
                scope,
                ..
            } => {
                let scope = scope
                    .as_deref()
                    .map(|s| format!(" (scope `{s}`)"))
                    .unwrap_or_default();
                let _ = writeln!(out, "{ts}     approval for {call_id}: {decision}{scope}");
            }
            Event::LoopDetected { description, .. } => {
                let _ = writeln!(out, "{ts}     loop detected: {description}");
            }
            Event::HistoryRepaired { repair, reason, .. } => {
                let _ = writeln!(out, "{ts}     repaired history ({repair}): {reason}");
            }
            Event::TurnEnd {
                turn_id,
                stop_reason,
                message,
                usage,
                cost_usd,
            } => {
                let message = message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default();
                let cost = cost_usd.map(|c| format!(", ${c:.4}")).unwrap_or_default();
                let _ = writeln!(
                    out,
                    "{ts} == end of {turn_id}: {}{message} ({} in / {} out / {} cached tokens{cost})",
                    stop_reason.as_str(),
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.cached_tokens
                );
            }
            Event::ModeChanged { mode } => {
                let _ = writeln!(out, "{ts} mode changed to {mode:?}");
            }
            other => {
                if let Some(line) = super::guards::describe(other) {
                    let _ = writeln!(out, "{ts}     {line}");
                }
            }
        }
    }
    out
}
