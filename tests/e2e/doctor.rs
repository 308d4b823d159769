//! `tandem doctor` through the real binary: with the scripted model server
//! up every check passes and the server saw the model list and a streaming
//! request; with a dead port, a broken config file and a home that cannot
//! be created, each problem is reported with its fix and the exit status
//! is 1.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::support::client::tandem_bin;
use crate::support::model_server::{anthropic, openai, ModelServer, MODEL_NAME};

/// Runs `tandem doctor` (with `args`) in `workspace` with `home` as
/// `TANDEM_HOME`, `bin` first on `PATH` (the fake editors), and `env`.
async fn doctor(
    home: &Path,
    workspace: &Path,
    bin: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let path = format!("{}:/usr/bin:/bin", bin.display());
    tokio::process::Command::new(tandem_bin())
        .arg("doctor")
        .args(args)
        .current_dir(workspace)
        .env("TANDEM_HOME", home)
        .env("TANDEM_LOG", "warn")
        .env("PATH", path)
        .env_remove("TANDEM_PROVIDER")
        .env_remove("TANDEM_BASE_URL")
        .env_remove("TANDEM_MODEL")
        .env_remove("TANDEM_SANDBOX_SIMULATE_UNAVAILABLE")
        .env_remove("TANDEM_SANDBOX_SIMULATE_NO_NAMESPACES")
        .envs(env.iter().copied())
        .output()
        .await
        .expect("tandem doctor runs")
}

/// A directory with fake `nvim` and `code` that print a version, so the
/// editor checks do not depend on what this machine has installed.
fn fake_editors() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let bin = tempfile::tempdir().unwrap();
    for (name, version) in [
        ("nvim", "NVIM v0.11.4\nBuild type: Release"),
        ("code", "1.95.3\nf1a4fb1\nx64"),
    ] {
        let path = bin.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\nprintf '%s\\n' '{version}'\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

/// The check with `id` in a `--json` report.
fn check<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id} in {report}"))
}

fn json_report(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not one JSON object ({e}): {stdout}"))
}

#[tokio::test]
async fn doctor_with_the_model_server_up_reports_every_check_ok_and_exits_zero() {
    let server = ModelServer::start().await;
    server.push(openai::text(["o", "k"]));
    server.push(openai::text(["ok"]));
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let bin = fake_editors();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[model]\nbase_url = \"{}\"\nname = \"{MODEL_NAME}\"\napi_key_env = \"TANDEM_TEST_NO_KEY\"\n",
            server.base_url()
        ),
    )
    .unwrap();
    std::fs::create_dir(workspace.path().join(".tandem")).unwrap();
    std::fs::write(
        workspace.path().join(".tandem/config.toml"),
        "[limits]\nmax_iterations = 20\n",
    )
    .unwrap();

    let output = doctor(home.path(), workspace.path(), bin.path(), &["--json"], &[]).await;
    let report = json_report(&output);
    assert_eq!(output.status.code(), Some(0), "{report}");
    assert!(
        output.stderr.is_empty(),
        "the report is on stdout: {output:?}"
    );
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["problems"], 0, "{report}");
    for id in [
        "model.config",
        "model.reachable",
        "model.listed",
        "model.streams",
        "config.user",
        "config.workspace",
        "state.home",
        "editors.nvim",
        "editors.vscode",
    ] {
        assert_eq!(check(&report, id)["status"], "ok", "{id}: {report}");
    }
    assert!(
        check(&report, "model.streams")["message"]
            .as_str()
            .unwrap()
            .contains("2 chunk(s)"),
        "{report}"
    );
    assert!(
        check(&report, "editors.nvim")["message"]
            .as_str()
            .unwrap()
            .starts_with("Neovim: NVIM v0.11.4"),
        "{report}"
    );
    assert!(
        check(&report, "editors.vscode")["message"]
            .as_str()
            .unwrap()
            .starts_with("VS Code: 1.95.3"),
        "{report}"
    );
    // The sandbox check is this machine's; it never fails the report.
    let sandbox = check(&report, "sandbox.mechanism");
    assert_ne!(sandbox["status"], "fail", "{report}");
    assert_eq!(
        report["sandbox"]["available"],
        sandbox["status"] == "ok",
        "{report}"
    );

    // What the server received: the list, then one small streamed request.
    let requests = server.wait_for_requests(2).await;
    assert_eq!(
        (requests[0].method.as_str(), requests[0].path.as_str()),
        ("GET", "/v1/models")
    );
    assert_eq!(requests[1].path, "/v1/chat/completions");
    assert_eq!(requests[1].body["stream"], true, "{}", requests[1].body);
    assert_eq!(requests[1].body["model"], MODEL_NAME);

    // The same, for people.
    let output = doctor(home.path(), workspace.path(), bin.path(), &[], &[]).await;
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(text.starts_with("tandem doctor "), "{text}");
    assert!(
        text.contains("\nmodel server\n  ok    openai server at "),
        "{text}"
    );
    assert!(
        text.contains(&format!("  ok    `{MODEL_NAME}` is listed\n")),
        "{text}"
    );
    assert!(
        text.contains("  ok    streams: first text after "),
        "{text}"
    );
    assert!(!text.contains("FAIL"), "{text}");
}

