//! The one vocabulary of a session: every fact about a session is an
//! [`Event`] appended to its log. The model's context, what editors see and a
//! restarted daemon's state are all projections of the sequence of events.
//!
//! Events serialize as one JSON object per line (`type` tag, snake_case
//! fields); the shapes here are the on-disk format of `sessions/<id>.jsonl`,
//! so changing a field is a log-format change.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Identifier of one turn within a session (`t1`, `t2`, ...).
pub type TurnId = String;

/// Token counts of one provider call, or summed over a turn or session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    /// Input tokens served from the provider's prompt cache: a subset of
    /// `input_tokens` (providers that report them separately, like
    /// Anthropic, have them added to `input_tokens` too).
    #[serde(default)]
    pub cached_tokens: u64,
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_tokens += other.cached_tokens;
    }

    /// Every token of the calls: the whole input (cached included) and
    /// the output.
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

/// Why a turn ended. Serialized as the wire's `stopReason` strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    MaxTokens,
    MaxIterations,
    TokenBudget,
    Timeout,
    LoopDetected,
    Refusal,
    Cancelled,
    Blocked,
    Error,
    /// Synthesized on load for a turn whose log never closed.
    Interrupted,
    /// The next model call could cross a `[budget]` cap; it was not made.
    BudgetExceeded,
    /// The history was compacted again and again with no progress between.
    CompactionSpiral,
    /// The provider said the request does not fit its context window and
    /// nothing in it could be shrunk further.
    ContextOverflow,
}

impl StopReason {
    pub fn as_str(&self) -> &'static str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::MaxTokens => "max_tokens",
            StopReason::MaxIterations => "max_iterations",
            StopReason::TokenBudget => "token_budget",
            StopReason::Timeout => "timeout",
            StopReason::LoopDetected => "loop_detected",
            StopReason::Refusal => "refusal",
            StopReason::Cancelled => "cancelled",
            StopReason::Blocked => "blocked",
            StopReason::Error => "error",
            StopReason::Interrupted => "interrupted",
            StopReason::BudgetExceeded => "budget_exceeded",
            StopReason::CompactionSpiral => "compaction_spiral",
            StopReason::ContextOverflow => "context_overflow",
        }
    }
}

/// How a provider call finished, normalized across providers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model finished its answer (`stop`, `end_turn`).
    Stop,
    /// The model wants tools run (`tool_calls`, `tool_use`).
    ToolCalls,
    /// The output hit the token limit (`length`, `max_tokens`).
    Length,
    /// A stop sequence matched.
    StopSequence,
    /// The provider filtered the content or the model refused.
    ContentFilter,
}

/// A tool call as the model made it. `arguments` is the raw JSON text the
/// model produced; it may be malformed, which is the tool's error to report.
/// Which MCP server and which of its tools a call went to (the tool's own
/// name, before tandem's `mcp__<server>__<tool>` naming).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpTarget {
    pub server: String,
    pub tool: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRequest {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// A reasoning block the provider wants back verbatim on the next request
/// (Anthropic's `thinking` with its `signature`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thinking {
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// Outcome of one tool call, as the model will read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// The tool ran and produced its output.
    Completed,
    /// The tool ran (or tried to) and failed; the output says why.
    Failed,
    /// The tool was running and was killed (cancel, timeout).
    Aborted,
    /// The tool was never started (cancelled before dispatch, loop stop).
    NotRun,
    /// The user or the approval mode refused it.
    Rejected,
}

/// A block of user content. Mirrors the wire's ContentBlock but is the core's
/// own type; frontends convert.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum UserContent {
    Text {
        text: String,
    },
    /// A file or selection the user attached; `text` is its content when the
    /// client embedded it.
    Resource {
        uri: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
    /// An image the user attached: the log names it by the SHA-256 of its
    /// bytes (the file `<session>.images/<sha256>.<ext>` beside the log
    /// holds them); `data` is its base64 text in memory only.
    Image {
        mime_type: String,
        sha256: String,
        /// Decoded size in bytes.
        bytes: u64,
        #[serde(skip)]
        data: super::image::ImageData,
    },
}

/// Where queued input is, on the wire's `input_status`: `pending`
/// (queued), `claimed` (taken by a turn) or `discarded`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputStatus {
    Pending,
    Claimed,
    Discarded,
}

