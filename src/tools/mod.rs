//! Tools the model can call. Each tool is a self-contained unit: a name, a
//! JSON schema, an execution mode, an approval class and a handler.
//!
//! Invariant: a tool never fails the daemon. Bad arguments, refused paths and
//! I/O errors are a [`ToolError`] whose message the model reads and can act
//! on. Tools reach files only through [`ToolContext`] (workspace confinement,
//! the buffer cache), never through raw paths from the model.

pub mod apply_patch;
pub mod edits;
pub mod exec;
pub mod exec_command;
pub mod grep;
pub mod language;
pub mod list_files;
mod ordered_search;
pub mod patch;
pub mod read_file;
pub mod request_user_input;
pub mod update_plan;

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::buffers::BufferCache;
use crate::provider::ToolSpec;
use crate::vocab::approval::ApprovalMode;
use crate::vocab::bridge::{ClientAbilities, ClientBridge, NoClient};
pub use crate::vocab::event::McpTarget;
use crate::vocab::plan::PlanStep;
use crate::vocab::tool_call::{ToolKind, WaitingFor};
use crate::workspace::Workspace;

/// Whether calls of a tool may run alongside others from the same response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecMode {
    Parallel,
    /// A barrier: everything before it finishes first, nothing after it
    /// starts until it ends.
    Exclusive,
}

/// What a tool does to the world, for the approval modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalClass {
    None,
    Read,
    Edit,
    Execute,
}

/// What a tool call can reach.
#[derive(Clone)]
pub struct ToolContext {
    pub workspace: Arc<Workspace>,
    pub buffers: Arc<BufferCache>,
    /// Cancelled when the turn is cancelled; long-running tools must watch it.
    pub cancel: CancellationToken,
    pub session_id: String,
    /// The id of the call being run.
    pub call_id: String,
    /// The session's approval mode when the call started.
    pub mode: ApprovalMode,
    /// How to ask the editor (permission, questions, edits).
    pub bridge: Arc<dyn ClientBridge>,
    /// Where the tool reports progress; each becomes a session event.
    pub emit: Arc<dyn Fn(ToolEvent) + Send + Sync>,
    /// Secret-looking environment variables commands may still see
    /// (`[tools] exec_env_allow`).
    pub env_allow: Vec<String>,
    /// `[sandbox]`: how commands are confined.
    pub sandbox: crate::config::sandbox::SandboxConfig,
    /// The approval of this call lets it run unconfined: the user allowed
    /// the model's request to leave the sandbox, or allowed it where no
    /// sandbox exists.
    pub unsandboxed: bool,
    /// The model reads images (`[model] vision`), each up to
    /// `max_image_bytes`: a tool may then emit [`ToolEvent::Image`].
    pub vision: bool,
    pub max_image_bytes: u64,
    /// `[tools] diagnostics_settle_ms` when `apply_patch` checks the
    /// editor's diagnostics after an edit; `None`: no check.
    pub diagnostics_settle: Option<std::time::Duration>,
}

impl ToolContext {
    /// A context with no editor, no progress reporting and `auto` mode.
    pub fn new(
        workspace: Arc<Workspace>,
        buffers: Arc<BufferCache>,
        cancel: CancellationToken,
    ) -> Self {
        ToolContext {
            workspace,
            buffers,
            cancel,
            session_id: String::new(),
            call_id: String::new(),
            mode: ApprovalMode::Auto,
            bridge: Arc::new(NoClient),
            emit: Arc::new(|_| {}),
            env_allow: Vec::new(),
            sandbox: Default::default(),
            unsandboxed: false,
            vision: false,
            max_image_bytes: 0,
            diagnostics_settle: None,
        }
    }
}

