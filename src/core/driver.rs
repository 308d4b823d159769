//! The driver: runs a session's turns, one at a time, step by step.
//!
//! A step is one provider call plus the tools it asks for; a turn is steps
//! until the model stops asking for tools. Before every step the budget
//! gates run (shutdown, cancellation, iterations, idle progress, activity,
//! token budget); every
//! provider call streams with adaptive timeouts and is retried per the typed
//! recovery policy; tool calls of one response run in a bounded pool, with
//! exclusive tools as barriers, and their results are recorded in model
//! order.
//!
//! Invariant: every fact is recorded as an event before it is acted on, and
//! every turn that starts ends with exactly one `turn_end`; every tool call
//! that is recorded gets exactly one `tool_result`, whatever happens.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::log::SessionLog;
use super::projection::{Projection, RepairLimits};
use super::session::{PendingInput, Session, StartedWork, TurnReceipt, Work};
use crate::buffers::BufferCache;
use crate::config::LimitsConfig;
use crate::provider::{
    Completion, ErrorKind, ModelMessage, ModelRequest, Provider, ProviderError, StreamEvent,
    ToolSpec,
};
use crate::tools::{
    ApprovalClass, ExecMode, Tool, ToolContext, ToolErrorKind, ToolEvent, ToolRegistry,
};
use crate::vocab::approval::ApprovalMode;
use crate::vocab::bridge::{BridgeOutcome, ClientBridge, PermissionChoice, PermissionRequest};
use crate::vocab::event::{
    Cost, Event, FinishReason, StopReason, ToolCallRequest, ToolStatus, TurnId, Usage, UserContent,
};
use crate::vocab::pricing::{price_of, Price};
use crate::workspace::Workspace;

/// The summarizer's instructions (tier-2 compaction).
const SUMMARY_PROMPT: &str = "You are compacting the history of a coding session so it can continue in a \
smaller context. Summarize the transcript you are given: the user's goals and constraints, decisions made, \
files read or changed (with paths), commands run and their outcomes, errors met, and what remains to do. \
Be specific and concise; keep names, paths and numbers exact. Answer with the summary only.";

/// Longest tool output recorded for the model, in bytes.
const MAX_TOOL_OUTPUT: usize = 100_000;

/// What a session's turns run with.
pub struct SessionEnv {
    pub provider: Arc<dyn Provider>,
    pub tools: ToolRegistry,
    pub workspace: Arc<Workspace>,
    pub buffers: Arc<BufferCache>,
    /// Run in order on every claimed batch.
    pub admission: Vec<Arc<dyn AdmissionHook>>,
    pub bridge: Arc<dyn ClientBridge>,
}

/// An input claimed by a turn, as admission hooks see it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedInput {
    pub message_id: String,
    pub content: Vec<UserContent>,
}

/// What an admission hook decides about a claimed batch.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// Enter these inputs (the batch, possibly rewritten; inputs left out
    /// are discarded).
    Enter(Vec<ClaimedInput>),
    /// Enter none of them.
    Reject { reason: String },
}

/// The pre-step admission point: sees every claimed batch before it
/// becomes model messages, and may enter, rewrite or reject it.
pub trait AdmissionHook: Send + Sync {
    fn admit(&self, session_id: &str, batch: Vec<ClaimedInput>) -> Admission;
}

/// Rejects batches whose text is longer than a limit (`limits.max_input_chars`).
pub struct MaxInputChars(pub usize);

impl AdmissionHook for MaxInputChars {
    fn admit(&self, _session_id: &str, batch: Vec<ClaimedInput>) -> Admission {
        let chars: usize = batch
            .iter()
            .map(|i| {
                super::projection::render_user_content(&i.content)
                    .chars()
                    .count()
            })
            .sum();
        if chars > self.0 {
            Admission::Reject {
                reason: format!(
                    "the input is {chars} characters long (max_input_chars = {})",
                    self.0
                ),
            }
        } else {
            Admission::Enter(batch)
        }
    }
}

/// The session's task: takes work from the inbox and runs a turn for
/// each, answering the prompt's receipt when its turn has ended.
pub async fn run_session(session: Arc<Session>, env: SessionEnv, mut projection: Projection) {
    let mut session_usage = session.restored_usage();
    let mut loops = LoopDetector::default();
    while let Some(StartedWork {
        work,
        turn_id,
        cancel,
    }) = session.next_work().await
    {
        // Inputs injected without waking ride along, ahead of the prompt
        // that was sent after them.
        let mut inputs = session.claim_next_step();
        let receipt = match work {
            Work::Prompt(mut prompt) => {
                // A new prompt from the user ends the previous burst.
                loops.reset();
                let receipt = prompt.receipt.take();
                inputs.push(prompt);
                receipt
            }
            Work::Wake => None,
        };
        let mut turn = Turn {
            session: &session,
            env: &env,
            tool_specs: Vec::new(),
            limits: &session.config.limits,
            projection: &mut projection,
            turn_id: turn_id.clone(),
            cancel,
            usage: Usage::default(),
            session_usage: &mut session_usage,
            loops: &mut loops,
            started: Instant::now(),
            last_progress: Instant::now(),
        };
        let end = turn.run(inputs).await;
        let usage = turn.usage;
        session.set_idle();
        if let Some(receipt) = receipt {
            let _ = receipt.send(TurnReceipt {
                turn_id: Some(turn_id),
                stop_reason: end.reason,
                message: end.message,
                usage,
                cost_usd: end.cost_usd,
            });
        }
    }
    session.discard_inbox("the daemon is shutting down");
    session.log.sync();
}

/// Spots the model calling the same tools over and over: a pattern of
/// period 1, 2 or 3 repeated three times in the last 12 calls.
#[derive(Debug, Default)]
pub struct LoopDetector {
    window: std::collections::VecDeque<(u64, String)>,
    /// Detections since the last user prompt.
    detections: u32,
}

const LOOP_WINDOW: usize = 12;
const LOOP_REPEATS: usize = 3;

impl LoopDetector {
    pub fn reset(&mut self) {
        self.window.clear();
        self.detections = 0;
    }

    /// Adds a batch of calls; returns what repeated if they complete a loop.
    pub fn check(&mut self, calls: &[ToolCallRequest]) -> Option<String> {
        let mut found = None;
        for call in calls {
            let canonical = canonical_call(call);
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            std::hash::Hash::hash(&canonical, &mut hasher);
            let hash = std::hash::Hasher::finish(&hasher);
            if self.window.len() == LOOP_WINDOW {
                self.window.pop_front();
            }
            self.window.push_back((hash, canonical));
            if found.is_none() {
                found = self.repeating_pattern();
            }
        }
        if found.is_some() {
            self.detections += 1;
            // Start afresh so the same calls are not reported twice.
            self.window.clear();
        }
        found
    }

