//! Following a session's story through its log for `tandem replay`: which
//! requests went to the model and how far each got, every tool call from
//! the moment the model asked for it to its result (or to where the log
//! stops), and whether the last turn is still open.
//!
//! Invariant: the walk only reads. What it says about a turn without an end
//! comes from the log and the session's lock, never from loading (and so
//! recovering) the session.

use std::collections::HashMap;

use serde::Serialize;

use super::names::{finish_name, request_name, serde_name, status_name, streamed};
use super::shorten;
use crate::core::log::LoggedEvent;
use crate::core::projection::render_user_content;
use crate::vocab::event::{Event, StopReason, UserContent};

/// What `tandem replay` prints.
#[derive(Debug, Clone, Default)]
pub struct ReplayOptions {
    /// Tool output, answers and prompts whole instead of their first line.
    pub full: bool,
    /// Only this turn (`t3` or `3`).
    pub turn: Option<String>,
}

/// Whether a daemon has the session open now (its lock is held by a live
/// process), which decides how a turn without an end reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "daemon")]
pub enum DaemonState {
    NotRunning,
    Running { pid: u32 },
}

/// The counts of a replay, the last line of `--json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReplaySummary {
    pub turns: usize,
    /// The turn the log leaves without an end, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_turn: Option<OpenTurn>,
    pub model_requests: RequestCounts,
    pub tool_calls: CallCounts,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpenTurn {
    pub turn_id: String,
    #[serde(flatten)]
    pub daemon: DaemonState,
}

/// Model requests: every one sent, and how each ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RequestCounts {
    pub sent: usize,
    pub completed: usize,
    pub failed: usize,
    /// Ended by a cancel, a stop or a crash before the answer completed.
    pub cut_short: usize,
    /// Still open where the log ends.
    pub in_flight: usize,
}

/// Tool calls the model asked for, and the results logged for them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CallCounts {
    pub requested: usize,
    pub results: usize,
}

/// One line of the human trajectory: when, how deep, what; `block` is
/// whole text printed under it (`--full`), `recovered_at` the time crash
/// recovery wrote the event (then `ts` is when the log stood still).
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub ts: String,
    pub depth: usize,
    pub text: String,
    pub block: Option<String>,
    pub recovered_at: Option<String>,
}

struct Request {
    step: u32,
    attempt: u32,
    purpose: String,
    chunks: usize,
    text: String,
    /// Where the line saying how it ended goes when its step ended before
    /// the turn said why (a cancel, a crash): before that `end of step`.
    ends_at: Option<usize>,
}

struct Call {
    name: String,
    turn_id: String,
    started: bool,
    result: bool,
    output: String,
}

/// The walk over the events, producing lines and counts.
pub struct Walk<'a> {
    options: &'a ReplayOptions,
    pub lines: Vec<Line>,
    pub summary: ReplaySummary,
    open_turn: Option<String>,
    request: Option<Request>,
    calls: HashMap<String, Call>,
    order: Vec<String>,
    last_ts: String,
    ts: String,
    recovered_at: Option<String>,
}

impl<'a> Walk<'a> {
    pub fn new(options: &'a ReplayOptions) -> Self {
        Walk {
            options,
            lines: Vec::new(),
            summary: ReplaySummary::default(),
            open_turn: None,
            request: None,
            calls: HashMap::new(),
            order: Vec::new(),
            last_ts: String::new(),
            ts: String::new(),
            recovered_at: None,
        }
    }

    fn line(&mut self, depth: usize, text: String) {
        self.line_with(depth, text, None);
    }

    fn line_with(&mut self, depth: usize, text: String, block: Option<String>) {
        self.lines.push(Line {
            ts: self.ts.clone(),
            depth,
            text,
            block,
            recovered_at: self.recovered_at.clone(),
        });
    }

    /// The first line of `text` with how much more there is, and (with
    /// `--full`) the whole text as a block when it is more than that line.
    fn excerpt(&self, text: &str, max: usize) -> (String, Option<String>) {
        let first = shorten(text, max);
        let lines = text.lines().count();
        let whole = first.as_str() == text.trim_end_matches('\n');
        if self.options.full && !whole {
            return (first, Some(text.to_string()));
        }
        let more = match lines {
            0 | 1 if whole => String::new(),
            0 | 1 => format!(" (+{} chars; --full for all)", text.chars().count()),
            n => format!(" (+{} more lines; --full for all)", n - 1),
        };
        (format!("{first}{more}"), None)
    }

