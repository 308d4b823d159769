//! Configuration: defaults, user `config.toml`, workspace
//! `.tandem/config.toml`, environment, `initializationOptions`, per-session
//! overrides — merged in that order, low to high.
//!
//! Invariant: layers are merged as JSON values and deserialized once, with
//! unknown keys refused, so a typo is an error naming the file and the key,
//! never a silently ignored setting. The API key itself is never stored
//! here: only the name of the variable that holds it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::vocab::approval::ApprovalMode;

pub mod budget;
pub mod checkpoints;
pub mod instructions;
pub mod mcp_servers;
pub mod models;
pub mod sandbox;
pub mod tasks;

/// Which wire format the model server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    Openai,
    Anthropic,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    pub provider: ProviderKind,
    pub base_url: String,
    pub name: String,
    /// Name of the environment variable holding the API key.
    pub api_key_env: String,
    pub context_window: u64,
    /// Output cap per call; 0 lets the server decide (Anthropic: 8192).
    pub max_output_tokens: u32,
    /// The reasoning efforts the model accepts (`low`, `medium`, ...);
    /// the first is in force until the user picks another. Empty: none
    /// is sent.
    pub efforts: Vec<String>,
    /// Whether the model reads images; a prompt with an image for a model
    /// configured `false` is refused before any call.
    pub vision: bool,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            provider: ProviderKind::Openai,
            base_url: DEFAULT_BASE_URL.to_string(),
            name: "qwen2.5-coder".to_string(),
            api_key_env: "OPENAI_API_KEY".to_string(),
            context_window: 128_000,
            max_output_tokens: 0,
            efforts: Vec::new(),
            vision: true,
        }
    }
}

/// The endpoint used when nothing is configured: a local Ollama.
pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:11434/v1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Model calls per turn.
    pub max_iterations: u32,
    /// Whole-turn token budget: input (cached tokens included) + output;
    /// 0 = none.
    pub max_tokens: u64,
    pub idle_timeout_secs: f64,
    pub activity_timeout_secs: f64,
    /// Wait for the first chunk: this, plus `first_token_secs_per_1k` per
    /// 1,000 estimated input tokens, capped at `first_token_timeout_cap_secs`.
    pub first_token_timeout_secs: f64,
    pub first_token_secs_per_1k: f64,
    pub first_token_timeout_cap_secs: f64,
    /// Longest silence between two chunks once streaming.
    pub chunk_timeout_secs: f64,
    /// First retry delay of a failed provider call; doubles per attempt,
    /// with jitter, up to `retry_max_delay_ms`. `Retry-After` wins.
    pub retry_base_delay_ms: u64,
    pub retry_max_delay_ms: u64,
    /// Retries of failed model calls per turn, across every error kind, on
    /// top of each kind's own bucket; 0 = no turn-wide cap.
    pub max_retries_per_turn: u32,
    /// Tool calls of one response that may run at once.
    pub parallel_tools: usize,
    /// What counts as recent progress for the activity timeout.
    pub activity_recent_secs: f64,
    /// Longest input a turn admits, in characters; 0 = no limit.
    pub max_input_chars: usize,
    /// Largest image a prompt may carry, in decoded bytes.
    pub max_image_bytes: u64,
    /// Compact the history when a request would fill this share of the
    /// context window.
    pub compact_threshold: f64,
    /// Share of the context window the most recent messages may keep when
    /// compacting.
    pub compact_keep_ratio: f64,
    /// Compactions in one turn with no completed tool call and no new
    /// answer text between them before the turn stops
    /// (`compaction_spiral`); 0 = never.
    pub max_compactions_without_progress: u32,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_iterations: 50,
            max_tokens: 0,
            idle_timeout_secs: 300.0,
            activity_timeout_secs: 1800.0,
            first_token_timeout_secs: 30.0,
            first_token_secs_per_1k: 1.0,
            first_token_timeout_cap_secs: 180.0,
            chunk_timeout_secs: 30.0,
            retry_base_delay_ms: 1000,
            retry_max_delay_ms: 30_000,
            max_retries_per_turn: 8,
            parallel_tools: 4,
            activity_recent_secs: 30.0,
            max_input_chars: 0,
            max_image_bytes: 5 * 1024 * 1024,
            compact_threshold: 0.8,
            compact_keep_ratio: 0.4,
            max_compactions_without_progress: 2,
        }
    }
}

