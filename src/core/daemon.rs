//! The daemon: the one object frontends talk to. It owns the sessions, the
//! buffer cache and the workspace, and builds each session's configuration
//! from the layers.
//!
//! Invariant: a frontend can only reach the core through these methods;
//! every error they return is specific (unknown session, bad config,
//! storage) so the frontend can map it to its wire's error codes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::driver::{run_session, AdmissionHook, MaxInputChars, SessionEnv};
use super::history::{list_session_logs, recover_interrupted, SessionSummary};
use super::instructions::InstructionSources;
use super::log::{
    now_rfc3339, read_log, Durability, EventSink, LogHeader, LoggedEvent, NullSink, SessionLog,
    LOG_VERSION,
};
use super::projection::Projection;
use super::session::{RunState, Session, TurnReceipt};
use super::spend::SpendBook;
use super::tasks::{config_roots, TaskOrigin, TaskState};
use crate::buffers::BufferCache;
use crate::config::instructions::user_instructions_dir;
use crate::config::mcp_servers::McpServerConfig;
use crate::config::tasks::TaskCatalog;
use crate::config::{Config, ConfigBuilder, ConfigError};
use crate::mcp::{McpHub, McpServer, SessionMcp};
use crate::tools::{Tool, ToolRegistry};
use crate::vocab::bridge::ClientBridge;
use crate::vocab::event::UserContent;
use crate::workspace::Workspace;

#[path = "daemon_lifecycle.rs"]
mod lifecycle;

/// A failed daemon call.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("unknown session `{0}`")]
    UnknownSession(String),
    /// The session is busy: a turn runs or prompts wait (deleting it).
    #[error("{0}")]
    Busy(String),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("session storage: {0}")]
    Storage(String),
    /// The prompt's content is refused (an image too big, or for a model
    /// without vision); nothing was queued.
    #[error("{0}")]
    Prompt(String),
}

/// How to start a daemon.
pub struct DaemonOptions {
    /// `$TANDEM_HOME`: `config.toml`, `sessions/`.
    pub home: PathBuf,
    pub durability: Durability,
    /// Told about every event of every session.
    pub sink: Arc<dyn EventSink>,
    /// How sessions ask the editor for permission, answers and edits.
    pub bridge: Arc<dyn ClientBridge>,
}

/// What a new session is made with.
#[derive(Debug, Clone, Default)]
pub struct NewSession {
    pub workspace_folder: Option<PathBuf>,
    pub title: Option<String>,
    pub config: Option<Value>,
}

pub struct Daemon {
    home: PathBuf,
    durability: Durability,
    sink: Arc<dyn EventSink>,
    bridge: Arc<dyn ClientBridge>,
    buffers: Arc<BufferCache>,
    workspace: Arc<Workspace>,
    /// `initializationOptions`, already checked.
    init_options: Mutex<Value>,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// Each session's task, by session id.
    tasks: Mutex<Vec<(String, JoinHandle<()>)>>,
    shutdown: CancellationToken,
    admission: Mutex<Vec<Arc<dyn AdmissionHook>>>,
    extra_tools: Mutex<Vec<Arc<dyn Tool>>>,
    loading: Mutex<()>,
    tasks_state: TaskState,
    bridge_for: Mutex<Option<BridgeFactory>>,
    /// Today's spending per workspace, read from the logs once a day.
    spend: Arc<SpendBook>,
    /// The MCP servers of every session.
    mcp: McpHub,
    /// Each session's MCP servers (held by its task while it runs).
    session_mcp: Mutex<HashMap<String, Weak<SessionMcp>>>,
    /// MCP servers given for a session on disk before it is loaded (the
    /// serve's shim sends them ahead of its attach).
    pending_mcp: Mutex<HashMap<String, std::collections::BTreeMap<String, McpServerConfig>>>,
    /// Where the user's own instruction files are.
    user_instructions: Option<PathBuf>,
}

/// Makes the bridge of one session, by id: a frontend serving several
/// clients routes each session's requests to the clients following it.
pub type BridgeFactory = Arc<dyn Fn(&str) -> Arc<dyn ClientBridge> + Send + Sync>;

