//! Crash faults: 50 real SIGKILLs of the daemon at seeded random points —
//! mid-stream, mid-tool (a command that appends its call id to a file),
//! mid-write of the log (a fast stream of many chunks) and right after a
//! prompt was sent — each followed by a restart that loads the session.
//! After every restart: every prompt the daemon acknowledged is in the
//! log, every turn of the replay is closed and the open one reads
//! `interrupted`, and no command ran twice.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::gen::Gen;
use crate::support::client::{Editor, EditorOptions};
use crate::support::model_server::{openai, ModelServer, Reply, SseStep};

const KILLS: usize = 50;

/// Chunks of the stream that keeps the log busy.
const BURST_CHUNKS: usize = 120;

#[derive(Debug, Clone, Copy, PartialEq)]
enum KillPoint {
    /// Right after the prompt is written, before any answer.
    AfterSend,
    /// While the model's answer is stalled after a chunk.
    MidStream,
    /// While the command runs (or is about to).
    MidTool,
    /// At a random chunk of a fast stream, while its events are logged.
    MidLogWrite,
}

/// The reply to "crash N": what its kill point needs.
fn reply_for(turn: usize, point: KillPoint) -> Reply {
    match point {
        KillPoint::AfterSend | KillPoint::MidStream => Reply::Sse(vec![
            openai::delta(json!({"content": format!("streaming {turn}")})),
            SseStep::Stall,
        ]),
        KillPoint::MidTool => {
            let cmd = format!("echo call_{turn} >> ran.txt; echo started; sleep 3");
            openai::tool_calls(&[(
                &format!("call_{turn}"),
                "exec_command",
                &json!({"cmd": cmd, "timeout_ms": 60000}).to_string(),
            )])
        }
        KillPoint::MidLogWrite => {
            let mut steps = vec![openai::delta(json!({"role": "assistant", "content": ""}))];
            steps.extend(
                (0..BURST_CHUNKS).map(|i| openai::delta(json!({"content": format!("w{i} ")}))),
            );
            steps.extend(openai::ending("stop"));
            Reply::Sse(steps)
        }
    }
}