impl LimitsConfig {
    /// How long to wait for the first chunk of a request of about
    /// `input_tokens` tokens.
    pub fn first_token_timeout(&self, input_tokens: u64) -> Duration {
        let secs = self.first_token_timeout_secs
            + self.first_token_secs_per_1k * (input_tokens as f64 / 1000.0);
        secs_to_duration(
            secs.min(
                self.first_token_timeout_cap_secs
                    .max(self.first_token_timeout_secs),
            ),
        )
    }

    pub fn chunk_timeout(&self) -> Duration {
        secs_to_duration(self.chunk_timeout_secs)
    }

    pub fn idle_timeout(&self) -> Duration {
        secs_to_duration(self.idle_timeout_secs)
    }

    pub fn activity_timeout(&self) -> Duration {
        secs_to_duration(self.activity_timeout_secs)
    }

    pub fn activity_recent(&self) -> Duration {
        secs_to_duration(self.activity_recent_secs)
    }
}

/// The longest wait a setting can ask for: a century, which no turn
/// reaches. Anything longer (`1e300`) would overflow `Instant + timeout`,
/// which panics.
const LONGEST_WAIT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

fn secs_to_duration(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs.max(0.0))
        .unwrap_or(Duration::MAX)
        .min(LONGEST_WAIT)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct ApprovalConfig {
    pub mode: ApprovalMode,
}

/// Settings of the tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolsConfig {
    /// Environment variables `exec_command` children keep although their
    /// names look secret (contain KEY, SECRET, TOKEN, PASSWORD or
    /// CREDENTIAL); matched exactly.
    pub exec_env_allow: Vec<String>,
    /// After a patch lands in the editor's buffers, check the editor's
    /// diagnostics of the changed lines (when the client offers them).
    pub diagnostics_after_edit: bool,
    /// How long that check waits for the editor's diagnostics to settle.
    pub diagnostics_settle_ms: u64,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        ToolsConfig {
            exec_env_allow: Vec::new(),
            diagnostics_after_edit: true,
            diagnostics_settle_ms: 1500,
        }
    }
}

/// Settings of `tandem serve` (read from the user's `config.toml` and the
/// environment only; a session's layers cannot change them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServeConfig {
    /// Exit after this long with no client connected and no turn running;
    /// 0 = never.
    pub idle_exit_secs: f64,
    /// WebSocket connections served at once; more are refused (HTTP 429).
    pub max_connections: u32,
    /// Largest message a client may send, and the serve may answer.
    pub max_message_bytes: u32,
    /// `Origin` header values allowed to connect (exact match, e.g.
    /// `vscode-webview://…`). Empty: any request carrying `Origin` is
    /// refused, which shuts out every web page.
    pub allowed_origins: Vec<String>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            idle_exit_secs: 1800.0,
            max_connections: 64,
            max_message_bytes: 64 << 20,
            allowed_origins: Vec::new(),
        }
    }
}

impl ServeConfig {
    pub fn idle_exit(&self) -> Option<Duration> {
        (self.idle_exit_secs > 0.0).then(|| secs_to_duration(self.idle_exit_secs))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub model: ModelConfig,
    /// `[models.<id>]`: the other models a session can switch to
    /// (config/models.rs); `[model]` is the one named `default`.
    pub models: std::collections::BTreeMap<String, ModelConfig>,
    pub limits: LimitsConfig,
    pub approval: ApprovalConfig,
    pub tools: ToolsConfig,
    pub serve: ServeConfig,
    /// Hard spending caps per turn, session and day.
    pub budget: budget::BudgetConfig,
    /// How `exec_command` confines commands.
    pub sandbox: sandbox::SandboxConfig,
    /// Which instruction files (`AGENTS.md`) the model is given.
    pub instructions: instructions::InstructionsConfig,
    /// `[checkpoints]`: what rewinding keeps (config/checkpoints.rs).
    pub checkpoints: checkpoints::CheckpointsConfig,
    /// Prices per model name (USD per million tokens), over the built-in
    /// table of known models.
    pub pricing: std::collections::BTreeMap<String, crate::vocab::pricing::Price>,
    /// `[tasks.<id>]` tables, kept raw: each is checked on its own by
    /// [`tasks::TaskCatalog::from_config`], so one bad task never makes
    /// the whole configuration invalid.
    pub tasks: std::collections::BTreeMap<String, Value>,
    /// `[mcp_servers.<name>]` (config/mcp_servers.rs).
    pub mcp_servers: std::collections::BTreeMap<String, mcp_servers::McpServerConfig>,
}

/// A configuration problem, naming where it came from.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("failed to read config at {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid config at {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid configuration ({origin}): {message}")]
    Invalid { origin: String, message: String },
}

