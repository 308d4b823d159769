//! The cancel storm: 100 cancels at seeded random moments — right after
//! the prompt is sent, while the model is silent, mid-stream, mid-command,
//! while a permission request waits for the user, and on a prompt queued
//! behind a running turn — by `tandem/cancel` or `$/cancelRequest`. Each
//! prompt must be answered `cancelled` within 500 ms of its cancel, after
//! its turn's `turn_end`, and a plain prompt after every ten must be
//! served in full.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::gen::Gen;
use crate::support::client::{agent_text, Editor};
use crate::support::model_server::{openai, ModelServer, Reply, SseStep};

const CANCELS: usize = 100;

/// The longest a cancelled prompt may wait for its answer.
const CANCEL_ANSWER_CAP: Duration = Duration::from_millis(500);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Busy {
    /// The model server read the request and says nothing.
    Silent,
    /// A slow stream: a chunk every 10 ms for 3 s.
    Streaming,
    /// A command that sleeps for 5 s.
    Command,
    /// A command that waits for the user's permission (review mode; the
    /// editor never answers).
    Permission,
}

fn reply_for(busy: Busy, n: usize) -> Reply {
    match busy {
        Busy::Silent => Reply::Hang,
        Busy::Streaming => {
            let mut steps = vec![openai::delta(json!({"role": "assistant", "content": ""}))];
            for i in 0..300 {
                steps.push(openai::delta(json!({"content": format!("s{n}.{i} ")})));
                steps.push(SseStep::Delay(Duration::from_millis(10)));
            }
            steps.extend(openai::ending("stop"));
            Reply::Sse(steps)
        }
        Busy::Command | Busy::Permission => openai::tool_calls(&[(
            &format!("call_{n}"),
            "exec_command",
            &json!({"cmd": "echo started; sleep 5", "timeout_ms": 60000}).to_string(),
        )]),
    }
}

