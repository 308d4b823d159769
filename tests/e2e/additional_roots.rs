//! More workspace roots for a session (`additionalDirectories`, issue 29)
//! over `tandem lsp` and through the serve: the tools reach into them and
//! walk them all, nothing outside them, and a reloaded session has them
//! again. (ACP's `session/new` is tests/acp-sdk/test/additional_directories.)

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::serve::{attach_options, StopOnDrop};
use crate::support::client::{Editor, EditorOptions};
use crate::support::model_server::{openai, ModelServer};

/// Runs one turn whose model calls `calls` then answers; returns the tool
/// results the model read, by call id.
async fn tool_turn(
    editor: &mut Editor,
    server: &ModelServer,
    session: &str,
    calls: &[(&str, &str, Value)],
) -> Vec<(String, String)> {
    let calls: Vec<(&str, &str, String)> = calls
        .iter()
        .map(|(id, name, args)| (*id, *name, args.to_string()))
        .collect();
    let refs: Vec<(&str, &str, &str)> =
        calls.iter().map(|(i, n, a)| (*i, *n, a.as_str())).collect();
    server.push(openai::tool_calls(&refs));
    server.push(openai::text(["done"]));
    let (receipt, _) = editor.prompt(session, "look around").await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    server.requests().last().unwrap().tool_messages()
}

fn result<'r>(results: &'r [(String, String)], id: &str) -> &'r str {
    &results.iter().find(|(i, _)| i == id).unwrap().1
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

async fn roots_reach_and_walk(options: EditorOptions) {
    let server = ModelServer::start().await;
    let (main, more, outside) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    write(main.path(), "a.txt", "alpha needle\n");
    write(more.path(), "b.txt", "beta needle\n");
    write(outside.path(), "c.txt", "gamma needle\n");
    let more_root = more.path().canonicalize().unwrap();
    let b = more_root.join("b.txt");
    let c = outside.path().canonicalize().unwrap().join("c.txt");

    let mut editor = Editor::spawn_with(options).await;
    editor.initialize(main.path()).await;
    // Bad entries are refused, naming them.
    for (bad, says) in [
        (json!(["relative/dir"]), "additionalDirectories[0]"),
        (
            json!([more.path(), "/no/such/dir"]),
            "additionalDirectories[1]",
        ),
    ] {
        let answer = editor
            .request(
                "tandem/newSession",
                json!({"workspaceFolder": main.path(), "additionalDirectories": bad,
                       "config": server.session_config()}),
            )
            .await;
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        assert!(
            answer["error"]["message"].as_str().unwrap().contains(says),
            "{answer}"
        );
    }
    let made = editor
        .request(
            "tandem/newSession",
            json!({"workspaceFolder": main.path(), "additionalDirectories": [more.path()],
                   "config": server.session_config()}),
        )
        .await;
    let session = made["result"]["sessionId"].as_str().unwrap().to_string();

    let check = |results: &[(String, String)]| {
        assert!(result(results, "r1").contains("beta needle"), "{results:?}");
        let outside = result(results, "r2");
        assert!(outside.contains("outside the workspace"), "{outside}");
        let listed = result(results, "l1");
        assert!(listed.contains("a.txt"), "{listed}");
        assert!(listed.contains(&b.display().to_string()), "{listed}");
        let found = result(results, "g1");
        assert!(
            found.contains("alpha needle") && found.contains("beta needle"),
            "{found}"
        );
        assert!(!found.contains("gamma"), "{found}");
    };
    let calls = [
        ("r1", "read_file", json!({"path": b})),
        ("r2", "read_file", json!({"path": c})),
        ("l1", "list_files", json!({})),
        ("g1", "grep", json!({"pattern": "needle"})),
    ];
    check(&tool_turn(&mut editor, &server, &session, &calls).await);

    // Closed and loaded again from its log: the same roots.
    let closed = editor
        .request("tandem/closeSession", json!({"sessionId": session}))
        .await;
    assert_eq!(closed["result"], json!({}), "{closed}");
    let loaded = editor
        .request("tandem/loadSession", json!({"sessionId": session}))
        .await;
    assert!(loaded["result"].is_object(), "{loaded}");
    check(&tool_turn(&mut editor, &server, &session, &calls).await);
    let header = &editor.log_lines(&session)[0];
    assert_eq!(
        header["workspace"][1],
        json!(more_root),
        "kept in the log's header: {header}"
    );
}