/// The state directory: `$TANDEM_HOME`, else `~/.local/state/tandem`,
/// the home directory being `$HOME`, else the password database's (ACP
/// clients such as agentic.nvim start agents with only `PATH` and their
/// own variables). Never a temporary directory: without a home, the error
/// says so and what to set.
pub fn tandem_home() -> Result<PathBuf, HomeError> {
    if let Some(home) = std::env::var_os("TANDEM_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(home));
    }
    let base = match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(home) => PathBuf::from(home),
        None => home_from_passwd().ok_or(HomeError {
            // SAFETY: getuid has no failure mode and touches no memory.
            uid: unsafe { libc::getuid() },
        })?,
    };
    Ok(base.join(".local/state/tandem"))
}

/// No state directory: neither `TANDEM_HOME` nor `HOME` is set and the
/// password database has no home directory for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "cannot find where to keep tandem's state: TANDEM_HOME and HOME are unset, and the \
     password database has no home directory for uid {uid}; set HOME or TANDEM_HOME"
)]
pub struct HomeError {
    pub uid: u32,
}

/// The current user's home directory in the password database
/// (`getpwuid_r`), if it names one.
fn home_from_passwd() -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: getuid has no failure mode and touches no memory.
    let uid = unsafe { libc::getuid() };
    let mut buf = vec![0u8; 1024];
    loop {
        // SAFETY: `passwd` is plain data; getpwuid_r fills it with pointers
        // into `buf`, which outlives every read of them below.
        let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        let rc = unsafe {
            libc::getpwuid_r(
                uid,
                &mut entry,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            )
        };
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        if rc != 0 || found.is_null() || entry.pw_dir.is_null() {
            return None;
        }
        // SAFETY: a NUL-terminated string inside `buf`, set by getpwuid_r.
        let dir = unsafe { std::ffi::CStr::from_ptr(entry.pw_dir) };
        let dir = std::ffi::OsStr::from_bytes(dir.to_bytes());
        return (!dir.is_empty()).then(|| PathBuf::from(dir));
    }
}

/// Builds a [`Config`] from layers.
#[derive(Debug, Clone)]
pub struct ConfigBuilder {
    merged: Value,
    /// Only what the layers set (no defaults), to tell a default from a
    /// choice.
    explicit: Value,
}

/// Anthropic's API, the default `base_url` when `provider = "anthropic"`.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com/v1";

impl Default for ConfigBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl ConfigBuilder {
    /// Starts from the defaults.
    pub fn new() -> Self {
        ConfigBuilder {
            merged: serde_json::to_value(Config::default()).unwrap_or(Value::Null),
            explicit: Value::Object(Default::default()),
        }
    }

    /// Merges a TOML file if it exists. A file that cannot be parsed, or
    /// holds unknown keys, is an error naming the file.
    pub fn file(self, path: &Path) -> Result<Self, ConfigError> {
        self.file_layer(path, false)
    }

    /// Merges a workspace's `.tandem/config.toml`, minus `[sandbox]`: the
    /// workspace is what sandboxed commands may write, so a setting there
    /// could let the next command out. The sandbox is the user's to set
    /// (user config, editor settings).
    pub fn workspace_file(self, path: &Path) -> Result<Self, ConfigError> {
        self.file_layer(path, true)
    }

