//! `tandem mcp`: the MCP servers of the configuration as a session would
//! run them — `list` starts them and shows their state and tools, `call`
//! calls one tool and prints what the model would read. A server is a
//! configured name or an `http(s)://` URL (a streamable-HTTP server with
//! no headers).
//!
//! Invariant: this goes through the sessions' own client (`crate::mcp`):
//! the same start, environment, timeouts and result rendering; nothing
//! here speaks MCP itself. Every server it started is stopped before it
//! returns, Ctrl-C included.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Subcommand;
use serde_json::{Map, Value};

use crate::config::mcp_servers::{McpServerConfig, McpTransport};
use crate::config::ConfigBuilder;
use crate::mcp::tool::render_result_with_images;
use crate::mcp::{McpHub, McpServer, ServerState};

/// `tandem mcp …`.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Start the configured MCP servers (user config.toml and this
    /// directory's .tandem/config.toml) as a session does, and print each
    /// one's state and tools; exit status 1 when one failed.
    List {
        /// Only this server: a configured name or an http(s):// URL.
        server: Option<String>,
        /// Print `tandem/listMcpServers`' answer (JSON) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Call one tool of a server and print what the model would read;
    /// exit status 1 when the call failed or the server says `isError`.
    Call {
        /// A configured name or an http(s):// URL.
        server: String,
        /// The tool, as the server names it.
        tool: String,
        /// The arguments: a JSON object (default `{}`).
        arguments: Option<String>,
        /// Print the server's whole result (JSON) instead.
        #[arg(long)]
        json: bool,
    },
}

/// Where the configuration is read.
pub struct McpCliOptions {
    /// `$TANDEM_HOME`.
    pub home: PathBuf,
    /// The workspace whose `.tandem/config.toml` is read (the current
    /// directory).
    pub workspace: PathBuf,
}

/// Runs the command; returns the exit status (0 ok, 1 a server or call
/// failed, 2 bad arguments or configuration, 130 interrupted).
pub async fn run(command: McpCommand, options: McpCliOptions) -> u8 {
    let (server_arg, arguments) = match &command {
        McpCommand::List { server, .. } => (server.clone(), None),
        McpCommand::Call {
            server, arguments, ..
        } => (Some(server.clone()), arguments.as_deref()),
    };
    let arguments = match parse_arguments(arguments) {
        Ok(arguments) => arguments,
        Err(e) => return usage_error(&e),
    };
    let configured = match configured_servers(&options) {
        Ok(configured) => configured,
        Err(e) => return usage_error(&e),
    };
    let selected = match select(configured, server_arg.as_deref()) {
        Ok(selected) => selected,
        Err(e) => return usage_error(&e),
    };
    let hub = McpHub::default();
    let servers = hub.servers_for(&selected);
    let work = async {
        match command {
            McpCommand::List { json, .. } => list(&selected, &servers, json).await,
            McpCommand::Call { tool, json, .. } => match servers.first() {
                Some(server) => call(server, &tool, arguments, json).await,
                // Only a disabled server leaves nothing to start.
                None => usage_error("the server is disabled (`enabled = false`)"),
            },
        }
    };
    let code = tokio::select! {
        code = work => code,
        _ = tokio::signal::ctrl_c() => 130,
    };
    hub.shutdown().await;
    code
}

fn usage_error(message: &str) -> u8 {
    eprintln!("tandem mcp: {message}");
    2
}

/// `[mcp_servers]` of the user's and this workspace's configuration.
fn configured_servers(
    options: &McpCliOptions,
) -> Result<BTreeMap<String, McpServerConfig>, String> {
    let config = ConfigBuilder::standard(&options.home, std::slice::from_ref(&options.workspace))
        .and_then(ConfigBuilder::build)
        .map_err(|e| e.to_string())?;
    Ok(config.mcp_servers)
}

/// The servers the command is about: all configured ones, the one named,
/// or one made of a URL.
fn select(
    configured: BTreeMap<String, McpServerConfig>,
    server: Option<&str>,
) -> Result<BTreeMap<String, McpServerConfig>, String> {
    let Some(server) = server else {
        return Ok(configured);
    };
    if let Some(config) = configured.get(server) {
        return Ok(BTreeMap::from([(server.to_string(), config.clone())]));
    }
    if let Ok(url) = url::Url::parse(server) {
        if matches!(url.scheme(), "http" | "https") {
            let name = match (url.host_str(), url.port()) {
                (Some(host), Some(port)) => format!("{host}:{port}"),
                (Some(host), None) => host.to_string(),
                (None, _) => "url".to_string(),
            };
            let config = McpServerConfig {
                url: Some(server.to_string()),
                ..McpServerConfig::default()
            };
            return Ok(BTreeMap::from([(name, config)]));
        }
    }
    let names: Vec<&str> = configured.keys().map(String::as_str).collect();
    Err(if names.is_empty() {
        format!(
            "no MCP server `{server}`: none is configured ([mcp_servers.<name>] in config.toml or .tandem/config.toml), and it is not an http(s):// URL"
        )
    } else {
        format!(
            "no MCP server `{server}` (configured: {}), and it is not an http(s):// URL",
            names.join(", ")
        )
    })
}

