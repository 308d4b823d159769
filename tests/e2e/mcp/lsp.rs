//! Real MCP servers given through the configuration, over LSP.

use serde_json::{json, Value};

use super::{
    call, config_with, everything, fault_log, fault_server, list_servers, offered, offered_names,
    session, time_server, tool_result, wait_fault_log,
};
use crate::support::client::{Editor, EditorOptions};
use crate::support::model_server::{openai, ModelServer};

#[tokio::test]
async fn the_everything_servers_echo_reaches_the_model_in_the_next_request() {
    let Some(everything) = everything() else {
        return;
    };
    let server = ModelServer::start().await;
    server.push(call(
        "call_1",
        "mcp__everything__echo",
        json!({"message": "hello from the model"}),
    ));
    server.push(openai::text(["done"]));
    let root = tempfile::tempdir().unwrap();
    let config = config_with(&server, "auto", json!({"everything": everything}));
    let (mut editor, session) = session(root.path(), config, EditorOptions::default()).await;

    let (receipt, updates) = editor.prompt(&session, "echo something").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    // Offered with the server's description and input schema.
    let echo = offered(&requests[0])
        .into_iter()
        .find(|t| t["name"] == "mcp__everything__echo")
        .unwrap_or_else(|| panic!("echo not offered: {:?}", offered_names(&requests[0])));
    assert!(
        echo["description"]
            .as_str()
            .is_some_and(|d| d.contains("everything")),
        "{echo}"
    );
    assert!(
        echo["parameters"]["properties"]["message"].is_object(),
        "{echo}"
    );
    // The server's answer is what the model reads next.
    assert_eq!(
        tool_result(&requests[1], "call_1"),
        "Echo: hello from the model"
    );
    // The editor sees an `mcp` call naming the server and the tool.
    let shown = updates
        .iter()
        .map(|u| &u["update"])
        .find(|u| u["sessionUpdate"] == "tool_call")
        .expect("a tool_call update");
    assert_eq!(shown["kind"], "mcp", "{shown}");
    assert_eq!(
        shown["mcp"],
        json!({"server": "everything", "tool": "echo"})
    );
    // The log has the call and its result (replay reads them).
    let log = editor.log_lines(&session);
    let logged_call = log.iter().find(|e| e["type"] == "tool_call").unwrap();
    assert_eq!(logged_call["mcp"]["server"], "everything");
    assert!(log
        .iter()
        .any(|e| e["type"] == "tool_result" && e["output"] == "Echo: hello from the model"));
    // `tandem replay` shows the call and its result.
    let home = editor.sessions_dir().parent().unwrap().to_path_buf();
    let replay = std::process::Command::new(crate::support::client::tandem_bin())
        .args(["replay", &session, "--full"])
        .env("TANDEM_HOME", &home)
        .output()
        .unwrap();
    let replay = String::from_utf8_lossy(&replay.stdout);
    assert!(replay.contains("mcp__everything__echo"), "{replay}");
    assert!(replay.contains("Echo: hello from the model"), "{replay}");
    // And the server is listed, ready, with its tools.
    let servers = list_servers(&mut editor, &session).await;
    assert_eq!(servers[0]["name"], "everything", "{servers}");
    assert_eq!(servers[0]["state"], "ready", "{servers}");
    assert!(servers[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "mcp__everything__echo" && t["tool"] == "echo"));
}

#[tokio::test]
async fn the_time_server_from_pypi_answers_a_call() {
    let Some(time) = time_server() else {
        return;
    };
    let server = ModelServer::start().await;
    server.push(call(
        "call_t",
        "mcp__time__get_current_time",
        json!({"timezone": "UTC"}),
    ));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let config = config_with(&server, "auto", json!({"time": time}));
    let (mut editor, session) = session(root.path(), config, EditorOptions::default()).await;
    editor.prompt(&session, "what time is it").await;
    let answer = tool_result(&server.requests()[1], "call_t");
    let parsed: Value = serde_json::from_str(&answer).unwrap_or_else(|_| panic!("{answer}"));
    assert_eq!(parsed["timezone"], "UTC", "{answer}");
    assert!(parsed["datetime"].is_string(), "{answer}");
}