/// Which inbox queue an input went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputQueue {
    /// `prompt`: one turn each, in order.
    #[default]
    NextTurn,
    /// `steer`: claimed in a batch at the next step boundary.
    NextStep,
}

impl InputQueue {
    /// The protocol's name (`next_turn`, `next_step`).
    pub fn as_str(&self) -> &'static str {
        match self {
            InputQueue::NextTurn => "next_turn",
            InputQueue::NextStep => "next_step",
        }
    }
}

/// One entry of a session log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// User input was accepted into one of the inbox queues (pending).
    InputQueued {
        message_id: String,
        #[serde(default)]
        queue: InputQueue,
        content: Vec<UserContent>,
    },
    /// Pending inputs were taken by a turn at a step boundary (claimed);
    /// each then becomes a `user_message` (entered) or `input_discarded`.
    InputClaimed {
        turn_id: TurnId,
        message_ids: Vec<String>,
    },
    /// A queued prompt was dropped without becoming a turn (cancel
    /// cleared the inbox, shutdown).
    InputDiscarded {
        message_id: String,
        reason: String,
    },
    TurnStart {
        turn_id: TurnId,
    },
    /// A queued input became a user message of this turn.
    UserMessage {
        turn_id: TurnId,
        message_id: String,
        content: Vec<UserContent>,
    },
    StepStart {
        turn_id: TurnId,
        step: u32,
    },
    /// A streamed fragment of the assistant's answer.
    AssistantChunk {
        turn_id: TurnId,
        step: u32,
        attempt: u32,
        text: String,
    },
    /// A streamed fragment of the model's reasoning.
    ThoughtChunk {
        turn_id: TurnId,
        step: u32,
        attempt: u32,
        text: String,
    },
    /// The completion anchor: one per successful provider call, with the
    /// whole message. The projection reads these, never the chunks.
    AssistantMessage {
        turn_id: TurnId,
        step: u32,
        attempt: u32,
        provider: String,
        model: String,
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thinking: Option<Thinking>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCallRequest>,
        finish_reason: FinishReason,
        usage: Usage,
    },
    /// A provider call failed; `retry` says whether the driver tries again.
    AttemptFailed {
        turn_id: TurnId,
        step: u32,
        attempt: u32,
        error_kind: String,
        message: String,
        retry: bool,
        /// Whether this attempt had already streamed text to the client,
        /// which must then discard it (`agent_message_reset`).
        #[serde(default)]
        streamed: bool,
    },
    /// The message-repair pipeline changed the model's view of the history
    /// before a provider call.
    HistoryRepaired {
        turn_id: TurnId,
        repair: String,
        reason: String,
    },
    /// The oldest part of the history was replaced by a summary (or, when
    /// summarizing failed, dropped) to fit the context window. The
    /// projection keeps the system prompt, the first user message and the
    /// `keep_last` most recent messages; the original events stay in the log.
    Compacted {
        turn_id: TurnId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
        /// How many messages the summary stands for.
        removed: usize,
        keep_last: usize,
        /// Why there is no summary, when there is none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// The file ledger, verbatim, when there is no summary to carry it
        /// (summarizing failed and the messages were dropped); with a
        /// summary it is the summary's tail.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ledger: Option<String>,
        /// Tokens the summarization call used (counted in turn and session
        /// usage like any call).
        #[serde(default)]
        usage: Usage,
    },
    /// The same tool calls kept repeating; the batch was not run.
    LoopDetected {
        turn_id: TurnId,
        description: String,
    },
    /// A tool call was dispatched (or about to be refused).
    ToolCall {
        turn_id: TurnId,
        call_id: String,
        name: String,
        arguments: Value,
        title: String,
        /// Logs may hold kinds this build does not know: they read as
        /// `other`.
        kind: super::tool_call::ToolKind,
        /// The MCP server and tool, for a tool of an MCP server.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mcp: Option<McpTarget>,
    },
    /// A piece of a running tool's output (buffered like chunks).
    ToolOutput {
        turn_id: TurnId,
        call_id: String,
        text: String,
    },
    /// An image a tool returned (an MCP server's), for a model with vision:
    /// stored like a prompt's, by hash beside the log; logged before the
    /// call's result, and read by the model after its block of results.
    ToolImage {
        turn_id: TurnId,
        call_id: String,
        mime_type: String,
        sha256: String,
        bytes: u64,
        #[serde(skip)]
        data: super::image::ImageData,
    },
    /// The file changes a tool proposed or made, for editors to render.
    ToolDiff {
        turn_id: TurnId,
        call_id: String,
        files: Vec<FileDiff>,
    },
    /// The places a tool call reads or changes (a file read, a directory
    /// listed, grep's hits, each file a patch changes), for editors that
    /// follow the agent.
    ToolLocations {
        turn_id: TurnId,
        call_id: String,
        locations: Vec<ToolLocation>,
    },
    /// A tool call waits for the user (`permission` or `input`).
    ToolWaiting {
        turn_id: TurnId,
        call_id: String,
        waiting_for: super::tool_call::WaitingFor,
    },
    /// The user's (or the mode's) decision on a call that needed approval.
    /// `scope` is what `allow_always`/`reject_always` remember.
    ApprovalDecided {
        turn_id: TurnId,
        call_id: String,
        decision: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scope: Option<String>,
        /// The call runs outside the exec sandbox: the user chose
        /// `allow_once_unsandboxed`, or allowed it where there is no
        /// sandbox. Absent (false) in logs written before the sandbox.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unsandboxed: bool,
    },
    /// The agent's plan (`update_plan`).
    Plan {
        turn_id: TurnId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        explanation: Option<String>,
        steps: Vec<crate::vocab::plan::PlanStep>,
    },
    /// The session's approval mode changed (`tandem/setMode`).
    ModeChanged {
        mode: crate::vocab::approval::ApprovalMode,
    },
    /// A tool call began running.
    ToolStarted {
        turn_id: TurnId,
        call_id: String,
    },
    ToolResult {
        turn_id: TurnId,
        call_id: String,
        status: ToolStatus,
        output: String,
    },
    StepEnd {
        turn_id: TurnId,
        step: u32,
    },
    /// Usage so far, after a provider call, with its cost in US dollars
    /// when the model's price is known.
    UsageUpdate {
        turn_id: TurnId,
        call: Usage,
        turn: Usage,
        session: Usage,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost: Option<Cost>,
        /// How much of the model's context is in use after the call
        /// (absent in logs written before it was recorded).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context: Option<ContextUse>,
    },
    TurnEnd {
        turn_id: TurnId,
        stop_reason: StopReason,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        usage: Usage,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
    },
    // Issue 19 (the replay's record of model requests) adds from here.
    /// A model request is about to be sent: logged before it leaves, so a
    /// request cut short by cancel, error or crash is on record, with what
    /// streamed after it (the chunks of the same `step` and `attempt`).
    ModelRequest {
        turn_id: TurnId,
        step: u32,
        /// The attempt within the step (1, 2, ...); 0 for a compaction's
        /// summary call.
        attempt: u32,
        /// `step` (the step's call) or `compaction` (a summary call).
        purpose: String,
        provider: String,
        model: String,
        /// How many messages and tool definitions were sent.
        messages: usize,
        tools: usize,
        /// The estimate of the input's size (characters / 4) that the
        /// first-token timeout was set from.
        estimated_input_tokens: u64,
    },
    // Guards of issue 13: why a turn was stopped by one of them.
    /// The turn's retry budget (`limits.max_retries_per_turn`, across every
    /// error kind) was spent; `errors` counts the failures seen by kind.
    RetryBudgetSpent {
        turn_id: TurnId,
        retries: u32,
        max_retries: u32,
        errors: std::collections::BTreeMap<String, u32>,
    },
    /// A model call was not made because it could cross a `[budget]` cap:
    /// `cap` names it (`max_cost_per_turn`, `max_tokens_per_day`, ...),
    /// `unit` is `usd` or `tokens`; `spent` is what the cap's scope has
    /// used, `estimate` the call's worst case (input + maximum output).
    BudgetExceeded {
        turn_id: TurnId,
        cap: String,
        unit: String,
        spent: f64,
        limit: f64,
        estimate: f64,
    },
    // Issue 29 (session titles) adds from here.
    /// The session's title: the first line of its first prompt, or the
    /// name the user gave it (`renamed`).
    TitleChanged {
        title: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        renamed: bool,
    },
    // Issue 25 (project instructions) adds from here.
    /// The instruction files the model is given from now on, and the text
    /// made of them that it reads at the end of the system prompt. Logged
    /// when a session starts and whenever the set of files or their
    /// content changes (checked at each turn's start); `files` empty and
    /// `text` empty: none any more. `cut` is the notice the model read when
    /// the 32 KiB cap cut the text.
    Instructions {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_id: Option<TurnId>,
        files: Vec<crate::vocab::instructions::InstructionFile>,
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cut: Option<String>,
        /// The file whose directories were looked in (a turn's task or
        /// attached file, else the last one a turn had), absolute.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        about: Option<String>,
    },
    // Issue 29 (models and effort per session) adds from here.
    /// The session's next model requests use model `model` (`default` is
    /// `[model]`, else a `[models.<id>]`), `name` on the wire, at
    /// `effort` (none: no effort is sent).
    ModelChanged {
        model: String,
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        effort: Option<String>,
    },
    // Context overflow that compaction cannot fix (issue 28).
    /// After the provider said the request does not fit its context, the
    /// newest tool results were cut head-and-tail to fit (each to
    /// `kept_bytes`, a note saying so in what the model reads); the
    /// original outputs stay in their `tool_result` events.
    ResultsShrunk {
        turn_id: TurnId,
        step: u32,
        results: Vec<ShrunkResult>,
    },
    // Checkpoints and rewind (issue 26) add from here.
    /// The state of files before a turn changed them, stored before the
    /// first change (one event per batch of files newly touched). A
    /// rewind is a checkpoint too: `turn_id` is then its rewind id.
    Checkpoint {
        turn_id: TurnId,
        files: Vec<crate::vocab::checkpoint::CheckpointFile>,
    },
    /// What the turn (or rewind) left of its checkpoint's files, logged
    /// when it ended: a file found otherwise later was changed by the user.
    CheckpointEnd {
        turn_id: TurnId,
        files: Vec<crate::vocab::checkpoint::CheckpointAfter>,
    },
    /// A rewind is about to write `files` (synced before the first write);
    /// each written file then gets a `rewind_file`, and the rewind a
    /// `rewound`. After a kill, the files without a `rewind_file` were not
    /// written (each write is an atomic rename).
    RewindStarted {
        rewind_id: String,
        to_message_id: String,
        files: Vec<String>,
        conversation: bool,
    },
    /// One file of a rewind is restored.
    RewindFile {
        rewind_id: String,
        path: String,
    },
    /// A rewind ended. With `conversation`, the model's context ends just
    /// before `to_message_id` from now on (the events stay in the log).
    Rewound {
        rewind_id: String,
        to_message_id: String,
        conversation: bool,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        restored: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        conflicts: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        unrestorable: Vec<String>,
        /// Written by recovery for a rewind the daemon died in: the files
        /// it had not written yet (untouched).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        untouched: Vec<String>,
        /// With `conversation`: the user messages it took out of the
        /// model's context (`to_message_id` and those after it that an
        /// earlier rewind had not dropped yet).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        dropped_messages: Vec<String>,
        /// A redo of a conversation rewind: the user messages back in the
        /// context.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        restored_messages: Vec<String>,
    },
}

