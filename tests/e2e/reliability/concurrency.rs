//! Concurrency: 20 sessions of one daemon streaming at once, each its own
//! text in many small chunks at seeded rates, so their streams interleave
//! on the one stdout. Every session must receive exactly its own text,
//! every turn must end before its prompt is answered, and all must finish.

use std::time::{Duration, Instant};

use serde_json::json;

use super::gen::Gen;
use crate::support::client::Editor;
use crate::support::model_server::{openai, ModelServer, Reply, SseStep};

const SESSIONS: usize = 20;

const CHUNKS: usize = 40;

/// Session `k`'s answer, as streamed: `k<k>.<i> ` for each chunk.
fn piece(k: usize, i: usize) -> String {
    format!("k{k}.{i} ")
}

#[tokio::test]
async fn twenty_sessions_streaming_at_once_each_get_their_own_text_and_all_finish() {
    let mut g = Gen::for_suite("reliability::concurrency");
    let seed = g.seed;
    let delays: Vec<u64> = (0..SESSIONS).map(|_| g.below(8) as u64 + 1).collect();
    let server = ModelServer::start().await;
    let delays_for_server = delays.clone();
    server.respond_with(move |request| {
        let messages = request.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let prompt = messages
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_string();
        let Some(k) = prompt
            .strip_prefix("session ")
            .and_then(|k| k.parse::<usize>().ok())
        else {
            return openai::error(400, "unexpected prompt");
        };
        let mut steps = vec![openai::delta(json!({"role": "assistant", "content": ""}))];
        for i in 0..CHUNKS {
            steps.push(openai::delta(json!({"content": piece(k, i)})));
            steps.push(SseStep::Delay(Duration::from_millis(delays_for_server[k])));
        }
        steps.extend(openai::ending("stop"));
        Reply::Sse(steps)
    });
    let root = tempfile::tempdir().expect("workspace");
    let mut editor = Editor::spawn().await;
    editor.initialize(root.path()).await;
    let mut sessions = Vec::new();
    for _ in 0..SESSIONS {
        sessions.push(editor.new_session(server.session_config()).await);
    }

    let started = Instant::now();
    let mut prompts = Vec::new();
    for (k, session) in sessions.iter().enumerate() {
        prompts.push(editor.start_prompt(session, &format!("session {k}")).await);
    }
    // Every session made its model call.
    let requests = server.wait_for_requests(SESSIONS).await;
    assert_eq!(requests.len(), SESSIONS, "seed {seed}");
    for (k, (session, prompt)) in sessions.iter().zip(&prompts).enumerate() {
        let (receipt, at) = editor.response(*prompt).await;
        assert_eq!(
            receipt["result"]["stopReason"], "end_turn",
            "{receipt} (seed {seed}, session {k})"
        );
        let updates: Vec<_> = editor.received[..at]
            .iter()
            .filter(|m| {
                m["method"] == "tandem/update" && m["params"]["sessionId"] == session.as_str()
            })
            .map(|m| m["params"].clone())
            .collect();
        let text = crate::support::client::agent_text(&updates);
        let expected: String = (0..CHUNKS).map(|i| piece(k, i)).collect();
        assert_eq!(
            text, expected,
            "seed {seed}, session {k} received another's text or lost its own"
        );
        assert_eq!(
            updates.last().map(|u| u["update"]["sessionUpdate"].clone()),
            Some(json!("turn_end")),
            "seed {seed}, session {k}: the answer came before turn_end"
        );
    }
    let elapsed = started.elapsed();
    // Streams interleaved: some session's chunk arrived between two chunks
    // of another.
    let order: Vec<&str> = editor
        .received
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["sessionId"].as_str())
        .collect();
    let switches = order.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(
        switches >= SESSIONS,
        "the streams did not interleave ({switches} switches, seed {seed})"
    );
    eprintln!(
        "concurrency: {SESSIONS} sessions x {CHUNKS} chunks in {elapsed:.1?}, seed {seed}; \
         {switches} switches between sessions on the wire, no chunk misdelivered"
    );
}
