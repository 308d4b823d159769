//! npm's MCP conformance suite (`@modelcontextprotocol/conformance`, pinned
//! in tests/mcp) against tandem's MCP client, through `tandem mcp`: for each
//! client scenario the suite starts its scenario server on loopback and runs
//! a command with the server's URL appended (`MCP_CONFORMANCE_SCENARIO`
//! names the scenario); the command here runs `tandem mcp list` or `tandem
//! mcp call`, and the suite checks what the server saw.
//!
//! Every client scenario of the suite is either expected to pass or listed
//! in [`UNSUPPORTED`] with the reason; a scenario in neither (a newer suite)
//! fails the test until it is classified.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::{mcp_dir, missing};
use crate::support::client::tandem_bin;

/// The scenarios tandem passes, with what it runs for them.
const PASSING: &[(&str, &str)] = &[
    (
        "initialize",
        "`tandem mcp list URL`: initialize, then tools/list",
    ),
    (
        "tools_call",
        "`tandem mcp call URL add_numbers {\"a\":5,\"b\":3}`",
    ),
    (
        "sse-retry",
        "`tandem mcp call URL test_reconnection`: the call's SSE stream closes; \
         the client reconnects with GET after the stream's `retry` and Last-Event-ID",
    ),
    (
        "auth/resource-mismatch",
        "`tandem mcp list URL`: tandem never starts an OAuth flow, so it never \
         authorizes against a protected-resource document naming another server",
    ),
];

const NO_OAUTH: &str = "tandem has no OAuth client: an HTTP server's credentials are \
    headers from the environment (`headers` in `[mcp_servers.<name>]`) or the ACP \
    client's literal headers, so a server that answers 401 fails";

/// The scenarios tandem deliberately does not support, with why. The suite
/// must report each as failing.
const UNSUPPORTED: &[(&str, &str)] = &[
    (
        "elicitation-sep1034-client-defaults",
        "tandem declares no `elicitation` capability (a server's question is not \
         put to the editor's user), so the SDK answers `decline`",
    ),
    ("auth/metadata-default", NO_OAUTH),
    ("auth/metadata-var1", NO_OAUTH),
    ("auth/metadata-var2", NO_OAUTH),
    ("auth/metadata-var3", NO_OAUTH),
    ("auth/basic-cimd", NO_OAUTH),
    ("auth/scope-from-www-authenticate", NO_OAUTH),
    ("auth/scope-from-scopes-supported", NO_OAUTH),
    ("auth/scope-omitted-when-undefined", NO_OAUTH),
    ("auth/scope-step-up", NO_OAUTH),
    ("auth/scope-retry-limit", NO_OAUTH),
    ("auth/token-endpoint-auth-basic", NO_OAUTH),
    ("auth/token-endpoint-auth-post", NO_OAUTH),
    ("auth/token-endpoint-auth-none", NO_OAUTH),
    ("auth/pre-registration", NO_OAUTH),
    ("auth/2025-03-26-oauth-metadata-backcompat", NO_OAUTH),
    ("auth/2025-03-26-oauth-endpoint-fallback", NO_OAUTH),
    ("auth/offline-access-scope", NO_OAUTH),
    ("auth/offline-access-not-supported", NO_OAUTH),
    ("auth/client-credentials-jwt", NO_OAUTH),
    ("auth/client-credentials-basic", NO_OAUTH),
    ("auth/cross-app-access-complete-flow", NO_OAUTH),
];

/// What tandem runs for a scenario; the suite appends the server's URL.
const CLIENT_SCRIPT: &str = r#"#!/bin/sh
url="$1"
case "$MCP_CONFORMANCE_SCENARIO" in
  tools_call) exec "$TANDEM_BIN" mcp call "$url" add_numbers '{"a":5,"b":3}' ;;
  elicitation-sep1034-client-defaults)
    exec "$TANDEM_BIN" mcp call "$url" test_client_elicitation_defaults ;;
  sse-retry) exec "$TANDEM_BIN" mcp call "$url" test_reconnection ;;
  *) exec "$TANDEM_BIN" mcp list "$url" ;;
esac
"#;

/// The suite's CLI, if it is installed.
fn suite() -> Option<PathBuf> {
    let entry = mcp_dir().join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    if !entry.exists() {
        missing("@modelcontextprotocol/conformance")?;
    }
    Some(entry)
}

/// `node` running the suite's CLI (on Node 20 through the shim for its
/// `fs.globSync` import: tests/mcp/conformance-node20.mjs).
fn suite_command(entry: &Path) -> Command {
    let mut command = Command::new("node");
    command
        .arg("--import")
        .arg(mcp_dir().join("conformance-node20.mjs"))
        .arg(entry);
    command
}

