//! `[mcp_servers.<name>]`: the MCP servers a session's tools come from.
//!
//! Invariant: a secret is never in the file. A server is given variables
//! of the daemon's environment by name (`env_vars`), and a header's value
//! names the variable that holds it; `env` is for plain settings.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One server's definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpServerConfig {
    /// A stdio server: the program to run.
    pub command: Option<String>,
    pub args: Vec<String>,
    /// Variables set for the server.
    pub env: BTreeMap<String, String>,
    /// Variables of the daemon's environment passed on to the server.
    pub env_vars: Vec<String>,
    pub cwd: Option<PathBuf>,
    /// An HTTP (streamable) server: its endpoint.
    pub url: Option<String>,
    /// Header name → the name of the environment variable with its value,
    /// or a template naming variables as `${NAME}` (`"Bearer ${TOKEN}"`).
    pub headers: BTreeMap<String, String>,
    /// Header name → its literal value, as an ACP client gives it
    /// (`mcpServers`' `headers`); never read from a file.
    #[serde(skip_deserializing)]
    pub client_headers: BTreeMap<String, String>,
    pub enabled: bool,
    pub startup_timeout_sec: f64,
    pub tool_timeout_sec: f64,
    /// Only these tools are offered (all when absent).
    pub enabled_tools: Option<Vec<String>>,
    /// These tools are never offered.
    pub disabled_tools: Vec<String>,
    /// Tools the server annotates `readOnlyHint` run without asking.
    pub trust_read_only: bool,
}

impl Default for McpServerConfig {
    fn default() -> Self {
        McpServerConfig {
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            env_vars: Vec::new(),
            cwd: None,
            url: None,
            headers: BTreeMap::new(),
            client_headers: BTreeMap::new(),
            enabled: true,
            startup_timeout_sec: 10.0,
            tool_timeout_sec: 60.0,
            enabled_tools: None,
            disabled_tools: Vec::new(),
            trust_read_only: false,
        }
    }
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport<'a> {
    Stdio { command: &'a str },
    Http { url: &'a str },
}

impl McpServerConfig {
    /// The transport, or why the definition has none.
    pub fn transport(&self) -> Result<McpTransport<'_>, String> {
        match (&self.command, &self.url) {
            (Some(command), None) if !command.trim().is_empty() => {
                Ok(McpTransport::Stdio { command })
            }
            (None, Some(url)) if !url.trim().is_empty() => Ok(McpTransport::Http { url }),
            (Some(_), Some(_)) => {
                Err("set either `command` (a stdio server) or `url` (HTTP), not both".to_string())
            }
            _ => Err("needs `command` (a stdio server) or `url` (HTTP)".to_string()),
        }
    }

    /// The headers an HTTP server is sent: `headers` with their variables
    /// read through `var` (the daemon's environment), then `client_headers`.
    /// A variable that is not set is an error naming it.
    pub fn http_headers(
        &self,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Vec<(String, String)>, String> {
        let mut resolved = Vec::new();
        for (name, spec) in &self.headers {
            let value = if spec.contains("${") {
                expand(spec, &var)
            } else {
                var(spec.trim()).ok_or_else(|| spec.trim().to_string())
            };
            let value = value.map_err(|missing| {
                format!(
                    "the header `{name}` names the environment variable `{missing}`, which is not set in tandem's environment"
                )
            })?;
            resolved.push((name.clone(), value));
        }
        resolved.extend(self.client_headers.clone());
        Ok(resolved)
    }

    pub fn startup_timeout(&self) -> Duration {
        secs(self.startup_timeout_sec)
    }

    pub fn tool_timeout(&self) -> Duration {
        secs(self.tool_timeout_sec)
    }

    /// Whether the model is offered the server's tool `name`.
    pub fn offers_tool(&self, name: &str) -> bool {
        self.enabled_tools
            .as_ref()
            .is_none_or(|only| only.iter().any(|t| t == name))
            && !self.disabled_tools.iter().any(|t| t == name)
    }
}

/// Whether `name` may name a server. Its tools' names are fitted to what
/// providers accept anyway (`mcp/names.rs`), so ACP clients' names with
/// spaces work; `|` is refused because it separates the server from the
/// tool in a remembered approval.
pub fn valid_server_name(name: &str) -> bool {
    !name.trim().is_empty()
        && name.chars().count() <= 64
        && !name.chars().any(|c| c == '|' || c.is_control())
}

/// `template` with each `${NAME}` replaced by the variable's value; the
/// error is the name of a variable that is not set.
fn expand(template: &str, var: &impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start + 2..].find('}') else {
            break;
        };
        let name = &rest[start + 2..start + 2 + len];
        out.push_str(&rest[..start]);
        out.push_str(&var(name).ok_or_else(|| name.to_string())?);
        rest = &rest[start + 3 + len..];
    }
    out.push_str(rest);
    Ok(out)
}

fn secs(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs.max(0.001)).unwrap_or(Duration::from_secs(3600))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_has_one_transport() {
        let stdio = McpServerConfig {
            command: Some("npx".into()),
            ..Default::default()
        };
        assert_eq!(
            stdio.transport(),
            Ok(McpTransport::Stdio { command: "npx" })
        );
        let both = McpServerConfig {
            url: Some("http://x".into()),
            ..stdio.clone()
        };
        assert!(both.transport().unwrap_err().contains("not both"));
        assert!(McpServerConfig::default().transport().is_err());
    }

    #[test]
    fn header_values_come_from_the_environment_never_the_file() {
        let config = McpServerConfig {
            url: Some("http://127.0.0.1:1/mcp".into()),
            headers: BTreeMap::from([
                ("Authorization".into(), "Bearer ${TOKEN}".into()),
                ("X-Team".into(), "TEAM".into()),
            ]),
            client_headers: BTreeMap::from([("X-Client".into(), "literal".into())]),
            ..Default::default()
        };
        let env = |name: &str| match name {
            "TOKEN" => Some("t0k".to_string()),
            "TEAM" => Some("core".to_string()),
            _ => None,
        };
        assert_eq!(
            config.http_headers(env).unwrap(),
            vec![
                ("Authorization".to_string(), "Bearer t0k".to_string()),
                ("X-Team".to_string(), "core".to_string()),
                ("X-Client".to_string(), "literal".to_string()),
            ]
        );
        let err = config.http_headers(|_| None).unwrap_err();
        assert!(
            err.contains("`Authorization`") && err.contains("`TOKEN`") && err.contains("not set"),
            "{err}"
        );
        // A file cannot give literal values.
        let parsed: Result<McpServerConfig, _> =
            toml::from_str("url = \"http://h\"\nclient_headers = { A = \"secret\" }");
        assert!(
            parsed.is_err(),
            "client_headers must not be read from a file"
        );
    }

    #[test]
    fn server_names_may_have_spaces_but_not_the_scope_separator() {
        assert!(valid_server_name("GitHub MCP"));
        assert!(valid_server_name("everything"));
        assert!(!valid_server_name("a|b"));
        assert!(!valid_server_name("  "));
        assert!(!valid_server_name(&"x".repeat(65)));
    }

    #[test]
    fn enabled_and_disabled_tools_filter_the_offer() {
        let config = McpServerConfig {
            enabled_tools: Some(vec!["echo".into(), "add".into()]),
            disabled_tools: vec!["add".into()],
            ..Default::default()
        };
        assert!(config.offers_tool("echo"));
        assert!(!config.offers_tool("add"));
        assert!(!config.offers_tool("other"));
    }
}
