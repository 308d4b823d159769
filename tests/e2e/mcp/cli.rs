//! `tandem mcp list` and `tandem mcp call` through the real binary, on the
//! servers of a user's config.toml (our scripted fault server: it needs
//! only python3).

use std::path::Path;
use std::process::{Command, Output};

use super::{fault_log, mcp_dir};
use crate::support::client::tandem_bin;

/// A TANDEM_HOME whose config.toml has a working server (`faulty`), one
/// that never answers `initialize` (`silent`) and a disabled one (`off`).
fn home_with_servers(home: &Path) {
    let script = mcp_dir().join("fault_server.py");
    let config = format!(
        r#"
[mcp_servers.faulty]
command = "python3"
args = [{script:?}, "tools", {tools_log:?}]
tool_timeout_sec = 1
disabled_tools = ["crash"]

[mcp_servers.silent]
command = "python3"
args = [{script:?}, "silent", {silent_log:?}]
startup_timeout_sec = 1

[mcp_servers.off]
command = "python3"
enabled = false
"#,
        tools_log = home.join("tools.log"),
        silent_log = home.join("silent.log"),
    );
    std::fs::write(home.join("config.toml"), config).expect("write config.toml");
}

fn tandem_mcp(home: &Path, args: &[&str]) -> Output {
    Command::new(tandem_bin())
        .arg("mcp")
        .args(args)
        .current_dir(home)
        .env("TANDEM_HOME", home)
        .env_remove("TANDEM_LOG")
        .output()
        .expect("run tandem mcp")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).to_string()
}

#[test]
fn mcp_list_starts_the_configured_servers_and_shows_their_state_and_tools() {
    let home = tempfile::tempdir().expect("temp dir");
    home_with_servers(home.path());
    let out = tandem_mcp(home.path(), &["list"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "a server failed: {stdout}");
    for line in [
        "faulty  ready  (stdio: python3 ",
        "  echo  → mcp__faulty__echo  Echoes its text",
        "  env  → mcp__faulty__env  [read-only]  Shows the server's environment",
        "  crash  (not offered: enabled_tools/disabled_tools)  Exits mid-call",
        "off  disabled  (stdio: python3)",
        "silent  failed: did not finish starting within 1s (startup_timeout_sec)",
    ] {
        assert!(stdout.contains(line), "no {line:?} in:\n{stdout}");
    }
    // Both servers were stopped before tandem exited: no orphans.
    for log in ["tools.log", "silent.log"] {
        let lines = fault_log(&home.path().join(log));
        let pid: i32 = lines[0]
            .strip_prefix("started ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{log}: {lines:?}"));
        let alive = unsafe { libc::kill(pid, 0) } == 0;
        assert!(
            !alive,
            "the server of {log} (pid {pid}) outlived tandem mcp"
        );
    }

    let out = tandem_mcp(home.path(), &["list", "faulty", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(answer["servers"][0]["name"], "faulty");
    assert_eq!(answer["servers"][0]["state"], "ready");
    assert_eq!(
        answer["servers"][0]["tools"][0]["name"],
        "mcp__faulty__echo"
    );
    assert_eq!(answer["servers"].as_array().map(Vec::len), Some(1));

    // A URL nothing listens on: the cause in words, not the SDK's types.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let out = tandem_mcp(home.path(), &["list", &url]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.starts_with(&format!(
            "127.0.0.1:{port}  failed: the MCP handshake with {url} failed: "
        )) && stdout.contains("Connection refused")
            && !stdout.contains("rmcp::"),
        "{stdout}"
    );
}

#[test]
fn mcp_call_prints_what_the_model_would_read_and_fails_clearly() {
    let home = tempfile::tempdir().expect("temp dir");
    home_with_servers(home.path());

    let out = tandem_mcp(home.path(), &["call", "faulty", "echo", r#"{"text":"hi"}"#]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "fault echo: hi\n");
    let log = fault_log(&home.path().join("tools.log"));
    assert!(
        log.iter()
            .any(|l| l.contains(r#""name": "echo""#) || l.contains(r#""name":"echo""#)),
        "the server never got the call: {log:?}"
    );

    let out = tandem_mcp(home.path(), &["call", "faulty", "echo", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(result["content"][0]["text"], "fault echo: ");

    let out = tandem_mcp(
        home.path(),
        &["call", "faulty", "slow", r#"{"seconds":30}"#],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("`slow` did not answer within 1s (tool_timeout_sec)"),
        "{}",
        text(&out.stderr)
    );

    let out = tandem_mcp(home.path(), &["call", "faulty", "nosuch"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("has no tool `nosuch` (it lists: echo, env, slow, crash, grow)"),
        "{}",
        text(&out.stderr)
    );

    let out = tandem_mcp(home.path(), &["call", "nope", "echo"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(
            "no MCP server `nope` (configured: faulty, off, silent), and it is not an http(s):// URL"
        ),
        "{}",
        text(&out.stderr)
    );

    let out = tandem_mcp(home.path(), &["call", "faulty", "echo", "[1]"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("the arguments must be a JSON object"),
        "{}",
        text(&out.stderr)
    );
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
}
