//! Several editor connections (LSP tunnels) on one serve: a turn streams to
//! every connection that follows its session (one that made, loaded or
//! prompted it), outlives the connection that started it, and a late one
//! that loads the session gets it whole.

use std::time::Duration;

use serde_json::{json, Value};

use super::{log_lines, Serve};
use crate::support::client::agent_text;
use crate::support::model_server::openai::{delta, ending};
use crate::support::model_server::{ModelServer, Reply, SseStep};

/// A reply that streams `n` pieces `gap` apart.
fn slow_text(n: usize, gap: Duration) -> (Reply, String) {
    let mut steps = vec![delta(json!({"role": "assistant", "content": ""}))];
    let mut text = String::new();
    for i in 0..n {
        let piece = format!("p{i} ");
        text.push_str(&piece);
        steps.push(SseStep::Delay(gap));
        steps.push(delta(json!({ "content": piece })));
    }
    steps.extend(ending("stop"));
    (Reply::Sse(steps), text)
}

/// What the log says an editor should have seen: the `tandem/update`s of
/// every event, as a list of (turnId, kind, text) to compare with.
fn expected_from_log(home: &std::path::Path, session: &str) -> Vec<(Value, String, Value)> {
    log_lines(home, session)
        .into_iter()
        .skip(1)
        .filter_map(|e| {
            let kind = match e["type"].as_str()? {
                "input_queued" | "input_claimed" | "input_discarded" => "input_status",
                "user_message" => "user_message",
                "assistant_chunk" => "agent_message_chunk",
                "turn_end" => "turn_end",
                "usage_update" => "usage",
                _ => return None,
            };
            Some((e["turn_id"].clone(), kind.to_string(), e["text"].clone()))
        })
        .collect()
}

fn summary(updates: &[Value]) -> Vec<(Value, String, Value)> {
    updates
        .iter()
        .filter_map(|u| {
            let kind = u["update"]["sessionUpdate"].as_str()?.to_string();
            if ![
                "input_status",
                "user_message",
                "agent_message_chunk",
                "turn_end",
                "usage",
            ]
            .contains(&kind.as_str())
            {
                return None;
            }
            let text = if kind == "agent_message_chunk" {
                u["update"]["content"]["text"].clone()
            } else {
                Value::Null
            };
            let turn = u.get("turnId").cloned().unwrap_or(Value::Null);
            Some((turn, kind, text))
        })
        .collect()
}

fn normalize(expected: Vec<(Value, String, Value)>) -> Vec<(Value, String, Value)> {
    expected
        .into_iter()
        .map(|(turn, kind, text)| {
            let text = if kind == "agent_message_chunk" {
                text
            } else {
                Value::Null
            };
            (turn, kind, text)
        })
        .collect()
}