/// The text of the last user message of a model request.
fn prompt_of(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

async fn daemon(home: Arc<tempfile::TempDir>, root: &std::path::Path) -> Editor {
    let mut editor = Editor::spawn_with(EditorOptions {
        home: Some(home),
        env: vec![("TANDEM_LOG".into(), "info".into())],
        ..EditorOptions::default()
    })
    .await;
    editor.initialize(root).await;
    editor
}

/// The session's log, read leniently: a line torn by the kill is skipped
/// (the daemon skips it too) and counted.
fn log_events(editor: &Editor, session: &str) -> (Vec<Value>, usize) {
    let text = std::fs::read_to_string(editor.sessions_dir().join(format!("{session}.jsonl")))
        .unwrap_or_default();
    let mut torn = 0;
    let events = text
        .lines()
        .filter_map(|line| {
            let parsed = serde_json::from_str(line).ok();
            torn += usize::from(parsed.is_none());
            parsed
        })
        .collect();
    (events, torn)
}

/// Checks a freshly loaded session against what the killed daemons
/// acknowledged; returns the replayed updates.
async fn load_and_check(
    editor: &mut Editor,
    session: &str,
    acknowledged: &[String],
    killed_turn: Option<&(String, bool)>,
    context: &str,
) -> Vec<Value> {
    let from = editor.received.len();
    let id = editor
        .start_request("tandem/loadSession", json!({"sessionId": session}))
        .await;
    let (response, at) = editor.response(id).await;
    assert!(response["result"].is_object(), "{response} ({context})");
    let replay: Vec<Value> = editor.received[from..at]
        .iter()
        .filter(|m| m["method"] == "tandem/update")
        .map(|m| m["params"].clone())
        .collect();

    let (events, _) = log_events(editor, session);
    for text in acknowledged {
        assert!(
            events
                .iter()
                .any(|e| e["type"] == "input_queued" && e["content"][0]["text"] == text.as_str()),
            "the acknowledged prompt {text:?} is not in the log ({context})"
        );
    }

    // Every turn of the replay ends, exactly once.
    let mut ends: HashMap<String, Vec<String>> = HashMap::new();
    for update in &replay {
        if let Some(turn) = update["turnId"].as_str() {
            let entry = ends.entry(turn.to_string()).or_default();
            if update["update"]["sessionUpdate"] == "turn_end" {
                entry.push(
                    update["update"]["stopReason"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                );
            }
        }
    }
    for (turn, stops) in &ends {
        assert_eq!(stops.len(), 1, "turn {turn} ends {stops:?} ({context})");
    }
    if let Some((turn, saw_end)) = killed_turn {
        let stop = ends.get(turn).map(|s| s[0].as_str());
        if *saw_end {
            assert_eq!(stop, Some("end_turn"), "turn {turn} ({context})");
        } else {
            assert!(
                matches!(stop, Some("interrupted" | "end_turn")),
                "the killed turn {turn} ends {stop:?} ({context})"
            );
        }
    }
    replay
}

/// Returns once an update of `session` that `pred` accepts has arrived
/// since `from` (the waits before may have read it already).
async fn seen_or_wait(
    editor: &mut Editor,
    from: usize,
    session: &str,
    pred: impl Fn(&Value) -> bool,
) {
    let seen = editor.received[from..].iter().any(|m| {
        m["method"] == "tandem/update"
            && m["params"]["sessionId"] == session
            && pred(&m["params"]["update"])
    });
    if !seen {
        editor.wait_update(session, pred).await;
    }
}

/// Each command's call id in ran.txt, with how often it ran.
fn runs(root: &std::path::Path) -> HashMap<String, usize> {
    let mut runs = HashMap::new();
    for line in std::fs::read_to_string(root.join("ran.txt"))
        .unwrap_or_default()
        .lines()
    {
        *runs.entry(line.to_string()).or_default() += 1;
    }
    runs
}

#[tokio::test]
async fn fifty_kill_9s_lose_no_acknowledged_prompt_rerun_no_command_and_leave_no_turn_open() {
    let mut g = Gen::for_suite("reliability::crash");
    let seed = g.seed;
    let points: Vec<KillPoint> = (0..KILLS)
        .map(|_| {
            *g.pick(&[
                KillPoint::AfterSend,
                KillPoint::MidStream,
                KillPoint::MidTool,
                KillPoint::MidLogWrite,
            ])
        })
        .collect();
    let server = ModelServer::start().await;
    let plan = points.clone();
    server.respond_with(move |request| {
        let prompt = prompt_of(&request.body);
        let number = |prefix: &str| {
            prompt
                .strip_prefix(prefix)
                .and_then(|n| n.parse::<usize>().ok())
        };
        // A model call after this turn's tool result just answers.
        let messages = request.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let after_tool = messages
            .iter()
            .rev()
            .take_while(|m| m["role"] != "user")
            .any(|m| m["role"] == "tool");
        match number("crash ") {
            Some(turn) if !after_tool && turn < plan.len() => reply_for(turn, plan[turn]),
            _ => openai::text(["done"]),
        }
    });
    let root = tempfile::tempdir().expect("workspace");
    let home = Arc::new(tempfile::tempdir().expect("home"));
    let mut config = server.session_config();
    config["approval"] = json!({"mode": "auto"});

    let started = Instant::now();
    let mut session = String::new();
    let mut acknowledged: Vec<String> = Vec::new();
    let mut killed_turn: Option<(String, bool)> = None;
    for (kill, point) in points.iter().enumerate() {
        let context = format!("seed {seed}, kill {kill}, {point:?}");
        let mut editor = daemon(home.clone(), root.path()).await;
        if kill == 0 {
            session = editor.new_session(config.clone()).await;
        } else {
            load_and_check(
                &mut editor,
                &session,
                &acknowledged,
                killed_turn.as_ref(),
                &context,
            )
            .await;
        }
        let duplicates: Vec<_> = runs(root.path())
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .collect();
        assert!(
            duplicates.is_empty(),
            "commands ran twice: {duplicates:?} ({context})"
        );

        let from = editor.received.len();
        let text = format!("crash {kill}");
        editor.start_prompt(&session, &text).await;
        let ack = |u: &Value| u["sessionUpdate"] == "input_status" && u["status"] == "pending";
        if *point != KillPoint::AfterSend {
            editor.wait_update(&session, ack).await;
            acknowledged.push(text.clone());
            if g.chance(30) {
                // A prompt queued behind the running turn.
                let queued = format!("queued {kill}");
                editor.start_prompt(&session, &queued).await;
                editor.wait_update(&session, ack).await;
                acknowledged.push(queued);
            }
        }
        match point {
            KillPoint::AfterSend => {}
            KillPoint::MidStream => {
                seen_or_wait(&mut editor, from, &session, |u| {
                    u["sessionUpdate"] == "agent_message_chunk"
                })
                .await;
            }
            KillPoint::MidTool => {
                seen_or_wait(&mut editor, from, &session, |u| {
                    u["sessionUpdate"] == "tool_call_update" && u["status"] == "in_progress"
                })
                .await;
            }
            KillPoint::MidLogWrite => {
                let chunks = g.below(BURST_CHUNKS) + 1;
                for _ in 0..chunks {
                    let seen = editor
                        .wait_update(&session, |u| {
                            u["sessionUpdate"] == "agent_message_chunk"
                                || u["sessionUpdate"] == "turn_end"
                        })
                        .await;
                    if seen["update"]["sessionUpdate"] == "turn_end" {
                        break;
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(g.below(15) as u64)).await;
        let turn = editor.received[from..]
            .iter()
            .find_map(|m| m["params"]["turnId"].as_str().map(str::to_string));
        let saw_end = editor.received[from..]
            .iter()
            .any(|m| m["params"]["update"]["sessionUpdate"] == "turn_end");
        killed_turn = turn.map(|t| (t, saw_end));
        editor.kill_9().await;
    }

    // The last restart: checks, then the session still works.
    let mut editor = daemon(home.clone(), root.path()).await;
    let context = format!("seed {seed}, after the last kill");
    let replay = load_and_check(
        &mut editor,
        &session,
        &acknowledged,
        killed_turn.as_ref(),
        &context,
    )
    .await;
    let interrupted = replay
        .iter()
        .filter(|u| u["update"]["stopReason"] == "interrupted")
        .count();
    let (receipt, updates) = editor.prompt(&session, "after all that").await;
    assert_eq!(
        receipt["result"]["stopReason"], "end_turn",
        "{receipt} ({context})"
    );
    assert_eq!(
        crate::support::client::agent_text(&updates),
        "done",
        "{context}"
    );
    let duplicates: Vec<_> = runs(root.path())
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .collect();
    assert!(
        duplicates.is_empty(),
        "commands ran twice: {duplicates:?} ({context})"
    );
    let (_, torn) = log_events(&editor, &session);
    let mut by_point: HashMap<String, usize> = HashMap::new();
    for point in &points {
        *by_point.entry(format!("{point:?}")).or_default() += 1;
    }
    eprintln!(
        "crash: {KILLS} kill -9 in {:.1?}, seed {seed}; points {by_point:?}; {} prompts acknowledged, all in the log; \
         {interrupted} turns replayed as interrupted; {} commands ran, none twice; {torn} torn log lines left",
        started.elapsed(),
        acknowledged.len(),
        runs(root.path()).len()
    );
}