impl Daemon {
    pub fn new(options: DaemonOptions) -> Arc<Daemon> {
        // Probed, and logged, once at startup rather than at the first command.
        crate::tools::exec::sandbox::probe::support();
        let spend = Arc::new(SpendBook::new(options.home.join("sessions")));
        let user_instructions =
            user_instructions_dir(&options.home, |name| std::env::var(name).ok());
        Arc::new(Daemon {
            home: options.home,
            durability: options.durability,
            sink: options.sink,
            bridge: options.bridge,
            buffers: Arc::new(BufferCache::new()),
            workspace: Arc::new(Workspace::default()),
            init_options: Mutex::new(Value::Null),
            sessions: Mutex::new(HashMap::new()),
            tasks: Mutex::new(Vec::new()),
            shutdown: CancellationToken::new(),
            admission: Mutex::new(Vec::new()),
            extra_tools: Mutex::new(Vec::new()),
            loading: Mutex::new(()),
            tasks_state: TaskState::default(),
            bridge_for: Mutex::new(None),
            spend,
            mcp: McpHub::default(),
            session_mcp: Mutex::new(HashMap::new()),
            pending_mcp: Mutex::new(HashMap::new()),
            user_instructions,
        })
    }

    /// Registers an admission hook for sessions created from now on.
    pub fn add_admission_hook(&self, hook: Arc<dyn AdmissionHook>) {
        self.admission
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(hook);
    }

    /// Adds a tool to sessions created from now on (embedders, benchmarks
    /// and in-process tests; replaces a built-in tool of the same name).
    pub fn register_tool(&self, tool: Arc<dyn Tool>) {
        self.extra_tools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(tool);
    }

    /// Gives sessions started from now on a bridge of their own instead of
    /// the daemon's one.
    pub fn set_bridge_factory(&self, factory: BridgeFactory) {
        *self.bridge_for.lock().unwrap_or_else(|e| e.into_inner()) = Some(factory);
    }

    pub fn buffers(&self) -> &Arc<BufferCache> {
        &self.buffers
    }

    pub fn workspace(&self) -> &Arc<Workspace> {
        &self.workspace
    }

    pub fn home(&self) -> &PathBuf {
        &self.home
    }

    /// How sessions reach the editor.
    pub fn bridge(&self) -> &Arc<dyn ClientBridge> {
        &self.bridge
    }

    pub(crate) fn tasks_state(&self) -> &TaskState {
        &self.tasks_state
    }

    /// The task catalog for a file: the configuration of the workspace
    /// root holding it (else of the editor's folders). Cached; cheap when
    /// nothing changed, so code actions can ask on every cursor move.
    pub fn task_catalog(&self, path: &Path) -> Result<Arc<TaskCatalog>, DaemonError> {
        let origin = self.task_origin();
        self.task_catalog_for(path, &origin)
    }

    /// The task catalog for a file, with `origin`'s folders and
    /// `initializationOptions`.
    pub fn task_catalog_for(
        &self,
        path: &Path,
        origin: &TaskOrigin,
    ) -> Result<Arc<TaskCatalog>, DaemonError> {
        let roots = config_roots(path, &origin.roots);
        Ok(self
            .tasks_state
            .catalog(&self.home, &roots, &origin.init_options)?)
    }

    /// Tasks asked for through the daemon's own editor: its buffer cache,
    /// workspace, `initializationOptions` and bridge.
    pub fn task_origin(&self) -> TaskOrigin {
        let bridge = self.bridge.clone();
        TaskOrigin {
            buffers: self.buffers.clone(),
            roots: self.workspace.roots(),
            init_options: self
                .init_options
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            session_config: None,
            bridge: Arc::new(move |_| bridge.clone()),
        }
    }

    /// Sets the editor's `initializationOptions` after checking that they
    /// form a valid configuration layer.
    pub fn set_init_options(&self, options: Value) -> Result<(), ConfigError> {
        // Only the layer itself: a broken config file is reported when a
        // session is made, naming the file, not as a bad initialize.
        ConfigBuilder::check("initializationOptions", &options)?;
        *self.init_options.lock().unwrap_or_else(|e| e.into_inner()) = options;
        Ok(())
    }

    /// Creates a session and starts its task.
    pub fn new_session(&self, params: NewSession) -> Result<Arc<Session>, DaemonError> {
        self.new_session_of_kind(params, None)
    }

