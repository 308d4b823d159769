//! What the core can ask of the editor: permission, answers to questions,
//! and edits applied to its buffers. Frontends implement [`ClientBridge`]
//! over their wire; the core never sees JSON-RPC.
//!
//! Invariant: every call returns an outcome, never hangs past cancellation:
//! when the turn's token is cancelled the frontend withdraws its request
//! (`$/cancelRequest`) and the call returns `Cancelled`.

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::language::{
    FileDiagnostics, LanguageAnswer, LanguageFeatures, Location, Symbol, TextPoint,
};

/// What the connected client said it can answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientAbilities {
    pub request_permission: bool,
    pub request_user_input: bool,
    /// `workspace.applyEdit` with `documentChanges`.
    pub apply_edit: bool,
    /// `workspace.workspaceEdit.changeAnnotationSupport`.
    pub change_annotations: bool,
    /// `workspace.workspaceEdit.resourceOperations` includes create, rename
    /// and delete.
    pub resource_operations: bool,
    /// The editor's language servers, as far as it answers for them
    /// (`experimental.tandem.languageFeatures`).
    pub language: LanguageFeatures,
}

/// What the client offers besides questions and edits: its own view of the
/// files (ACP's `fs/read_text_file`, `fs/write_text_file`). Apart from
/// [`ClientAbilities`] so that frontends without them (LSP, exec) need not
/// name them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientFacilities {
    /// Reads go to the client, which answers with its buffer when the file
    /// is open there (unsaved text included).
    pub read_text_file: bool,
    /// Writes go to the client, which updates its buffer (and the disk, as
    /// it sees fit).
    pub write_text_file: bool,
    /// Commands run in the client's terminal (ACP `terminal/*`), which the
    /// user watches live.
    pub terminal: bool,
}

/// A command for the client's terminal.
#[derive(Debug, Clone, PartialEq)]
pub struct TerminalCommand {
    pub session_id: String,
    pub tool_call_id: String,
    /// A shell command line (run as `sh -c`).
    pub command: String,
    pub cwd: std::path::PathBuf,
    /// The client keeps at most this many bytes of output (the end).
    pub output_byte_limit: usize,
    /// Killed when it runs longer.
    pub timeout: std::time::Duration,
}

/// How a command in the client's terminal ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TerminalEnd {
    Exited(i32),
    Signalled(String),
    TimedOut,
    /// The turn was cancelled; the command was killed.
    Cancelled,
}

/// A finished command of the client's terminal.
#[derive(Debug, Clone, PartialEq)]
pub struct TerminalRun {
    pub end: TerminalEnd,
    pub output: String,
    /// The client dropped the start of the output to keep the limit.
    pub truncated: bool,
}

/// The user's answer to a permission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionChoice {
    AllowOnce,
    AllowAlways,
    RejectOnce,
    RejectAlways,
}

impl PermissionChoice {
    pub fn option_id(&self) -> &'static str {
        match self {
            PermissionChoice::AllowOnce => "allow_once",
            PermissionChoice::AllowAlways => "allow_always",
            PermissionChoice::RejectOnce => "reject_once",
            PermissionChoice::RejectAlways => "reject_always",
        }
    }

    pub fn from_option_id(id: &str) -> Option<Self> {
        Some(match id {
            "allow_once" => PermissionChoice::AllowOnce,
            "allow_always" => PermissionChoice::AllowAlways,
            "reject_once" => PermissionChoice::RejectOnce,
            "reject_always" => PermissionChoice::RejectAlways,
            _ => return None,
        })
    }

    pub fn allows(&self) -> bool {
        matches!(
            self,
            PermissionChoice::AllowOnce | PermissionChoice::AllowAlways
        )
    }
}

/// The user's answer to a permission request, with their reason when they
/// gave one (a tandem extension of ACP's outcome: `outcome.reason`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionAnswer {
    pub choice: PermissionChoice,
    pub reason: Option<String>,
}

impl From<PermissionChoice> for PermissionAnswer {
    fn from(choice: PermissionChoice) -> Self {
        PermissionAnswer {
            choice,
            reason: None,
        }
    }
}

/// A request for permission to run a tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionRequest {
    pub session_id: String,
    pub tool_call_id: String,
    pub title: String,
    pub kind: super::tool_call::ToolKind,
    pub raw_input: Value,
    /// What `allow_always` would remember (e.g. the command prefix).
    pub always_scope: Option<String>,
    /// What the user approves, shown in the request itself (a client need
    /// not have kept the call's earlier updates): the command line, and
    /// why a second request asks again.
    pub text: Option<String>,
    /// The file changes the call would make.
    pub diffs: Vec<crate::vocab::event::FileDiff>,
}

/// How a request to the editor ended.
#[derive(Debug, Clone, PartialEq)]
pub enum BridgeOutcome<T> {
    Answered(T),
    /// The turn was cancelled, or the editor cancelled the request.
    Cancelled,
    /// The editor cannot answer this (no capability, method not found) or
    /// answered with an error.
    Unavailable(String),
}

/// A question for the user (`request_user_input`).
#[derive(Debug, Clone, PartialEq)]
pub struct UserInputRequest {
    pub session_id: String,
    pub tool_call_id: String,
    /// At least one.
    pub questions: Vec<Question>,
}

