//! Wire shapes of tandem's extension methods, serialized exactly as
//! `protocol.md` documents them (camelCase fields, ACP's `session/update`
//! variant shapes).
//!
//! Invariant: this module knows serde and nothing else — no core types, no
//! tower-lsp. Frontends convert between these and the core's types.

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::vocab::checkpoint::RewindStatus;
pub use crate::vocab::event::{InputQueue, InputStatus, StopReason};
pub use crate::vocab::plan::{PlanPriority, PlanStatus};
pub use crate::vocab::tool_call::{ToolCallStatus, ToolKind, WaitingFor};

/// Version of the tandem extension protocol, announced in
/// `initialize` as `capabilities.experimental.tandem.protocolVersion`.
pub const PROTOCOL_VERSION: u32 = 1;

/// tandem's JSON-RPC error codes (implementation-defined server range).
pub mod error_code {
    /// The `sessionId` names no session of this daemon.
    pub const UNKNOWN_SESSION: i64 = -32001;
    /// The `config` of a request (or `initializationOptions`) is invalid.
    pub const INVALID_CONFIG: i64 = -32003;
    /// The daemon could not create or open the session's state on disk.
    pub const SESSION_STORAGE: i64 = -32004;
    /// The session cannot be deleted now: a turn runs in it, or another
    /// tandem process has it open.
    pub const SESSION_BUSY: i64 = -32005;
    /// LSP's `ContentModified`: the request's document version is not the
    /// one the daemon has (`tandem/runTask`, `tandem.runTask`).
    pub const CONTENT_MODIFIED: i64 = -32801;
}

/// The command code actions carry and `workspace/executeCommand` runs.
pub const RUN_TASK_COMMAND: &str = "tandem.runTask";

/// A block of prompt content (ACP ContentBlock).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text {
        text: String,
    },
    /// A reference to a file; the daemon reads it through the buffer cache.
    ResourceLink {
        uri: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// A file or selection with its content embedded.
    Resource {
        resource: EmbeddedResource,
    },
    /// An image, base64 (ACP's ImageContent; `uri` is ignored).
    #[serde(rename_all = "camelCase")]
    Image {
        data: String,
        mime_type: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmbeddedResource {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// `tandem/newSession` params.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewSessionParams {
    /// URI (or absolute path) of the folder the session works in; defaults
    /// to the editor's workspace folders.
    #[serde(default)]
    pub workspace_folder: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    /// Per-session configuration overrides, same keys as `config.toml`.
    #[serde(default)]
    pub config: Option<Value>,
    /// More workspace roots after the folder (URIs or absolute paths),
    /// as ACP's `additionalDirectories`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_directories: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionResult {
    pub session_id: String,
    /// The approval mode the session starts in (`read-only`, `review` or
    /// `auto`), so an editor can show it before any `current_mode_update`.
    pub mode: String,
    /// The instruction files (`AGENTS.md`) the model is given, most
    /// general first.
    #[serde(default)]
    pub instructions: Vec<InstructionFileInfo>,
    /// The model and effort in force, and the models to switch to.
    #[serde(flatten)]
    pub model_state: ModelState,
}

/// A model a session can switch to (`[model]` is `default`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireModel {
    pub id: String,
    /// The name sent to the model server.
    pub name: String,
    /// The reasoning efforts it accepts; empty: none.
    #[serde(default)]
    pub efforts: Vec<String>,
    pub context_window: u64,
}

/// The model and effort a session's next request uses, and the models
/// it can switch to: in `tandem/newSession`, `tandem/loadSession`,
/// `tandem/attached` and `tandem/setModel` answers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelState {
    /// The id of the model in force.
    #[serde(default)]
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    #[serde(default)]
    pub models: Vec<WireModel>,
}

/// `tandem/setModel` params; the result is the [`ModelState`] after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SetModelParams {
    pub session_id: String,
    /// A model id of the session's `models`.
    pub model: String,
    /// One of that model's efforts; absent: the current one when the
    /// model stays, else the model's first.
    #[serde(default)]
    pub effort: Option<String>,
}

/// How much of the model's context is in use, in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireContext {
    pub used: u64,
    /// The model's context window.
    pub size: u64,
}