    pub fn detections(&self) -> u32 {
        self.detections
    }

    fn repeating_pattern(&self) -> Option<String> {
        let n = self.window.len();
        for period in 1..=3 {
            let span = period * LOOP_REPEATS;
            if n < span {
                continue;
            }
            let tail: Vec<&(u64, String)> = self.window.iter().skip(n - span).collect();
            if (period..span).all(|i| tail[i].0 == tail[i - period].0) {
                let pattern: Vec<&str> = tail[..period].iter().map(|(_, c)| c.as_str()).collect();
                return Some(format!(
                    "the same {} repeated {LOOP_REPEATS} times: {}",
                    if period == 1 {
                        "tool call".to_string()
                    } else {
                        format!("sequence of {period} tool calls")
                    },
                    pattern.join(" -> ")
                ));
            }
        }
        None
    }
}

/// `name {canonical JSON args}` with object keys sorted, so that argument
/// order does not hide a repetition.
fn canonical_call(call: &ToolCallRequest) -> String {
    fn canonical(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                let mut out = serde_json::Map::new();
                for key in keys {
                    out.insert(key.clone(), canonical(&map[key]));
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
            other => other.clone(),
        }
    }
    let args = serde_json::from_str::<Value>(&call.arguments)
        .map(|v| canonical(&v).to_string())
        .unwrap_or_else(|_| call.arguments.clone());
    format!("{} {}", call.name, args)
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
struct TurnEnd {
    reason: StopReason,
    message: Option<String>,
    /// Filled in when the turn's end is recorded.
    cost_usd: Option<f64>,
}

impl TurnEnd {
    fn new(reason: StopReason, message: impl Into<String>) -> Self {
        TurnEnd {
            reason,
            message: Some(message.into()),
            cost_usd: None,
        }
    }

    fn cancelled() -> Self {
        TurnEnd::new(StopReason::Cancelled, "cancelled by the user")
    }
}

/// Why one provider attempt did not produce a completion.
enum AttemptFailure {
    Cancelled,
    Provider {
        error: ProviderError,
        streamed: bool,
    },
}

/// What the recovery policy does with a failure kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// Wait (exponential backoff with jitter, or `Retry-After`) and retry.
    BackoffRetry,
    /// Compact the history, then retry at once.
    CompactRetry,
    /// Give up at once: retrying cannot help.
    Fail,
}

/// The recovery hint and retry bucket size of each failure kind.
pub fn recovery_policy(kind: ErrorKind) -> (Recovery, u32) {
    match kind {
        ErrorKind::RateLimited => (Recovery::BackoffRetry, 4),
        ErrorKind::Overloaded => (Recovery::BackoffRetry, 3),
        ErrorKind::StreamDropped | ErrorKind::StreamStalled => (Recovery::BackoffRetry, 3),
        // Summarize the history harder and try again.
        ErrorKind::ContextOverflow => (Recovery::CompactRetry, 2),
        // A refused connection is a configuration problem, not a blip: say
        // so at once instead of making the user wait through backoff.
        ErrorKind::Connect => (Recovery::Fail, 0),
        ErrorKind::Auth | ErrorKind::BadRequest | ErrorKind::Protocol => (Recovery::Fail, 0),
    }
}

/// Delay before retry number `retry` (1-based).
fn backoff_delay(limits: &LimitsConfig, retry: u32, retry_after: Option<Duration>) -> Duration {
    if let Some(after) = retry_after {
        return after.min(Duration::from_secs(300));
    }
    let base = limits.retry_base_delay_ms as f64 * 2f64.powi(retry.saturating_sub(1) as i32);
    let capped = base.min(limits.retry_max_delay_ms as f64);
    // Jitter in [0.75, 1.25) keeps many clients from retrying in lockstep.
    let jittered = capped * (0.75 + fastrand::f64() * 0.5);
    Duration::from_millis(jittered as u64)
}

struct Turn<'a> {
    session: &'a Arc<Session>,
    env: &'a SessionEnv,
    /// The tools offered in the current step (mode and client decide).
    tool_specs: Vec<ToolSpec>,
    limits: &'a LimitsConfig,
    projection: &'a mut Projection,
    turn_id: TurnId,
    cancel: CancellationToken,
    usage: Usage,
    session_usage: &'a mut Usage,
    loops: &'a mut LoopDetector,
    started: Instant,
    /// Last time the work moved on: the model streamed text, or a tool
    /// call completed. Retries, failed or refused calls, reasoning alone
    /// and empty answers are not progress.
    last_progress: Instant,
}