    /// A user input's excerpt, its images named after it.
    fn content(&self, content: &[UserContent]) -> (String, Option<String>) {
        let (rest, notes) = super::image_lines::split_images(content);
        let (text, block) = self.excerpt(&render_user_content(&rest), 200);
        (super::image_lines::with_notes(text, notes), block)
    }

    pub fn event(&mut self, logged: &LoggedEvent) {
        match &logged.recovered {
            Some(mark) => {
                self.ts = mark.after_ts.clone();
                self.recovered_at = Some(logged.ts.clone());
            }
            None => {
                self.ts = logged.ts.clone();
                self.recovered_at = None;
            }
        }
        self.apply(&logged.event);
        self.last_ts = self.ts.clone();
    }

    fn apply(&mut self, event: &Event) {
        match event {
            Event::InputQueued {
                message_id,
                queue,
                content,
            } => {
                let (text, block) = self.content(content);
                let queue = queue.as_str();
                self.line_with(0, format!("queued {message_id} ({queue}): {text}"), block);
            }
            Event::InputClaimed { message_ids, .. } => {
                self.line(1, format!("claimed {}", message_ids.join(", ")));
            }
            Event::InputDiscarded { message_id, reason } => {
                self.line(0, format!("discarded {message_id}: {reason}"));
            }
            Event::TurnStart { turn_id } => {
                self.summary.turns += 1;
                self.open_turn = Some(turn_id.clone());
                self.line(0, format!("== turn {turn_id}"));
            }
            Event::UserMessage {
                message_id,
                content,
                ..
            } => {
                let (text, block) = self.content(content);
                self.line_with(1, format!("user ({message_id}): {text}"), block);
            }
            Event::StepStart { step, .. } => self.line(1, format!("step {step}")),
            Event::StepEnd { step, .. } => {
                let at = self.lines.len();
                if let Some(request) = self.request.as_mut() {
                    request.ends_at.get_or_insert(at);
                }
                self.line(1, format!("end of step {step}"));
            }
            Event::ModelRequest {
                step,
                attempt,
                purpose,
                provider,
                model,
                messages,
                tools,
                estimated_input_tokens,
                ..
            } => {
                self.close_request("superseded by a new request");
                self.summary.model_requests.sent += 1;
                let what = request_name(purpose, *step, *attempt);
                self.line(
                    2,
                    format!(
                        "{what} sent to {provider} {model}: {messages} messages, {tools} tools, ~{estimated_input_tokens} tokens in"
                    ),
                );
                self.request = Some(Request {
                    step: *step,
                    attempt: *attempt,
                    purpose: purpose.clone(),
                    chunks: 0,
                    text: String::new(),
                    ends_at: None,
                });
            }
            Event::AssistantChunk {
                step,
                attempt,
                text,
                ..
            } => {
                if let Some(request) = self.request_for(*step, *attempt) {
                    request.chunks += 1;
                    request.text.push_str(text);
                }
            }
            Event::ThoughtChunk { step, attempt, .. } => {
                if let Some(request) = self.request_for(*step, *attempt) {
                    request.chunks += 1;
                }
            }
            Event::AssistantMessage {
                model,
                text,
                tool_calls,
                finish_reason,
                usage,
                turn_id,
                ..
            } => {
                self.answered(true);
                let _ = self.request.take();
                self.line(
                    2,
                    format!(
                        "model {model}: finish {}, {} in / {} out / {} cached tokens",
                        finish_name(*finish_reason),
                        usage.input_tokens,
                        usage.output_tokens,
                        usage.cached_tokens
                    ),
                );
                if !text.is_empty() {
                    let (text, block) = self.excerpt(text, 200);
                    self.line_with(2, format!("answer: {text}"), block);
                }
                for call in tool_calls {
                    self.summary.tool_calls.requested += 1;
                    self.calls.insert(
                        call.id.clone(),
                        Call {
                            name: call.name.clone(),
                            turn_id: turn_id.clone(),
                            started: false,
                            result: false,
                            output: String::new(),
                        },
                    );
                    self.order.push(call.id.clone());
                    self.line(
                        2,
                        format!(
                            "tool call requested: {} {} [{}]",
                            call.name, call.arguments, call.id
                        ),
                    );
                }
            }
            Event::UsageUpdate { cost: Some(c), .. } => {
                self.line(
                    2,
                    format!(
                        "cost ${:.4} (turn ${:.4}, session ${:.4})",
                        c.call, c.turn, c.session
                    ),
                );
            }
            Event::UsageUpdate { cost: None, .. } => {}
            Event::AttemptFailed {
                attempt,
                error_kind,
                message,
                retry,
                ..
            } => {
                self.answered(false);
                let streamed = self
                    .request
                    .take()
                    .filter(|r| r.chunks > 0)
                    .map(|r| streamed(r.chunks, &r.text))
                    .unwrap_or_default();
                let then = if *retry { "retrying" } else { "giving up" };
                self.line(
                    2,
                    format!("attempt {attempt} failed ({error_kind}){streamed}: {message}; {then}"),
                );
            }
            Event::Compacted {
                summary,
                removed,
                keep_last,
                error,
                ..
            } => {
                if self
                    .request
                    .as_ref()
                    .is_some_and(|r| r.purpose == "compaction")
                {
                    self.answered(error.is_none());
                    self.request = None;
                }
                match (summary, error) {
                    (Some(summary), _) => {
                        let (text, block) = self.excerpt(summary, 120);
                        self.line_with(
                            2,
                            format!(
                                "compacted {removed} messages into a summary (kept the last {keep_last}): {text}"
                            ),
                            block,
                        );
                    }
                    (None, error) => self.line(
                        2,
                        format!(
                            "dropped {removed} old messages (kept the last {keep_last}): {}",
                            error.as_deref().unwrap_or("no summary")
                        ),
                    ),
                }
            }
            Event::HistoryRepaired { repair, reason, .. } => {
                self.line(2, format!("repaired history ({repair}): {reason}"));
            }
            Event::ResultsShrunk { results, .. } => {
                let cuts: Vec<String> = results
                    .iter()
                    .map(|r| {
                        let name = self.call_name(&r.call_id);
                        format!(
                            "{name} [{}] {} -> {} bytes",
                            r.call_id, r.from_bytes, r.kept_bytes
                        )
                    })
                    .collect();
                self.line(
                    2,
                    format!(
                        "context overflow: cut tool results to fit: {}",
                        cuts.join(", ")
                    ),
                );
            }
            Event::LoopDetected { description, .. } => {
                self.line(2, format!("loop detected: {description}"));
            }
            Event::Checkpoint { .. }
            | Event::CheckpointEnd { .. }
            | Event::RewindStarted { .. }
            | Event::RewindFile { .. }
            | Event::Rewound { .. } => {
                if let Some(text) = crate::core::checkpoints::replay_line(event) {
                    self.line(1, text);
                }
            }
            Event::ToolCall {
                turn_id,
                call_id,
                name,
                arguments,
                ..
            } => {
                if !self.calls.contains_key(call_id) {
                    // A log from before tool calls were paired with the
                    // model's answer: the call is first seen here.
                    self.summary.tool_calls.requested += 1;
                    self.calls.insert(
                        call_id.clone(),
                        Call {
                            name: name.clone(),
                            turn_id: turn_id.clone(),
                            started: false,
                            result: false,
                            output: String::new(),
                        },
                    );
                    self.order.push(call_id.clone());
                    self.line(
                        2,
                        format!("tool call requested: {name} {arguments} [{call_id}]"),
                    );
                }
            }
            Event::ToolWaiting {
                call_id,
                waiting_for,
                ..
            } => {
                let name = self.call_name(call_id);
                self.line(
                    2,
                    format!("tool {name} [{call_id}] waiting for {waiting_for}"),
                );
            }
            Event::ApprovalDecided {
                call_id,
                decision,
                scope,
                unsandboxed,
                ..
            } => {
                let name = self.call_name(call_id);
                let scope = scope
                    .as_deref()
                    .map(|s| format!(" (scope `{s}`)"))
                    .unwrap_or_default();
                let unsandboxed = if *unsandboxed { " [unsandboxed]" } else { "" };
                self.line(
                    2,
                    format!("tool {name} [{call_id}] decision: {decision}{scope}{unsandboxed}"),
                );
            }
            Event::ToolStarted { call_id, .. } => {
                if let Some(call) = self.calls.get_mut(call_id) {
                    call.started = true;
                }
                let name = self.call_name(call_id);
                self.line(2, format!("tool {name} [{call_id}] started"));
            }
            Event::ToolOutput { call_id, text, .. } => {
                if let Some(call) = self.calls.get_mut(call_id) {
                    call.output.push_str(text);
                }
            }
            Event::ToolImage {
                call_id,
                mime_type,
                bytes,
                ..
            } => {
                let image = super::image_lines::image_note(mime_type, *bytes);
                let name = self.call_name(call_id);
                self.line(2, format!("tool {name} [{call_id}] returned {image}"));
            }
            Event::ToolDiff { call_id, files, .. } => {
                let name = self.call_name(call_id);
                let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
                self.line(
                    2,
                    format!("tool {name} [{call_id}] changes {}", paths.join(", ")),
                );
            }
            Event::ToolLocations {
                call_id, locations, ..
            } => {
                let at = locations.iter().map(|l| match l.line {
                    Some(line) => format!("{}:{line}", l.path),
                    None => l.path.clone(),
                });
                let line = format!("tool {} [{call_id}] at {}", self.call_name(call_id), {
                    at.collect::<Vec<_>>().join(", ")
                });
                self.line(2, line);
            }
            Event::Plan { steps, .. } => {
                let plan: Vec<String> = steps
                    .iter()
                    .map(|s| format!("[{}] {}", serde_name(&s.status), s.step))
                    .collect();
                let block = self.options.full.then(|| plan.join("\n"));
                self.line_with(2, format!("plan: {} steps", steps.len()), block);
            }
            Event::ToolResult {
                call_id,
                status,
                output,
                ..
            } => {
                self.summary.tool_calls.results += 1;
                if let Some(call) = self.calls.get_mut(call_id) {
                    call.result = true;
                }
                let name = self.call_name(call_id);
                let (text, block) = self.excerpt(output, 160);
                self.line_with(
                    2,
                    format!(
                        "tool {name} [{call_id}] -> {}: {text}",
                        status_name(*status)
                    ),
                    block,
                );
            }
            Event::ModeChanged { mode } => {
                self.line(0, format!("mode changed to {}", mode.as_str()));
            }
            Event::ModelChanged {
                model,
                name,
                effort,
            } => {
                let effort = effort
                    .as_deref()
                    .map(|e| format!(", effort {e}"))
                    .unwrap_or_default();
                self.line(0, format!("model changed to {model} ({name}{effort})"));
            }
            Event::TitleChanged { title, renamed } => {
                let how = if *renamed { "renamed" } else { "titled" };
                self.line(0, format!("session {how}: {title}"));
            }
            Event::Instructions {
                turn_id,
                files,
                text,
                cut,
                about,
            } => {
                let depth = usize::from(turn_id.is_some());
                let about = about
                    .as_deref()
                    .map(|a| format!(" for {a}"))
                    .unwrap_or_default();
                let block = (self.options.full && !text.is_empty()).then(|| text.clone());
                let more = if block.is_none() && !text.is_empty() {
                    " (--full for their text)"
                } else {
                    ""
                };
                self.line_with(
                    depth,
                    format!("instructions{about}: {} files{more}", files.len()),
                    block,
                );
                for file in files {
                    let given = match file.included_bytes {
                        Some(0) => ", left out by the cap".to_string(),
                        Some(n) => format!(", {n} given (cut by the cap)"),
                        None => String::new(),
                    };
                    let hash = file.sha256.get(..12).unwrap_or(&file.sha256);
                    self.line(
                        depth + 1,
                        format!("{} ({} bytes{given}, sha256 {hash})", file.path, file.bytes),
                    );
                }
                if let Some(cut) = cut {
                    self.line(depth + 1, format!("cut: {cut}"));
                }
            }
            guard @ (Event::RetryBudgetSpent { .. } | Event::BudgetExceeded { .. }) => {
                if let Some(line) = crate::core::guards::describe(guard) {
                    self.line(2, line);
                }
            }
            Event::TurnEnd {
                turn_id,
                stop_reason,
                message,
                usage,
                cost_usd,
            } => {
                let why = match stop_reason {
                    StopReason::Interrupted => "the daemon stopped",
                    other => other.as_str(),
                };
                self.close_request(why);
                self.unfinished_calls(turn_id, why);
                self.open_turn = None;
                let message = message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default();
                let cost = cost_usd.map(|c| format!(", ${c:.4}")).unwrap_or_default();
                self.line(
                    0,
                    format!(
                        "== end of {turn_id}: {}{message} ({} in / {} out / {} cached tokens{cost})",
                        stop_reason.as_str(),
                        usage.input_tokens,
                        usage.output_tokens,
                        usage.cached_tokens
                    ),
                );
            }
        }
    }