/// An instruction file in force: `tandem/newSession`'s `instructions`,
/// `tandem/attached`'s, and ACP's `_meta.tandem.instructions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstructionFileInfo {
    /// Absolute path.
    pub path: String,
    /// The file's size.
    pub bytes: u64,
    /// SHA-256 of its content, lowercase hex.
    pub sha256: String,
    /// How many of its bytes the model gets, when the 32 KiB cap cut it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub included_bytes: Option<u64>,
}

/// `tandem/prompt` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PromptParams {
    pub session_id: String,
    pub prompt: Vec<ContentBlock>,
}

/// Token counts on the wire, with their cost when the model's price is
/// known.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireUsage {
    /// The whole input, cached tokens included.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The part of the input served from the provider's cache.
    pub cached_tokens: u64,
    /// US dollars; absent for models without a known price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// `tandem/prompt` result: the receipt of the turn the prompt opened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptResult {
    /// The turn's id; `null` when the prompt was discarded (cancel cleared
    /// the inbox) before its turn started.
    pub turn_id: Option<String>,
    /// One of the stop reasons in protocol.md.
    pub stop_reason: StopReason,
    /// Why the turn stopped, for reasons other than `end_turn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub usage: WireUsage,
    /// The prompt's own `messageId` (its `user_message`'s), which
    /// `tandem/forkSession` takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
}

/// `tandem/steer` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SteerParams {
    pub session_id: String,
    pub prompt: Vec<ContentBlock>,
    /// `false`: inject context without starting work. Default `true`.
    #[serde(default = "default_true")]
    pub wake: bool,
}

fn default_true() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SteerResult {
    pub message_id: String,
}

/// `tandem/listSessions` params (all optional).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListSessionsParams {
    /// Only sessions working in this folder (URI or absolute path).
    #[serde(default)]
    pub workspace_folder: Option<String>,
}

/// `tandem/loadSession` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoadSessionParams {
    pub session_id: String,
    /// More workspace roots after the session's logged ones (URIs or
    /// absolute paths), as ACP's `additionalDirectories`; not logged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_directories: Vec<String>,
    /// `{mcpServers}` only: the client's MCP servers, given again on load.
    #[serde(default)]
    pub config: Option<Value>,
}

/// `tandem/loadSession` result, sent after the replayed updates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadSessionResult {
    pub session_id: String,
    /// How many `tandem/update` notifications the replay sent.
    pub replayed: usize,
    /// The approval mode in force after the replay.
    pub mode: String,
    /// The instruction files the model was last given.
    #[serde(default)]
    pub instructions: Vec<InstructionFileInfo>,
    /// The model and effort in force after the replay.
    #[serde(flatten)]
    pub model_state: ModelState,
}

/// `tandem/setMode` params and result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SetModeParams {
    pub session_id: String,
    /// `read-only`, `review` or `auto`.
    pub mode: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetModeResult {
    pub mode: String,
}

/// `tandem/cancel` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CancelParams {
    pub session_id: String,
    #[serde(default)]
    pub keep_inbox: bool,
}

/// `tandem/update` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateParams {
    pub session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    pub update: SessionUpdate,
}

/// The content of a tool call as editors render it (ACP ToolCallContent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolCallContent {
    Content {
        content: ContentBlock,
    },
    #[serde(rename_all = "camelCase")]
    Diff {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        old_text: Option<String>,
        new_text: String,
    },
    /// A command running in the ACP client's own terminal.
    #[serde(rename_all = "camelCase")]
    Terminal {
        terminal_id: String,
    },
}

/// A place a tool call touches (ACP's `ToolCallLocation`): an absolute
/// path and a 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireLocation {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

/// `update` of a `tandem/update` notification, tagged by `sessionUpdate`.
/// The MCP server and tool of a call (`tool_call`'s `mcp`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireMcpTarget {
    pub server: String,
    pub tool: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "sessionUpdate", rename_all = "snake_case")]