#[tokio::test]
async fn a_server_sees_only_the_minimal_environment_and_what_its_config_gives() {
    let Some(mut everything) = everything() else {
        return;
    };
    everything["env"] = json!({"GIVEN_IN_CONFIG": "plain"});
    everything["env_vars"] = json!(["PASSED_BY_NAME"]);
    let server = ModelServer::start().await;
    server.push(call("call_env", "mcp__everything__get-env", json!({})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let options = EditorOptions {
        env: vec![
            ("OPENAI_API_KEY".into(), "sk-must-not-leak".into()),
            (
                "TANDEM_TEST_NO_KEY".into(),
                "model-key-must-not-leak".into(),
            ),
            ("PASSED_BY_NAME".into(), "by-name".into()),
            ("SOME_OTHER_VAR".into(), "x".into()),
        ],
        ..EditorOptions::default()
    };
    let config = config_with(&server, "auto", json!({"everything": everything}));
    let (mut editor, session) = session(root.path(), config, options).await;
    editor.prompt(&session, "env").await;
    let answer = tool_result(&server.requests()[1], "call_env");
    let env: Value = serde_json::from_str(&answer).unwrap_or_else(|_| panic!("{answer}"));
    let names: Vec<&str> = env
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let allowed = [
        "PATH",
        "HOME",
        "TMPDIR",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "GIVEN_IN_CONFIG",
        "PASSED_BY_NAME",
    ];
    assert!(
        names.iter().all(|n| allowed.contains(n)),
        "the server saw more than its config gives: {names:?}"
    );
    assert_eq!(env["GIVEN_IN_CONFIG"], "plain");
    assert_eq!(env["PASSED_BY_NAME"], "by-name");
    assert!(!answer.contains("must-not-leak"), "{answer}");
}

#[tokio::test]
async fn review_mode_asks_per_tool_and_allow_always_covers_only_that_tool() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let server = ModelServer::start().await;
    server.push(call("c1", "mcp__fault__echo", json!({"text": "one"})));
    server.push(call("c2", "mcp__fault__echo", json!({"text": "two"})));
    server.push(call("c3", "mcp__fault__env", json!({})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let config = config_with(
        &server,
        "review",
        json!({"fault": fault_server("tools", log.path())}),
    );
    let (mut editor, session) = session(root.path(), config, EditorOptions::default()).await;
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = asked.clone();
    editor.on_request(move |method, params| {
        (method == "tandem/requestPermission").then(|| {
            seen.lock().unwrap().push(params.clone());
            json!({"outcome": {"outcome": "selected", "optionId": "allow_always"}})
        })
    });
    editor.prompt(&session, "go").await;
    let asked = asked.lock().unwrap().clone();
    // echo asked once (then remembered), env asked on its own.
    assert_eq!(asked.len(), 2, "{asked:?}");
    let first = &asked[0]["toolCall"];
    assert_eq!(first["kind"], "mcp");
    assert_eq!(first["rawInput"], json!({"text": "one"}));
    let title = first["title"].as_str().unwrap();
    assert!(
        title.contains("fault") && title.contains("echo") && title.contains("one"),
        "{title}"
    );
    assert_eq!(asked[1]["toolCall"]["toolCallId"], "c3");
    let requests = server.requests();
    assert_eq!(tool_result(&requests[2], "c2"), "fault echo: two");
    let decisions: Vec<(String, String)> = editor
        .log_lines(&session)
        .into_iter()
        .filter(|e| e["type"] == "approval_decided")
        .map(|e| {
            (
                e["decision"].as_str().unwrap_or_default().to_string(),
                e["scope"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        decisions,
        [
            ("allow_always".to_string(), "mcp|fault|echo".to_string()),
            ("allowed_by_rule".to_string(), "mcp|fault|echo".to_string()),
            ("allow_always".to_string(), "mcp|fault|env".to_string()),
        ]
    );
}

#[tokio::test]
async fn read_only_mode_offers_only_read_only_tools_and_trust_runs_them_unasked() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let server = ModelServer::start().await;
    server.push(call("c1", "mcp__fault__env", json!({})));
    server.push(openai::text(["ok"]));
    let root = tempfile::tempdir().unwrap();
    let mut fault = fault_server("tools", log.path());
    fault["trust_read_only"] = json!(true);
    let config = config_with(&server, "read-only", json!({"fault": fault}));
    let (mut editor, session) = session(root.path(), config, EditorOptions::default()).await;
    editor.on_request(|method, _| {
        assert_ne!(
            method, "tandem/requestPermission",
            "a trusted read-only tool asks nobody"
        );
        None
    });
    editor.prompt(&session, "go").await;
    let requests = server.requests();
    let names = offered_names(&requests[0]);
    assert!(names.contains(&"mcp__fault__env".to_string()), "{names:?}");
    assert!(
        !names
            .iter()
            .any(|n| n == "mcp__fault__echo" || n == "mcp__fault__crash"),
        "{names:?}"
    );
    assert!(tool_result(&requests[1], "c1").contains("PATH"));
}

#[tokio::test]
async fn servers_stop_with_the_daemon_and_leave_no_process_behind() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let root = tempfile::tempdir().unwrap();
    let (_server, editor, _session, pid) = a_session_with_a_running_server(&root, &log).await;
    editor.shutdown_and_exit().await;
    assert!(
        !alive(pid),
        "the server outlived the daemon: {:?}",
        fault_log(log.path())
    );
}

#[tokio::test]
async fn closing_the_last_session_that_uses_a_server_stops_it() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let root = tempfile::tempdir().unwrap();
    let (_server, mut editor, session, pid) = a_session_with_a_running_server(&root, &log).await;
    editor
        .request("tandem/closeSession", json!({"sessionId": session}))
        .await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while alive(pid) && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(
        !alive(pid),
        "the server outlived the only session using it: {:?}",
        fault_log(log.path())
    );
    editor.shutdown_and_exit().await;
}

/// A session in `root` whose config names the fault server (logging to
/// `log`), after one turn: the model server, the editor, the session and
/// the server's pid, checked alive.
async fn a_session_with_a_running_server(
    root: &tempfile::TempDir,
    log: &tempfile::NamedTempFile,
) -> (ModelServer, Editor, String, i32) {
    let server = ModelServer::start().await;
    server.push(openai::text(["hi"]));
    let config = config_with(
        &server,
        "auto",
        json!({"fault": fault_server("tools", log.path())}),
    );
    let (mut editor, session) = session(root.path(), config, EditorOptions::default()).await;
    editor.prompt(&session, "hi").await;
    let lines = wait_fault_log(log.path(), |l| l.starts_with("started ")).await;
    let pid: i32 = lines[0]
        .strip_prefix("started ")
        .and_then(|p| p.parse().ok())
        .unwrap();
    assert!(alive(pid), "the server runs while the session does");
    (server, editor, session, pid)
}

/// Whether `pid` is a process that has not been reaped (nor is a zombie).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| !stat.contains(") Z "))
        .unwrap_or(false)
}

#[tokio::test]
async fn a_changed_tool_list_is_offered_from_the_next_step() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let server = ModelServer::start().await;
    server.push(call("c1", "mcp__fault__grow", json!({})));
    server.push(openai::text(["grown"]));
    server.push(openai::text(["again"]));
    let root = tempfile::tempdir().unwrap();
    let config = config_with(
        &server,
        "auto",
        json!({"fault": fault_server("tools", log.path())}),
    );
    let (mut editor, session) = session(root.path(), config, EditorOptions::default()).await;
    editor.prompt(&session, "grow").await;
    assert!(!offered_names(&server.requests()[0]).contains(&"mcp__fault__grown".to_string()));
    // The refresh follows the notification; the listing shows when it landed.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let servers = list_servers(&mut editor, &session).await;
        let tools = servers[0]["tools"].as_array().cloned().unwrap_or_default();
        if tools.iter().any(|t| t["tool"] == "grown") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never refreshed: {servers}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    editor.prompt(&session, "again").await;
    let names = offered_names(&server.requests()[2]);
    assert!(
        names.contains(&"mcp__fault__grown".to_string()),
        "{names:?}"
    );
    assert_eq!(
        fault_log(log.path())
            .iter()
            .filter(|l| l.contains("\"tools/list\""))
            .count(),
        2,
        "listed at the start and once after the change"
    );
}

#[tokio::test]
async fn sessions_with_the_same_definition_share_one_server_process() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let server = ModelServer::start().await;
    server.push(call("c1", "mcp__fault__echo", json!({"text": "a"})));
    server.push(openai::text(["one"]));
    server.push(call("c2", "mcp__fault__echo", json!({"text": "b"})));
    server.push(openai::text(["two"]));
    let root = tempfile::tempdir().unwrap();
    let config = config_with(
        &server,
        "auto",
        json!({"fault": fault_server("tools", log.path())}),
    );
    let (mut editor, first) = session(root.path(), config.clone(), EditorOptions::default()).await;
    let second = editor.new_session(config).await;
    editor.prompt(&first, "a").await;
    editor.prompt(&second, "b").await;
    assert_eq!(tool_result(&server.requests()[3], "c2"), "fault echo: b");
    let starts = fault_log(log.path())
        .iter()
        .filter(|l| l.starts_with("started "))
        .count();
    assert_eq!(starts, 1, "one process for both sessions");
    let all = editor.request("tandem/listMcpServers", json!({})).await;
    assert_eq!(
        all["result"]["servers"].as_array().map(Vec::len),
        Some(1),
        "{all}"
    );
}