    /// The end of the log: a turn still open reads as running or as
    /// stopped with the daemon, and so do its request and its calls.
    pub fn finish(&mut self, daemon: DaemonState) {
        self.recovered_at = None;
        self.ts = self.last_ts.clone();
        let Some(turn_id) = self.open_turn.take() else {
            return;
        };
        match daemon {
            DaemonState::Running { pid } => {
                if let Some(request) = self.request.take() {
                    self.summary.model_requests.in_flight += 1;
                    let what = request_name(&request.purpose, request.step, request.attempt);
                    self.line(
                        2,
                        format!(
                            "{what} in flight{}",
                            streamed(request.chunks, &request.text)
                        ),
                    );
                }
                for id in self.open_calls(&turn_id) {
                    let call = &self.calls[&id];
                    let text = if call.started {
                        format!("tool {} [{id}] is running", call.name)
                    } else {
                        format!("tool {} [{id}] has not started yet", call.name)
                    };
                    self.line(2, text);
                }
                self.line(
                    0,
                    format!("== {turn_id} is open (running in daemon pid {pid})"),
                );
            }
            DaemonState::NotRunning => {
                self.close_request("the daemon stopped");
                self.unfinished_calls(&turn_id, "the daemon stopped");
                self.line(
                    0,
                    format!(
                        "== {turn_id} is open (daemon not running): interrupted after the last event above; loading the session marks it interrupted"
                    ),
                );
            }
        }
        self.summary.open_turn = Some(OpenTurn { turn_id, daemon });
    }

