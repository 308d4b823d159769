//! The MCP client: the servers of `[mcp_servers.<name>]` and of ACP's
//! `mcpServers`, their tools offered to the model as
//! `mcp__<server>__<tool>`.
//!
//! - `rmcp_client.rs` — the only file that names the SDK (`rmcp`).
//! - `process.rs` — a server's process: its group, environment, stderr, stop.
//! - `server.rs` — one server's state, tools, restart and calls.
//! - `tool.rs` — a server's tool as a [`Tool`](crate::tools::Tool).
//! - `names.rs` — the names the model calls them by.
//!
//! Invariant: a server is shared by every session with the same name and
//! definition, and runs while one of them does; the daemon's shutdown
//! stops every server (TERM, then KILL, to its process group).

pub mod names;
pub mod process;
mod rmcp_client;
pub mod server;
pub mod tool;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

pub use self::rmcp_client::ListedTool;
pub use self::server::{McpServer, ServerState};
use self::tool::McpTool;
use crate::config::mcp_servers::{valid_server_name, McpServerConfig};
use crate::tools::{Tool, ToolSource};

/// Every server the daemon runs, by name and definition.
#[derive(Default)]
pub struct McpHub {
    servers: Mutex<HashMap<String, Weak<McpServer>>>,
}

impl McpHub {
    /// The servers of a session's configuration, started (concurrently)
    /// unless they already run for another session. Disabled ones are left
    /// out; a definition that cannot work is a failed server.
    pub fn servers_for(&self, configs: &BTreeMap<String, McpServerConfig>) -> Vec<Arc<McpServer>> {
        let mut servers = Vec::new();
        let mut map = self.servers.lock();
        map.retain(|_, server| server.strong_count() > 0);
        for (name, config) in configs.iter().filter(|(_, c)| c.enabled) {
            let key = format!(
                "{name}\u{0}{}",
                serde_json::to_string(config).unwrap_or_default()
            );
            if let Some(server) = map.get(&key).and_then(Weak::upgrade) {
                servers.push(server);
                continue;
            }
            let server = McpServer::new(name.clone(), config.clone());
            map.insert(key, Arc::downgrade(&server));
            if valid_server_name(name) {
                let starting = server.clone();
                tokio::spawn(async move { starting.start().await });
            } else {
                server.fail_now(format!(
                    "`{name}` cannot name an MCP server: at most 64 characters, none of them `|` or a control character"
                ));
            }
            servers.push(server);
        }
        servers
    }

    /// Every server that runs, by name.
    pub fn running(&self) -> Vec<Arc<McpServer>> {
        let map = self.servers.lock();
        let mut all: Vec<_> = map.values().filter_map(Weak::upgrade).collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// Stops every server (the daemon exits).
    pub async fn shutdown(&self) {
        futures::future::join_all(self.running().iter().map(|s| s.stop())).await;
    }
}

/// A session's servers: the source of its MCP tools. Servers can be added
/// while it runs (ACP's `mcpServers` of a `session/load`).
#[derive(Default)]
pub struct SessionMcp {
    servers: Mutex<Vec<Arc<McpServer>>>,
}

impl SessionMcp {
    pub fn new(servers: Vec<Arc<McpServer>>) -> Self {
        let mcp = SessionMcp::default();
        mcp.add(servers);
        mcp
    }

    /// Adds servers; one with the name of a server already there replaces it.
    pub fn add(&self, servers: Vec<Arc<McpServer>>) {
        let mut all = self.servers.lock();
        for server in servers {
            all.retain(|s| s.name != server.name);
            all.push(server);
        }
        all.sort_by(|a, b| a.name.cmp(&b.name));
    }

    pub fn servers(&self) -> Vec<Arc<McpServer>> {
        self.servers.lock().clone()
    }
}

#[async_trait::async_trait]
impl ToolSource for SessionMcp {
    /// The offered tools of every server that can be called, named in
    /// server order (the configuration's, sorted by name).
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        let mut names: Vec<String> = Vec::new();
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        for server in &self.servers() {
            for listed in server.tools() {
                if !server.config.offers_tool(&listed.name) {
                    continue;
                }
                let name = names::unique(names::tool_name(&server.name, &listed.name), &names);
                names.push(name.clone());
                tools.push(Arc::new(McpTool::new(server.clone(), listed, name)));
            }
        }
        tools
    }

    async fn wait_ready(&self) {
        let servers = self.servers();
        futures::future::join_all(servers.iter().map(|s| s.wait_settled())).await;
    }
}
