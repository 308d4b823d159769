//! An MCP server's process: started in a process group of its own with a
//! minimal environment, its stderr copied to the daemon's log, and stopped
//! with TERM, then KILL, sent to the whole group.
//!
//! Invariant: the server never sees the daemon's environment beyond PATH,
//! HOME, the locale and TMPDIR (so never the model's API key), plus what
//! its configuration gives it; and its stdout is the protocol's, never the
//! daemon's stdout. A `ServerProcess` dropped without `stop` KILLs its
//! group, so no server outlives the daemon.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::config::mcp_servers::McpServerConfig;

/// How long a stopped server gets between TERM and KILL.
pub const STOP_GRACE: Duration = Duration::from_secs(2);

/// The daemon's variables every server gets (when set).
const PASSED_THROUGH: [&str; 6] = ["PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "LC_CTYPE"];

/// A running server process.
pub struct ServerProcess {
    child: Child,
    /// The process group's id (the child's pid: it leads its group).
    pgid: Option<i32>,
}

/// The environment a server starts with: the pass-through variables, the
/// ones `env_vars` names (from the daemon's environment), then `env`.
pub fn server_env(
    config: &McpServerConfig,
    lookup: impl Fn(&str) -> Option<String>,
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for name in PASSED_THROUGH.iter().copied() {
        if let Some(value) = lookup(name) {
            env.insert(name.to_string(), value);
        }
    }
    for name in &config.env_vars {
        if let Some(value) = lookup(name) {
            env.insert(name.clone(), value);
        }
    }
    for (name, value) in &config.env {
        env.insert(name.clone(), value.clone());
    }
    env
}

impl ServerProcess {
    /// Starts `command` for server `name`; its stderr goes to the log.
    pub fn spawn(
        name: &str,
        command: &str,
        config: &McpServerConfig,
    ) -> Result<(ServerProcess, ChildStdout, ChildStdin), String> {
        let mut cmd = Command::new(command);
        cmd.args(&config.args)
            .env_clear()
            .envs(server_env(config, |n| std::env::var(n).ok()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(cwd) = &config.cwd {
            cmd.current_dir(cwd);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start `{command}`: {e}"))?;
        let pgid = child.id().and_then(|id| i32::try_from(id).ok());
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err("the server's pipes could not be opened".to_string());
        };
        if let Some(stderr) = child.stderr.take() {
            let name = name.to_string();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::info!(target: "tandem::mcp", server = %name, "stderr: {line}");
                }
            });
        }
        Ok((ServerProcess { child, pgid }, stdout, stdin))
    }

    /// Whether the process has exited.
    pub fn has_exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// TERM to the group, up to [`STOP_GRACE`] for the leader to exit, then
    /// KILL to the group (whatever it left behind goes too).
    pub async fn stop(mut self) {
        signal_group(self.pgid, libc::SIGTERM);
        let _ = tokio::time::timeout(STOP_GRACE, self.child.wait()).await;
        signal_group(self.pgid, libc::SIGKILL);
        let _ = self.child.wait().await;
        self.pgid = None;
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        signal_group(self.pgid, libc::SIGKILL);
    }
}

fn signal_group(pgid: Option<i32>, signal: i32) {
    if let Some(pgid) = pgid.filter(|p| *p > 1) {
        // SAFETY: killpg takes no pointers; a group that is gone is ESRCH.
        unsafe {
            libc::killpg(pgid, signal);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_is_the_minimal_set_plus_what_the_config_gives() {
        let config = McpServerConfig {
            env: BTreeMap::from([("MODE".to_string(), "test".to_string())]),
            env_vars: vec!["GITHUB_TOKEN".to_string()],
            ..McpServerConfig::default()
        };
        let daemon = |name: &str| match name {
            "PATH" => Some("/bin".to_string()),
            "GITHUB_TOKEN" => Some("t".to_string()),
            "OPENAI_API_KEY" => Some("secret".to_string()),
            _ => None,
        };
        let env = server_env(&config, daemon);
        assert_eq!(
            env.keys().map(String::as_str).collect::<Vec<_>>(),
            ["GITHUB_TOKEN", "MODE", "PATH"]
        );
    }
}
