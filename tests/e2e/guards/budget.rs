//! The hard spending caps of `[budget]`: a call that could cross a cap is
//! never made — per turn, per session, and per day across daemon runs.

use serde_json::{json, Value};

use super::{log_events, of_type, replay};
use crate::support::client::{Editor, EditorOptions};
use crate::support::model_server::{openai, ModelServer};

/// A session config where a call costs $0.001 per output token (input is
/// free, so the estimate does not depend on the system prompt's size) and
/// may output at most 10 tokens: the worst case of a call is $0.01, and a
/// scripted call (5 output tokens) costs $0.005.
fn priced(server: &ModelServer, budget: Value) -> Value {
    let mut config = server.session_config();
    config["model"]["max_output_tokens"] = json!(10);
    config["pricing"] =
        json!({"scripted-model": {"input_per_mtok": 0.0, "output_per_mtok": 1000.0}});
    config["budget"] = budget;
    config
}

async fn editor_on(root: &std::path::Path, options: EditorOptions) -> Editor {
    let mut editor = Editor::spawn_with(options).await;
    editor.initialize(root).await;
    editor
}

#[tokio::test]
async fn a_call_that_could_cross_the_turn_cap_is_not_made() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "alpha\n").unwrap();
    server.push(openai::tool_calls(&[(
        "call_1",
        "read_file",
        r#"{"path":"a.txt"}"#,
    )]));
    server.push(openai::text(["never asked for"]));
    let mut editor = editor_on(root.path(), EditorOptions::default()).await;
    // The first call: $0 spent + $0.01 at worst fits $0.012; the second:
    // $0.005 + $0.01 does not.
    let session = editor
        .new_session(priced(&server, json!({"max_cost_per_turn": 0.012})))
        .await;

    let (response, updates) = editor.prompt(&session, "read a.txt").await;
    let result = &response["result"];
    assert_eq!(result["stopReason"], "budget_exceeded", "{response}");
    let message = "stopped before a model call: max_cost_per_turn is $0.0120; \
                   spent $0.0050, and the call could cost up to $0.0100";
    assert_eq!(result["message"], message);
    assert_eq!(server.requests().len(), 1, "the second call was not made");
    let end = updates.last().unwrap();
    assert_eq!(end["update"]["sessionUpdate"], "turn_end");
    assert_eq!(end["update"]["stopReason"], "budget_exceeded");
    assert_eq!(end["update"]["message"], message);

    let log = log_events(&editor, &session);
    let exceeded = of_type(&log, "budget_exceeded");
    assert_eq!(exceeded.len(), 1);
    assert_eq!(exceeded[0]["cap"], "max_cost_per_turn");
    assert_eq!(exceeded[0]["unit"], "usd");
    assert_eq!(exceeded[0]["limit"], 0.012);
    assert!((exceeded[0]["spent"].as_f64().unwrap() - 0.005).abs() < 1e-9);
    assert!((exceeded[0]["estimate"].as_f64().unwrap() - 0.01).abs() < 1e-9);
    // The log stays consistent: every step that started ended.
    assert_eq!(
        of_type(&log, "step_start").len(),
        of_type(&log, "step_end").len()
    );
    assert_eq!(of_type(&log, "tool_result").len(), 1);

    let home = editor.home.clone();
    editor.shutdown_and_exit().await;
    let text = replay(home.path(), &session);
    assert!(
        text.contains("budget cap max_cost_per_turn reached: spent $0.0050"),
        "{text}"
    );
}

#[tokio::test]
async fn a_model_without_a_price_is_capped_in_tokens_before_its_first_call() {
    let server = ModelServer::start().await;
    server.push(openai::text(["never asked for"]));
    let root = tempfile::tempdir().unwrap();
    let mut editor = editor_on(root.path(), EditorOptions::default()).await;
    let mut config = server.session_config();
    config["budget"] = json!({"max_tokens_per_turn": 100, "max_cost_per_turn": 0.000001});
    let session = editor.new_session(config).await;

    let (response, _) = editor.prompt(&session, "hi").await;
    let result = &response["result"];
    assert_eq!(result["stopReason"], "budget_exceeded", "{response}");
    let message = result["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "stopped before a model call: max_tokens_per_turn is 100 tokens; spent 0 tokens"
        ),
        "{message}"
    );
    assert!(
        server.requests().is_empty(),
        "the model server saw no request"
    );
}

#[tokio::test]
async fn the_day_cap_counts_what_an_earlier_daemon_spent_in_the_workspace() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    server.push(openai::text(["first run"]));
    let mut editor = editor_on(root.path(), EditorOptions::default()).await;
    let session = editor.new_session(priced(&server, json!({}))).await;
    let (response, _) = editor.prompt(&session, "spend a little").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let home = editor.home.clone();
    editor.shutdown_and_exit().await;

    // A new daemon on the same state: $0.005 spent today in this
    // workspace, so a $0.01 call would cross a $0.012 day cap.
    let mut editor = editor_on(
        root.path(),
        EditorOptions {
            home: Some(home.clone()),
            ..EditorOptions::default()
        },
    )
    .await;
    let capped = priced(&server, json!({"max_cost_per_day": 0.012}));
    let session = editor.new_session(capped.clone()).await;
    let (response, _) = editor.prompt(&session, "more").await;
    let result = &response["result"];
    assert_eq!(result["stopReason"], "budget_exceeded", "{response}");
    assert_eq!(
        result["message"],
        "stopped before a model call: max_cost_per_day is $0.0120; \
         spent $0.0050, and the call could cost up to $0.0100"
    );
    assert_eq!(server.requests().len(), 1, "no call in the second run");

    // Another workspace has spent nothing today.
    server.push(openai::text(["elsewhere"]));
    let response = editor
        .request(
            "tandem/newSession",
            json!({"workspaceFolder": other.path(), "config": capped}),
        )
        .await;
    let elsewhere = response["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let (response, _) = editor.prompt(&elsewhere, "more").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(server.requests().len(), 2);
}