    fn request_for(&mut self, step: u32, attempt: u32) -> Option<&mut Request> {
        self.request
            .as_mut()
            .filter(|r| r.step == step && r.attempt == attempt)
    }

    /// Counts an answer or a failure; a log from before `model_request`
    /// counts the request here.
    fn answered(&mut self, completed: bool) {
        let counts = &mut self.summary.model_requests;
        if self.request.is_none() {
            counts.sent += 1;
        }
        if completed {
            counts.completed += 1;
        } else {
            counts.failed += 1;
        }
    }

    /// A request that got no answer: cut short by `why`.
    fn close_request(&mut self, why: &str) {
        let Some(request) = self.request.take() else {
            return;
        };
        self.summary.model_requests.cut_short += 1;
        let what = request_name(&request.purpose, request.step, request.attempt);
        let block = (self.options.full && !request.text.is_empty()).then(|| request.text.clone());
        self.line_with(
            2,
            format!(
                "{what} cut short ({why}){}; no answer, usage unknown",
                streamed(request.chunks, &request.text)
            ),
            block,
        );
        if let Some(at) = request.ends_at {
            if let Some(mut line) = self.lines.pop() {
                line.ts = self.lines[at].ts.clone();
                line.recovered_at = self.lines[at].recovered_at.clone();
                self.lines.insert(at, line);
            }
        }
    }