/// A place a tool call touches: an absolute path, and a 1-based line
/// when the call is about one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolLocation {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

/// One tool result cut by `results_shrunk`: its size in the model's
/// context before, and the bytes of it that were kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShrunkResult {
    pub call_id: String,
    pub from_bytes: usize,
    pub kept_bytes: usize,
}

/// One file of a tool's change: absolute path, the text before (none for a
/// new file) and after (empty for a deleted one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDiff {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_text: Option<String>,
    pub new_text: String,
}

/// Tokens in the model's context and the size of its window: after a call,
/// its input and output; after a compaction, the estimate of what is left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextUse {
    pub used: u64,
    pub size: u64,
}

/// The id of the model's answer in one step's attempt.
fn agent_message_id(turn_id: &str, step: u32, attempt: u32) -> String {
    format!("{turn_id}-{step}-{attempt}")
}

/// Costs in US dollars of a call, its turn and its session.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    pub call: f64,
    pub turn: f64,
    pub session: f64,
}

impl Event {
    /// The id of the message this event is part of, as every frontend
    /// sends it (ACP's `messageId`): a user message's own id (`m1`, from
    /// its `input_queued`), and for the model's output one id per step and
    /// attempt, `t1-1-1` for the answer and `t1-1-1-thought` for the
    /// reasoning — derived from the event alone, so a reload, a replay and
    /// a fork name every message as the live stream did.
    pub fn message_id(&self) -> Option<String> {
        match self {
            Event::UserMessage { message_id, .. } => Some(message_id.clone()),
            Event::AssistantChunk {
                turn_id,
                step,
                attempt,
                ..
            }
            | Event::AssistantMessage {
                turn_id,
                step,
                attempt,
                ..
            } => Some(agent_message_id(turn_id, *step, *attempt)),
            Event::ThoughtChunk {
                turn_id,
                step,
                attempt,
                ..
            } => Some(format!(
                "{}-thought",
                agent_message_id(turn_id, *step, *attempt)
            )),
            _ => None,
        }
    }