pub enum SessionUpdate {
    #[serde(rename_all = "camelCase")]
    UserMessage {
        message_id: String,
        content: Vec<ContentBlock>,
    },
    /// Lifecycle of queued input: `pending` (queued), `claimed` (taken by
    /// a turn), `discarded` (with a reason). Entered input appears as
    /// `user_message`.
    #[serde(rename_all = "camelCase")]
    InputStatus {
        message_ids: Vec<String>,
        status: InputStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        queue: Option<InputQueue>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// `messageId` is shared by the chunks of one message (ACP's).
    #[serde(rename_all = "camelCase")]
    AgentMessageChunk {
        message_id: String,
        content: ContentBlock,
    },
    #[serde(rename_all = "camelCase")]
    AgentThoughtChunk {
        message_id: String,
        content: ContentBlock,
    },
    /// Discard the partial agent text of this turn's current step: the
    /// stream is being retried.
    AgentMessageReset {},
    #[serde(rename_all = "camelCase")]
    ToolCall {
        tool_call_id: String,
        title: String,
        kind: ToolKind,
        status: ToolCallStatus,
        raw_input: Value,
        /// tandem extension: with `kind: "mcp"`, the server and its tool.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mcp: Option<WireMcpTarget>,
    },
    #[serde(rename_all = "camelCase")]
    ToolCallUpdate {
        tool_call_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<ToolCallStatus>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        content: Vec<ToolCallContent>,
        /// tandem extension: a new piece of a running tool's output, to
        /// append to what was shown before.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_delta: Option<String>,
        /// tandem extension: the call waits for the user (`permission`,
        /// `input`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        waiting_for: Option<WaitingFor>,
        /// ACP's: the places the call reads or changes.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        locations: Vec<WireLocation>,
    },
    /// The agent's plan (ACP plan entries).
    Plan { entries: Vec<PlanEntry> },
    /// The oldest part of the history was summarized (or dropped, when
    /// summarizing failed) to fit the model's context window.
    #[serde(rename_all = "camelCase")]
    ContextCompacted {
        removed_messages: usize,
        summarized: bool,
    },
    /// The session's approval mode changed.
    #[serde(rename_all = "camelCase")]
    CurrentModeUpdate { current_mode_id: String },
    /// The session's title (ACP's `session_info_update`).
    SessionInfo { title: String },
    /// A `tandem/rewind` ended (tandem only). With `conversation`, the
    /// model's context now ends before `toMessageId`: the user messages in
    /// `droppedMessageIds` (and what answered them) are out of it.
    #[serde(rename_all = "camelCase")]
    Rewound {
        rewind_id: String,
        to_message_id: String,
        conversation: bool,
        #[serde(default)]
        dropped_message_ids: Vec<String>,
        /// A redo of a conversation rewind: the user messages back in it.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        restored_message_ids: Vec<String>,
    },
    Usage {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call: Option<WireUsage>,
        turn: WireUsage,
        session: WireUsage,
        /// The context in use after the call, and the window.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context: Option<WireContext>,
    },
    /// The model (and effort) of the session's next requests changed.
    #[serde(rename_all = "camelCase")]
    CurrentModelUpdate {
        model_id: String,
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        effort: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    TurnEnd {
        stop_reason: StopReason,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        usage: WireUsage,
    },
}

/// One entry of a plan (ACP PlanEntry).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanEntry {
    pub content: String,
    /// tandem sends `medium`.
    pub priority: PlanPriority,
    pub status: PlanStatus,
}

/// `tandem/requestPermission` params (daemon → editor): the shape of
/// ACP's `session/request_permission`, with tandem's `mcp` kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestPermissionParams {
    pub session_id: String,
    pub tool_call: PermissionToolCall,
    pub options: Vec<PermissionOption>,
}

/// The call a permission request asks about, as its `tool_call` showed
/// it, with what is approved in `content`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionToolCall {
    pub tool_call_id: String,
    pub title: String,
    pub kind: ToolKind,
    pub status: ToolCallStatus,
    pub raw_input: Value,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<ToolCallContent>,
}

/// One choice of a permission request; `optionId` is its kind's name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionOption {
    pub option_id: String,
    pub name: String,
    pub kind: PermissionOptionKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionOptionKind {
    AllowOnce,
    AllowAlways,
    RejectOnce,
    RejectAlways,
}

/// The answer to `tandem/requestPermission` (and ACP's
/// `session/request_permission`, the same shape).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestPermissionResult {
    pub outcome: PermissionOutcome,
}

/// What the user chose, or that the request was cancelled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum PermissionOutcome {
    Selected {
        #[serde(rename = "optionId")]
        option_id: String,
        /// tandem's extension: the user's comment on a rejection.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    Cancelled,
}