#[tokio::test]
async fn a_prompt_from_one_client_streams_to_both_and_its_answer_follows_its_updates() {
    let model = ModelServer::start().await;
    model.push(Reply::Sse({
        let mut steps = vec![delta(json!({"role": "assistant", "content": ""}))];
        for piece in ["Hello", " from", " the serve"] {
            steps.push(delta(json!({ "content": piece })));
        }
        steps.extend(ending("stop"));
        steps
    }));
    let serve = Serve::start().await;
    let workspace = tempfile::tempdir().unwrap();
    let mut a = serve.client().await;
    let mut b = serve.client().await;
    a.initialize(workspace.path(), json!({})).await;
    b.initialize(workspace.path(), json!({})).await;
    // A follows the session it made; B loads it (nothing to replay yet).
    let session = a.new_session(model.session_config()).await;
    assert_eq!(b.attach(&session).await, 0);

    let id = a.start_prompt(&session, "hi").await;
    let answer = a.response(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // Every update of the turn arrived before the answer.
    let at = a
        .received
        .iter()
        .position(|m| m["id"] == json!(id))
        .unwrap();
    let before: Vec<Value> = a.received[..at].to_vec();
    assert!(before
        .iter()
        .any(|m| m["params"]["update"]["sessionUpdate"] == "turn_end"));
    b.wait_update(&session, |u| u["sessionUpdate"] == "turn_end")
        .await;

    assert_eq!(agent_text(&a.updates_of(&session)), "Hello from the serve");
    assert_eq!(a.updates_of(&session), b.updates_of(&session));
    assert_eq!(
        summary(&a.updates_of(&session)),
        normalize(expected_from_log(&serve.path(), &session))
    );
    assert_eq!(model.requests().len(), 1);
}

#[tokio::test]
async fn the_turn_ends_normally_when_the_client_that_started_it_goes_away() {
    let model = ModelServer::start().await;
    let (reply, text) = slow_text(12, Duration::from_millis(40));
    model.push(reply);
    let serve = Serve::start().await;
    let workspace = tempfile::tempdir().unwrap();
    let mut a = serve.client().await;
    let mut b = serve.client().await;
    a.initialize(workspace.path(), json!({})).await;
    b.initialize(workspace.path(), json!({})).await;
    let session = a.new_session(model.session_config()).await;
    b.attach(&session).await;

    a.start_prompt(&session, "go").await;
    a.wait_update(&session, |u| u["sessionUpdate"] == "agent_message_chunk")
        .await;
    a.close().await;

    let end = b
        .wait_update(&session, |u| u["sessionUpdate"] == "turn_end")
        .await;
    assert_eq!(end["params"]["update"]["stopReason"], "end_turn", "{end}");
    assert_eq!(agent_text(&b.updates_of(&session)), text);
    let log = log_lines(&serve.path(), &session);
    let turn_end = log
        .iter()
        .find(|e| e["type"] == "turn_end")
        .expect("turn_end logged");
    assert_eq!(turn_end["stop_reason"], "end_turn");
}

#[tokio::test]
async fn a_late_client_gets_the_replay_then_live_updates_with_nothing_missing_or_doubled() {
    let model = ModelServer::start().await;
    let (reply, text) = slow_text(30, Duration::from_millis(15));
    model.push(reply);
    let serve = Serve::start().await;
    let workspace = tempfile::tempdir().unwrap();
    let mut a = serve.client().await;
    a.initialize(workspace.path(), json!({})).await;
    let session = a.new_session(model.session_config()).await;
    let id = a.start_prompt(&session, "count").await;
    // Load while the answer streams: part of it is history by now.
    a.wait_update(&session, |u| u["content"]["text"] == "p5 ")
        .await;

    let mut c = serve.client().await;
    c.initialize(workspace.path(), json!({})).await;
    let replayed = c.attach(&session).await;
    assert!(replayed >= 6, "replayed only {replayed}");
    c.wait_update(&session, |u| u["sessionUpdate"] == "turn_end")
        .await;
    assert_eq!(a.response(id).await["result"]["stopReason"], "end_turn");

    let seen = c.updates_of(&session);
    assert!(
        seen.len() > replayed as usize,
        "nothing arrived live after the replay"
    );
    assert_eq!(agent_text(&seen), text);
    assert_eq!(
        summary(&seen),
        normalize(expected_from_log(&serve.path(), &session))
    );
    assert_eq!(seen, a.updates_of(&session));
}

#[tokio::test]
async fn a_permission_request_goes_to_every_following_window_and_the_first_answer_wins() {
    let model = ModelServer::start().await;
    model.push(crate::support::model_server::openai::tool_calls(&[(
        "call_1",
        "exec_command",
        r#"{"cmd":"echo hi"}"#,
    )]));
    model.push(crate::support::model_server::openai::text(["done"]));
    let serve = Serve::start().await;
    let workspace = tempfile::tempdir().unwrap();
    let caps = json!({"experimental": {"tandem": {"requestPermission": true}}});
    let mut a = serve.client().await;
    let mut b = serve.client().await;
    a.initialize(workspace.path(), caps.clone()).await;
    b.initialize(workspace.path(), caps).await;
    let session = a.new_session(model.session_config()).await;
    b.attach(&session).await;
    let id = a.start_prompt(&session, "run it").await;

    let is_request = |m: &Value| m["method"] == "tandem/requestPermission" && m.get("id").is_some();
    let on_a = a.wait_for(is_request).await;
    let on_b = b.wait_for(is_request).await;
    // The same question on both connections, each under its own id.
    assert_eq!(on_a["params"], on_b["params"]);
    assert_eq!(on_a["params"]["sessionId"], session.as_str(), "{on_a}");
    assert_eq!(on_a["params"]["toolCall"]["toolCallId"], "call_1", "{on_a}");
    // B answers; A's copy is withdrawn, under A's id.
    b.answer(
        &on_b["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
    )
    .await;
    let withdrawn = a
        .wait_for(|m| m["method"] == "$/cancelRequest" && m["params"]["id"] == on_a["id"])
        .await;
    assert_eq!(withdrawn["params"]["id"], on_a["id"]);
    assert!(
        !b.received.iter().any(|m| m["method"] == "$/cancelRequest"),
        "the answering window's request was withdrawn: {:?}",
        b.received
    );
    // A late answer from A is not delivered: the command ran as B allowed.
    a.answer(
        &on_a["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}}),
    )
    .await;
    assert_eq!(a.response(id).await["result"]["stopReason"], "end_turn");
    let requests = model.wait_for_requests(2).await;
    let results = requests[1].tool_messages();
    assert!(results[0].1.contains("hi"), "{results:?}");
    let decided: Vec<Value> = log_lines(&serve.path(), &session)
        .into_iter()
        .filter(|e| e["type"] == "approval_decided")
        .collect();
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0]["decision"], "allow_once", "{decided:?}");
    super::poll_until("the late answer logged as not delivered", || {
        serve
            .stderr()
            .contains("answer to an unknown or withdrawn request")
    })
    .await;
    // A's connection keeps serving.
    let listed = a.request("tandem/listSessions", json!({})).await;
    assert!(listed.get("result").is_some(), "{listed}");
}

#[tokio::test]
async fn a_waiting_question_reaches_a_window_that_loads_later_not_one_that_cannot_answer() {
    let model = ModelServer::start().await;
    model.push(crate::support::model_server::openai::tool_calls(&[(
        "call_1",
        "exec_command",
        r#"{"cmd":"echo joined"}"#,
    )]));
    model.push(crate::support::model_server::openai::text(["done"]));
    let serve = Serve::start().await;
    let workspace = tempfile::tempdir().unwrap();
    let caps = json!({"experimental": {"tandem": {"requestPermission": true}}});
    let mut a = serve.client().await;
    a.initialize(workspace.path(), caps.clone()).await;
    // C follows the session but declared no requestPermission.
    let mut c = serve.client().await;
    c.initialize(workspace.path(), json!({})).await;
    let session = a.new_session(model.session_config()).await;
    c.attach(&session).await;
    let id = a.start_prompt(&session, "run it").await;
    let is_request = |m: &Value| m["method"] == "tandem/requestPermission" && m.get("id").is_some();
    let on_a = a.wait_for(is_request).await;

    // B loads the session while the question waits: it is asked too.
    let mut b = serve.client().await;
    b.initialize(workspace.path(), caps).await;
    assert!(b.attach(&session).await > 0);
    let on_b = b.wait_for(is_request).await;
    assert_eq!(on_a["params"], on_b["params"]);
    b.answer(
        &on_b["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
    )
    .await;
    a.wait_for(|m| m["method"] == "$/cancelRequest" && m["params"]["id"] == on_a["id"])
        .await;
    assert_eq!(a.response(id).await["result"]["stopReason"], "end_turn");
    let results = model.wait_for_requests(2).await[1].tool_messages();
    assert!(results[0].1.contains("joined"), "{results:?}");
    // C heard the whole turn, and was asked nothing.
    c.wait_update(&session, |u| u["sessionUpdate"] == "turn_end")
        .await;
    let asked: Vec<&Value> = c
        .received
        .iter()
        .filter(|m| m["method"] == "tandem/requestPermission" || m["method"] == "$/cancelRequest")
        .collect();
    assert!(asked.is_empty(), "{asked:?}");
}

#[tokio::test]
async fn tools_read_the_buffers_of_the_client_that_prompted_and_the_disk_once_it_is_gone() {
    let model = ModelServer::start().await;
    let read = |id: &str| {
        crate::support::model_server::openai::tool_calls(&[(
            id,
            "read_file",
            r#"{"path":"notes.txt"}"#,
        )])
    };
    model.push(read("call_a"));
    model.push(crate::support::model_server::openai::text(["a"]));
    model.push(read("call_b"));
    model.push(crate::support::model_server::openai::text(["b"]));
    // The third turn's read comes after B, who prompted it, has gone.
    let Reply::Sse(mut steps) = read("call_c") else {
        unreachable!()
    };
    steps.insert(0, SseStep::Delay(Duration::from_millis(300)));
    model.push(Reply::Sse(steps));
    model.push(crate::support::model_server::openai::text(["c"]));
    let serve = Serve::start().await;
    let workspace = tempfile::tempdir().unwrap();
    let file = workspace.path().join("notes.txt");
    std::fs::write(&file, "on disk\n").unwrap();
    let uri = crate::support::client::file_uri(&file);
    let mut a = serve.client().await;
    let mut b = serve.client().await;
    for (client, text) in [(&mut a, "unsaved in A\n"), (&mut b, "unsaved in B\n")] {
        client.initialize(workspace.path(), json!({})).await;
        client
            .send(json!({"jsonrpc": "2.0", "method": "textDocument/didOpen",
                "params": {"textDocument": {"uri": uri, "languageId": "text", "version": 1, "text": text}}}))
            .await;
    }
    let session = a.new_session(model.session_config()).await;
    let prompt =
        |who: &str| json!({"sessionId": session, "prompt": [{"type": "text", "text": who}]});

    let answer = a.request("tandem/prompt", prompt("from A")).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let answer = b.request("tandem/prompt", prompt("from B")).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // A, which made the session, heard B's turns too.
    b.start_request("tandem/prompt", prompt("from B, then gone"))
        .await;
    model.wait_for_requests(5).await;
    b.close().await;
    let end = a
        .wait_for(|m| {
            m["params"]["turnId"] == "t3" && m["params"]["update"]["sessionUpdate"] == "turn_end"
        })
        .await;
    assert_eq!(end["params"]["update"]["stopReason"], "end_turn", "{end}");
    let ends = a
        .updates_of(&session)
        .iter()
        .filter(|u| u["update"]["sessionUpdate"] == "turn_end")
        .count();
    assert_eq!(ends, 3);

    let requests = model.wait_for_requests(6).await;
    // The newest tool result of each turn's second request.
    let read_result = |i: usize| requests[i].tool_messages().last().unwrap().1.clone();
    assert!(
        read_result(1).contains("unsaved in A"),
        "{}",
        read_result(1)
    );
    assert!(
        read_result(3).contains("unsaved in B"),
        "{}",
        read_result(3)
    );
    assert!(read_result(5).contains("on disk"), "{}", read_result(5));
}

#[tokio::test]
async fn attaching_to_an_unknown_session_is_refused_and_the_connection_keeps_serving() {
    let serve = Serve::start().await;
    let workspace = tempfile::tempdir().unwrap();
    let model = ModelServer::start().await;
    let mut a = serve.client().await;
    a.initialize(workspace.path(), json!({})).await;
    let unknown = "0123456789abcdef0123456789abcdef";
    for (method, params) in [
        ("tandem/attachSession", json!({"sessionId": unknown})),
        (
            "tandem/attachSession",
            json!({"sessionId": unknown, "replay": false}),
        ),
        ("tandem/loadSession", json!({"sessionId": unknown})),
    ] {
        let refused = a.request(method, params).await;
        assert_eq!(refused["error"]["code"], -32001, "{method}: {refused}");
        assert_eq!(
            refused["error"]["data"]["sessionId"], unknown,
            "{method}: {refused}"
        );
    }
    let session = a.new_session(model.session_config()).await;
    let attached = a
        .request(
            "tandem/attachSession",
            json!({"sessionId": session, "replay": false}),
        )
        .await;
    assert_eq!(
        attached["result"]["sessionId"],
        session.as_str(),
        "{attached}"
    );
    assert_eq!(attached["result"]["replayed"], 0, "{attached}");
}