#[tokio::test]
async fn doctor_reports_a_dead_port_a_broken_config_and_an_unusable_home_each_with_a_fix() {
    // A port nobody listens on: bound, then released.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    let base_url = format!("http://127.0.0.1:{port}/v1");
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let bin = fake_editors();
    std::fs::create_dir(workspace.path().join(".tandem")).unwrap();
    let broken = workspace.path().join(".tandem/config.toml");
    std::fs::write(&broken, "[model]\nnmae = \"typo\"\n").unwrap();
    // TANDEM_HOME beneath a file: it can never be created.
    let file = home.path().join("not-a-dir");
    std::fs::write(&file, "").unwrap();
    let unusable_home = file.join("home");
    let env = [
        ("TANDEM_BASE_URL", base_url.as_str()),
        ("TANDEM_SANDBOX_SIMULATE_UNAVAILABLE", "1"),
    ];

    let output = doctor(
        &unusable_home,
        workspace.path(),
        bin.path(),
        &["--json"],
        &env,
    )
    .await;
    let report = json_report(&output);
    assert_eq!(output.status.code(), Some(1), "{report}");
    assert_eq!(report["ok"], false, "{report}");
    assert_eq!(report["problems"], 3, "{report}");

    let config = check(&report, "config.workspace");
    assert_eq!(config["status"], "fail", "{report}");
    let message = config["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("invalid config at {}", broken.display()))
            && message.contains("nmae"),
        "{message}"
    );
    assert!(
        config["fix"]
            .as_str()
            .unwrap()
            .starts_with("correct the file"),
        "{config}"
    );

    let reachable = check(&report, "model.reachable");
    assert_eq!(reachable["status"], "fail", "{report}");
    assert!(
        reachable["message"]
            .as_str()
            .unwrap()
            .contains(&format!("{base_url} (connection refused)")),
        "{reachable}"
    );
    assert!(
        reachable["fix"]
            .as_str()
            .unwrap()
            .starts_with("start the model server at"),
        "{reachable}"
    );
    assert_eq!(
        check(&report, "model.streams")["status"],
        "skip",
        "{report}"
    );

    let state = check(&report, "state.home");
    assert_eq!(state["status"], "fail", "{report}");
    assert!(!unusable_home.exists());
    assert!(
        state["fix"].as_str().unwrap().contains("TANDEM_HOME"),
        "{state}"
    );

    // A missing sandbox is a warning with its fix, not a failure.
    let sandbox = check(&report, "sandbox.mechanism");
    assert_eq!(sandbox["status"], "warn", "{report}");
    assert!(
        sandbox["message"]
            .as_str()
            .unwrap()
            .starts_with("exec sandbox unavailable: simulated"),
        "{sandbox}"
    );
    assert!(
        sandbox["fix"]
            .as_str()
            .unwrap()
            .contains("TANDEM_SANDBOX_SIMULATE_UNAVAILABLE"),
        "{sandbox}"
    );

    // For people: each problem on a FAIL line, its fix beneath.
    let output = doctor(&unusable_home, workspace.path(), bin.path(), &[], &env).await;
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{text}");
    for problem in [
        format!("  FAIL  invalid config at {}", broken.display()),
        "  FAIL  unreachable: could not connect".to_string(),
        format!(
            "  FAIL  TANDEM_HOME {} does not exist",
            unusable_home.display()
        ),
    ] {
        let at = text
            .find(&problem)
            .unwrap_or_else(|| panic!("no `{problem}` in:\n{text}"));
        let after: Vec<&str> = text[at..].lines().skip(1).collect();
        assert!(
            after
                .iter()
                .take_while(|l| l.starts_with("        "))
                .any(|l| l.starts_with("        fix: ")),
            "no fix under `{problem}`:\n{text}"
        );
    }
    assert!(
        text.ends_with("3 problem(s) found: see the fixes above.\n"),
        "{text}"
    );
}

