//! One MCP server as the daemon runs it: its process and client session,
//! its state (starting, ready, failed, stopped), its tools, one restart
//! after it exits, and its calls.
//!
//! Invariant: the state only moves forward from `Starting` once, when the
//! start settles (ready or failed, within the startup timeout); waiters on
//! [`McpServer::wait_settled`] never wait longer than that.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::FutureExt;
use parking_lot::Mutex;
use serde_json::{Map, Value};
use tokio::sync::watch;

use super::process::ServerProcess;
use super::rmcp_client::{self, CallFailure, Connection, ListedTool};
use crate::config::mcp_servers::{McpServerConfig, McpTransport};

/// Where a server is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    Starting,
    Ready,
    Failed(String),
    Stopped,
}

impl ServerState {
    pub fn as_str(&self) -> &'static str {
        match self {
            ServerState::Starting => "starting",
            ServerState::Ready => "ready",
            ServerState::Failed(_) => "failed",
            ServerState::Stopped => "stopped",
        }
    }
}

struct Live {
    connection: Arc<Connection>,
    /// A stdio server's process (an HTTP server has none of ours).
    process: Option<ServerProcess>,
}

impl Live {
    fn has_exited(&mut self) -> bool {
        self.connection.is_closed() || self.process.as_mut().is_some_and(|p| p.has_exited())
    }
}

struct Status {
    state: ServerState,
    tools: Vec<ListedTool>,
    /// It exited while ready: the next call starts it again.
    restart_pending: bool,
}

pub struct McpServer {
    pub name: String,
    pub config: McpServerConfig,
    live: tokio::sync::Mutex<Option<Live>>,
    status: Mutex<Status>,
    settled: watch::Sender<bool>,
    restarted: AtomicBool,
}

impl McpServer {
    pub(super) fn new(name: String, config: McpServerConfig) -> Arc<McpServer> {
        Arc::new(McpServer {
            name,
            config,
            live: tokio::sync::Mutex::new(None),
            status: Mutex::new(Status {
                state: ServerState::Starting,
                tools: Vec::new(),
                restart_pending: false,
            }),
            settled: watch::channel(false).0,
            restarted: AtomicBool::new(false),
        })
    }

    pub fn state(&self) -> ServerState {
        self.status.lock().state.clone()
    }

    /// The server's tools while it can be called (ready, or exited and to
    /// be restarted on the next call).
    pub fn tools(&self) -> Vec<ListedTool> {
        let status = self.status.lock();
        match status.state {
            ServerState::Ready => status.tools.clone(),
            ServerState::Failed(_) if status.restart_pending => status.tools.clone(),
            _ => Vec::new(),
        }
    }

    /// The last tools listed, whatever the state (for `tandem/listMcpServers`).
    pub fn listed_tools(&self) -> Vec<ListedTool> {
        self.status.lock().tools.clone()
    }

    /// Waits until the start has settled (ready or failed).
    pub async fn wait_settled(&self) {
        let mut settled = self.settled.subscribe();
        let _ = settled.wait_for(|s| *s).await;
    }

    /// A server that cannot start at all (a bad definition).
    pub(super) fn fail_now(&self, why: String) {
        tracing::warn!(server = %self.name, "MCP server failed: {why}");
        self.set_state(ServerState::Failed(why), None);
        self.settled.send_replace(true);
    }

    /// Starts the server: process, handshake and tool list within the
    /// startup timeout. Failures are the state, reported, never an error.
    pub(super) async fn start(self: &Arc<Self>) {
        let mut live = self.live.lock().await;
        let outcome = self.connect().await;
        match outcome {
            Ok((new, tools)) => {
                tracing::info!(
                    server = %self.name,
                    tools = tools.len(),
                    "MCP server ready ({})",
                    new.connection.server_info().unwrap_or_default()
                );
                *live = Some(new);
                self.set_state(ServerState::Ready, Some(tools));
            }
            Err(why) => {
                tracing::warn!(server = %self.name, "MCP server failed: {why}");
                self.set_state(ServerState::Failed(why), None);
            }
        }
        self.settled.send_replace(true);
    }

    async fn connect(self: &Arc<Self>) -> Result<(Live, Vec<ListedTool>), String> {
        let weak = Arc::downgrade(self);
        let on_changed: rmcp_client::ListChanged = Arc::new(move || refresh_soon(weak.clone()));
        let limit = self.config.startup_timeout();
        let (process, handshake) = match self.config.transport()? {
            McpTransport::Stdio { command } => {
                let (process, stdout, stdin) =
                    ServerProcess::spawn(&self.name, command, &self.config)?;
                let handshake = rmcp_client::connect(stdout, stdin, on_changed);
                (Some(process), handshake.boxed())
            }
            McpTransport::Http { url } => {
                let headers = self.config.http_headers(|name| std::env::var(name).ok())?;
                let url = url.to_string();
                let handshake =
                    async move { rmcp_client::connect_http(&url, &headers, on_changed).await };
                (None, handshake.boxed())
            }
        };
        let started = async {
            let connection = handshake.await?;
            let tools = connection.list_tools().await?;
            Ok::<_, String>((connection, tools))
        };
        let outcome = match tokio::time::timeout(limit, started).await {
            Ok(outcome) => outcome,
            Err(_) => Err(format!(
                "did not finish starting within {limit:?} (startup_timeout_sec)"
            )),
        };
        match outcome {
            Ok((connection, tools)) => Ok((
                Live {
                    connection: Arc::new(connection),
                    process,
                },
                tools,
            )),
            Err(why) => {
                if let Some(process) = process {
                    process.stop().await;
                }
                Err(why)
            }
        }
    }