/// `tandem/loadSession`'s and `tandem/forkSession`'s `additionalDirectories`
/// (the LSP twins of ACP's on load and fork): roots after the logged ones,
/// for the load; kept in the fork's log; a bad one refused, naming it.
async fn roots_given_on_load_and_fork(options: EditorOptions) {
    let server = ModelServer::start().await;
    let (main, more, other) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    write(more.path(), "b.txt", "beta needle\n");
    write(other.path(), "c.txt", "gamma needle\n");
    let b = more.path().canonicalize().unwrap().join("b.txt");
    let c = other.path().canonicalize().unwrap().join("c.txt");
    let mut editor = Editor::spawn_with(options).await;
    editor.initialize(main.path()).await;
    let made = editor
        .request(
            "tandem/newSession",
            json!({"workspaceFolder": main.path(), "config": server.session_config()}),
        )
        .await;
    let session = made["result"]["sessionId"].as_str().unwrap().to_string();
    let calls = [
        ("b1", "read_file", json!({"path": b})),
        ("c1", "read_file", json!({"path": c})),
    ];
    let results = tool_turn(&mut editor, &server, &session, &calls).await;
    assert!(result(&results, "b1").contains("outside the workspace"));
    for method in ["tandem/loadSession", "tandem/forkSession"] {
        let answer = editor
            .request(
                method,
                json!({"sessionId": session, "additionalDirectories": ["relative/dir"]}),
            )
            .await;
        assert_eq!(answer["error"]["code"], -32602, "{method}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("additionalDirectories[0]"), "{answer}");
    }
    let closed = editor
        .request("tandem/closeSession", json!({"sessionId": session}))
        .await;
    assert_eq!(closed["result"], json!({}), "{closed}");
    let loaded = editor
        .request(
            "tandem/loadSession",
            json!({"sessionId": session, "additionalDirectories": [more.path()]}),
        )
        .await;
    assert!(loaded["result"].is_object(), "{loaded}");
    // This turn's results come last in the history.
    let results = tool_turn(&mut editor, &server, &session, &calls).await;
    let (b_now, c_now) = (&results[results.len() - 2].1, &results[results.len() - 1].1);
    assert!(b_now.contains("beta needle"), "{b_now}");
    assert!(c_now.contains("outside the workspace"), "{c_now}");
    let forked = editor
        .request(
            "tandem/forkSession",
            json!({"sessionId": session, "additionalDirectories": [other.path()]}),
        )
        .await;
    let fork = forked["result"]["sessionId"].as_str().unwrap().to_string();
    let results = tool_turn(&mut editor, &server, &fork, &calls).await;
    let (b_now, c_now) = (&results[results.len() - 2].1, &results[results.len() - 1].1);
    assert!(b_now.contains("outside the workspace"), "{b_now}");
    assert!(c_now.contains("gamma needle"), "{c_now}");
    let header = &editor.log_lines(&fork)[0];
    assert_eq!(
        header["workspace"][1],
        json!(other.path().canonicalize().unwrap()),
        "{header}"
    );
}

#[tokio::test]
async fn lsp_load_and_fork_take_additional_directories() {
    roots_given_on_load_and_fork(EditorOptions::default()).await;
}

#[tokio::test]
async fn lsp_attach_load_and_fork_take_additional_directories() {
    let home = Arc::new(tempfile::tempdir().unwrap());
    let _stop = StopOnDrop(home.path().to_path_buf());
    roots_given_on_load_and_fork(attach_options(&home)).await;
}

#[tokio::test]
async fn lsp_additional_directories_are_roots_that_a_reload_keeps() {
    roots_reach_and_walk(EditorOptions::default()).await;
}

#[tokio::test]
async fn lsp_attach_additional_directories_are_roots_in_the_serve() {
    let home = Arc::new(tempfile::tempdir().unwrap());
    let _stop = StopOnDrop(home.path().to_path_buf());
    roots_reach_and_walk(attach_options(&home)).await;
}
