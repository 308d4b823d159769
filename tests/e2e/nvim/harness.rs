//! The shared harness of the Neovim tests: a workspace on disk, and a
//! headless Neovim that runs the plugin (`editors/nvim`) against the real
//! binary and the scripted model server, executes a test's Lua body, and
//! hands back what the body recorded with `T.put`.
//!
//! The body runs after `harness.lua`; it calls `T.setup()` itself, waits on
//! the plugin's own `User` events (`T.turn(n)`, `T.event(name)`) or polls
//! with a cap (`T.wait`), never sleeps. A Lua error fails the test with its
//! traceback and Neovim's stderr.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::support::client::tandem_bin;
use crate::support::model_server::ModelServer;

/// The longest a whole Neovim run may take before the test fails.
const RUN_LIMIT: Duration = Duration::from_secs(90);

const HARNESS_LUA: &str = include_str!("harness.lua");

/// Whether the editor tests run here. `scripts/test` installs Neovim and
/// sets `TANDEM_EDITOR_TESTS=1`; without it a test says it did not run.
pub fn enabled() -> bool {
    let on = std::env::var("TANDEM_EDITOR_TESTS").as_deref() == Ok("1");
    if !on {
        eprintln!("not run: set TANDEM_EDITOR_TESTS=1 with nvim 0.11+ on PATH (scripts/test does)");
    }
    on
}

/// A temporary project (the daemon's workspace root) and `TANDEM_HOME`.
pub struct Workspace {
    pub root: tempfile::TempDir,
    pub home: tempfile::TempDir,
}

impl Workspace {
    pub fn new() -> Workspace {
        Workspace {
            root: tempfile::tempdir().expect("workspace dir"),
            home: tempfile::tempdir().expect("tandem home"),
        }
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.root.path().join(relative)
    }

    pub fn write(&self, relative: &str, text: &str) {
        let path = self.path(relative);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("create dirs");
        }
        std::fs::write(path, text).expect("write workspace file");
    }

    pub fn read(&self, relative: &str) -> Option<String> {
        std::fs::read_to_string(self.path(relative)).ok()
    }
}

/// A Lua string literal for `s` (Rust's debug quoting is valid Lua for
/// the strings tests use: paths, JSON).
pub fn lua_string(s: &str) -> String {
    format!("{s:?}")
}

/// What a Neovim run recorded with `T.put`.
#[derive(Debug)]
pub struct Recorded {
    pub results: Value,
    pub stderr: String,
}

impl Recorded {
    pub fn get(&self, key: &str) -> &Value {
        &self.results[key]
    }

    /// A recorded list of strings (buffer lines) as one text.
    pub fn text(&self, key: &str) -> String {
        self.lines(key).join("\n")
    }

    pub fn lines(&self, key: &str) -> Vec<String> {
        self.results[key]
            .as_array()
            .unwrap_or_else(|| panic!("`{key}` is not a list in {:#}", self.results))
            .iter()
            .map(|l| l.as_str().unwrap_or_default().to_string())
            .collect()
    }
}

/// Runs `body` in a headless Neovim in `ws` with the plugin against
/// `server` (`session_config` is passed to `setup()`), and returns what it
/// recorded. Panics with the Lua error and Neovim's stderr if it failed.
pub async fn run(ws: &Workspace, session_config: &Value, body: &str) -> Recorded {
    let out = ws.home.path().join("results.json");
    let script = format!(
        "TEST = {{ plugin = {plugin}, bin = {bin}, config = {config}, out = {out}, root = {root} }}\n\
         {harness}\n\
         local ok, err = xpcall(function()\n{body}\nend, debug.traceback)\n\
         if not ok then T.put('error', err) end\n\
         T.finish()\n",
        plugin = lua_string(&plugin_dir().display().to_string()),
        bin = lua_string(&tandem_bin().display().to_string()),
        config = lua_string(&session_config.to_string()),
        out = lua_string(&out.display().to_string()),
        root = lua_string(&ws.root.path().display().to_string()),
        harness = HARNESS_LUA,
    );
    let script_path = ws.home.path().join("test.lua");
    std::fs::write(&script_path, script).expect("write the test script");
    let output = tokio::time::timeout(
        RUN_LIMIT,
        tokio::process::Command::new("nvim")
            .args(["--headless", "--clean", "-n", "-i", "NONE", "-c"])
            .arg(format!("luafile {}", script_path.display()))
            .current_dir(ws.root.path())
            .env("TANDEM_HOME", ws.home.path())
            .env("TANDEM_LOG", "warn")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("nvim did not finish in time")
    .expect("run nvim");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let written = std::fs::read_to_string(&out).unwrap_or_else(|_| {
        panic!(
            "the test wrote no results; nvim stderr:\n{stderr}\nstdout:\n{}",
            String::from_utf8_lossy(&output.stdout)
        )
    });
    let results: Value = serde_json::from_str(&written).expect("results are JSON");
    if let Some(error) = results.get("error") {
        panic!(
            "the Lua test failed:\n{}\nnvim stderr:\n{stderr}",
            error.as_str().unwrap_or_default()
        );
    }
    Recorded { results, stderr }
}

fn plugin_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/editors/nvim"))
}

/// The session config the tests use: the scripted server, in `mode`.
pub fn config(server: &ModelServer, mode: &str) -> Value {
    let mut config = server.session_config();
    config["approval"] = serde_json::json!({ "mode": mode });
    config
}

/// The text of every user message of a model request, joined.
pub fn user_text(request: &crate::support::model_server::RecordedRequest) -> String {
    request.body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names of the tools offered in a model request.
pub fn tool_names(request: &crate::support::model_server::RecordedRequest) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}