/// What a running tool reports besides its result.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolEvent {
    /// A piece of output as it is produced (`exec_command`).
    Output(String),
    /// The files a call proposes or makes changes to, for editors to
    /// render (all of them at once: ACP clients replace a call's content).
    Diffs(Vec<crate::vocab::event::FileDiff>),
    /// An image the call returned (base64), for a model with vision
    /// (`ToolContext::vision`); logged as the call's `tool_image`.
    Image { mime_type: String, data: String },
    /// The places the call reads or changes (`ToolLocation`s).
    Locations(Vec<crate::vocab::event::ToolLocation>),
    /// A new plan (`update_plan`).
    Plan {
        explanation: Option<String>,
        steps: Vec<PlanStep>,
    },
    /// The call waits for the user: `permission` or `input`.
    Waiting(WaitingFor),
    /// The user decided on a request the tool made itself (a second
    /// request to run a command the sandbox refused outside it); logged
    /// as the call's `approval_decided`.
    Decided {
        decision: &'static str,
        unsandboxed: bool,
    },
}

/// A tool's failure, phrased for the model, and what kind it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String, pub ToolErrorKind);

/// How a call that produced no result went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolErrorKind {
    /// The tool tried and failed (bad arguments, I/O, no match).
    #[default]
    Failed,
    /// The user (or the mode) refused what the call would have done;
    /// nothing changed. Logged as a `rejected` result.
    Rejected,
}

impl ToolError {
    pub fn new(message: impl Into<String>) -> Self {
        ToolError(message.into(), ToolErrorKind::Failed)
    }

    pub fn rejected(message: impl Into<String>) -> Self {
        ToolError(message.into(), ToolErrorKind::Rejected)
    }
}

/// Parses a tool's arguments, turning serde's message (which names the
/// field) into an error the model can correct.
pub fn parse_args<T: serde::de::DeserializeOwned>(
    tool: &str,
    args: &Value,
) -> Result<T, ToolError> {
    serde_json::from_value(args.clone())
        .map_err(|e| ToolError::new(format!("invalid arguments for {tool}: {e}")))
}

#[async_trait::async_trait]
pub trait Tool: Send + Sync {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// JSON schema of the arguments object.
    fn parameters(&self) -> Value;
    fn mode(&self) -> ExecMode;
    fn approval(&self) -> ApprovalClass;
    /// ACP tool kind shown by editors: read, search, edit, execute, think, other.
    fn kind(&self) -> ToolKind;
    /// A short human title for the call, e.g. "Read src/main.rs".
    fn title(&self, args: &Value) -> String;
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<String, ToolError>;
    /// How long one call may run before it is stopped and reported as
    /// aborted. `None`: no limit (tools that wait for the user, or that
    /// enforce their own, like `exec_command`'s `timeout_ms`).
    fn timeout(&self) -> Option<std::time::Duration> {
        None
    }
    /// The MCP server and tool behind this tool; `None` for tandem's own.
    fn mcp(&self) -> Option<McpTarget> {
        None
    }
    /// The tool is annotated as changing nothing (MCP's `readOnlyHint`):
    /// read-only mode offers it whatever its approval class.
    fn read_only_hint(&self) -> bool {
        self.approval() == ApprovalClass::Read
    }
    /// Whether a client with `abilities` can serve this tool (the editor's
    /// language features are offered only where the editor answers them).
    fn offered_to(&self, _abilities: ClientAbilities) -> bool {
        true
    }
}

/// Tools that come and go while a session runs (an MCP server's): asked
/// for the current list at every step.
#[async_trait::async_trait]
pub trait ToolSource: Send + Sync {
    fn tools(&self) -> Vec<Arc<dyn Tool>>;
    /// Waits until the source has its first list (or gave up on it).
    async fn wait_ready(&self) {}
}

/// The time limit of the read tools (walks and searches of big trees).
pub const READ_TOOL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// The set of tools offered in a session.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    /// Asked after the fixed tools; a name already taken is skipped.
    sources: Vec<Arc<dyn ToolSource>>,
}

impl ToolRegistry {
    /// The read-only tools of the foundation: read_file, list_files, grep.
    pub fn with_read_tools() -> Self {
        let mut registry = ToolRegistry::default();
        registry.register(Arc::new(read_file::ReadFile));
        registry.register(Arc::new(list_files::ListFiles));
        registry.register(Arc::new(grep::Grep));
        registry
    }