    /// The turn this event belongs to, if any.
    pub fn turn_id(&self) -> Option<&str> {
        match self {
            Event::InputQueued { .. }
            | Event::InputDiscarded { .. }
            | Event::ModeChanged { .. }
            | Event::ModelChanged { .. }
            | Event::TitleChanged { .. }
            | Event::Checkpoint { .. }
            | Event::CheckpointEnd { .. }
            | Event::RewindStarted { .. }
            | Event::RewindFile { .. }
            | Event::Rewound { .. } => None,
            Event::Instructions { turn_id, .. } => turn_id.as_deref(),
            Event::TurnStart { turn_id }
            | Event::UserMessage { turn_id, .. }
            | Event::InputClaimed { turn_id, .. }
            | Event::HistoryRepaired { turn_id, .. }
            | Event::ResultsShrunk { turn_id, .. }
            | Event::Compacted { turn_id, .. }
            | Event::LoopDetected { turn_id, .. }
            | Event::StepStart { turn_id, .. }
            | Event::AssistantChunk { turn_id, .. }
            | Event::ThoughtChunk { turn_id, .. }
            | Event::AssistantMessage { turn_id, .. }
            | Event::AttemptFailed { turn_id, .. }
            | Event::ToolCall { turn_id, .. }
            | Event::ToolStarted { turn_id, .. }
            | Event::ToolOutput { turn_id, .. }
            | Event::ToolImage { turn_id, .. }
            | Event::ToolDiff { turn_id, .. }
            | Event::ToolLocations { turn_id, .. }
            | Event::ToolWaiting { turn_id, .. }
            | Event::ApprovalDecided { turn_id, .. }
            | Event::Plan { turn_id, .. }
            | Event::ToolResult { turn_id, .. }
            | Event::StepEnd { turn_id, .. }
            | Event::UsageUpdate { turn_id, .. }
            | Event::TurnEnd { turn_id, .. }
            | Event::ModelRequest { turn_id, .. }
            | Event::RetryBudgetSpent { turn_id, .. }
            | Event::BudgetExceeded { turn_id, .. } => Some(turn_id),
        }
    }

