//! The tool calls of one response: recorded (and synced) before any runs,
//! run in a bounded pool with exclusive tools as barriers, each through the
//! approval gate, and each result recorded as soon as its call ends (the
//! projection gives them to the model in call order). Every recorded
//! call gets exactly one result, whatever happens (unknown tool, bad
//! arguments, refusal, cancellation, timeout, panic).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tokio::time::Instant;

use super::approval::{approve, Approved};
use super::turn::Turn;
use crate::core::log::SessionLog;
use crate::core::session::Session;
use crate::tools::{ExecMode, Tool, ToolContext, ToolErrorKind, ToolEvent, ToolRegistry};
use crate::vocab::event::{Event, ToolCallRequest, ToolStatus, TurnId};
use crate::vocab::tool_call::ToolKind;

/// Longest tool output recorded for the model, in bytes.
const MAX_TOOL_OUTPUT: usize = 100_000;

impl Turn<'_> {
    /// Runs the calls of one response: parallel-safe calls in a bounded
    /// pool, exclusive calls alone; each result recorded when its call ends.
    pub(super) async fn run_tools(&mut self, calls: &[ToolCallRequest]) {
        let mut prepared = Vec::with_capacity(calls.len());
        let mode = self.session.mode();
        let abilities = self.bridge.abilities();
        for call in calls {
            let known = self.env.tools.get(&call.name);
            let withheld = known.is_some();
            let tool = known.filter(|t| ToolRegistry::is_offered(t.as_ref(), mode, abilities));
            let withheld = withheld && tool.is_none();
            let parsed: Result<Value, String> =
                serde_json::from_str(&call.arguments).map_err(|e| e.to_string());
            let (title, kind) = match (&tool, &parsed) {
                (Some(tool), Ok(args)) => (tool.title(args), tool.kind()),
                (Some(tool), Err(_)) => (tool.name().to_string(), tool.kind()),
                (None, _) => (call.name.clone(), ToolKind::Other),
            };
            let mcp = tool.as_ref().and_then(|t| t.mcp());
            self.record(Event::ToolCall {
                turn_id: self.turn_id.clone(),
                call_id: call.id.clone(),
                name: call.name.clone(),
                arguments: parsed
                    .clone()
                    .unwrap_or_else(|_| Value::String(call.arguments.clone())),
                title,
                kind,
                mcp,
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
        // a call without a result is known to have maybe started. The
        // fsync runs on the blocking pool: other sessions stream meanwhile.
        self.session.log.synced().await;
        let mut ctx = ToolContext::new(
            self.env.workspace.clone(),
            self.buffers.clone(),
            self.cancel.clone(),
        );
        ctx.session_id = self.session.id.clone();
        ctx.env_allow = self.session.config.tools.exec_env_allow.clone();
        ctx.diagnostics_settle = diagnostics_settle(&self.session.config.tools);
        ctx.sandbox = self.session.config.sandbox.clone();
        ctx.mode = self.session.mode();
        ctx.bridge = self.bridge.clone();
        ctx.vision = self.model.config.vision;
        ctx.max_image_bytes = self.session.config.limits.max_image_bytes;
        let available = self.available_tools();
        // Images the calls logged, for the projection (see `call_context`).
        let tool_images: ToolImages = Default::default();
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
            let calls: Vec<futures::future::BoxFuture<'static, (usize, (ToolStatus, String))>> =
                batch
                    .iter()
                    .enumerate()
                    .map(|(index, call)| {
                        let call = call.clone();
                        let ctx = call_context(
                            &ctx,
                            (&self.session.log, &tool_images),
                            &self.turn_id,
                            &call.call_id,
                        );
                        let log = self.session.clone();
                        let turn_id = self.turn_id.clone();
                        let available = available.clone();
                        Box::pin(async move {
                            (
                                index,
                                execute_call(&call, ctx, log, turn_id, &available).await,
                            )
                        }) as futures::future::BoxFuture<'static, _>
                    })
                    .collect();
            // Each result is recorded (and so shown) as soon as its call
            // ends: a sibling that waits for the user, or is slow, holds
            // nobody's result back. The projection puts results in the
            // model's order whatever order they are logged in.
            let mut results = futures::stream::iter(calls).buffer_unordered(pool);
            while let Some((index, (status, output))) = results.next().await {
                // A tool that succeeded moved the work on; failures and
                // refusals did not.
                if status == ToolStatus::Completed {
                    self.last_progress = Instant::now();
                }
                let images = std::mem::take(&mut *tool_images.lock());
                for image in &images {
                    self.projection.apply(image);
                }
                self.record(Event::ToolResult {
                    turn_id: self.turn_id.clone(),
                    call_id: batch[index].call_id.clone(),
                    status,
                    output,
                });
            }
            // One fsync for the batch's results. Before the next run of
            // calls it is waited for; after the last it runs while the
            // model is sent them (the next batch's fsync, before its calls
            // run, and the turn's end wait for it).
            if rest.is_empty() {
                self.session.log.sync_soon();
            } else {
                self.session.log.synced().await;
            }
        }
    }

    /// Records the calls of a batch that will not run, each with a result.
    pub(super) fn refuse_calls(&mut self, calls: &[ToolCallRequest], why: &str) {
        for call in calls {
            let arguments = serde_json::from_str(&call.arguments)
                .unwrap_or_else(|_| Value::String(call.arguments.clone()));
            self.record(Event::ToolCall {
                turn_id: self.turn_id.clone(),
                call_id: call.id.clone(),
                name: call.name.clone(),
                arguments,
                title: call.name.clone(),
                kind: ToolKind::Other,
                mcp: None,
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
        // Nothing runs after them: the turn's end covers the same bytes.
        self.session.log.sync_soon();
    }

    pub(super) fn available_tools(&self) -> String {
        self.tool_specs
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[derive(Clone)]
pub(super) struct PreparedCall {
    pub(super) call_id: String,
    pub(super) name: String,
    pub(super) tool: Option<Arc<dyn Tool>>,
    /// The tool exists but the mode or the client does not allow it.
    pub(super) withheld: bool,
    pub(super) args: Result<Value, String>,
}

/// The context of one call: its id, and progress reported as events.
/// The `tool_image` events the calls of a run logged, waiting to be folded
/// into the projection before the next result is recorded (the calls run
/// apart from the turn, which alone holds the projection).
type ToolImages = Arc<parking_lot::Mutex<Vec<Event>>>;

fn call_context(
    base: &ToolContext,
    (log, images): (&Arc<SessionLog>, &ToolImages),
    turn_id: &TurnId,
    call_id: &str,
) -> ToolContext {
    let mut ctx = base.clone();
    ctx.call_id = call_id.to_string();
    let (log, turn_id, call_id) = (log.clone(), turn_id.clone(), call_id.to_string());
    let images = images.clone();
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
            ToolEvent::Image { mime_type, data } => {
                if let Some(event) = crate::core::images::tool_image_event(
                    log.path(),
                    (&turn_id, &call_id),
                    mime_type,
                    data,
                ) {
                    let logged = log.append(event);
                    images.lock().push(logged.event);
                }
                return;
            }
            ToolEvent::Locations(locations) => Event::ToolLocations {
                turn_id: turn_id.clone(),
                call_id: call_id.clone(),
                locations,
            },
            ToolEvent::Plan { explanation, steps } => Event::Plan {
                turn_id: turn_id.clone(),
                explanation,
                steps,
            },
            ToolEvent::Waiting(what) => Event::ToolWaiting {
                turn_id: turn_id.clone(),
                call_id: call_id.clone(),
                waiting_for: what,
            },
            ToolEvent::Decided {
                decision,
                unsandboxed,
            } => Event::ApprovalDecided {
                turn_id: turn_id.clone(),
                call_id: call_id.clone(),
                decision: decision.to_string(),
                scope: None,
                unsandboxed,
            },
        };
        log.append(event);
    });
    ctx
}

/// Runs one call to its result; never fails.
async fn execute_call(
    call: &PreparedCall,
    mut ctx: ToolContext,
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
    match approve(tool, &args, &ctx, &session, &turn_id).await {
        Ok(Approved::AsConfigured) => {}
        Ok(Approved::Unsandboxed) => ctx.unsandboxed = true,
        Err(refused) => return refused,
    }
    // An approval is on disk before what it allowed runs (immediate unless
    // the log fsyncs in the background).
    session.log.durable().await;
    let watch =
        super::checkpoint_hooks::before_call(tool.name(), &args, &ctx, &session, &turn_id).await;
    session.log.append(Event::ToolStarted {
        turn_id: turn_id.clone(),
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
        _ = cancel.cancelled() => None,
        result = run => Some(result),
    };
    // A stopped command may have changed files too.
    super::checkpoint_hooks::after_call(watch, &session, &turn_id).await;
    let Some(result) = result else {
        return aborted();
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

/// How long `apply_patch` waits for the editor's diagnostics, when it checks
/// them at all.
fn diagnostics_settle(tools: &crate::config::ToolsConfig) -> Option<std::time::Duration> {
    tools
        .diagnostics_after_edit
        .then(|| std::time::Duration::from_millis(tools.diagnostics_settle_ms))
}