/// One question for the user, as the model wrote it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Question {
    pub id: String,
    pub question: String,
    /// Answers to pick from; `None` for a free-form answer.
    #[serde(default)]
    pub options: Option<Vec<QuestionOption>>,
}

/// One answer offered for a [`Question`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuestionOption {
    pub label: String,
    #[serde(default)]
    pub description: Option<String>,
}

/// An edit for the editor to apply to its buffers (`workspace/applyEdit`).
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyEditRequest {
    /// The changes, positions already in the client's encoding.
    pub edit: super::edit::EditProposal,
    pub label: String,
}

/// The editor's answer to an edit.
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyEditResponse {
    pub applied: bool,
    pub failure_reason: Option<String>,
}

/// A file read or write through the client (`fs/*`).
#[derive(Debug, Clone, PartialEq)]
pub struct ClientFile {
    pub session_id: String,
    /// Absolute, inside the workspace (the tool resolved it).
    pub path: std::path::PathBuf,
}

#[async_trait::async_trait]
pub trait ClientBridge: Send + Sync {
    fn abilities(&self) -> ClientAbilities;
    /// The client's file facilities; none unless a frontend says so.
    fn facilities(&self) -> ClientFacilities {
        ClientFacilities::default()
    }
    /// The text of `file` as the client has it.
    async fn read_text_file(
        &self,
        _file: ClientFile,
        _cancel: &CancellationToken,
    ) -> BridgeOutcome<String> {
        BridgeOutcome::Unavailable("the client cannot read files".to_string())
    }
    /// Replaces the whole text of `file` in the client (creating it).
    async fn write_text_file(
        &self,
        _file: ClientFile,
        _text: String,
        _cancel: &CancellationToken,
    ) -> BridgeOutcome<()> {
        BridgeOutcome::Unavailable("the client cannot write files".to_string())
    }
    /// Runs a command in the client's terminal until it exits, times out or
    /// `cancel` fires (then it is killed); the terminal is released after.
    async fn run_in_terminal(
        &self,
        _command: TerminalCommand,
        _cancel: &CancellationToken,
    ) -> BridgeOutcome<TerminalRun> {
        BridgeOutcome::Unavailable("the client has no terminal".to_string())
    }
    async fn request_permission(
        &self,
        request: PermissionRequest,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<PermissionAnswer>;
    async fn request_user_input(
        &self,
        request: UserInputRequest,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<Value>;
    async fn apply_edit(
        &self,
        request: ApplyEditRequest,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<ApplyEditResponse>;
    /// The editor's current diagnostics of `paths` (absolute, inside the
    /// workspace), or of every file it has diagnostics for.
    async fn diagnostics(
        &self,
        _paths: Option<Vec<std::path::PathBuf>>,
        _cancel: &CancellationToken,
    ) -> BridgeOutcome<LanguageAnswer<FileDiagnostics>> {
        BridgeOutcome::Unavailable(NO_LANGUAGE_FEATURES.to_string())
    }
    /// Where the symbol at `at` is defined, from the editor's providers.
    async fn definition(
        &self,
        _at: TextPoint,
        _cancel: &CancellationToken,
    ) -> BridgeOutcome<LanguageAnswer<Location>> {
        BridgeOutcome::Unavailable(NO_LANGUAGE_FEATURES.to_string())
    }
    /// Where the symbol at `at` is used, from the editor's providers.
    async fn references(
        &self,
        _at: TextPoint,
        _include_declaration: bool,
        _cancel: &CancellationToken,
    ) -> BridgeOutcome<LanguageAnswer<Location>> {
        BridgeOutcome::Unavailable(NO_LANGUAGE_FEATURES.to_string())
    }
    /// The workspace's symbols matching `query`, from the editor's providers.
    async fn workspace_symbols(
        &self,
        _query: String,
        _cancel: &CancellationToken,
    ) -> BridgeOutcome<LanguageAnswer<Symbol>> {
        BridgeOutcome::Unavailable(NO_LANGUAGE_FEATURES.to_string())
    }
}

/// Why a bridge without the editor's language features cannot answer.
pub const NO_LANGUAGE_FEATURES: &str = "the editor does not offer its language features";

/// A client that can answer nothing (headless runs, tests of the core).
pub struct NoClient;

#[async_trait::async_trait]
impl ClientBridge for NoClient {
    fn abilities(&self) -> ClientAbilities {
        ClientAbilities::default()
    }
    async fn request_permission(
        &self,
        _: PermissionRequest,
        _: &CancellationToken,
    ) -> BridgeOutcome<PermissionAnswer> {
        BridgeOutcome::Unavailable("no editor is connected to ask".to_string())
    }
    async fn request_user_input(
        &self,
        _: UserInputRequest,
        _: &CancellationToken,
    ) -> BridgeOutcome<Value> {
        BridgeOutcome::Unavailable("no editor is connected to ask".to_string())
    }
    async fn apply_edit(
        &self,
        _: ApplyEditRequest,
        _: &CancellationToken,
    ) -> BridgeOutcome<ApplyEditResponse> {
        BridgeOutcome::Unavailable("no editor is connected".to_string())
    }
}
