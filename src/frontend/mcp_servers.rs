//! MCP servers on the wire, for every frontend: ACP's `mcpServers` list
//! (also what `tandem/newSession` takes in `config.mcpServers`) as server
//! definitions, and `tandem/listMcpServers`' answer.
//!
//! Invariant: a list given by a client is never written to the session
//! log (its `env` may hold the client's secrets); it is taken out of the
//! `config` before the session is made, and added to the running session.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::config::mcp_servers::McpServerConfig;
use crate::mcp::{McpServer, ServerState};

/// ACP's `mcpServers`: `{name, command, args, env: [{name, value}]}` for a
/// stdio server, `{type: "http", name, url, headers: [{name, value}]}` for
/// a streamable-HTTP one. An HTTP server's headers are the client's literal
/// values (`client_headers`), never names of variables.
pub fn acp_mcp_servers(list: &Value) -> Result<BTreeMap<String, McpServerConfig>, String> {
    let Some(items) = list.as_array() else {
        return Err("invalid params: `mcpServers` must be an array".to_string());
    };
    let mut servers = BTreeMap::new();
    for (i, item) in items.iter().enumerate() {
        let field = |key: &str| item.get(key).and_then(Value::as_str);
        let name = field("name")
            .ok_or_else(|| format!("invalid params: `mcpServers[{i}]` has no string `name`"))?;
        let mut config = McpServerConfig::default();
        match field("type").unwrap_or("stdio") {
            "stdio" => {
                config.command = Some(
                    field("command")
                        .ok_or_else(|| {
                            format!("invalid params: `mcpServers[{i}]` (`{name}`) has no string `command`")
                        })?
                        .to_string(),
                );
                config.args = strings(item.get("args")).ok_or_else(|| {
                    format!("invalid params: `mcpServers[{i}].args` must be strings")
                })?;
                config.env = pairs(item, i, "env")?;
            }
            "http" | "sse" => {
                config.url = Some(field("url").unwrap_or_default().to_string());
                config.client_headers = pairs(item, i, "headers")?;
            }
            other => {
                return Err(format!(
                    "invalid params: `mcpServers[{i}]` has unknown type `{other}`"
                ))
            }
        }
        servers.insert(name.to_string(), config);
    }
    Ok(servers)
}

/// An entry's `[{name, value}]` list (`env`, `headers`) as a map.
fn pairs(item: &Value, i: usize, key: &str) -> Result<BTreeMap<String, String>, String> {
    let mut map = BTreeMap::new();
    for pair in item
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match (pair["name"].as_str(), pair["value"].as_str()) {
            (Some(k), Some(v)) => {
                map.insert(k.to_string(), v.to_string());
            }
            _ => {
                return Err(format!(
                    "invalid params: `mcpServers[{i}].{key}` entries are {{name, value}} strings"
                ))
            }
        }
    }
    Ok(map)
}

fn strings(value: Option<&Value>) -> Option<Vec<String>> {
    match value {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect(),
        Some(_) => None,
    }
}

/// Takes `mcpServers` (ACP's list) out of a `tandem/newSession` config.
pub fn take_config_mcp_servers(
    config: &mut Option<Value>,
) -> Result<BTreeMap<String, McpServerConfig>, String> {
    let list = config
        .as_mut()
        .and_then(Value::as_object_mut)
        .and_then(|c| c.remove("mcpServers"));
    match list {
        None => Ok(BTreeMap::new()),
        Some(list) => {
            acp_mcp_servers(&list).map_err(|e| e.replace("`mcpServers", "`config.mcpServers"))
        }
    }
}

/// `tandem/loadSession`'s `config`: only `mcpServers` (a client's list is
/// never logged, so it is given again on each load; the rest of a
/// session's configuration is its log's).
pub fn load_config_mcp_servers(
    config: Option<Value>,
) -> Result<BTreeMap<String, McpServerConfig>, String> {
    let mut config = match config {
        None | Some(Value::Null) => return Ok(BTreeMap::new()),
        Some(config) if config.is_object() => Some(config),
        Some(_) => return Err("config: expected an object".to_string()),
    };
    let servers = take_config_mcp_servers(&mut config)?;
    if let Some(key) = config
        .as_ref()
        .and_then(Value::as_object)
        .and_then(|c| c.keys().next())
    {
        return Err(format!(
            "config: `{key}` cannot change on load (the session keeps its logged configuration); only `mcpServers` is read"
        ));
    }
    Ok(servers)
}

/// `tandem/listMcpServers`' answer.
pub fn list_result(servers: &[Arc<McpServer>]) -> Value {
    let servers: Vec<Value> = servers
        .iter()
        .map(|server| {
            let state = server.state();
            let tools: Vec<Value> = server
                .listed_tools()
                .iter()
                .filter(|t| server.config.offers_tool(&t.name))
                .map(|t| {
                    json!({
                        "name": crate::mcp::names::tool_name(&server.name, &t.name),
                        "tool": t.name,
                        "description": t.description,
                        "readOnly": t.read_only,
                    })
                })
                .collect();
            let mut entry = json!({
                "name": server.name,
                "state": state.as_str(),
                "tools": tools,
            });
            if let ServerState::Failed(error) = &state {
                entry["error"] = json!(error);
            }
            entry
        })
        .collect();
    json!({ "servers": servers })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acp_lists_become_server_definitions() {
        let servers = acp_mcp_servers(&json!([
            {"name": "everything", "command": "npx", "args": ["x"], "env": [{"name": "A", "value": "1"}]},
            {"type": "http", "name": "web", "url": "http://h", "headers": [{"name": "Authorization", "value": "s"}]}
        ]))
        .unwrap();
        assert_eq!(servers["everything"].command.as_deref(), Some("npx"));
        assert_eq!(servers["everything"].env["A"], "1");
        assert_eq!(servers["web"].url.as_deref(), Some("http://h"));
        assert!(
            servers["web"].headers.is_empty(),
            "literal values are not env names"
        );
        assert_eq!(servers["web"].client_headers["Authorization"], "s");
        let loaded = load_config_mcp_servers(Some(json!({"mcpServers": [
            {"name": "everything", "command": "npx"}
        ]})))
        .unwrap();
        assert_eq!(loaded["everything"].command.as_deref(), Some("npx"));
        let err = load_config_mcp_servers(Some(json!({"model": "x"}))).unwrap_err();
        assert!(
            err.contains("`model`") && err.contains("mcpServers"),
            "{err}"
        );
        let err = acp_mcp_servers(&json!([{"command": "x"}])).unwrap_err();
        assert!(
            err.contains("mcpServers[0]") && err.contains("name"),
            "{err}"
        );
    }
}