    /// [`Daemon::new_session`] with the header's `kind` (`task` for the
    /// session keybinding tasks run in).
    pub fn new_session_of_kind(
        &self,
        params: NewSession,
        kind: Option<&str>,
    ) -> Result<Arc<Session>, DaemonError> {
        let (workspace, roots) = self.workspace_for(params.workspace_folder.clone());
        let config = self.session_config(&roots, params.config.as_ref())?;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let title = params.title.filter(|t| !t.trim().is_empty());
        let header = LogHeader {
            tandem_log: LOG_VERSION,
            session_id: id.clone(),
            created: now_rfc3339(),
            title: title.clone(),
            workspace: roots.clone(),
            workspace_folder: params.workspace_folder,
            config: params.config,
            kind: kind.map(str::to_string),
        };
        let log = SessionLog::create(
            &self.sessions_dir(),
            &header,
            self.durability,
            self.sink.clone(),
        )
        .map_err(|e| DaemonError::Storage(format!("cannot create the session: {e}")))?;
        let session = Arc::new(Session::new(
            id,
            config,
            Arc::new(log),
            self.shutdown.child_token(),
        ));
        session.set_header_title(title);
        let mut projection = Projection::new(system_prompt(&roots));
        // The instructions in force from the start: the newSession answer
        // names them, and the first turn logs again only what changed.
        let sources = self.instruction_sources(&session.config);
        if let Some(event) = session.refresh_instructions(&sources, &roots, None, None) {
            projection.apply(&session.log.append(event).event);
        }
        self.start(session.clone(), workspace, projection);
        Ok(session)
    }

    /// Loads a session from its log, closes a turn a crash left open, and
    /// replays the whole history to the sink (as the live turns produced
    /// it) before returning the session and the events it replayed. A
    /// session this daemon already runs is only replayed.
    pub fn load_session(&self, id: &str) -> Result<(Arc<Session>, Vec<LoggedEvent>), DaemonError> {
        // One load at a time: two concurrent loads of one session must not
        // both try to open (and lock) its log.
        let _loading = self.loading.lock().unwrap_or_else(|e| e.into_inner());
        if let Ok(session) = self.session(id) {
            let (_, mut events) =
                read_log(session.log.path()).map_err(|e| DaemonError::Storage(e.to_string()))?;
            crate::core::images::load_images(
                &crate::core::images::images_dir(session.log.path()),
                &mut events,
            );
            for event in &events {
                self.sink.on_replay(id, event);
            }
            return Ok((session, events));
        }
        if !valid_session_id(id) {
            return Err(DaemonError::UnknownSession(id.to_string()));
        }
        let path = self.sessions_dir().join(format!("{id}.jsonl"));
        if !path.exists() {
            return Err(DaemonError::UnknownSession(id.to_string()));
        }
        // Replay goes to the sink after recovery, in one pass, so the log is
        // opened with a sink that stays quiet until then.
        let (log, header, mut events) =
            SessionLog::open(&path, self.durability, Arc::new(NullSink))
                .map_err(|e| DaemonError::Storage(e.to_string()))?;
        events.extend(recover_interrupted(&log, &events));
        crate::core::images::load_images(&crate::core::images::images_dir(&path), &mut events);
        let log = log.with_sink(self.sink.clone());
        // The session's own folder; else the editor's folders now; else the
        // folders it was created in (a headless load, an editor without
        // folders).
        let (workspace, roots) = match self.workspace_for(header.workspace_folder.clone()) {
            (_, roots) if roots.is_empty() => {
                let ws = Arc::new(Workspace::new(header.workspace.clone()));
                let roots = ws.roots();
                (ws, roots)
            }
            found => found,
        };
        let config = self.session_config(&roots, header.config.as_ref())?;
        let session = Arc::new(Session::new(
            header.session_id.clone(),
            config,
            Arc::new(log),
            self.shutdown.child_token(),
        ));
        session.restore(&events);
        session.set_header_title(header.title.clone());
        let projection =
            Projection::from_events(system_prompt(&roots), events.iter().map(|e| &e.event));
        for event in &events {
            self.sink.on_replay(id, event);
        }
        self.start(session.clone(), workspace, projection);
        Ok((session, events))
    }