    /// Whether appending the event fsyncs the log: what the user was told
    /// is accepted (queued input, approvals, mode changes) and turn ends.
    /// Tool calls and results are synced by the driver once per batch
    /// (`SessionLog::sync` in `core::log`) — before the calls run and
    /// before their results go to the model — so a step costs one fsync,
    /// not one per call. Everything else reaches the OS but is not synced.
    pub fn is_durable_boundary(&self) -> bool {
        matches!(
            self,
            Event::InputQueued { .. }
                | Event::InputDiscarded { .. }
                | Event::UserMessage { .. }
                | Event::ApprovalDecided { .. }
                | Event::ModeChanged { .. }
                | Event::ModelChanged { .. }
                | Event::TitleChanged { .. }
                | Event::Compacted { .. }
                | Event::TurnEnd { .. }
                | Event::Checkpoint { .. }
                | Event::RewindStarted { .. }
                | Event::Rewound { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_approval_logged_before_the_sandbox_loads_as_sandboxed_and_unsandboxed_round_trips() {
        let old =
            r#"{"type":"approval_decided","turn_id":"t1","call_id":"c1","decision":"allow_once"}"#;
        let Event::ApprovalDecided { unsandboxed, .. } = serde_json::from_str(old).unwrap() else {
            panic!("not an approval");
        };
        assert!(!unsandboxed);
        let new = Event::ApprovalDecided {
            turn_id: "t1".to_string(),
            call_id: "c1".to_string(),
            decision: "allow_once_unsandboxed".to_string(),
            scope: None,
            unsandboxed: true,
        };
        let line = serde_json::to_string(&new).unwrap();
        assert!(line.contains(r#""unsandboxed":true"#), "{line}");
        assert_eq!(serde_json::from_str::<Event>(&line).unwrap(), new);
    }
}
