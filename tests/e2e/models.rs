//! Models and reasoning effort per session, and the usage that follows
//! each model call (issue 29), over `tandem lsp` and through the serve
//! (`tandem lsp --attach`): `[models.<id>]`, `tandem/setModel`, the
//! `model_changed` event, the model server seeing the new name and effort,
//! and `usage` updates carrying the context in use and the costs.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::serve::{attach_options, StopOnDrop};
use crate::support::client::{tandem_bin, Editor, EditorOptions};
use crate::support::model_server::{openai, ModelServer, MODEL_NAME};

/// The scripted server's model as `default`, and `fast` beside it, with
/// two efforts and a price.
fn config_with_models(server: &ModelServer) -> Value {
    let mut config = server.session_config();
    config["model"]["context_window"] = json!(64000);
    config["models"] = json!({"fast": {"name": "fast-model", "efforts": ["low", "high"],
                                        "context_window": 32000}});
    config["pricing"] = json!({"fast-model": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}});
    config
}

fn usage_updates(updates: &[Value]) -> Vec<Value> {
    updates
        .iter()
        .filter(|u| u["update"]["sessionUpdate"] == "usage")
        .map(|u| u["update"].clone())
        .collect()
}

async fn switch_models_and_report_usage(options: EditorOptions, restart: bool) {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let home = options.home.clone();
    let mut editor = Editor::spawn_with(options).await;
    let caps = json!({"capabilities": {"experimental": {"tandem": {"requestPermission": true}}}});
    editor.hold_requests("tandem/requestPermission");
    editor.initialize_with(root.path(), caps.clone()).await;

    // The answer says the model in force and what there is to switch to.
    let created = editor
        .request(
            "tandem/newSession",
            json!({"config": config_with_models(&server)}),
        )
        .await;
    let result = &created["result"];
    assert_eq!(result["model"], "default", "{created}");
    assert!(result.get("effort").is_none(), "{created}");
    assert_eq!(
        result["models"],
        json!([{"id": "default", "name": MODEL_NAME, "efforts": [], "contextWindow": 64000},
               {"id": "fast", "name": "fast-model", "efforts": ["low", "high"],
                "contextWindow": 32000}])
    );
    let session = result["sessionId"].as_str().unwrap().to_string();

    // A turn on the default model: no effort sent; usage says the context.
    server.push(openai::text(["hi"]));
    let (_, updates) = editor.prompt(&session, "hello").await;
    let first = server.wait_for_requests(1).await;
    assert_eq!(first[0].body["model"], MODEL_NAME);
    assert!(first[0].body.get("reasoning_effort").is_none());
    let usage = usage_updates(&updates);
    assert_eq!(usage.len(), 1, "{updates:?}");
    let used = openai::PROMPT_TOKENS + openai::COMPLETION_TOKENS;
    assert_eq!(usage[0]["context"], json!({"used": used, "size": 64000}));
    assert_eq!(usage[0]["call"]["inputTokens"], openai::PROMPT_TOKENS);
    assert!(usage[0]["session"].get("costUsd").is_none(), "no price");

    // Unknown model or effort: a specific error, and nothing changes.
    let unknown = editor
        .request(
            "tandem/setModel",
            json!({"sessionId": session, "model": "huge"}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown model `huge`; the configured models are: default, fast"),
        "{unknown}"
    );
    let effort = editor
        .request(
            "tandem/setModel",
            json!({"sessionId": session, "model": "fast", "effort": "turbo"}),
        )
        .await;
    assert_eq!(effort["error"]["code"], -32602, "{effort}");
    assert!(
        effort["error"]["message"]
            .as_str()
            .unwrap()
            .contains("its efforts are: low, high"),
        "{effort}"
    );

    // A switch while a step waits on the user: that step ends on the old
    // model, the next request goes to the new one with its effort.
    server.push(openai::tool_calls(&[(
        "c1",
        "exec_command",
        r#"{"cmd": "echo switched"}"#,
    )]));
    server.push(openai::text(["done"]));
    let prompt = editor.start_prompt(&session, "run it").await;
    let asked = loop {
        let message = editor.next_message().await;
        if message["method"] == "tandem/requestPermission" {
            break message;
        }
    };
    let switched = editor
        .request(
            "tandem/setModel",
            json!({"sessionId": session, "model": "fast", "effort": "high"}),
        )
        .await;
    assert_eq!(switched["result"]["model"], "fast", "{switched}");
    assert_eq!(switched["result"]["effort"], "high", "{switched}");
    editor
        .send(&json!({"jsonrpc": "2.0", "id": asked["id"],
            "result": {"outcome": {"outcome": "selected", "optionId": "reject_once"}}}))
        .await;
    let (receipt, _) = editor.response(prompt).await;
    assert_eq!(receipt["result"]["stopReason"], "end_turn", "{receipt}");
    let requests = server.wait_for_requests(3).await;
    assert_eq!(requests[1].body["model"], MODEL_NAME, "the running step");
    assert_eq!(requests[2].body["model"], "fast-model", "the next step");
    assert_eq!(requests[2].body["reasoning_effort"], "high");
    // Every update of the turn came before its answer.
    let updates = editor.updates_of(&session);
    let changed = updates
        .iter()
        .find(|u| u["update"]["sessionUpdate"] == "current_model_update")
        .expect("a current_model_update");
    assert_eq!(
        changed["update"],
        json!({"sessionUpdate": "current_model_update", "modelId": "fast",
               "name": "fast-model", "effort": "high"})
    );
    // The priced call's usage: its context in the new window, its cost.
    let priced = updates
        .iter()
        .find(|u| {
            u["update"]["sessionUpdate"] == "usage" && u["update"]["context"]["size"] == 32000
        })
        .expect("a usage update of the new model");
    let cost = priced["update"]["call"]["costUsd"].as_f64().unwrap();
    assert!(cost > 0.0, "{priced}");
    assert_eq!(priced["update"]["session"]["costUsd"].as_f64(), Some(cost));
    assert_eq!(priced["update"]["context"]["used"], used);

    // Logged, shown by replay.
    let logged: Vec<Value> = editor
        .log_lines(&session)
        .into_iter()
        .filter(|e| e["type"] == "model_changed")
        .map(|mut e| {
            let event = e.as_object_mut().unwrap();
            event.remove("seq");
            event.remove("ts");
            e
        })
        .collect();
    assert_eq!(
        logged,
        [
            json!({"type": "model_changed", "model": "fast", "name": "fast-model",
                "effort": "high"})
        ],
        "one switch, the refused ones left no trace"
    );
    let replay = std::process::Command::new(tandem_bin())
        .args(["replay", &session])
        .env("TANDEM_HOME", editor.home.path())
        .output()
        .unwrap();
    let replay = String::from_utf8_lossy(&replay.stdout);
    assert!(
        replay.contains("model changed to fast (fast-model, effort high)"),
        "{replay}"
    );

    // Kept across a reload (a new daemon over the same home for stdio).
    let mut editor = if restart {
        editor.shutdown_and_exit().await;
        let mut again = Editor::spawn_with(EditorOptions {
            home: home.clone(),
            ..EditorOptions::default()
        })
        .await;
        again.initialize_with(root.path(), caps).await;
        again
    } else {
        editor
    };
    let loaded = editor
        .request("tandem/loadSession", json!({"sessionId": session}))
        .await;
    assert_eq!(loaded["result"]["model"], "fast", "{loaded}");
    assert_eq!(loaded["result"]["effort"], "high", "{loaded}");
    server.push(openai::text(["again"]));
    editor.prompt(&session, "once more").await;
    let requests = server.wait_for_requests(4).await;
    assert_eq!(requests[3].body["model"], "fast-model");
    assert_eq!(requests[3].body["reasoning_effort"], "high");
}

#[tokio::test]
async fn lsp_set_model_switches_the_next_request_and_usage_reports_the_context() {
    let home = Arc::new(tempfile::tempdir().unwrap());
    switch_models_and_report_usage(
        EditorOptions {
            home: Some(home),
            ..EditorOptions::default()
        },
        true,
    )
    .await;
}

#[tokio::test]
async fn lsp_attach_set_model_switches_the_next_request_in_the_serve() {
    let home = Arc::new(tempfile::tempdir().unwrap());
    let _stop = StopOnDrop(home.path().to_path_buf());
    switch_models_and_report_usage(attach_options(&home), false).await;
}