/// What the last user message of a model request says.
fn last_prompt(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn a_hundred_cancels_at_random_moments_are_each_answered_within_500_ms() {
    let mut g = Gen::for_suite("reliability::cancel_storm");
    let seed = g.seed;
    let plan: Vec<(Busy, bool, Option<u64>)> = (0..CANCELS)
        .map(|_| {
            let busy = *g.pick(&[
                Busy::Silent,
                Busy::Streaming,
                Busy::Command,
                Busy::Permission,
            ]);
            let by_cancel_request = g.chance(50);
            // None: cancel right after sending; else this long after the
            // turn showed it is busy.
            let delay = (!g.chance(20)).then(|| g.below(60) as u64);
            (busy, by_cancel_request, delay)
        })
        .collect();
    let server = ModelServer::start().await;
    let busy_of: Vec<Busy> = plan.iter().map(|p| p.0).collect();
    server.respond_with(move |request| {
        let prompt = last_prompt(&request.body);
        let after_tool = request.body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .is_some_and(|m| m["role"] == "tool");
        match prompt
            .strip_prefix("storm ")
            .and_then(|n| n.parse::<usize>().ok())
        {
            Some(n) if !after_tool && n < busy_of.len() => reply_for(busy_of[n], n),
            _ => openai::text(["served ", &prompt]),
        }
    });
    let root = tempfile::tempdir().expect("workspace");
    let mut editor = Editor::spawn().await;
    editor
        .initialize_with(
            root.path(),
            json!({"capabilities": {"experimental": {"tandem": {"requestPermission": true}}}}),
        )
        .await;
    editor.hold_requests("tandem/requestPermission");
    let mut config = server.session_config();
    config["approval"] = json!({"mode": "auto"});
    let auto = editor.new_session(config.clone()).await;
    config["approval"] = json!({"mode": "review"});
    let review = editor.new_session(config).await;

    let started = Instant::now();
    let mut waits: Vec<Duration> = Vec::new();
    let mut discarded = 0;
    let mut queued_withdrawn = 0;
    for (n, (busy, by_cancel_request, delay)) in plan.iter().enumerate() {
        let context = format!("seed {seed}, cancel {n}, {busy:?}, $/cancelRequest {by_cancel_request}, delay {delay:?}");
        let session = if *busy == Busy::Permission {
            &review
        } else {
            &auto
        };
        let from = editor.received.len();
        let prompt = editor.start_prompt(session, &format!("storm {n}")).await;
        if let Some(delay) = delay {
            let busy_now = |u: &Value| match busy {
                Busy::Silent => u["sessionUpdate"] == "user_message",
                Busy::Streaming => u["sessionUpdate"] == "agent_message_chunk",
                Busy::Command => u["outputDelta"]
                    .as_str()
                    .is_some_and(|t| t.contains("started")),
                Busy::Permission => u["waitingFor"] == "permission",
            };
            editor.wait_update(session, busy_now).await;
            if *delay % 4 == 0 {
                // A prompt queued behind the busy turn, withdrawn alone.
                let queued = editor.start_prompt(session, &format!("queued {n}")).await;
                let withdrawn_at = Instant::now();
                editor
                    .notify("$/cancelRequest", json!({"id": queued}))
                    .await;
                let (receipt, _) = editor.response(queued).await;
                let waited = withdrawn_at.elapsed();
                assert!(
                    waited <= CANCEL_ANSWER_CAP,
                    "queued prompt answered {waited:?} after ({context})"
                );
                assert_eq!(
                    receipt["result"]["stopReason"], "cancelled",
                    "{receipt} ({context})"
                );
                assert_eq!(
                    receipt["result"]["turnId"],
                    Value::Null,
                    "{receipt} ({context})"
                );
                waits.push(waited);
                queued_withdrawn += 1;
            }
            tokio::time::sleep(Duration::from_millis(*delay)).await;
        }
        let cancelled_at = Instant::now();
        if *by_cancel_request {
            editor
                .notify("$/cancelRequest", json!({"id": prompt}))
                .await;
        } else {
            editor
                .notify("tandem/cancel", json!({"sessionId": *session}))
                .await;
        }
        let (receipt, at) = editor.response(prompt).await;
        let waited = cancelled_at.elapsed();
        assert!(
            waited <= CANCEL_ANSWER_CAP,
            "answered {waited:?} after the cancel ({context})"
        );
        waits.push(waited);
        let result = &receipt["result"];
        assert_eq!(result["stopReason"], "cancelled", "{receipt} ({context})");
        match result["turnId"].as_str() {
            Some(turn) => {
                let end = editor.received[from..at].iter().any(|m| {
                    m["params"]["turnId"] == turn
                        && m["params"]["update"]["sessionUpdate"] == "turn_end"
                });
                assert!(
                    end,
                    "the answer came before the turn's turn_end ({context})"
                );
            }
            None => discarded += 1,
        }
        // A permission request still out was withdrawn before the answer.
        let asked = editor.received[from..at]
            .iter()
            .find(|m| m["method"] == "tandem/requestPermission")
            .map(|m| m["id"].clone());
        if let Some(asked) = asked {
            let withdrawn = editor.received[from..at]
                .iter()
                .any(|m| m["method"] == "$/cancelRequest" && m["params"]["id"] == asked);
            assert!(
                withdrawn,
                "permission request {asked} left open ({context})"
            );
        }
        if n % 10 == 9 {
            let text = format!("plain {n}");
            let (receipt, updates) = editor.prompt(session, &text).await;
            assert_eq!(
                receipt["result"]["stopReason"], "end_turn",
                "{receipt} ({context})"
            );
            assert_eq!(agent_text(&updates), format!("served {text}"), "{context}");
        }
    }
    waits.sort();
    let median = waits[waits.len() / 2];
    let max = waits[waits.len() - 1];
    eprintln!(
        "cancel storm: {CANCELS} cancels and {queued_withdrawn} queued prompts withdrawn in {:.1?}, seed {seed}; \
         answer after cancel: median {median:?}, max {max:?}; {discarded} prompts discarded before their turn started",
        started.elapsed()
    );
}