/// The answer to `tandem/requestUserInput`: `{answers}` (any JSON), or
/// `{outcome: "cancelled"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestUserInputResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<UserInputOutcome>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UserInputOutcome {
    Cancelled,
}

/// `tandem/requestUserInput` params (daemon → editor).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestUserInputParams {
    pub session_id: String,
    pub tool_call_id: String,
    pub questions: Vec<WireQuestion>,
}

/// One question of `tandem/requestUserInput`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireQuestion {
    pub id: String,
    pub question: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<WireQuestionOption>>,
}

/// One answer offered for a [`WireQuestion`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireQuestionOption {
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `experimental.tandem` in the client's `initialize` capabilities.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClientTandemCapabilities {
    pub request_permission: bool,
    pub request_user_input: bool,
    /// Which of `tandem/diagnostics`, `tandem/definition`,
    /// `tandem/references` and `tandem/workspaceSymbols` it answers:
    /// `"diagnostics"`, `"definition"`, `"references"`, `"symbols"`.
    pub language_features: Vec<String>,
}

/// A position in the negotiated encoding (LSP `Position`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WirePosition {
    pub line: u32,
    pub character: u32,
}

/// LSP `Range`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireRange {
    pub start: WirePosition,
    pub end: WirePosition,
}

/// The parts of an LSP `Diagnostic` a task reads; other fields (`tags`,
/// `relatedInformation`, `data`, ...) are accepted and ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireDiagnostic {
    pub range: WireRange,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// A number or a string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<Value>,
}

/// `textDocument` of `tandem/runTask`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskDocument {
    pub uri: String,
    /// The version the range refers to; default: the daemon's.
    #[serde(default)]
    pub version: Option<i32>,
}

/// `tandem/runTask` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunTaskParams {
    pub task: String,
    pub text_document: TaskDocument,
    pub range: WireRange,
    #[serde(default)]
    pub instruction: Option<String>,
    #[serde(default)]
    pub diagnostics: Vec<WireDiagnostic>,
    /// Run in this session instead of the workspace's task session.
    #[serde(default)]
    pub session_id: Option<String>,
}

/// The one argument of the `tandem.runTask` command, as code actions
/// carry it (`instruction` and `sessionId` are optional extras).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunTaskArgs {
    pub task: String,
    pub uri: String,
    pub range: WireRange,
    #[serde(default)]
    pub version: Option<i32>,
    #[serde(default)]
    pub diagnostics: Vec<WireDiagnostic>,
    #[serde(default)]
    pub instruction: Option<String>,
    #[serde(default)]
    pub session_id: Option<String>,
}

/// `workspace/executeCommand` `tandem.runTask` result: the task started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartedTaskResult {
    pub session_id: String,
    /// `null` when the task ended before it got a turn.
    pub turn_id: Option<String>,
}

/// How an inline edit ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskEditResult {
    /// `accepted`, `rejected` or `refused`.
    pub outcome: String,
    /// What the model is told about it.
    pub message: String,
}

/// `tandem/runTask` result: the task turn's receipt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunTaskResult {
    pub session_id: String,
    pub turn_id: Option<String>,
    pub stop_reason: StopReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub usage: WireUsage,
    /// For `edit = "selection"` tasks whose turn ended with `end_turn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit: Option<TaskEditResult>,
}

/// `tandem/attachSession` params: `tandem/loadSession`'s, with the replay
/// optional.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AttachSessionParams {
    pub session_id: String,
    /// More workspace roots after the session's logged ones (URIs or
    /// absolute paths), as ACP's `additionalDirectories`; not logged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_directories: Vec<String>,
    /// `false`: no replay of the log, only what happens from now on.
    #[serde(default = "replay_by_default")]
    pub replay: bool,
}

fn replay_by_default() -> bool {
    true
}

// Issue 29: session titles, close and delete.

/// `tandem/renameSession` params; the result is `{title}`, the title as
/// kept (trimmed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RenameSessionParams {
    pub session_id: String,
    pub title: String,
}

/// `tandem/closeSession` and `tandem/deleteSession` params; the result is
/// `{}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionIdParams {
    pub session_id: String,
}

mod language;
pub use self::language::*;
mod rewind;
pub use self::rewind::*;