fn parse_arguments(arguments: Option<&str>) -> Result<Map<String, Value>, String> {
    let Some(text) = arguments else {
        return Ok(Map::new());
    };
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!(
            "the arguments must be a JSON object, like '{{\"text\":\"hi\"}}', not {other}"
        )),
        Err(e) => Err(format!("the arguments are not JSON: {e}")),
    }
}

async fn list(
    selected: &BTreeMap<String, McpServerConfig>,
    servers: &[Arc<McpServer>],
    json: bool,
) -> u8 {
    futures::future::join_all(servers.iter().map(|s| s.wait_settled())).await;
    let failed = servers
        .iter()
        .any(|s| matches!(s.state(), ServerState::Failed(_)));
    if json {
        println!("{}", super::mcp_servers::list_result(servers));
        return u8::from(failed);
    }
    if selected.is_empty() {
        println!("no MCP servers configured ([mcp_servers.<name>] in config.toml or .tandem/config.toml)");
    }
    for (name, config) in selected {
        let Some(server) = servers.iter().find(|s| &s.name == name) else {
            println!("{name}  disabled  ({})", describe(config));
            continue;
        };
        let state = server.state();
        match &state {
            ServerState::Failed(error) => {
                println!("{name}  failed: {error}  ({})", describe(config))
            }
            other => println!("{name}  {}  ({})", other.as_str(), describe(config)),
        }
        let tools = server.listed_tools();
        if tools.is_empty() && state == ServerState::Ready {
            println!("  (no tools)");
        }
        for tool in tools {
            let offered = if config.offers_tool(&tool.name) {
                format!("→ {}", crate::mcp::names::tool_name(name, &tool.name))
            } else {
                "(not offered: enabled_tools/disabled_tools)".to_string()
            };
            let read_only = if tool.read_only { "  [read-only]" } else { "" };
            let description = tool.description.lines().next().unwrap_or_default();
            println!("  {}  {offered}{read_only}  {description}", tool.name);
        }
    }
    u8::from(failed)
}

fn describe(config: &McpServerConfig) -> String {
    match config.transport() {
        Ok(McpTransport::Stdio { command }) => {
            let mut line = format!("stdio: {command}");
            for arg in &config.args {
                line.push(' ');
                line.push_str(arg);
            }
            line
        }
        Ok(McpTransport::Http { url }) => format!("http: {url}"),
        Err(e) => e,
    }
}

async fn call(
    server: &Arc<McpServer>,
    tool: &str,
    arguments: Map<String, Value>,
    json: bool,
) -> u8 {
    server.wait_settled().await;
    if let ServerState::Failed(error) = server.state() {
        eprintln!(
            "tandem mcp: the MCP server `{}` failed: {error}",
            server.name
        );
        return 1;
    }
    if !server.listed_tools().iter().any(|t| t.name == tool) {
        let names: Vec<String> = server.listed_tools().into_iter().map(|t| t.name).collect();
        eprintln!(
            "tandem mcp: the MCP server `{}` has no tool `{tool}` (it lists: {})",
            server.name,
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        );
        return 1;
    }
    let limit = server.config.tool_timeout();
    let result = match tokio::time::timeout(limit, server.call(tool, arguments)).await {
        Ok(Ok(result)) => result,
        Ok(Err(e)) => {
            eprintln!("tandem mcp: {e}");
            return 1;
        }
        Err(_) => {
            eprintln!("tandem mcp: `{tool}` did not answer within {limit:?} (tool_timeout_sec); it was cancelled");
            return 1;
        }
    };
    let (text, is_error, _) = render_result_with_images(&result, Some(u64::MAX));
    if json {
        println!("{result}");
    } else {
        println!("{text}");
    }
    if is_error {
        eprintln!("tandem mcp: `{tool}` answered with isError: true");
        return 1;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_is_a_configured_name_or_an_http_url() {
        let configured = BTreeMap::from([(
            "everything".to_string(),
            McpServerConfig {
                command: Some("npx".to_string()),
                ..McpServerConfig::default()
            },
        )]);
        let picked = select(configured.clone(), Some("everything")).unwrap();
        assert_eq!(picked.keys().collect::<Vec<_>>(), ["everything"]);
        let picked = select(configured.clone(), Some("http://127.0.0.1:3001/mcp")).unwrap();
        assert_eq!(
            picked["127.0.0.1:3001"].url.as_deref(),
            Some("http://127.0.0.1:3001/mcp")
        );
        let err = select(configured.clone(), Some("nope")).unwrap_err();
        assert!(err.contains("configured: everything"), "{err}");
        let err = select(BTreeMap::new(), Some("ftp://x")).unwrap_err();
        assert!(err.contains("none is configured"), "{err}");
        assert_eq!(select(configured, None).unwrap().len(), 1);
    }

    #[test]
    fn arguments_are_a_json_object() {
        assert!(parse_arguments(None).unwrap().is_empty());
        assert_eq!(parse_arguments(Some(r#"{"a":1}"#)).unwrap()["a"], 1);
        let err = parse_arguments(Some("[1]")).unwrap_err();
        assert!(err.contains("JSON object"), "{err}");
        let err = parse_arguments(Some("{a")).unwrap_err();
        assert!(err.contains("not JSON"), "{err}");
    }
}