    /// Calls tool `tool`. An exited server is started again once, on this
    /// call; a call in flight when it exits ends as an error.
    pub async fn call(
        self: &Arc<Self>,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<Value, String> {
        let connection = self.connection_for_call().await?;
        match connection.call_tool(tool, arguments).await {
            Ok(result) => Ok(result),
            Err(CallFailure::Error(e)) => Err(format!(
                "the MCP server `{}` answered with an error: {e}",
                self.name
            )),
            Err(CallFailure::Closed) => {
                let again = !self.restarted.load(Ordering::SeqCst);
                self.mark_exited();
                Err(format!(
                    "the MCP server `{}` exited during the call; {}",
                    self.name,
                    if again {
                        "it is started again on the next call"
                    } else {
                        "it had been restarted once already and is not started again"
                    }
                ))
            }
        }
    }

    async fn connection_for_call(self: &Arc<Self>) -> Result<Arc<Connection>, String> {
        let mut live = self.live.lock().await;
        if let Some(current) = live.as_mut() {
            if !current.has_exited() {
                return Ok(current.connection.clone());
            }
        }
        if let Some(dead) = live.take() {
            stop_live(dead).await;
            self.mark_exited();
        }
        let pending = self.status.lock().restart_pending;
        if !pending || self.restarted.swap(true, Ordering::SeqCst) {
            return Err(self.unavailable());
        }
        tracing::info!(server = %self.name, "restarting the MCP server after it exited");
        match self.connect().await {
            Ok((new, tools)) => {
                let connection = new.connection.clone();
                *live = Some(new);
                self.set_state(ServerState::Ready, Some(tools));
                Ok(connection)
            }
            Err(why) => {
                self.set_state(ServerState::Failed(format!("restart failed: {why}")), None);
                Err(self.unavailable())
            }
        }
    }

    fn unavailable(&self) -> String {
        match self.state() {
            ServerState::Failed(why) => format!("the MCP server `{}` failed: {why}", self.name),
            other => format!("the MCP server `{}` is {}", self.name, other.as_str()),
        }
    }

    /// The server exited under a ready connection.
    fn mark_exited(&self) {
        let mut status = self.status.lock();
        if status.state == ServerState::Ready {
            status.restart_pending = !self.restarted.load(Ordering::SeqCst);
            status.state = ServerState::Failed("the server exited".to_string());
        }
    }

    fn set_state(&self, state: ServerState, tools: Option<Vec<ListedTool>>) {
        let mut status = self.status.lock();
        status.restart_pending = false;
        status.state = state;
        if let Some(tools) = tools {
            status.tools = tools;
        }
    }

    /// Stops the process (TERM, then KILL, to its group).
    pub async fn stop(&self) {
        let live = self.live.lock().await.take();
        if let Some(live) = live {
            stop_live(live).await;
        }
        self.set_state(ServerState::Stopped, None);
        self.settled.send_replace(true);
    }

    /// The tool list again (after `notifications/tools/list_changed`).
    async fn refresh(&self) {
        let connection = match &*self.live.lock().await {
            Some(live) => live.connection.clone(),
            None => return,
        };
        match connection.list_tools().await {
            Ok(tools) => {
                tracing::info!(server = %self.name, tools = tools.len(), "MCP tool list changed");
                self.status.lock().tools = tools;
            }
            Err(why) => tracing::warn!(server = %self.name, "refreshing the tools: {why}"),
        }
    }
}

async fn stop_live(live: Live) {
    if let Ok(connection) = Arc::try_unwrap(live.connection) {
        connection.close(Duration::from_millis(200)).await;
    }
    if let Some(process) = live.process {
        process.stop().await;
    }
}

fn refresh_soon(server: Weak<McpServer>) {
    tokio::spawn(async move {
        if let Some(server) = server.upgrade() {
            server.refresh().await;
        }
    });
}

impl Drop for McpServer {
    /// The last session using the server is gone: stop it. Without a
    /// runtime the process's own drop KILLs its group.
    fn drop(&mut self) {
        let Some(live) = self.live.get_mut().take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(stop_live(live));
            }
            Err(_) => drop(live),
        }
    }
}