    /// Summaries of every session on disk, newest first.
    pub fn list_sessions(&self) -> Vec<SessionSummary> {
        let running: HashMap<String, bool> = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(id, s)| {
                (
                    id.clone(),
                    matches!(s.run_state(), RunState::Running { .. }),
                )
            })
            .collect();
        list_session_logs(&self.sessions_dir(), &running)
    }

    /// Whether a turn runs in any session of this daemon.
    pub fn any_turn_running(&self) -> bool {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .any(|s| matches!(s.run_state(), RunState::Running { .. }))
    }

    fn sessions_dir(&self) -> PathBuf {
        self.home.join("sessions")
    }

    fn workspace_for(&self, folder: Option<PathBuf>) -> (Arc<Workspace>, Vec<PathBuf>) {
        match folder {
            Some(folder) => {
                let ws = Arc::new(Workspace::new(vec![folder]));
                let roots = ws.roots();
                (ws, roots)
            }
            None => (self.workspace.clone(), self.workspace.roots()),
        }
    }

    /// A session's configuration: the files and environment for its roots,
    /// then `initializationOptions`, then its own overrides.
    fn session_config(
        &self,
        roots: &[PathBuf],
        overrides: Option<&Value>,
    ) -> Result<Config, DaemonError> {
        let init = self
            .init_options
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        Ok(ConfigBuilder::standard(&self.home, roots)?
            .json("initializationOptions", &init)?
            .json("session config", overrides.unwrap_or(&Value::Null))?
            .build()?)
    }

    /// Where a session with `config` looks for instruction files.
    fn instruction_sources(&self, config: &Config) -> InstructionSources {
        InstructionSources {
            user_dir: self.user_instructions.clone(),
            names: config.instructions.files.clone(),
        }
    }

    /// Builds a session's environment and spawns its task.
    fn start(&self, session: Arc<Session>, workspace: Arc<Workspace>, projection: Projection) {
        let mut admission: Vec<Arc<dyn AdmissionHook>> = Vec::new();
        if session.config.limits.max_input_chars > 0 {
            admission.push(Arc::new(MaxInputChars(
                session.config.limits.max_input_chars,
            )));
        }
        admission.extend(
            self.admission
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .cloned(),
        );
        let mut tools = ToolRegistry::for_session();
        for tool in self
            .extra_tools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            tools.register(tool.clone());
        }
        // The session's MCP servers start now, concurrently; its first
        // turn waits for them up to their startup timeouts.
        let mcp = Arc::new(SessionMcp::new(
            self.mcp.servers_for(&session.config.mcp_servers),
        ));
        let pending = self
            .pending_mcp
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&session.id);
        if let Some(pending) = pending {
            mcp.add(self.mcp.servers_for(&pending));
        }
        tools.add_source(mcp.clone());
        self.session_mcp
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(session.id.clone(), Arc::downgrade(&mcp));
        let env = SessionEnv {
            providers: Default::default(),
            tools,
            workspace,
            buffers: self.buffers.clone(),
            admission,
            bridge: match &*self.bridge_for.lock().unwrap_or_else(|e| e.into_inner()) {
                Some(factory) => factory(&session.id),
                None => self.bridge.clone(),
            },
            spend: self.spend.clone(),
            instructions: self.instruction_sources(&session.config),
        };
        let task = tokio::spawn(run_session(session.clone(), env, projection));
        self.tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((session.id.clone(), task));
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(session.id.clone(), session);
    }

    /// Adds MCP servers to a running session (ACP's `mcpServers`, given
    /// with each `session/new`, `load` and `resume` and never logged: their
    /// `env` may hold the client's secrets). A server of the same name
    /// replaces the configuration's.
    pub fn add_mcp_servers(
        &self,
        session_id: &str,
        servers: &std::collections::BTreeMap<String, McpServerConfig>,
    ) -> Result<(), DaemonError> {
        if servers.is_empty() {
            return Ok(());
        }
        let running = self
            .session_mcp
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(session_id)
            .and_then(Weak::upgrade);
        if let Some(mcp) = running {
            mcp.add(self.mcp.servers_for(servers));
            return Ok(());
        }
        // A session on disk, not loaded yet: its servers start with it.
        let on_disk = valid_session_id(session_id)
            && self
                .sessions_dir()
                .join(format!("{session_id}.jsonl"))
                .exists();
        if !on_disk {
            return Err(DaemonError::UnknownSession(session_id.to_string()));
        }
        self.pending_mcp
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(session_id.to_string(), servers.clone());
        Ok(())
    }

    /// The MCP servers of a session, or every server the daemon runs.
    pub fn mcp_servers(
        &self,
        session_id: Option<&str>,
    ) -> Result<Vec<Arc<McpServer>>, DaemonError> {
        match session_id {
            None => Ok(self.mcp.running()),
            Some(id) => {
                self.session(id)?;
                Ok(self
                    .session_mcp
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(id)
                    .and_then(Weak::upgrade)
                    .map(|mcp| mcp.servers())
                    .unwrap_or_default())
            }
        }
    }

    pub fn session(&self, id: &str) -> Result<Arc<Session>, DaemonError> {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
            .ok_or_else(|| DaemonError::UnknownSession(id.to_string()))
    }

    /// Queues a prompt; returns its message id and where the receipt of
    /// its turn will arrive.
    pub fn prompt(
        &self,
        session_id: &str,
        content: Vec<UserContent>,
    ) -> Result<(String, oneshot::Receiver<TurnReceipt>), DaemonError> {
        self.prompt_reading(session_id, content, None)
    }

    /// Queues a prompt whose turn reads `buffers` (a serve connection's
    /// documents) instead of the daemon's cache; attached files are read
    /// from them too.
    pub fn prompt_reading(
        &self,
        session_id: &str,
        content: Vec<UserContent>,
        buffers: Option<Arc<BufferCache>>,
    ) -> Result<(String, oneshot::Receiver<TurnReceipt>), DaemonError> {
        let session = self.session(session_id)?;
        let content = admit_session_images(&session, content)?;
        let content = self.embed_resources(content, buffers.as_ref().unwrap_or(&self.buffers));
        Ok(session.enqueue_prompt_reading(content, buffers))
    }

    /// Queues next-step input; returns its message id.
    pub fn steer(
        &self,
        session_id: &str,
        content: Vec<UserContent>,
        wake: bool,
    ) -> Result<String, DaemonError> {
        self.steer_reading(session_id, content, wake, None)
    }

    /// Queues next-step input; a turn it opens reads `buffers`.
    pub fn steer_reading(
        &self,
        session_id: &str,
        content: Vec<UserContent>,
        wake: bool,
        buffers: Option<Arc<BufferCache>>,
    ) -> Result<String, DaemonError> {
        let session = self.session(session_id)?;
        let content = admit_session_images(&session, content)?;
        let content = self.embed_resources(content, buffers.as_ref().unwrap_or(&self.buffers));
        Ok(session.enqueue_steer_reading(content, wake, buffers))
    }

    /// Cancels a session's running turn (and its inbox unless `keep_inbox`).
    pub fn cancel(&self, session_id: &str, keep_inbox: bool) -> Result<(), DaemonError> {
        self.session(session_id)?.cancel(keep_inbox);
        Ok(())
    }

    /// Fills in the text of attached files from what the user sees.
    fn embed_resources(
        &self,
        content: Vec<UserContent>,
        buffers: &BufferCache,
    ) -> Vec<UserContent> {
        content
            .into_iter()
            .map(|block| match block {
                UserContent::Resource { uri, text: None } => {
                    let text = crate::workspace::file_uri_to_path(&uri)
                        .and_then(|p| buffers.read_text(&p).ok());
                    UserContent::Resource { uri, text }
                }
                other => other,
            })
            .collect()
    }

    /// Stops every session, answers their queued prompts, and flushes the
    /// logs. Safe to call more than once.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        // The MCP servers first, while the sessions still hold them: each
        // gets TERM and its grace before KILL (a server dropped with the
        // last session is stopped on a task the exiting runtime may cut).
        self.mcp.shutdown().await;
        let tasks: Vec<JoinHandle<()>> = self
            .tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
            .map(|(_, task)| task)
            .collect();
        for task in tasks {
            let _ = task.await;
        }
        for session in self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
        {
            session.log.sync();
        }
    }
}

/// Checks a prompt's images against the session's model and stores them
/// beside its log ([`crate::core::images`]).
fn admit_session_images(
    session: &Session,
    content: Vec<UserContent>,
) -> Result<Vec<UserContent>, DaemonError> {
    // The model in force (a session may have switched from `[model]`).
    let model = session.model().config;
    let policy = crate::core::images::ImagePolicy {
        model: model.name,
        vision: model.vision,
        max_bytes: session.config.limits.max_image_bytes,
    };
    let dir = crate::core::images::images_dir(session.log.path());
    crate::core::images::admit_images(content, &dir, &policy).map_err(DaemonError::Prompt)
}

/// Session ids are what `new_session` makes: hex digits (a path-safe name).
fn valid_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn system_prompt(roots: &[PathBuf]) -> String {
    let roots = if roots.is_empty() {
        "(no workspace folder is open)".to_string()
    } else {
        roots
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "You are tandem, a coding agent working inside the user's code editor.\n\
         Workspace: {roots}. Paths are relative to the first workspace folder.\n\
         Files you read show what the user sees in the editor, unsaved edits included.\n\
         Use the tools to look at the code before answering; be concise and precise."
    )
}