impl Turn<'_> {
    /// Records an event and folds it into the model's context.
    fn record(&mut self, event: Event) {
        let logged = self.session.log.append(event);
        self.projection.apply(&logged.event);
    }

    async fn run(&mut self, inputs: Vec<PendingInput>) -> TurnEnd {
        self.record(Event::TurnStart {
            turn_id: self.turn_id.clone(),
        });
        let end = match self.enter_inputs(inputs) {
            Ok(()) => self.steps().await,
            Err(reason) => TurnEnd::new(StopReason::Blocked, reason),
        };
        let mut end = end;
        end.cost_usd = self.price().map(|p| p.cost(&self.usage));
        self.record(Event::TurnEnd {
            turn_id: self.turn_id.clone(),
            stop_reason: end.reason,
            message: end.message.clone(),
            usage: self.usage,
            cost_usd: end.cost_usd,
        });
        end
    }

    /// The price of the session's model, when known.
    fn price(&self) -> Option<Price> {
        price_of(
            &self.session.config.model.name,
            &self.session.config.pricing,
        )
    }

    /// Claims a batch, runs it past the admission hooks and enters what
    /// they let through as user messages. `Err` carries the rejection.
    fn enter_inputs(&mut self, inputs: Vec<PendingInput>) -> Result<(), String> {
        if inputs.is_empty() {
            return Ok(());
        }
        self.record(Event::InputClaimed {
            turn_id: self.turn_id.clone(),
            message_ids: inputs.iter().map(|i| i.message_id.clone()).collect(),
        });
        let mut batch: Vec<ClaimedInput> = inputs
            .iter()
            .map(|i| ClaimedInput {
                message_id: i.message_id.clone(),
                content: i.content.clone(),
            })
            .collect();
        let mut rejection = None;
        for hook in &self.env.admission {
            match hook.admit(&self.session.id, batch) {
                Admission::Enter(next) => batch = next,
                Admission::Reject { reason } => {
                    rejection = Some(reason);
                    batch = Vec::new();
                    break;
                }
            }
        }
        for input in inputs {
            if !batch.iter().any(|b| b.message_id == input.message_id) {
                let reason = rejection
                    .clone()
                    .unwrap_or_else(|| "left out by an admission hook".to_string());
                self.session
                    .discard(input, &format!("rejected at admission: {reason}"));
            }
        }
        for entered in batch {
            self.record(Event::UserMessage {
                turn_id: self.turn_id.clone(),
                message_id: entered.message_id,
                content: entered.content,
            });
        }
        match rejection {
            Some(reason) => Err(format!("the input was rejected at admission: {reason}")),
            None => Ok(()),
        }
    }

    /// The budget gates, in order; `Some` stops the turn before the step.
    fn gate(&self, steps_done: u32) -> Option<TurnEnd> {
        if self.session.shutdown.is_cancelled() {
            return Some(TurnEnd::new(
                StopReason::Cancelled,
                "the daemon is shutting down",
            ));
        }
        if self.cancel.is_cancelled() {
            return Some(TurnEnd::cancelled());
        }
        let max = self.limits.max_iterations;
        if steps_done >= max {
            return Some(TurnEnd::new(
                StopReason::MaxIterations,
                format!("stopped after {steps_done} model calls (max_iterations = {max})"),
            ));
        }
        let now = Instant::now();
        let idle = now.duration_since(self.last_progress);
        if idle > self.limits.idle_timeout() {
            return Some(TurnEnd::new(
                StopReason::Timeout,
                format!(
                    "stopped after {:.0} s without progress (idle_timeout_secs = {})",
                    idle.as_secs_f64(),
                    self.limits.idle_timeout_secs
                ),
            ));
        }
        let active = now.duration_since(self.started);
        if active > self.limits.activity_timeout() && idle > self.limits.activity_recent() {
            return Some(TurnEnd::new(
                StopReason::Timeout,
                format!(
                    "stopped after {:.0} s of work with no progress in the last {:.0} s (activity_timeout_secs = {})",
                    active.as_secs_f64(),
                    idle.as_secs_f64(),
                    self.limits.activity_timeout_secs
                ),
            ));
        }
        let budget = self.limits.max_tokens;
        let used = self.usage.total();
        if budget > 0 && used >= budget {
            return Some(TurnEnd::new(
                StopReason::TokenBudget,
                format!("stopped after using {used} tokens (max_tokens = {budget})"),
            ));
        }
        None
    }

    async fn steps(&mut self) -> TurnEnd {
        let mut steps_done = 0;
        let mut hit_max_tokens = false;
        loop {
            if let Some(end) = self.gate(steps_done) {
                return end;
            }
            if steps_done > 0 {
                let claimed = self.session.claim_next_step();
                // A rejected steer is discarded; the turn goes on without it.
                let _ = self.enter_inputs(claimed);
            }
            steps_done += 1;
            let step = steps_done;
            self.record(Event::StepStart {
                turn_id: self.turn_id.clone(),
                step,
            });
            // Compaction first: it summarizes; trimming (a repair) only
            // drops, as the last resort when even that did not fit.
            self.compact_if_needed().await;
            self.repair_history();
            self.tool_specs = self
                .env
                .tools
                .offered(self.session.mode(), self.env.bridge.abilities());
            let (completion, attempt) = match self.call_model(step).await {
                Ok(done) => done,
                Err(end) => {
                    self.end_step(step);
                    return end;
                }
            };
            let finish = normalize_finish(&completion);
            self.usage.add(&completion.usage);
            self.session_usage.add(&completion.usage);
            let tool_calls = completion.tool_calls.clone();
            self.record(Event::AssistantMessage {
                turn_id: self.turn_id.clone(),
                step,
                attempt,
                provider: self.env.provider.name().to_string(),
                model: self.env.provider.model().to_string(),
                text: completion.text,
                thinking: completion.thinking,
                tool_calls: completion.tool_calls,
                finish_reason: finish,
                usage: completion.usage,
            });
            let cost = self.price().map(|price| Cost {
                call: price.cost(&completion.usage),
                turn: price.cost(&self.usage),
                session: price.cost(self.session_usage),
            });
            self.record(Event::UsageUpdate {
                turn_id: self.turn_id.clone(),
                call: completion.usage,
                turn: self.usage,
                session: *self.session_usage,
                cost,
            });
            if finish == FinishReason::Length {
                hit_max_tokens = true;
            }
            if !tool_calls.is_empty() {
                if let Some(description) = self.loops.check(&tool_calls) {
                    let second = self.loops.detections() > 1;
                    self.refuse_calls(&tool_calls, &format!("loop detected: {description}"));
                    self.record(Event::LoopDetected {
                        turn_id: self.turn_id.clone(),
                        description: description.clone(),
                    });
                    self.end_step(step);
                    return if second {
                        TurnEnd::new(
                            StopReason::Error,
                            format!("loop detected again after a warning: {description}"),
                        )
                    } else {
                        TurnEnd::new(
                            StopReason::LoopDetected,
                            format!("stopped a loop: {description}"),
                        )
                    };
                }
                self.run_tools(&tool_calls).await;
                self.end_step(step);
                if self.cancel.is_cancelled() {
                    return TurnEnd::cancelled();
                }
                continue;
            }
            self.end_step(step);
            if self.session.has_waking_input() && !self.cancel.is_cancelled() {
                // Steering arrived during this step: the turn goes on.
                continue;
            }
            return match finish {
                FinishReason::ContentFilter => TurnEnd::new(
                    StopReason::Refusal,
                    "the provider filtered the answer or the model refused",
                ),
                _ if hit_max_tokens => TurnEnd::new(
                    StopReason::MaxTokens,
                    "the model's answer was cut off at its output token limit",
                ),
                _ => TurnEnd {
                    reason: StopReason::EndTurn,
                    message: None,
                    cost_usd: None,
                },
            };
        }
    }

    fn end_step(&mut self, step: u32) {
        self.record(Event::StepEnd {
            turn_id: self.turn_id.clone(),
            step,
        });
    }

    /// One provider call, with retries per the recovery policy.
    async fn call_model(&mut self, step: u32) -> Result<(Completion, u32), TurnEnd> {
        let mut failures: HashMap<ErrorKind, u32> = HashMap::new();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (error, streamed) = match self.attempt(step, attempt).await {
                Ok(completion) => return Ok((completion, attempt)),
                Err(AttemptFailure::Cancelled) => return Err(TurnEnd::cancelled()),
                Err(AttemptFailure::Provider { error, streamed }) => (error, streamed),
            };
            let failed = failures.entry(error.kind).or_insert(0);
            *failed += 1;
            let (recovery, bucket) = recovery_policy(error.kind);
            let retry = recovery != Recovery::Fail && *failed <= bucket;
            let failed = *failed;
            self.session.log.append(Event::AttemptFailed {
                turn_id: self.turn_id.clone(),
                step,
                attempt,
                error_kind: error.kind.as_str().to_string(),
                message: error.message.clone(),
                retry,
                streamed,
            });
            if !retry {
                let message = if recovery == Recovery::Fail {
                    error.message
                } else {
                    format!(
                        "{} after {failed} attempts: {}",
                        error.kind.as_str(),
                        error.message
                    )
                };
                return Err(TurnEnd::new(StopReason::Error, message));
            }
            if recovery == Recovery::CompactRetry {
                // Each retry keeps less of the recent history.
                let keep = self.limits.compact_keep_ratio / f64::from(failed + 1);
                self.compact(
                    keep,
                    "the provider said the request does not fit the context window",
                )
                .await;
                continue;
            }
            let delay = backoff_delay(self.limits, failed, error.retry_after);
            tracing::info!(
                kind = error.kind.as_str(),
                ?delay,
                "retrying model call: {}",
                error.message
            );
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = self.cancel.cancelled() => return Err(TurnEnd::cancelled()),
            }
        }
    }

    /// One streamed provider attempt with the adaptive timeouts; chunks are
    /// logged (and so streamed to the client) as they arrive.
    async fn attempt(&mut self, step: u32, attempt: u32) -> Result<Completion, AttemptFailure> {
        let request = ModelRequest {
            messages: self.projection.messages(),
            tools: &self.tool_specs,
            max_output_tokens: match self.session.config.model.max_output_tokens {
                0 => None,
                n => Some(n),
            },
        };
        let input_tokens = self.projection.estimated_tokens();
        let (log, turn_id, last_progress) =
            (&self.session.log, &self.turn_id, &mut self.last_progress);
        let on_delta = |delta: StreamEvent| match delta {
            StreamEvent::TextDelta(text) => {
                // Progress is new output for the user: text, not
                // keep-alives, retries or empty deltas.
                if !text.trim().is_empty() {
                    *last_progress = Instant::now();
                }
                log.append(Event::AssistantChunk {
                    turn_id: turn_id.clone(),
                    step,
                    attempt,
                    text,
                });
            }
            StreamEvent::ThoughtDelta(text) => {
                log.append(Event::ThoughtChunk {
                    turn_id: turn_id.clone(),
                    step,
                    attempt,
                    text,
                });
            }
            _ => {}
        };
        stream_completion(
            self.env.provider.as_ref(),
            request,
            self.limits,
            input_tokens,
            &self.cancel,
            on_delta,
        )
        .await
    }

    /// Runs the calls of one response: parallel-safe calls in a bounded
    /// pool, exclusive calls alone; results recorded in model order.
    async fn run_tools(&mut self, calls: &[ToolCallRequest]) {
        let mut prepared = Vec::with_capacity(calls.len());
        let mode = self.session.mode();
        let abilities = self.env.bridge.abilities();
        for call in calls {
            let known = self.env.tools.get(&call.name);
            let tool = known
                .filter(|t| ToolRegistry::is_offered(t.as_ref(), mode, abilities))
                .cloned();
            let withheld = known.is_some() && tool.is_none();
            let parsed: Result<Value, String> =
                serde_json::from_str(&call.arguments).map_err(|e| e.to_string());
            let (title, kind) = match (&tool, &parsed) {
                (Some(tool), Ok(args)) => (tool.title(args), tool.kind()),
                (Some(tool), Err(_)) => (tool.name().to_string(), tool.kind()),
                (None, _) => (call.name.clone(), "other"),
            };
            self.record(Event::ToolCall {
                turn_id: self.turn_id.clone(),
                call_id: call.id.clone(),
                name: call.name.clone(),
                arguments: parsed
                    .clone()
                    .unwrap_or_else(|_| Value::String(call.arguments.clone())),
                title,
                kind: kind.to_string(),
            });
            prepared.push(PreparedCall {
                call_id: call.id.clone(),
                name: call.name.clone(),
                tool,
                withheld,
                args: parsed,
            });
        }
        // The calls are on disk before any of them runs: after a crash,
        // a call without a result is known to have maybe started.
        self.session.log.sync();
        let mut ctx = ToolContext::new(
            self.env.workspace.clone(),
            self.env.buffers.clone(),
            self.cancel.clone(),
        );
        ctx.session_id = self.session.id.clone();
        ctx.env_allow = self.session.config.tools.exec_env_allow.clone();
        ctx.mode = self.session.mode();
        ctx.bridge = self.env.bridge.clone();
        let available = self.available_tools();
        let pool = self.limits.parallel_tools.max(1);
        let mut rest = prepared.as_slice();
        while !rest.is_empty() {
            // A run of parallel-safe calls, or one exclusive call.
            let exclusive = |c: &PreparedCall| {
                c.tool
                    .as_ref()
                    .is_some_and(|t| t.mode() == ExecMode::Exclusive)
            };
            let len = if exclusive(&rest[0]) {
                1
            } else {
                rest.iter().position(exclusive).unwrap_or(rest.len())
            };
            let (batch, tail) = rest.split_at(len);
            rest = tail;
            // Boxed 'static futures: the pool's stream must not borrow the
            // batch, or the session task's future stops being `Send`.
            let calls: Vec<futures::future::BoxFuture<'static, (ToolStatus, String)>> = batch
                .iter()
                .map(|call| {
                    let call = call.clone();
                    let ctx = call_context(&ctx, &self.session.log, &self.turn_id, &call.call_id);
                    let log = self.session.clone();
                    let turn_id = self.turn_id.clone();
                    let available = available.clone();
                    Box::pin(
                        async move { execute_call(&call, ctx, log, turn_id, &available).await },
                    ) as futures::future::BoxFuture<'static, _>
                })
                .collect();
            let mut results = futures::stream::iter(calls).buffered(pool);
            let mut outcomes = Vec::with_capacity(batch.len());
            while let Some(outcome) = results.next().await {
                outcomes.push(outcome);
            }
            drop(results);
            // A tool that succeeded moved the work on; failures and
            // refusals did not.
            if outcomes
                .iter()
                .any(|(status, _)| *status == ToolStatus::Completed)
            {
                self.last_progress = Instant::now();
            }
            for (call, (status, output)) in batch.iter().zip(outcomes) {
                self.record(Event::ToolResult {
                    turn_id: self.turn_id.clone(),
                    call_id: call.call_id.clone(),
                    status,
                    output,
                });
            }
            // One fsync for the batch's results, before the model sees them.
            self.session.log.sync();
        }
    }

    /// Records the calls of a batch that will not run, each with a result.
    fn refuse_calls(&mut self, calls: &[ToolCallRequest], why: &str) {
        for call in calls {
            let arguments = serde_json::from_str(&call.arguments)
                .unwrap_or_else(|_| Value::String(call.arguments.clone()));
            self.record(Event::ToolCall {
                turn_id: self.turn_id.clone(),
                call_id: call.id.clone(),
                name: call.name.clone(),
                arguments,
                title: call.name.clone(),
                kind: "other".to_string(),
            });
            self.record(Event::ToolResult {
                turn_id: self.turn_id.clone(),
                call_id: call.id.clone(),
                status: ToolStatus::NotRun,
                output: format!(
                    "{why}. Try a different approach instead of repeating the same calls."
                ),
            });
        }
        self.session.log.sync();
    }

    /// Tier-2 compaction: when the request would fill more than
    /// `compact_threshold` of the context window, summarize the oldest part.
    async fn compact_if_needed(&mut self) {
        let window = self.session.config.model.context_window.max(1);
        let used = self.projection.estimated_tokens() as f64 / window as f64;
        if used > self.limits.compact_threshold {
            let why = format!(
                "the history fills {:.0}% of the {window}-token context window",
                used * 100.0
            );
            self.compact(self.limits.compact_keep_ratio, &why).await;
        }
    }

    /// Summarizes everything but the head and the most recent messages
    /// (within `keep_ratio` of the window) with the model; if that fails,
    /// drops them instead. Either way the result is a `compacted` event.
    async fn compact(&mut self, keep_ratio: f64, why: &str) {
        let window = self.session.config.model.context_window as f64;
        let keep_chars = (window * keep_ratio * 4.0) as usize;
        let Some(plan) = self.projection.compaction_plan(keep_chars) else {
            tracing::info!(
                "compaction wanted ({why}) but there is nothing old enough to summarize"
            );
            return;
        };
        tracing::info!(removed = plan.to - plan.from, "compacting: {why}");
        let transcript = self.projection.transcript(plan);
        let (summary, error, usage) = match self.summarize(transcript).await {
            Ok(done) if !done.text.trim().is_empty() => {
                (Some(done.text.trim().to_string()), None, done.usage)
            }
            Ok(done) => (None, Some("the summary was empty".to_string()), done.usage),
            Err(e) => {
                tracing::warn!("summarizing failed, dropping the oldest messages instead: {e}");
                (None, Some(e.message), Usage::default())
            }
        };
        self.usage.add(&usage);
        self.session_usage.add(&usage);
        self.record(Event::Compacted {
            turn_id: self.turn_id.clone(),
            summary,
            removed: plan.to - plan.from,
            keep_last: plan.keep_last,
            error,
            usage,
        });
    }

    /// One summarization call: no tools, the stream timeouts of a step.
    async fn summarize(&self, transcript: String) -> Result<Completion, ProviderError> {
        let messages = [
            ModelMessage::System {
                text: SUMMARY_PROMPT.to_string(),
            },
            ModelMessage::User { text: transcript },
        ];
        let request = ModelRequest {
            messages: &messages,
            tools: &[],
            max_output_tokens: Some(2048),
        };
        let input_tokens = (messages[1].len_hint() / 4) as u64;
        stream_completion(
            self.env.provider.as_ref(),
            request,
            self.limits,
            input_tokens,
            &self.cancel,
            |_| {},
        )
        .await
        .map_err(|failure| match failure {
            AttemptFailure::Cancelled => ProviderError::new(ErrorKind::StreamDropped, "cancelled"),
            AttemptFailure::Provider { error, .. } => error,
        })
    }

    /// Runs the message-repair pipeline and logs each repair that fired.
    fn repair_history(&mut self) {
        let limits = RepairLimits {
            context_window: self.session.config.model.context_window,
            ..RepairLimits::default()
        };
        for repair in self.projection.repair(limits) {
            tracing::info!(
                repair = repair.repair,
                "history repaired: {}",
                repair.reason
            );
            self.session.log.append(Event::HistoryRepaired {
                turn_id: self.turn_id.clone(),
                repair: repair.repair.to_string(),
                reason: repair.reason,
            });
        }
    }

    fn available_tools(&self) -> String {
        self.tool_specs
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Streams one provider call under the adaptive timeouts: the first chunk
/// (the response headers included) within the first-token budget for
/// `input_tokens`, then at most `chunk_timeout` between chunks. `on_delta`
/// sees each text and reasoning delta as it is decoded. A stall, a drop or a
/// stream that ends without completing is a failure, never a short answer.
async fn stream_completion(
    provider: &dyn Provider,
    request: ModelRequest<'_>,
    limits: &LimitsConfig,
    input_tokens: u64,
    cancel: &CancellationToken,
    mut on_delta: impl FnMut(StreamEvent),
) -> Result<Completion, AttemptFailure> {
    let first_token = limits.first_token_timeout(input_tokens);
    let first_deadline = Instant::now() + first_token;
    let stalled_first = || AttemptFailure::Provider {
        error: ProviderError::new(
            ErrorKind::StreamStalled,
            format!("the model sent nothing within {first_token:.0?} (first token timeout)"),
        ),
        streamed: false,
    };
    let mut stream = tokio::select! {
        result = tokio::time::timeout_at(first_deadline, provider.stream(request)) => match result {
            Err(_) => return Err(stalled_first()),
            Ok(Err(error)) => return Err(AttemptFailure::Provider { error, streamed: false }),
            Ok(Ok(stream)) => stream,
        },
        _ = cancel.cancelled() => return Err(AttemptFailure::Cancelled),
    };
    let mut streamed = false;
    let mut got_first = false;
    let chunk_timeout = limits.chunk_timeout();
    loop {
        let deadline = if got_first {
            Instant::now() + chunk_timeout
        } else {
            first_deadline
        };
        let next = tokio::select! {
            next = tokio::time::timeout_at(deadline, stream.next()) => next,
            _ = cancel.cancelled() => return Err(AttemptFailure::Cancelled),
        };
        let event = match next {
            Err(_) if got_first => {
                return Err(AttemptFailure::Provider {
                    error: ProviderError::new(
                        ErrorKind::StreamStalled,
                        format!("the model stream stalled: no data for {chunk_timeout:.0?}"),
                    ),
                    streamed,
                })
            }
            Err(_) => return Err(stalled_first()),
            Ok(None) => {
                return Err(AttemptFailure::Provider {
                    error: ProviderError::new(
                        ErrorKind::StreamDropped,
                        "the model stream ended before the answer was complete",
                    ),
                    streamed,
                })
            }
            Ok(Some(Err(error))) => return Err(AttemptFailure::Provider { error, streamed }),
            Ok(Some(Ok(event))) => event,
        };
        got_first = true;
        match event {
            StreamEvent::Completed(completion) => return Ok(completion),
            StreamEvent::TextDelta(_) | StreamEvent::ThoughtDelta(_) => {
                streamed = true;
                on_delta(event);
            }
            StreamEvent::ToolCallStarted { .. } => {}
        }
    }
}

#[derive(Clone)]
struct PreparedCall {
    call_id: String,
    name: String,
    tool: Option<Arc<dyn Tool>>,
    /// The tool exists but the mode or the client does not allow it.
    withheld: bool,
    args: Result<Value, String>,
}

/// The context of one call: its id, and progress reported as events.
fn call_context(
    base: &ToolContext,
    log: &Arc<SessionLog>,
    turn_id: &TurnId,
    call_id: &str,
) -> ToolContext {
    let mut ctx = base.clone();
    ctx.call_id = call_id.to_string();
    let (log, turn_id, call_id) = (log.clone(), turn_id.clone(), call_id.to_string());
    ctx.emit = Arc::new(move |event: ToolEvent| {
        let event = match event {
            ToolEvent::Output(text) => Event::ToolOutput {
                turn_id: turn_id.clone(),
                call_id: call_id.clone(),
                text,
            },
            ToolEvent::Diffs(files) => Event::ToolDiff {
                turn_id: turn_id.clone(),
                call_id: call_id.clone(),
                files,
            },
            ToolEvent::Plan { explanation, steps } => Event::Plan {
                turn_id: turn_id.clone(),
                explanation,
                steps,
            },
            ToolEvent::Waiting(what) => Event::ToolWaiting {
                turn_id: turn_id.clone(),
                call_id: call_id.clone(),
                waiting_for: what.to_string(),
            },
        };
        log.append(event);
    });
    ctx
}

/// What `allow_always` remembers for a command: its program and, when the
/// next word looks like a subcommand, that too (`cargo test`, `git status`).
/// Commands that chain or redirect (`;`, `&&`, `|`, `>`, `$(`, backticks)
/// have no scope: remembering them would allow whatever they chain. A
/// program that runs its arguments as code (a shell, an interpreter, a
/// wrapper such as `env` or `xargs`) is remembered with its whole command
/// line: allowing `sh` or `python` by name would allow anything at all.
pub fn command_scope(cmd: &str) -> Option<String> {
    const CHAINING: [&str; 9] = [";", "&", "|", ">", "<", "$(", "`", "\n", "\\"];
    if CHAINING.iter().any(|c| cmd.contains(c)) {
        return None;
    }
    let mut words = cmd.split_whitespace();
    let program = words.next()?;
    if runs_its_arguments(program) {
        return Some(cmd.trim().to_string());
    }
    match words.next() {
        Some(sub)
            if sub
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                && !sub.starts_with('-') =>
        {
            Some(format!("{program} {sub}"))
        }
        _ => Some(program.to_string()),
    }
}

/// Programs whose arguments are commands or code to run.
const RUNS_ITS_ARGUMENTS: [&str; 44] = [
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh", "busybox", "env", "sudo",
    "doas", "su", "xargs", "exec", "eval", "command", "builtin", "nohup", "nice", "ionice", "time",
    "timeout", "watch", "setsid", "chroot", "strace", "ssh", "find", "python", "node", "deno",
    "bun", "perl", "ruby", "php", "lua", "awk", "gawk", "mawk", "npx", "bunx", "pnpx",
];

fn runs_its_arguments(program: &str) -> bool {
    // `FOO=1 cmd` runs `cmd`, whatever it is.
    if program.contains('=') {
        return true;
    }
    // `/usr/bin/python3.12` is `python`.
    let name = program.rsplit('/').next().unwrap_or(program);
    let name = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    RUNS_ITS_ARGUMENTS.contains(&name)
}

/// Whether a remembered scope covers a command: the same program (and
/// subcommand) with any arguments, or, for a program that runs its
/// arguments, the very same command line.
fn scope_covers(scope: &str, cmd: &str) -> bool {
    let Some(own) = command_scope(cmd) else {
        return false;
    };
    let program = own.split_whitespace().next().unwrap_or_default();
    if runs_its_arguments(program) {
        return own == scope;
    }
    own == scope || own.starts_with(&format!("{scope} "))
}

/// The approval gate of one call: `Ok` to run it, or the result to record
/// instead.
async fn approve(
    tool: &Arc<dyn Tool>,
    args: &Value,
    ctx: &ToolContext,
    session: &Arc<Session>,
    turn_id: &TurnId,
) -> Result<(), (ToolStatus, String)> {
    if tool.approval() != ApprovalClass::Execute {
        return Ok(());
    }
    let decide = |decision: &str, scope: Option<String>| {
        session.log.append(Event::ApprovalDecided {
            turn_id: turn_id.clone(),
            call_id: ctx.call_id.clone(),
            decision: decision.to_string(),
            scope,
        });
    };
    let cmd = args.get("cmd").and_then(Value::as_str).unwrap_or_default();
    match ctx.mode {
        ApprovalMode::Auto => return Ok(()),
        ApprovalMode::ReadOnly => {
            decide("rejected_by_mode", None);
            return Err((
                ToolStatus::Rejected,
                "the session is in read-only mode: commands are not run".to_string(),
            ));
        }
        ApprovalMode::Review => {}
    }
    let approvals = session.approvals();
    if approvals.always_reject.iter().any(|s| scope_covers(s, cmd)) {
        decide("rejected_by_rule", command_scope(cmd));
        return Err((
            ToolStatus::Rejected,
            format!("the user chose to always reject `{cmd}`-like commands in this session"),
        ));
    }
    if approvals.always_allow.iter().any(|s| scope_covers(s, cmd)) {
        decide("allowed_by_rule", command_scope(cmd));
        return Ok(());
    }
    // A client that cannot answer is not asked (the bridge says so), and
    // then nothing waits for the user: the editor must not show "waiting
    // for you" for a question nobody will see.
    if ctx.bridge.abilities().request_permission {
        (ctx.emit)(ToolEvent::Waiting("permission"));
    }
    let scope = command_scope(cmd);
    let request = PermissionRequest {
        session_id: session.id.clone(),
        tool_call_id: ctx.call_id.clone(),
        title: tool.title(args),
        kind: tool.kind().to_string(),
        raw_input: args.clone(),
        always_scope: scope.clone(),
    };
    match ctx.bridge.request_permission(request, &ctx.cancel).await {
        BridgeOutcome::Answered(answer) => {
            let choice = answer.choice;
            let remembered = match choice {
                PermissionChoice::AllowAlways | PermissionChoice::RejectAlways => scope.clone(),
                _ => None,
            };
            decide(choice.option_id(), remembered.clone());
            if let Some(scope) = &remembered {
                session.remember(scope, choice.allows());
            }
            if choice.allows() {
                Ok(())
            } else {
                let because = answer
                    .reason
                    .map(|r| format!("; they said: {r}"))
                    .unwrap_or_default();
                Err((
                    ToolStatus::Rejected,
                    format!("the user rejected running `{cmd}`{because}"),
                ))
            }
        }
        BridgeOutcome::Cancelled if ctx.cancel.is_cancelled() => {
            decide("cancelled", None);
            Err((
                ToolStatus::NotRun,
                "ABORTED_BEFORE_DISPATCH: the turn was cancelled while waiting for permission"
                    .to_string(),
            ))
        }
        BridgeOutcome::Cancelled => {
            decide("dismissed", None);
            Err((
                ToolStatus::Rejected,
                format!("the user dismissed the permission request for `{cmd}`"),
            ))
        }
        BridgeOutcome::Unavailable(why) => {
            decide("unavailable", None);
            Err((
                ToolStatus::Rejected,
                format!("permission to run `{cmd}` could not be asked ({why}); in review mode commands need the user's approval"),
            ))
        }
    }
}

/// Runs one call to its result; never fails.
async fn execute_call(
    call: &PreparedCall,
    ctx: ToolContext,
    session: Arc<Session>,
    turn_id: TurnId,
    available: &str,
) -> (ToolStatus, String) {
    if ctx.cancel.is_cancelled() {
        return (
            ToolStatus::NotRun,
            "ABORTED_BEFORE_DISPATCH: the turn was cancelled before this call started".to_string(),
        );
    }
    let Some(tool) = &call.tool else {
        let why = if call.withheld {
            format!(
                "`{}` is not available in this session's mode ({}); available tools: {available}",
                call.name,
                ctx.mode.as_str()
            )
        } else {
            format!("unknown tool `{}`; available tools: {available}", call.name)
        };
        return (ToolStatus::Failed, why);
    };
    let args = match &call.args {
        Ok(args) => args.clone(),
        Err(e) => {
            return (
                ToolStatus::Failed,
                format!("the arguments are not valid JSON ({e}); send one JSON object that matches the tool's schema"),
            )
        }
    };
    if let Err(refused) = approve(tool, &args, &ctx, &session, &turn_id).await {
        return refused;
    }
    session.log.append(Event::ToolStarted {
        turn_id,
        call_id: call.call_id.clone(),
    });
    let cancel = ctx.cancel.clone();
    // A panicking tool must not take the session task (and every queued
    // prompt's receipt) down with it.
    let run = std::panic::AssertUnwindSafe(tool.run(args, &ctx));
    let limit = tool.timeout().unwrap_or(Duration::MAX);
    let run = tokio::time::timeout(limit, futures::FutureExt::catch_unwind(run));
    let aborted = || {
        (
            ToolStatus::Aborted,
            "the call was running and was stopped because the turn was cancelled".to_string(),
        )
    };
    // Cancellation wins over a result that races it: a tool that gave up
    // because it saw the cancel was aborted, not failed.
    let result = tokio::select! {
        biased;
        _ = cancel.cancelled() => return aborted(),
        result = run => result,
    };
    if cancel.is_cancelled() {
        return aborted();
    }
    match result {
        Err(_) => (
            ToolStatus::Aborted,
            format!(
                "the call was stopped after {limit:.0?}, the time limit of {}",
                tool.name()
            ),
        ),
        Ok(Ok(Ok(output))) => (ToolStatus::Completed, cap_output(output)),
        Ok(Ok(Err(e))) => match e.1 {
            ToolErrorKind::Failed => (ToolStatus::Failed, cap_output(e.0)),
            ToolErrorKind::Rejected => (ToolStatus::Rejected, cap_output(e.0)),
        },
        Ok(Err(_)) => {
            tracing::error!(tool = tool.name(), "tool panicked");
            (
                ToolStatus::Failed,
                format!(
                    "internal error: the {} tool crashed; this is a bug in tandem",
                    tool.name()
                ),
            )
        }
    }
}

fn cap_output(mut output: String) -> String {
    if output.len() > MAX_TOOL_OUTPUT {
        let cut = output.floor_char_boundary(MAX_TOOL_OUTPUT);
        let dropped = output.len() - cut;
        output.truncate(cut);
        output.push_str(&format!("\n[... output truncated: {dropped} more bytes]"));
    }
    output
}

/// `stop` with tool calls means run them; `tool_calls` with none means stop.
fn normalize_finish(completion: &Completion) -> FinishReason {
    match completion.finish_reason {
        FinishReason::Stop if !completion.tool_calls.is_empty() => FinishReason::ToolCalls,
        FinishReason::ToolCalls if completion.tool_calls.is_empty() => FinishReason::Stop,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: &str) -> ToolCallRequest {
        ToolCallRequest {
            id: format!("id-{name}-{args}"),
            name: name.to_string(),
            arguments: args.to_string(),
        }
    }

    fn feed(detector: &mut LoopDetector, calls: &[ToolCallRequest]) -> Vec<Option<String>> {
        calls
            .iter()
            .map(|c| detector.check(std::slice::from_ref(c)))
            .collect()
    }

    #[test]
    fn period_one_loop_is_detected_on_the_third_repeat() {
        let mut detector = LoopDetector::default();
        let a = call("read_file", r#"{"path":"a.rs"}"#);
        let results = feed(&mut detector, &[a.clone(), a.clone(), a.clone()]);
        assert!(results[0].is_none() && results[1].is_none());
        let description = results[2].as_ref().expect("loop on third call");
        assert!(description.contains("read_file"), "{description}");
    }

    #[test]
    fn period_two_and_three_loops_are_detected() {
        let mut detector = LoopDetector::default();
        let (a, b) = (
            call("read_file", r#"{"path":"a"}"#),
            call("grep", r#"{"pattern":"x"}"#),
        );
        let results = feed(
            &mut detector,
            &[
                a.clone(),
                b.clone(),
                a.clone(),
                b.clone(),
                a.clone(),
                b.clone(),
            ],
        );
        assert!(results[..5].iter().all(Option::is_none));
        assert!(results[5].as_ref().unwrap().contains("sequence of 2"));

        let mut detector = LoopDetector::default();
        let c = call("list_files", "{}");
        let seq = [a.clone(), b.clone(), c.clone()];
        let all: Vec<ToolCallRequest> = seq.iter().cycle().take(9).cloned().collect();
        let results = feed(&mut detector, &all);
        assert!(results[..8].iter().all(Option::is_none));
        assert!(results[8].as_ref().unwrap().contains("sequence of 3"));
    }

    #[test]
    fn paging_with_changing_offsets_is_not_a_loop() {
        let mut detector = LoopDetector::default();
        let pages: Vec<ToolCallRequest> = (0..12)
            .map(|i| {
                call(
                    "read_file",
                    &format!(r#"{{"path":"big.rs","offset":{}}}"#, 1 + i * 100),
                )
            })
            .collect();
        assert!(feed(&mut detector, &pages).iter().all(Option::is_none));
    }

    #[test]
    fn argument_key_order_does_not_hide_a_loop() {
        let mut detector = LoopDetector::default();
        let calls = [
            call("grep", r#"{"pattern":"x","path":"src"}"#),
            call("grep", r#"{"path":"src","pattern":"x"}"#),
            call("grep", r#"{"pattern":"x","path":"src"}"#),
        ];
        assert!(feed(&mut detector, &calls)[2].is_some());
    }

    #[test]
    fn one_batch_completing_a_loop_is_reported_once_and_counted() {
        let mut detector = LoopDetector::default();
        let a = call("read_file", r#"{"path":"a"}"#);
        assert!(detector.check(&[a.clone(), a.clone(), a.clone()]).is_some());
        assert_eq!(detector.detections(), 1);
        assert!(
            detector.check(std::slice::from_ref(&a)).is_none(),
            "window restarts after a detection"
        );
        detector.reset();
        assert_eq!(detector.detections(), 0);
    }

    #[test]
    fn command_scope_is_the_program_and_its_subcommand() {
        assert_eq!(
            command_scope("cargo test --release").as_deref(),
            Some("cargo test")
        );
        assert_eq!(command_scope("git status").as_deref(), Some("git status"));
        assert_eq!(command_scope("ls -la src").as_deref(), Some("ls"));
        assert_eq!(command_scope("cat src/main.rs").as_deref(), Some("cat"));
        assert_eq!(command_scope("   ").as_deref(), None);
    }

    #[test]
    fn chained_or_redirected_commands_have_no_scope() {
        for cmd in [
            "ls; rm -rf x",
            "ls && rm x",
            "ls | sh",
            "echo x > f",
            "echo $(id)",
            "a\nb",
        ] {
            assert_eq!(command_scope(cmd), None, "{cmd}");
        }
    }

    #[test]
    fn a_scope_covers_the_same_program_and_subcommand_with_other_arguments() {
        assert!(scope_covers("ls", "ls -l"));
        assert!(scope_covers("cargo test", "cargo test -p tandem"));
        assert!(!scope_covers("cargo test", "cargo build"));
        assert!(!scope_covers("cargo test", "cargo test-evil"));
        assert!(!scope_covers("ls", "ls; rm -rf ~"));
    }

    #[test]
    fn programs_that_run_their_arguments_are_scoped_to_the_whole_command() {
        let scope = command_scope("sh -c 'echo hi'").unwrap();
        assert_eq!(scope, "sh -c 'echo hi'");
        assert!(scope_covers(&scope, "sh -c 'echo hi'"));
        assert!(!scope_covers(&scope, "sh -c 'touch pwned'"));
        assert!(!scope_covers(&scope, "sh -c 'echo hi' extra"));
        for (cmd, other) in [
            (
                "/usr/bin/python3.12 build.py",
                "/usr/bin/python3.12 -c 'import os'",
            ),
            ("env", "env sh -c 'rm -rf ~'"),
            ("xargs echo", "xargs rm"),
            ("FOO=1 make", "FOO=1 sh -c 'rm -rf ~'"),
            ("find . -name x", "find . -exec rm {} +"),
        ] {
            let scope = command_scope(cmd).unwrap();
            assert_eq!(scope, cmd);
            assert!(!scope_covers(&scope, other), "{cmd} covers {other}");
        }
    }

    #[test]
    fn stop_with_tool_calls_and_tool_calls_without_calls_are_normalized() {
        let mut completion = Completion {
            text: String::new(),
            thinking: None,
            tool_calls: vec![call("grep", "{}")],
            finish_reason: FinishReason::Stop,
            usage: Usage::default(),
        };
        assert_eq!(normalize_finish(&completion), FinishReason::ToolCalls);
        completion.tool_calls.clear();
        completion.finish_reason = FinishReason::ToolCalls;
        assert_eq!(normalize_finish(&completion), FinishReason::Stop);
    }

    #[test]
    fn backoff_doubles_with_jitter_and_honours_retry_after() {
        let limits = LimitsConfig::default();
        for retry in 1..=3u32 {
            let base = 1000.0 * 2f64.powi(retry as i32 - 1);
            let delay = backoff_delay(&limits, retry, None).as_millis() as f64;
            assert!(
                delay >= base * 0.75 && delay < base * 1.25,
                "retry {retry}: {delay}"
            );
        }
        assert_eq!(
            backoff_delay(&limits, 1, Some(Duration::from_secs(7))),
            Duration::from_secs(7)
        );
        let capped = backoff_delay(&limits, 30, None).as_millis() as f64;
        assert!(capped < 30_000.0 * 1.25);
    }

    #[test]
    fn recovery_policy_fails_fast_on_auth_and_bad_requests() {
        assert_eq!(recovery_policy(ErrorKind::Auth), (Recovery::Fail, 0));
        assert_eq!(recovery_policy(ErrorKind::BadRequest), (Recovery::Fail, 0));
        assert_eq!(
            recovery_policy(ErrorKind::RateLimited),
            (Recovery::BackoffRetry, 4)
        );
    }
}