    /// Every tool of a session; which of them the model sees depends on the
    /// mode and the client (see [`ToolRegistry::offered`]).
    pub fn for_session() -> Self {
        let mut registry = ToolRegistry::with_read_tools();
        registry.register(Arc::new(apply_patch::ApplyPatch));
        registry.register(Arc::new(exec_command::ExecCommand));
        registry.register(Arc::new(update_plan::UpdatePlan));
        registry.register(Arc::new(request_user_input::RequestUserInput));
        language::register(&mut registry);
        registry
    }

    /// Whether the model is offered a tool: read-only mode offers no edit
    /// or execute tools, and `request_user_input` needs a client that can
    /// answer.
    pub fn is_offered(tool: &dyn Tool, mode: ApprovalMode, abilities: ClientAbilities) -> bool {
        if mode == ApprovalMode::ReadOnly
            && matches!(
                tool.approval(),
                ApprovalClass::Edit | ApprovalClass::Execute
            )
            && !(tool.mcp().is_some() && tool.read_only_hint())
        {
            return false;
        }
        if tool.name() == "request_user_input" && !abilities.request_user_input {
            return false;
        }
        tool.offered_to(abilities)
    }

    /// The specs of the tools offered in this mode to this client.
    pub fn offered(&self, mode: ApprovalMode, abilities: ClientAbilities) -> Vec<ToolSpec> {
        self.all()
            .iter()
            .filter(|t| Self::is_offered(t.as_ref(), mode, abilities))
            .map(|t| ToolSpec {
                name: t.name().to_string(),
                description: t.description().to_string(),
                parameters: t.parameters(),
            })
            .collect()
    }

    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.retain(|t| t.name() != tool.name());
        self.tools.push(tool);
    }

    /// Adds tools that change while the session runs.
    pub fn add_source(&mut self, source: Arc<dyn ToolSource>) {
        self.sources.push(source);
    }

    /// Waits until every source has its first list of tools.
    pub async fn wait_ready(&self) {
        futures::future::join_all(self.sources.iter().map(|s| s.wait_ready())).await;
    }

    /// The fixed tools, then the sources' tools whose names are free.
    fn all(&self) -> Vec<Arc<dyn Tool>> {
        let mut all = self.tools.clone();
        for source in &self.sources {
            for tool in source.tools() {
                if !all.iter().any(|t| t.name() == tool.name()) {
                    all.push(tool);
                }
            }
        }
        all
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        if let Some(tool) = self.tools.iter().find(|t| t.name() == name) {
            return Some(tool.clone());
        }
        self.sources
            .iter()
            .flat_map(|s| s.tools())
            .find(|t| t.name() == name)
    }
}

/// Shared by the tools' unit tests.
#[cfg(test)]
pub(crate) mod test_support {
    use std::sync::Arc;

    use tokio_util::sync::CancellationToken;

    use super::ToolContext;
    use crate::buffers::BufferCache;
    use crate::workspace::Workspace;

    /// A temp dir that is not a git repository, with the given files, and a
    /// context whose only root it is.
    pub fn workspace_with(files: &[(&str, &str)]) -> (tempfile::TempDir, ToolContext) {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let ctx = ToolContext::new(
            Arc::new(Workspace::new(vec![dir.path().to_path_buf()])),
            Arc::new(BufferCache::new()),
            CancellationToken::new(),
        );
        (dir, ctx)
    }

    /// `workspace_with`'s context with a second root (a temp dir of its own
    /// holding `second`) after the first.
    pub fn two_roots_with(
        first: &[(&str, &str)],
        second: &[(&str, &str)],
    ) -> (tempfile::TempDir, tempfile::TempDir, ToolContext) {
        let (a, _) = workspace_with(first);
        let (b, _) = workspace_with(second);
        let ctx = ToolContext::new(
            Arc::new(Workspace::new(vec![
                a.path().to_path_buf(),
                b.path().to_path_buf(),
            ])),
            Arc::new(BufferCache::new()),
            CancellationToken::new(),
        );
        (a, b, ctx)
    }
}