#[tokio::test]
async fn doctor_creates_no_tandem_home_it_checks() {
    let server = ModelServer::start().await;
    server.push(openai::text(["ok"]));
    let parent = tempfile::tempdir().unwrap();
    let home = parent.path().join("new-home");
    let workspace = tempfile::tempdir().unwrap();
    let bin = fake_editors();
    let base_url = server.base_url();
    let env = [
        ("TANDEM_BASE_URL", base_url.as_str()),
        ("TANDEM_MODEL", MODEL_NAME),
    ];

    let output = doctor(&home, workspace.path(), bin.path(), &["--json"], &env).await;
    let report = json_report(&output);

    assert_eq!(output.status.code(), Some(0), "{report}");
    let state = check(&report, "state.home");
    assert_eq!(state["status"], "ok", "{report}");
    assert!(
        state["message"]
            .as_str()
            .unwrap()
            .contains("does not exist yet; it will be created"),
        "{state}"
    );
    assert!(!home.exists(), "doctor created {}", home.display());
    assert_eq!(
        check(&report, "config.environment")["message"],
        "environment: TANDEM_BASE_URL, TANDEM_MODEL set (over the files)"
    );
}

#[tokio::test]
async fn doctor_asks_an_anthropic_server_with_its_key_and_version_headers() {
    let server = ModelServer::start().await;
    server.push(anthropic::text(["ok"]));
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let bin = fake_editors();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[model]\nprovider = \"anthropic\"\nbase_url = \"{}\"\nname = \"{MODEL_NAME}\"\n\
             api_key_env = \"TANDEM_DOCTOR_TEST_KEY\"\n",
            server.base_url()
        ),
    )
    .unwrap();
    let env = [("TANDEM_DOCTOR_TEST_KEY", "sk-doctor-test")];

    let output = doctor(home.path(), workspace.path(), bin.path(), &["--json"], &env).await;
    let report = json_report(&output);

    assert_eq!(output.status.code(), Some(0), "{report}");
    assert_eq!(
        check(&report, "model.key")["message"],
        "API key from $TANDEM_DOCTOR_TEST_KEY"
    );
    assert_eq!(check(&report, "model.streams")["status"], "ok", "{report}");
    let requests = server.wait_for_requests(2).await;
    assert_eq!(requests[0].path, "/v1/models");
    assert_eq!(requests[1].path, "/v1/messages");
    for request in &requests[..2] {
        assert!(
            request
                .headers
                .contains(&("x-api-key".to_string(), "sk-doctor-test".to_string())),
            "{:?}",
            request.headers
        );
        assert!(
            request
                .headers
                .iter()
                .any(|(name, _)| name == "anthropic-version"),
            "{:?}",
            request.headers
        );
    }
    // The key is never printed.
    assert!(!String::from_utf8_lossy(&output.stdout).contains("sk-doctor-test"));
}

#[tokio::test]
async fn a_model_the_server_does_not_list_warns_when_it_still_answers_and_fails_when_it_does_not() {
    let server = ModelServer::start().await;
    server.set_models(&["other-model", "third-model"]);
    server.push(openai::text(["ok"]));
    server.push(openai::error(404, "model 'scripted-model' not found"));
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let bin = fake_editors();
    let base_url = server.base_url();
    let env = [
        ("TANDEM_BASE_URL", base_url.as_str()),
        ("TANDEM_MODEL", MODEL_NAME),
    ];

    let output = doctor(home.path(), workspace.path(), bin.path(), &["--json"], &env).await;
    let report = json_report(&output);
    assert_eq!(output.status.code(), Some(0), "{report}");
    let listed = check(&report, "model.listed");
    assert_eq!(listed["status"], "warn", "{report}");
    assert_eq!(
        listed["message"],
        format!(
            "`{MODEL_NAME}` is not listed (the server lists other-model, third-model), though the server answers to it"
        )
    );

    let output = doctor(home.path(), workspace.path(), bin.path(), &["--json"], &env).await;
    let report = json_report(&output);
    assert_eq!(output.status.code(), Some(1), "{report}");
    let listed = check(&report, "model.listed");
    assert_eq!(listed["status"], "fail", "{report}");
    assert!(
        listed["fix"]
            .as_str()
            .unwrap()
            .contains(&format!("ollama pull {MODEL_NAME}")),
        "{listed}"
    );
    let streams = check(&report, "model.streams");
    assert_eq!(streams["status"], "fail", "{report}");
    assert!(
        streams["fix"]
            .as_str()
            .unwrap()
            .starts_with("the server refused the request"),
        "{streams}"
    );
}
