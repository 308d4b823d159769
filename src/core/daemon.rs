//! The daemon: the one object frontends talk to. It owns the sessions and
//! knows the clients (editor connections) that use them, and builds each
//! session's configuration from the layers. Everything of one editor
//! window (its documents, folders, options and bridge) is its
//! [`Client`]'s, which every input names.
//!
//! Invariant: a frontend can only reach the core through these methods;
//! every error they return is specific (unknown session, bad config,
//! storage) so the frontend can map it to its wire's error codes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::client::{Client, ClientLink};
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
use crate::vocab::event::UserContent;
use crate::workspace::Workspace;

#[path = "daemon_lifecycle.rs"]
mod lifecycle;
#[path = "daemon_rewind.rs"]
mod rewind;
pub use self::rewind::{RewindOutcome, RewindRequest};

#[path = "daemon_fork.rs"]
mod fork;
#[path = "daemon_roots.rs"]
mod roots;

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
    /// A parameter names something the session does not have (the
    /// message a fork starts at); the text names the parameter.
    #[error("{0}")]
    InvalidParams(String),
}

/// How to start a daemon.
pub struct DaemonOptions {
    /// `$TANDEM_HOME`: `config.toml`, `sessions/`.
    pub home: PathBuf,
    pub durability: Durability,
    /// Told about every event of every session.
    pub sink: Arc<dyn EventSink>,
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
    /// The editor connections, by id.
    clients: Mutex<HashMap<u64, Weak<Client>>>,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// Each session's task, by session id.
    tasks: Mutex<Vec<(String, JoinHandle<()>)>>,
    shutdown: CancellationToken,
    admission: Mutex<Vec<Arc<dyn AdmissionHook>>>,
    extra_tools: Mutex<Vec<Arc<dyn Tool>>>,
    loading: Mutex<()>,
    tasks_state: TaskState,
    /// Today's spending per workspace, read from the logs once a day.
    spend: Arc<SpendBook>,
    /// The MCP servers of every session.
    mcp: McpHub,
    /// Each session's MCP servers (held by its task while it runs).
    session_mcp: Mutex<HashMap<String, Weak<SessionMcp>>>,
    /// Each running session's workspace (held by its task), so a load,
    /// resume or fork can give it more roots.
    workspaces: Mutex<HashMap<String, Weak<Workspace>>>,
    /// MCP servers given for a session on disk before it is loaded (the
    /// serve's shim sends them ahead of its attach).
    pending_mcp: Mutex<HashMap<String, std::collections::BTreeMap<String, McpServerConfig>>>,
    /// Where the user's own instruction files are.
    user_instructions: Option<PathBuf>,
}

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
            clients: Mutex::new(HashMap::new()),
            sessions: Mutex::new(HashMap::new()),
            tasks: Mutex::new(Vec::new()),
            shutdown: CancellationToken::new(),
            admission: Mutex::new(Vec::new()),
            extra_tools: Mutex::new(Vec::new()),
            loading: Mutex::new(()),
            tasks_state: TaskState::default(),
            spend,
            mcp: McpHub::default(),
            session_mcp: Mutex::new(HashMap::new()),
            workspaces: Mutex::new(HashMap::new()),
            pending_mcp: Mutex::new(HashMap::new()),
            user_instructions,
        })
    }

    /// Registers an admission hook for sessions created from now on.
    pub fn add_admission_hook(&self, hook: Arc<dyn AdmissionHook>) {
        self.admission.lock().push(hook);
    }

    /// Adds a tool to sessions created from now on (embedders, benchmarks
    /// and in-process tests; replaces a built-in tool of the same name).
    pub fn register_tool(&self, tool: Arc<dyn Tool>) {
        self.extra_tools.lock().push(tool);
    }

    /// A new editor connection, asked through `link`.
    pub fn connect(&self, link: Arc<dyn ClientLink>) -> Arc<Client> {
        let client = Client::new(link);
        let mut clients = self.clients.lock();
        clients.retain(|_, c| c.strong_count() > 0);
        clients.insert(client.id(), Arc::downgrade(&client));
        client
    }

    /// An editor connection closed: its documents close (turns it opened
    /// run on, reading the disk) and what it was asked fails.
    pub fn disconnect(&self, client: &Client) {
        self.clients.lock().remove(&client.id());
        client.disconnect();
    }

    /// How many editor connections are open.
    pub fn client_count(&self) -> usize {
        self.clients
            .lock()
            .values()
            .filter(|c| c.strong_count() > 0)
            .count()
    }

    pub fn home(&self) -> &PathBuf {
        &self.home
    }

    pub(crate) fn tasks_state(&self) -> &TaskState {
        &self.tasks_state
    }

    /// The task catalog for a file: the configuration of the workspace
    /// root holding it (else of `client`'s folders). Cached; cheap when
    /// nothing changed, so code actions can ask on every cursor move.
    pub fn task_catalog(
        &self,
        client: &Arc<Client>,
        path: &Path,
    ) -> Result<Arc<TaskCatalog>, DaemonError> {
        self.task_catalog_for(path, &TaskOrigin::of(client))
    }

    /// The task catalog for a file, with `origin`'s folders and
    /// `initializationOptions`.
    pub fn task_catalog_for(
        &self,
        path: &Path,
        origin: &TaskOrigin,
    ) -> Result<Arc<TaskCatalog>, DaemonError> {
        let roots = config_roots(path, &origin.roots());
        Ok(self
            .tasks_state
            .catalog(&self.home, &roots, &origin.client.init_options())?)
    }

    /// Creates a session for `client` and starts its task.
    pub fn new_session(
        &self,
        client: &Arc<Client>,
        params: NewSession,
    ) -> Result<Arc<Session>, DaemonError> {
        self.new_session_of_kind(client, params, None)
    }

    /// [`Daemon::new_session`] with the header's `kind` (`task` for the
    /// session keybinding tasks run in).
    pub fn new_session_of_kind(
        &self,
        client: &Arc<Client>,
        params: NewSession,
        kind: Option<&str>,
    ) -> Result<Arc<Session>, DaemonError> {
        self.new_session_in(client, params, kind, Vec::new())
    }

    /// [`Daemon::new_session_of_kind`] with workspace roots after the
    /// session's folder (ACP's `additionalDirectories`): tools reach into
    /// them and walk them all; they are kept in the log's header, so a load
    /// has them again.
    pub fn new_session_in(
        &self,
        client: &Arc<Client>,
        params: NewSession,
        kind: Option<&str>,
        additional_roots: Vec<PathBuf>,
    ) -> Result<Arc<Session>, DaemonError> {
        let (workspace, roots) =
            workspace_for(client, params.workspace_folder.clone(), additional_roots);
        let config = self.session_config(client, &roots, params.config.as_ref())?;
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
        // Its maker hears it from its first event on.
        log.follow(client.id());
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
    /// session this daemon already runs is only replayed. `client`'s folders
    /// and options are the session's when it has no folder of its own.
    pub fn load_session(
        &self,
        client: &Arc<Client>,
        id: &str,
    ) -> Result<(Arc<Session>, Vec<LoggedEvent>), DaemonError> {
        self.load_session_with(client, id, true, Vec::new())
    }

    /// [`Daemon::load_session`] with more workspace roots (ACP's
    /// `additionalDirectories` of `session/load` and `session/resume`): the
    /// session's roots are then its logged ones plus these, for as long as
    /// it runs (they are not logged; a client gives them again with each
    /// load). A session already running gets them added.
    pub fn load_session_in(
        &self,
        client: &Arc<Client>,
        id: &str,
        more: Vec<PathBuf>,
    ) -> Result<(Arc<Session>, Vec<LoggedEvent>), DaemonError> {
        self.load_session_with(client, id, true, more)
    }

    /// [`Daemon::load_session_in`] with the replay or without: `client`
    /// follows the session from now on either way.
    pub fn attach_session(
        &self,
        client: &Arc<Client>,
        id: &str,
        replay: bool,
        more: Vec<PathBuf>,
    ) -> Result<(Arc<Session>, Vec<LoggedEvent>), DaemonError> {
        self.load_session_with(client, id, replay, more)
    }

    /// [`Daemon::load_session`], with the replay to the sink or without.
    pub(super) fn load_session_with(
        &self,
        client: &Arc<Client>,
        id: &str,
        replay: bool,
        more: Vec<PathBuf>,
    ) -> Result<(Arc<Session>, Vec<LoggedEvent>), DaemonError> {
        // One load at a time: two concurrent loads of one session must not
        // both try to open (and lock) its log.
        let _loading = self.loading.lock();
        if let Ok(session) = self.session(id) {
            self.add_roots(id, more);
            // It may be running: what it logs while its history is read
            // waits, and comes after the history.
            self.sink.begin_replay(client.id(), id);
            let read = read_log(session.log.path());
            let mut events = match read {
                Ok((_, events)) => events,
                Err(e) => {
                    self.sink.replay(client.id(), id, &[], false);
                    return Err(DaemonError::Storage(e.to_string()));
                }
            };
            crate::core::images::load_images(
                &crate::core::images::images_dir(session.log.path()),
                &mut events,
            );
            self.sink.replay(client.id(), id, &events, replay);
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
        events.extend(crate::core::checkpoints::recover_rewinds(&log, &events));
        let log = log.with_sink(self.sink.clone());
        // The session's own folder; else the editor's folders now; else the
        // folders it was created in (a headless load, an editor without
        // folders).
        // A folder's session has the header's other roots too (its
        // additional directories; the folder itself is among them).
        let extra = match &header.workspace_folder {
            Some(_) => header.workspace.iter().cloned().chain(more).collect(),
            None => more,
        };
        let (workspace, roots) = match workspace_for(client, header.workspace_folder.clone(), extra)
        {
            (_, roots) if roots.is_empty() => {
                let ws = Arc::new(Workspace::new(header.workspace.clone()));
                let roots = ws.roots();
                (ws, roots)
            }
            found => found,
        };
        let config = self.session_config(client, &roots, header.config.as_ref())?;
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
        self.sink.begin_replay(client.id(), id);
        self.sink.replay(client.id(), id, &events, replay);
        self.start(session.clone(), workspace, projection);
        Ok((session, events))
    }

    /// Summaries of every session on disk, newest first. Every log is
    /// read, so on the blocking pool: the one thread `tandem lsp`, `acp`
    /// and `serve` run on keeps streaming the others' chunks meanwhile.
    pub async fn list_sessions(&self) -> Vec<SessionSummary> {
        let running: HashMap<String, bool> = self
            .sessions
            .lock()
            .iter()
            .map(|(id, s)| {
                (
                    id.clone(),
                    matches!(s.run_state(), RunState::Running { .. }),
                )
            })
            .collect();
        let dir = self.sessions_dir();
        match tokio::task::spawn_blocking(move || list_session_logs(&dir, &running)).await {
            Ok(sessions) => sessions,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }

    /// Whether a turn runs in any session of this daemon.
    pub fn any_turn_running(&self) -> bool {
        self.sessions
            .lock()
            .values()
            .any(|s| matches!(s.run_state(), RunState::Running { .. }))
    }

    fn sessions_dir(&self) -> PathBuf {
        self.home.join("sessions")
    }

    /// A session's configuration: the files and environment for its roots,
    /// then `initializationOptions`, then its own overrides.
    fn session_config(
        &self,
        client: &Client,
        roots: &[PathBuf],
        overrides: Option<&Value>,
    ) -> Result<Config, DaemonError> {
        let init = client.init_options();
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
        admission.extend(self.admission.lock().iter().cloned());
        let mut tools = ToolRegistry::for_session();
        for tool in self.extra_tools.lock().iter() {
            tools.register(tool.clone());
        }
        // The session's MCP servers start now, concurrently; its first
        // turn waits for them up to their startup timeouts.
        let mcp = Arc::new(SessionMcp::new(
            self.mcp.servers_for(&session.config.mcp_servers),
        ));
        let pending = self.pending_mcp.lock().remove(&session.id);
        if let Some(pending) = pending {
            mcp.add(self.mcp.servers_for(&pending));
        }
        tools.add_source(mcp.clone());
        {
            let mut workspaces = self.workspaces.lock();
            workspaces.retain(|_, ws| ws.strong_count() > 0);
            workspaces.insert(session.id.clone(), Arc::downgrade(&workspace));
        }
        self.session_mcp
            .lock()
            .insert(session.id.clone(), Arc::downgrade(&mcp));
        let env = SessionEnv {
            providers: Default::default(),
            tools,
            workspace,
            admission,
            spend: self.spend.clone(),
            instructions: self.instruction_sources(&session.config),
        };
        let task = tokio::spawn(run_session(session.clone(), env, projection));
        self.tasks.lock().push((session.id.clone(), task));
        self.sessions.lock().insert(session.id.clone(), session);
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
            .get(id)
            .cloned()
            .ok_or_else(|| DaemonError::UnknownSession(id.to_string()))
    }

    /// Queues a prompt from `client`; returns its message id and where
    /// the receipt of its turn will arrive. Its turn reads `client`'s
    /// documents (attached files too) and asks through `client`.
    pub fn prompt(
        &self,
        client: &Arc<Client>,
        session_id: &str,
        content: Vec<UserContent>,
    ) -> Result<(String, oneshot::Receiver<TurnReceipt>), DaemonError> {
        let session = self.session(session_id)?;
        let content = admit_session_images(&session, content)?;
        let content = embed_resources(content, client.buffers());
        Ok(session.enqueue_prompt(client, content))
    }

    /// Queues next-step input from `client`; returns its message id. A
    /// turn it opens is `client`'s.
    pub fn steer(
        &self,
        client: &Arc<Client>,
        session_id: &str,
        content: Vec<UserContent>,
        wake: bool,
    ) -> Result<String, DaemonError> {
        let session = self.session(session_id)?;
        let content = admit_session_images(&session, content)?;
        let content = embed_resources(content, client.buffers());
        Ok(session.enqueue_steer(client, content, wake))
    }

    /// Cancels a session's running turn (and its inbox unless `keep_inbox`).
    pub fn cancel(&self, session_id: &str, keep_inbox: bool) -> Result<(), DaemonError> {
        self.session(session_id)?.cancel(keep_inbox);
        Ok(())
    }

    /// Stops every session, answers their queued prompts, and flushes the
    /// logs. Safe to call more than once.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        // The MCP servers first, while the sessions still hold them: each
        // gets TERM and its grace before KILL (a server dropped with the
        // last session is stopped on a task the exiting runtime may cut).
        self.mcp.shutdown().await;
        let tasks: Vec<JoinHandle<()>> =
            self.tasks.lock().drain(..).map(|(_, task)| task).collect();
        for task in tasks {
            let _ = task.await;
        }
        for session in self.sessions.lock().values() {
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

/// A session's workspace: its own folder first, then `more`; without a
/// folder, its client's folders (then `more`, in a workspace of its own).
fn workspace_for(
    client: &Client,
    folder: Option<PathBuf>,
    more: Vec<PathBuf>,
) -> (Arc<Workspace>, Vec<PathBuf>) {
    match folder {
        Some(folder) => {
            let ws = Arc::new(Workspace::new(
                std::iter::once(folder).chain(more).collect(),
            ));
            let roots = ws.roots();
            (ws, roots)
        }
        None if more.is_empty() => (client.workspace().clone(), client.roots()),
        None => {
            let ws = Arc::new(Workspace::new(
                client.roots().into_iter().chain(more).collect(),
            ));
            let roots = ws.roots();
            (ws, roots)
        }
    }
}

/// Fills in the text of attached files from what the user sees.
fn embed_resources(content: Vec<UserContent>, buffers: &BufferCache) -> Vec<UserContent> {
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
