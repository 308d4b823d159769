//! ACP's `additionalDirectories` on `session/load`, `session/resume` and
//! `session/fork` (issue 29), over `tandem acp` and `tandem acp --attach`:
//! the session's roots are its logged ones plus those given; a fork keeps
//! its own in its log; a bad entry is refused, naming it.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::acp::AcpClient;
use crate::serve::StopOnDrop;
use crate::support::model_server::{openai, ModelServer};

/// A folder holding `name` with `text`, by its real path.
fn folder_with(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(name), text).unwrap();
    let file = dir.path().canonicalize().unwrap().join(name);
    (dir, file)
}

/// One turn whose model reads `paths`; the tool results it then saw.
async fn read_turn(
    client: &mut AcpClient,
    server: &ModelServer,
    session: &str,
    paths: &[&Path],
) -> Vec<String> {
    let calls: Vec<(String, String)> = paths
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("r{i}"), json!({"path": p}).to_string()))
        .collect();
    let refs: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(id, args)| (id.as_str(), "read_file", args.as_str()))
        .collect();
    server.push(openai::tool_calls(&refs));
    server.push(openai::text(["done"]));
    let (answer, _) = client
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "read"}]}),
            "allow_once",
        )
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // The history's earlier results come first: this turn's are the last.
    let results = server.requests().last().unwrap().tool_messages();
    let mut results = results[results.len() - paths.len()..].to_vec();
    results.sort();
    results.into_iter().map(|(_, text)| text).collect()
}

fn reached(result: &str, text: &str) {
    assert!(result.contains(text), "expected `{text}` in: {result}");
}

fn refused(result: &str) {
    assert!(result.contains("outside the workspace"), "{result}");
}

async fn roots_on_load_resume_fork(args: &[&str]) {
    let server = ModelServer::start().await;
    let main = tempfile::tempdir().unwrap();
    let (_one, in_one) = folder_with("one.txt", "first extra\n");
    let (_two, in_two) = folder_with("two.txt", "second extra\n");
    let (three, in_three) = folder_with("three.txt", "third extra\n");
    let mut client = AcpClient::spawn(args, &server).await;
    let _stop = args
        .contains(&"--attach")
        .then(|| StopOnDrop(client.home().to_path_buf()));
    client
        .request("initialize", json!({"protocolVersion": 1}), "")
        .await;
    let (_, session) = client.new_session(main.path()).await;
    let results = read_turn(&mut client, &server, &session, &[&in_one]).await;
    refused(&results[0]);

    // A bad entry is refused by each, naming it; the session is unchanged.
    for method in ["session/load", "session/resume", "session/fork"] {
        let (answer, _) = client
            .request(
                method,
                json!({"sessionId": session, "cwd": main.path(), "mcpServers": [],
                       "additionalDirectories": [main.path(), "/no/such/dir"]}),
                "",
            )
            .await;
        assert_eq!(answer["error"]["code"], -32602, "{method}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("additionalDirectories[1]"),
            "{method}: {answer}"
        );
    }

    // Closed, then loaded from its log with one more root.
    let (closed, _) = client
        .request("session/close", json!({"sessionId": session}), "")
        .await;
    assert_eq!(closed["result"], json!({}), "{closed}");
    let (loaded, _) = client
        .request(
            "session/load",
            json!({"sessionId": session, "cwd": main.path(), "mcpServers": [],
                   "additionalDirectories": [in_one.parent().unwrap()]}),
            "",
        )
        .await;
    assert!(loaded["result"].is_object(), "{loaded}");
    let results = read_turn(&mut client, &server, &session, &[&in_one, &in_two]).await;
    reached(&results[0], "first extra");
    refused(&results[1]);

    // Resumed while it runs: another root is added to those it has.
    let (resumed, _) = client
        .request(
            "session/resume",
            json!({"sessionId": session, "cwd": main.path(), "mcpServers": [],
                   "additionalDirectories": [in_two.parent().unwrap()]}),
            "",
        )
        .await;
    assert!(resumed["result"].is_object(), "{resumed}");
    let results = read_turn(&mut client, &server, &session, &[&in_one, &in_two]).await;
    reached(&results[0], "first extra");
    reached(&results[1], "second extra");

    // A fork: the original's logged roots plus its own, kept in its log;
    // the roots the original was loaded with are not the fork's.
    let (forked, _) = client
        .request(
            "session/fork",
            json!({"sessionId": session, "cwd": main.path(), "mcpServers": [],
                   "additionalDirectories": [three.path()]}),
            "",
        )
        .await;
    let fork = forked["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{forked}"))
        .to_string();
    let results = read_turn(&mut client, &server, &fork, &[&in_three, &in_one]).await;
    reached(&results[0], "third extra");
    refused(&results[1]);
    let results = read_turn(&mut client, &server, &session, &[&in_three]).await;
    refused(&results[0]);
    let header = header_of(client.home(), &fork);
    assert_eq!(
        header["workspace"][1],
        json!(in_three.parent().unwrap()),
        "{header}"
    );
    let header = header_of(client.home(), &session);
    assert_eq!(header["workspace"].as_array().unwrap().len(), 1, "{header}");
}

fn header_of(home: &Path, session: &str) -> Value {
    let log = std::fs::read_to_string(home.join("sessions").join(format!("{session}.jsonl")))
        .unwrap_or_else(|e| panic!("no log of {session}: {e}"));
    serde_json::from_str(log.lines().next().unwrap()).unwrap()
}

#[tokio::test]
async fn acp_load_resume_and_fork_take_additional_directories() {
    roots_on_load_resume_fork(&["acp"]).await;
}

#[tokio::test]
async fn acp_attach_load_resume_and_fork_take_additional_directories() {
    roots_on_load_resume_fork(&["acp", "--attach"]).await;
}
