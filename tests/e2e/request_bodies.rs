//! The request bodies the real binary builds incrementally (each message's
//! cached serialized form, the repair checks continuing from where they
//! passed) are byte-identical to bodies built from scratch out of the
//! session's log: for every step request the model server received, the
//! log up to that request's `model_request` event is folded into a fresh
//! projection, repaired and serialized whole, and compared byte for byte.
//! Across tool results (ended out of order), an inject, a compaction, and a
//! switch to the other provider on reload.

use std::path::Path;

use serde_json::{json, Value};
use tandem::config::ProviderKind;
use tandem::core::log::LoggedEvent;
use tandem::core::projection::{Projection, RepairLimits};
use tandem::provider::{from_config, ModelRequest, ToolSpec};
use tandem::vocab::event::Event;

use crate::support::client::{Editor, EditorOptions};
use crate::support::model_server::{anthropic, openai, ModelServer, RecordedRequest};

const CONTEXT_WINDOW: u64 = 4_000;

async fn editor_in(
    home: Option<std::sync::Arc<tempfile::TempDir>>,
    env: &[(&str, &str)],
    root: &Path,
) -> Editor {
    let mut editor = Editor::spawn_with(EditorOptions {
        home,
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..EditorOptions::default()
    })
    .await;
    editor.initialize(root).await;
    editor
}

/// The tools a request offered, read back from its body.
fn tools_of(body: &Value, kind: ProviderKind) -> Vec<ToolSpec> {
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    tools
        .iter()
        .map(|t| {
            let (t, schema) = match kind {
                ProviderKind::Openai => (&t["function"], "parameters"),
                ProviderKind::Anthropic => (t, "input_schema"),
            };
            ToolSpec {
                name: t["name"].as_str().unwrap().to_string(),
                description: t["description"].as_str().unwrap().to_string(),
                parameters: t[schema].clone(),
            }
        })
        .collect()
}

/// Compares every step request with a from-scratch build of the log as it
/// stood when the request was made; returns how many were compared.
fn assert_bodies_match_the_log(server: &ModelServer, log: &[Value]) -> usize {
    let requests = server.requests();
    let events: Vec<Event> = log
        .iter()
        .skip(1)
        .map(|line| {
            serde_json::from_value::<LoggedEvent>(line.clone())
                .unwrap_or_else(|e| panic!("log line {line}: {e}"))
                .event
        })
        .collect();
    let mut sent = requests.iter();
    let mut compared = 0;
    for (at, event) in events.iter().enumerate() {
        let Event::ModelRequest { purpose, .. } = event else {
            continue;
        };
        let request: &RecordedRequest = sent.next().expect("a request for each model_request");
        assert_length_framed(request);
        if purpose != "step" {
            continue;
        }
        let kind = if request.path.ends_with("/messages") {
            ProviderKind::Anthropic
        } else {
            ProviderKind::Openai
        };
        let system = match kind {
            ProviderKind::Openai => &request.body["messages"][0]["content"],
            ProviderKind::Anthropic => &request.body["system"],
        };
        let mut projection = Projection::from_events(
            system.as_str().expect("a system prompt").to_string(),
            &events[..at],
        );
        projection.repair(RepairLimits {
            context_window: CONTEXT_WINDOW,
            ..RepairLimits::default()
        });
        let tools = tools_of(&request.body, kind);
        let provider = from_config(&server.model_config(kind));
        let scratch = provider.request_body_from_scratch(ModelRequest {
            messages: projection.messages(),
            tools: &tools,
            max_output_tokens: None,
        });
        assert_eq!(
            request.raw_body,
            String::from_utf8(scratch).unwrap(),
            "step request {} (of {} received) differs from a from-scratch build of the log",
            compared + 1,
            requests.len()
        );
        compared += 1;
    }
    compared
}