    fn file_layer(mut self, path: &Path, workspace: bool) -> Result<Self, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(self),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                })
            }
        };
        let table: toml::Value = toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let mut layer = serde_json::to_value(table).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        if workspace {
            if let Some(dropped) = layer.as_object_mut().and_then(|l| l.remove("sandbox")) {
                tracing::warn!(
                    "ignoring [sandbox] {dropped} in {}: the sandbox is set in the user's config.toml or the editor's settings, never by the workspace",
                    path.display()
                );
            }
        }
        // Check the layer alone so the error names this file.
        check_layer(&layer).map_err(|message| ConfigError::Parse {
            path: path.to_path_buf(),
            message,
        })?;
        merge(&mut self.merged, layer.clone());
        merge(&mut self.explicit, layer);
        Ok(self)
    }

    /// Merges a JSON layer (`initializationOptions`, per-session `config`).
    pub fn json(mut self, origin: &str, layer: &Value) -> Result<Self, ConfigError> {
        if layer.is_null() {
            return Ok(self);
        }
        check_layer(layer).map_err(|message| ConfigError::Invalid {
            origin: origin.to_string(),
            message,
        })?;
        merge(&mut self.merged, layer.clone());
        merge(&mut self.explicit, layer.clone());
        Ok(self)
    }

    /// Merges `TANDEM_PROVIDER`, `TANDEM_BASE_URL`, `TANDEM_MODEL`.
    pub fn env(self) -> Result<Self, ConfigError> {
        self.env_from(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    /// [`ConfigBuilder::env`] with an injectable lookup, for tests.
    pub fn env_from(self, lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let mut model = serde_json::Map::new();
        for (var, key) in [
            ("TANDEM_PROVIDER", "provider"),
            ("TANDEM_BASE_URL", "base_url"),
            ("TANDEM_MODEL", "name"),
        ] {
            if let Some(value) = lookup(var) {
                model.insert(key.to_string(), Value::String(value));
            }
        }
        if model.is_empty() {
            return Ok(self);
        }
        self.json("environment", &serde_json::json!({ "model": model }))
    }

    pub fn build(self) -> Result<Config, ConfigError> {
        let mut config: Config =
            serde_json::from_value(self.merged).map_err(|e| ConfigError::Invalid {
                origin: "merged configuration".to_string(),
                message: e.to_string(),
            })?;
        // An Anthropic provider with the endpoint and key variable left at
        // their (OpenAI-flavoured) defaults means Anthropic's own: never
        // send an OpenAI key to another vendor.
        let set = |key: &str| {
            self.explicit
                .get("model")
                .and_then(|m| m.get(key))
                .is_some()
        };
        if config.model.provider == ProviderKind::Anthropic {
            if !set("base_url") {
                config.model.base_url = ANTHROPIC_BASE_URL.to_string();
            }
            if !set("api_key_env") {
                config.model.api_key_env = "ANTHROPIC_API_KEY".to_string();
            }
        }
        models::settle(&mut config, self.explicit.get("models")).map_err(|message| {
            ConfigError::Invalid {
                origin: "merged configuration".to_string(),
                message,
            }
        })?;
        Ok(config)
    }

    /// Checks a layer on its own (so its error names it), without reading
    /// any file.
    pub fn check(origin: &str, layer: &Value) -> Result<(), ConfigError> {
        check_layer(layer).map_err(|message| ConfigError::Invalid {
            origin: origin.to_string(),
            message,
        })
    }

    /// The user and workspace files plus the environment: what a daemon
    /// starts from before the editor sends `initializationOptions`.
    pub fn standard(home: &Path, workspace_roots: &[PathBuf]) -> Result<Self, ConfigError> {
        let mut builder = ConfigBuilder::new().file(&home.join("config.toml"))?;
        for root in workspace_roots {
            builder = builder.workspace_file(&root.join(".tandem/config.toml"))?;
        }
        builder.env()
    }
}

/// Validates one layer by merging it over the defaults and deserializing.
fn check_layer(layer: &Value) -> Result<(), String> {
    let mut probe = serde_json::to_value(Config::default()).unwrap_or(Value::Null);
    merge(&mut probe, layer.clone());
    serde_json::from_value::<Config>(probe)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Deep-merges `layer` into `base`: objects merge key by key, anything else
/// replaces.
fn merge(base: &mut Value, layer: Value) {
    match (base, layer) {
        (Value::Object(base), Value::Object(layer)) => {
            for (key, value) in layer {
                merge(base.entry(key).or_insert(Value::Null), value);
            }
        }
        (base, layer) => *base = layer,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_home_directory_comes_from_the_password_database() {
        // The entry `getent` finds for this uid, when the database has one.
        let uid = unsafe { libc::getuid() };
        let Ok(out) = std::process::Command::new("getent")
            .args(["passwd", &uid.to_string()])
            .output()
        else {
            panic!("getent is missing: cannot check the password database");
        };
        let line = String::from_utf8_lossy(&out.stdout);
        let expected = line.trim().split(':').nth(5).filter(|d| !d.is_empty());
        assert_eq!(
            super::home_from_passwd(),
            expected.map(PathBuf::from),
            "{line}"
        );
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_point_at_local_ollama() {
        let config = ConfigBuilder::new().build().unwrap();
        assert_eq!(config.model.base_url, "http://127.0.0.1:11434/v1");
        assert_eq!(config.limits.max_iterations, 50);
        assert_eq!(config.approval.mode, ApprovalMode::Review);
    }

    #[test]
    fn layers_apply_low_to_high() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("config.toml");
        std::fs::write(
            &user,
            "[model]\nname = \"from-file\"\nbase_url = \"http://file\"\n",
        )
        .unwrap();
        let config = ConfigBuilder::new()
            .file(&user)
            .unwrap()
            .env_from(|v| (v == "TANDEM_MODEL").then(|| "from-env".to_string()))
            .unwrap()
            .json(
                "initializationOptions",
                &json!({"limits": {"max_iterations": 7}}),
            )
            .unwrap()
            .build()
            .unwrap();
        assert_eq!(config.model.name, "from-env");
        assert_eq!(config.model.base_url, "http://file");
        assert_eq!(config.limits.max_iterations, 7);
    }

    #[test]
    fn unknown_key_names_file_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "[model]\nmodle = \"x\"\n").unwrap();
        let err = ConfigBuilder::new().file(&path).unwrap_err().to_string();
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains("modle"), "{err}");
    }

    #[test]
    fn anthropic_gets_its_own_endpoint_and_key_variable_unless_set() {
        let config = ConfigBuilder::new()
            .json("test", &json!({"model": {"provider": "anthropic"}}))
            .unwrap()
            .build()
            .unwrap();
        assert_eq!(config.model.base_url, ANTHROPIC_BASE_URL);
        assert_eq!(config.model.api_key_env, "ANTHROPIC_API_KEY");
        let config = ConfigBuilder::new()
            .json("test", &json!({"model": {"provider": "anthropic", "base_url": "http://proxy/v1", "api_key_env": "K"}}))
            .unwrap()
            .build()
            .unwrap();
        assert_eq!(config.model.base_url, "http://proxy/v1");
        assert_eq!(config.model.api_key_env, "K");
    }

    #[test]
    fn a_workspace_file_cannot_set_the_sandbox() {
        let home = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join(".tandem")).unwrap();
        std::fs::write(
            root.path().join(".tandem/config.toml"),
            "[sandbox]\nmode = \"off\"\nnetwork = true\n[limits]\nmax_iterations = 9\n",
        )
        .unwrap();
        let config = ConfigBuilder::standard(home.path(), &[root.path().to_path_buf()])
            .unwrap()
            .build()
            .unwrap();
        assert_eq!(config.sandbox, sandbox::SandboxConfig::default());
        assert_eq!(
            config.limits.max_iterations, 9,
            "the rest of the file holds"
        );
        std::fs::write(
            home.path().join("config.toml"),
            "[sandbox]\nnetwork = true\n",
        )
        .unwrap();
        let config = ConfigBuilder::standard(home.path(), &[])
            .unwrap()
            .build()
            .unwrap();
        assert!(config.sandbox.network, "the user's own file may");
    }

    #[test]
    fn first_token_timeout_grows_with_input_and_is_capped() {
        let limits = LimitsConfig::default();
        assert_eq!(limits.first_token_timeout(0), Duration::from_secs(30));
        assert_eq!(limits.first_token_timeout(10_000), Duration::from_secs(40));
        assert_eq!(
            limits.first_token_timeout(1_000_000),
            Duration::from_secs(180)
        );
    }

    #[test]
    fn a_huge_timeout_still_gives_a_deadline() {
        let limits = LimitsConfig {
            first_token_timeout_secs: 1e300,
            first_token_timeout_cap_secs: 1e300,
            chunk_timeout_secs: f64::MAX,
            idle_timeout_secs: 1e20,
            ..LimitsConfig::default()
        };
        let now = std::time::Instant::now();
        for timeout in [
            limits.first_token_timeout(0),
            limits.chunk_timeout(),
            limits.idle_timeout(),
        ] {
            assert_eq!(timeout, LONGEST_WAIT);
            assert!(now.checked_add(timeout).is_some());
        }
    }
}