    /// Calls of `turn_id` that have no result: running or never run.
    fn unfinished_calls(&mut self, turn_id: &str, why: &str) {
        for id in self.open_calls(turn_id) {
            let call = &self.calls[&id];
            let name = call.name.clone();
            let text = if call.started {
                format!("tool {name} [{id}] has no result: it was running when {why}")
            } else {
                format!("tool {name} [{id}] has no result: never started before {why}")
            };
            let output = call.output.clone();
            if output.is_empty() {
                self.line(2, text);
            } else {
                let (excerpt, block) = self.excerpt(&output, 160);
                self.line_with(2, format!("{text}; output so far: {excerpt}"), block);
            }
        }
    }

    /// The calls of `turn_id` without a result, in the model's order.
    fn open_calls(&self, turn_id: &str) -> Vec<String> {
        self.order
            .iter()
            .filter(|id| {
                self.calls
                    .get(*id)
                    .is_some_and(|c| c.turn_id == turn_id && !c.result)
            })
            .cloned()
            .collect()
    }

    fn call_name(&self, call_id: &str) -> String {
        self.calls
            .get(call_id)
            .map(|c| c.name.clone())
            .unwrap_or_else(|| "?".to_string())
    }
}

/// Walks the selected events and the end of the log.
pub fn walk<'o>(
    events: &[&LoggedEvent],
    options: &'o ReplayOptions,
    daemon: DaemonState,
) -> Walk<'o> {
    let mut walk = Walk::new(options);
    for logged in events {
        walk.event(logged);
    }
    walk.finish(daemon);
    walk
}