/// The body is streamed, yet framed by `Content-Length` (local servers
/// reject chunked requests), and the length is the body's.
fn assert_length_framed(request: &RecordedRequest) {
    let header = |name: &str| {
        request
            .headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(header("transfer-encoding"), None, "{:?}", request.headers);
    assert_eq!(
        header("content-length"),
        Some(request.raw_body.len().to_string().as_str())
    );
}

#[tokio::test]
async fn a_request_of_many_blocks_arrives_whole_and_length_framed() {
    // A prompt of 1 MB: the body goes out in 64 KB blocks, the prompt's
    // form split across them; the second request sends it from the cache.
    let server = ModelServer::start().await;
    server.push(openai::text(["ok"]));
    server.push(openai::text(["ok again"]));
    let root = tempfile::tempdir().unwrap();
    let mut editor = editor_in(None, &[], root.path()).await;
    let mut config = server.session_config();
    config["model"]["context_window"] = json!(10_000_000);
    let session = editor.new_session(config).await;
    let big: String = (0..100_000).map(|i| format!("{:09}\n", i)).collect();
    let (response, _) = editor.prompt(&session, &big).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let (response, _) = editor.prompt(&session, "and this").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_length_framed(request);
        assert!(request.raw_body.len() > 1_000_000);
        assert_eq!(request.body["messages"][1]["content"], big.as_str());
    }
    assert_eq!(requests[1].body["messages"][2]["content"], "ok");
    assert_eq!(requests[1].body["messages"][3]["content"], "and this");
}

#[tokio::test]
async fn every_step_request_equals_a_from_scratch_build_of_the_log() {
    let server = ModelServer::start().await;
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "alpha \"quoted\"\n").unwrap();
    std::fs::write(root.path().join("b.txt"), "beta ünïcode\n").unwrap();
    // Enough to cross half of the 4,000-token window once read.
    std::fs::write(root.path().join("big.txt"), "a big line\n".repeat(900)).unwrap();

    // Turn 1: two reads in one step, then an answer.
    server.push(openai::tool_calls(&[
        ("call_a", "read_file", r#"{"path":"a.txt"}"#),
        ("call_b", "read_file", r#"{"path":"b.txt"}"#),
    ]));
    server.push(openai::text(["read both"]));
    // Turn 2 (after an inject): a big read, then compaction (the summary
    // call, then the step), then an answer.
    server.push(openai::tool_calls(&[(
        "call_big",
        "read_file",
        r#"{"path":"big.txt"}"#,
    )]));
    server.push(openai::text(["SUMMARY: read a, b and big"]));
    server.push(openai::text(["done"]));

    let mut editor = editor_in(None, &[], root.path()).await;
    let mut config =
        server.session_config_with(json!({"compact_threshold": 0.5, "compact_keep_ratio": 0.02}));
    config["model"]["context_window"] = json!(CONTEXT_WINDOW);
    let session = editor.new_session(config).await;
    let (response, _) = editor.prompt(&session, "read a and b").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let inject = editor
        .request(
            "tandem/steer",
            json!({"sessionId": session, "wake": false,
                   "prompt": [{"type": "text", "text": "context: big.txt is generated"}]}),
        )
        .await;
    assert!(inject.get("result").is_some(), "{inject}");
    let (response, _) = editor.prompt(&session, "now read big").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let log = editor.log_lines(&session);
    assert!(
        log.iter().any(|e| e["type"] == "compacted"),
        "the big read was compacted"
    );
    assert_eq!(assert_bodies_match_the_log(&server, &log), 4);

    // Provider switch: the same session loaded by a daemon configured for
    // the Messages API, prompted twice (the second from its caches).
    let home = editor.home.clone();
    editor.shutdown_and_exit().await;
    server.push(anthropic::thinking_and_tool_calls(
        "check a again",
        "sig-1",
        &[("toolu_a", "read_file", r#"{"path":"a.txt"}"#)],
    ));
    server.push(anthropic::text(["same as before"]));
    server.push(anthropic::text(["still here"]));
    let mut editor = editor_in(Some(home), &[("TANDEM_PROVIDER", "anthropic")], root.path()).await;
    let loaded = editor
        .request("tandem/loadSession", json!({"sessionId": session}))
        .await;
    assert!(loaded.get("error").is_none(), "{loaded}");
    for prompt in ["after the switch", "once more"] {
        let (response, _) = editor.prompt(&session, prompt).await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    }
    let requests = server.requests();
    let anthropic_steps = requests
        .iter()
        .filter(|r| r.path == "/v1/messages" && r.body.get("tools").is_some())
        .count();
    assert!(anthropic_steps >= 2, "{anthropic_steps} Messages API steps");
    let log = editor.log_lines(&session);
    let steps = log
        .iter()
        .filter(|e| e["type"] == "model_request" && e["purpose"] == "step")
        .count();
    assert_eq!(assert_bodies_match_the_log(&server, &log), steps);
    assert_eq!(steps, 4 + anthropic_steps);
    editor.shutdown_and_exit().await;
}
