//! The one file that names `rmcp`, the official Rust SDK of the Model
//! Context Protocol: a client session over a child's stdio, its tool list
//! and its tool calls, in tandem's own plain types.
//!
//! Invariant: no `rmcp` type leaves this file. Tools and results are read
//! from their JSON form (the protocol's, which is stable), not from the
//! SDK's structs (which change between releases), so an SDK update touches
//! this file only.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncWrite};

/// Told when the server says its tool list changed.
pub type ListChanged = Arc<dyn Fn() + Send + Sync>;

/// What tandem answers the server's requests with, and hears from it.
struct Handler {
    on_tools_changed: ListChanged,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("tandem", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        (self.on_tools_changed)();
    }
}

/// An initialized MCP client session.
pub struct Connection {
    service: RunningService<RoleClient, Handler>,
}

/// One tool as the server lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedTool {
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    pub input_schema: Value,
    /// `annotations.readOnlyHint`.
    pub read_only: bool,
    /// `annotations.destructiveHint` said explicitly.
    pub destructive: bool,
}

/// A call that ended without a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallFailure {
    /// The connection closed (the server exited) before the answer came.
    Closed,
    /// The server answered with a JSON-RPC error.
    Error(String),
}

/// Runs MCP's `initialize` handshake over `read`/`write` (a child's stdout
/// and stdin).
pub async fn connect<R, W>(
    read: R,
    write: W,
    on_tools_changed: ListChanged,
) -> Result<Connection, String>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let service = Handler { on_tools_changed }
        .serve((read, write))
        .await
        .map_err(|e| format!("the MCP handshake failed: {e}"))?;
    Ok(Connection { service })
}

impl Connection {
    /// The server's name and version, as it gave them.
    pub fn server_info(&self) -> Option<String> {
        let info = self.service.peer_info()?;
        let value = serde_json::to_value(&*info).ok()?;
        let server = value.get("serverInfo")?;
        Some(format!(
            "{} {}",
            server.get("name")?.as_str()?,
            server.get("version").and_then(Value::as_str).unwrap_or("")
        ))
    }

    /// Every tool, all pages.
    pub async fn list_tools(&self) -> Result<Vec<ListedTool>, String> {
        let tools = self
            .service
            .list_all_tools()
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        Ok(tools
            .iter()
            .filter_map(|tool| serde_json::to_value(tool).ok())
            .filter_map(|tool| listed_tool(&tool))
            .collect())
    }

    /// Calls a tool and returns its result as the protocol's JSON
    /// (`{content, structuredContent?, isError?}`). Dropping the future
    /// before it ends sends `notifications/cancelled` for the request.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<Value, CallFailure> {
        let params = CallToolRequestParams::new(name.to_string()).with_arguments(arguments);
        match self.service.call_tool(params).await {
            Ok(result) => serde_json::to_value(&result)
                .map_err(|e| CallFailure::Error(format!("unreadable result: {e}"))),
            Err(ServiceError::TransportClosed) => Err(CallFailure::Closed),
            Err(ServiceError::McpError(e)) => Err(CallFailure::Error(e.message.to_string())),
            Err(e) => Err(CallFailure::Error(e.to_string())),
        }
    }

    /// Whether the connection is gone (the server exited or hung up).
    pub fn is_closed(&self) -> bool {
        self.service.is_closed() || self.service.is_transport_closed()
    }

    /// Ends the session, waiting at most `grace` for the SDK's task.
    pub async fn close(mut self, grace: Duration) {
        let _ = self.service.close_with_timeout(grace).await;
    }
}

/// A tool from its `tools/list` JSON; `None` without a name.
fn listed_tool(tool: &Value) -> Option<ListedTool> {
    let annotations = tool.get("annotations");
    let hint = |key: &str| {
        annotations
            .and_then(|a| a.get(key))
            .and_then(Value::as_bool)
    };
    Some(ListedTool {
        name: tool.get("name")?.as_str()?.to_string(),
        title: tool
            .get("title")
            .or_else(|| annotations.and_then(|a| a.get("title")))
            .and_then(Value::as_str)
            .map(str::to_string),
        description: tool
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        input_schema: tool
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": "object"})),
        read_only: hint("readOnlyHint") == Some(true),
        destructive: hint("destructiveHint") == Some(true),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_listed_tool_reads_its_annotations() {
        let tool = listed_tool(&json!({
            "name": "echo", "description": "Echoes", "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true, "title": "Echo"}
        }))
        .unwrap();
        assert_eq!(tool.name, "echo");
        assert_eq!(tool.title.as_deref(), Some("Echo"));
        assert!(tool.read_only);
        assert!(!tool.destructive);
        assert!(listed_tool(&json!({"description": "no name"})).is_none());
    }
}