/// The client scenarios the suite has, as `conformance list --client` says.
fn client_scenarios(entry: &Path) -> Vec<String> {
    let out = suite_command(entry)
        .args(["list", "--client"])
        .output()
        .expect("run node");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "`conformance list --client` failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .filter_map(|line| line.trim_start().strip_prefix("- "))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// One scenario as the suite reported it.
struct Outcome {
    /// The suite's exit status (0: every check passed and tandem exited 0).
    passed: bool,
    /// Check id → status (`SUCCESS`, `FAILURE`, `WARNING`; `INFO` left out).
    checks: BTreeMap<String, String>,
    /// tandem's stdout and stderr.
    output: String,
    /// The suite's own report.
    report: String,
}

/// Runs one scenario with the client script; results under `dir/out`.
fn run_scenario(entry: &Path, dir: &Path, scenario: &str) -> Outcome {
    let out_dir = dir.join("out").join(scenario.replace('/', "_"));
    let out = suite_command(entry)
        .args(["client", "--scenario", scenario, "--timeout", "60000"])
        .arg("--command")
        .arg(dir.join("client.sh"))
        .arg("-o")
        .arg(&out_dir)
        .current_dir(dir)
        .env("TANDEM_BIN", tandem_bin())
        .env("TANDEM_HOME", dir.join("home"))
        .env_remove("TANDEM_LOG")
        .output()
        .expect("run node");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The suite writes `<scenario>-<timestamp>/` (a scenario's `/` makes a
    // directory): the one directory with a checks.json under out_dir.
    let result = find_checks(&out_dir)
        .unwrap_or_else(|| panic!("{scenario}: the suite wrote no checks.json\n{report}"));
    let read = |name: &str| std::fs::read_to_string(result.join(name)).unwrap_or_default();
    let checks: Vec<Value> =
        serde_json::from_str(&read("checks.json")).expect("checks.json is JSON");
    let checks = checks
        .iter()
        .filter(|c| c["status"] != "INFO")
        .map(|c| {
            (
                c["id"].as_str().unwrap_or_default().to_string(),
                c["status"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    Outcome {
        passed: out.status.success(),
        checks,
        output: format!("{}{}", read("stdout.txt"), read("stderr.txt")),
        report,
    }
}

fn find_checks(dir: &Path) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.join("checks.json").exists() {
            return Some(path);
        }
        if path.is_dir() {
            if let Some(found) = find_checks(&path) {
                return Some(found);
            }
        }
    }
    None
}

/// What is wrong with a scenario's outcome, if anything.
fn judge(scenario: &str, outcome: &Outcome) -> Option<String> {
    let failing: Vec<&String> = outcome
        .checks
        .iter()
        .filter(|(_, status)| *status != "SUCCESS")
        .map(|(id, _)| id)
        .collect();
    if PASSING.iter().any(|(name, _)| *name == scenario) {
        let succeeded = outcome.checks.values().any(|s| s == "SUCCESS");
        if !outcome.passed || !failing.is_empty() || !succeeded {
            return Some(format!("expected to pass; failing checks {failing:?}"));
        }
        let expected_output = match scenario {
            "tools_call" => "The sum of 5 and 3 is 8",
            "sse-retry" => "Reconnection test completed successfully",
            "initialize" => "  ready  (http: http://localhost:",
            _ => "",
        };
        if !outcome.output.contains(expected_output) {
            return Some(format!("tandem did not print {expected_output:?}"));
        }
        return None;
    }
    if UNSUPPORTED.iter().any(|(name, _)| *name == scenario) {
        if outcome.passed || failing.is_empty() {
            return Some(
                "listed as unsupported but passed: move it to PASSING (and protocol.md)"
                    .to_string(),
            );
        }
        // Failing for the reason given, not another.
        let why = if scenario.starts_with("auth/") {
            "HTTP 401 Unauthorized"
        } else {
            "Elicitation was not accepted"
        };
        if !outcome.output.contains(why) {
            return Some(format!("failed, but tandem's output lacks {why:?}"));
        }
        return None;
    }
    Some("a scenario this test does not classify: add it to PASSING or UNSUPPORTED".to_string())
}

#[test]
fn the_mcp_conformance_suites_client_scenarios_pass_except_the_unsupported_ones() {
    let Some(entry) = suite() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("client.sh");
    std::fs::write(&script, CLIENT_SCRIPT).expect("write the client script");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod the client script");
    std::fs::create_dir_all(dir.path().join("home")).expect("TANDEM_HOME");

    let scenarios = client_scenarios(&entry);
    for (name, _) in PASSING.iter().chain(UNSUPPORTED) {
        assert!(
            scenarios.iter().any(|s| s == name),
            "the suite no longer has the client scenario `{name}` (it has {scenarios:?})"
        );
    }
    // sse-retry measures how long the client waits before it reconnects:
    // it runs alone, the others four at a time.
    let (timed, rest): (Vec<&String>, Vec<&String>) =
        scenarios.iter().partition(|s| *s == "sse-retry");
    let mut outcomes: Vec<(String, Outcome)> = timed
        .iter()
        .map(|s| (s.to_string(), run_scenario(&entry, dir.path(), s)))
        .collect();
    for batch in rest.chunks(4) {
        std::thread::scope(|scope| {
            let running: Vec<_> = batch
                .iter()
                .map(|s| {
                    let (entry, dir) = (&entry, dir.path());
                    scope.spawn(move || (s.to_string(), run_scenario(entry, dir, s)))
                })
                .collect();
            outcomes.extend(
                running
                    .into_iter()
                    .map(|r| r.join().expect("scenario thread")),
            );
        });
    }

    let mut summary = String::new();
    let mut wrong = Vec::new();
    for (scenario, outcome) in &outcomes {
        let verdict = judge(scenario, outcome);
        let expected = if UNSUPPORTED.iter().any(|(name, _)| name == scenario) {
            " (unsupported)"
        } else {
            ""
        };
        summary.push_str(&format!(
            "{}{expected} {scenario}: {:?}{}\n",
            if outcome.passed { "passed" } else { "failed" },
            outcome.checks,
            verdict
                .as_deref()
                .map(|v| format!("  <- WRONG: {v}"))
                .unwrap_or_default()
        ));
        if let Some(verdict) = verdict {
            wrong.push(format!(
                "{scenario}: {verdict}\n--- tandem's output\n{}\n--- the suite's report\n{}",
                outcome.output, outcome.report
            ));
        }
    }
    eprintln!("conformance client scenarios:\n{summary}");
    assert!(
        wrong.is_empty(),
        "scenarios not as expected:\n{summary}\n{}",
        wrong.join("\n\n")
    );
}
