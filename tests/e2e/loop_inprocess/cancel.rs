//! Cancellation in-process: a running tool aborted, undispatched and queued
//! calls closed as not run, and what a prompt or steer sent meanwhile gets.

use std::time::{Duration, Instant};

use serde_json::json;

use tandem::vocab::event::{Event, StopReason, ToolStatus};

use super::{
    assert_every_call_has_one_result, call, results, started, text_content, tool_calls, turn_ends,
    Harness,
};
use crate::support::model_server::openai;

#[tokio::test]
async fn cancel_during_a_tool_aborts_it_and_closes_undispatched_calls_as_not_run() {
    let h = Harness::start().await;
    // `gate` runs; the barrier and the call after it are not dispatched yet.
    h.server.push(tool_calls(&[
        call("call_gate", "sleepy", "gate"),
        call("call_x", "barrier", "x"),
        call("call_after", "sleepy", "after"),
    ]));
    let session = h.session(json!({}));
    let (_, receipt) = h.prompt(&session, "go");
    h.board.wait_for("start gate").await;

    let cancelled_at = Instant::now();
    h.daemon.cancel(&session.id, false).expect("cancel");
    let receipt = receipt.get().await;
    let took = cancelled_at.elapsed();
    assert_eq!(receipt.stop_reason, StopReason::Cancelled, "{receipt:?}");
    assert_eq!(receipt.message.as_deref(), Some("cancelled by the user"));
    assert!(took < Duration::from_millis(500), "cancel took {took:?}");
    assert_eq!(
        h.board.journal(),
        ["start gate", "dropped gate"],
        "the running call was stopped; the others never started"
    );

    let log = h.log(&session);
    assert_every_call_has_one_result(&log);
    let logged = results(&log);
    assert_eq!(logged[0].0, "call_gate");
    assert_eq!(logged[0].1, ToolStatus::Aborted);
    for (id, status, output) in &logged[1..] {
        assert_eq!(*status, ToolStatus::NotRun, "{id}");
        assert!(
            output.starts_with("ABORTED_BEFORE_DISPATCH"),
            "{id}: {output}"
        );
    }
    assert_eq!(started(&log), ["call_gate"]);
    assert_eq!(turn_ends(&log), [("t1".to_string(), StopReason::Cancelled)]);
    assert_eq!(h.server.requests().len(), 1, "no model call after cancel");
}

#[tokio::test]
async fn cancel_with_a_full_pool_closes_the_queued_calls_before_dispatch() {
    let h = Harness::start().await;
    h.server.push(tool_calls(&[
        call("call_1", "sleepy", "1"),
        call("call_2", "sleepy", "2"),
        call("call_3", "sleepy", "3"),
    ]));
    let session = h.session(json!({"parallel_tools": 1}));
    let (_, receipt) = h.prompt(&session, "go");
    h.board.wait_for("start 1").await;
    h.daemon.cancel(&session.id, false).expect("cancel");
    assert_eq!(receipt.get().await.stop_reason, StopReason::Cancelled);

    let log = h.log(&session);
    assert_every_call_has_one_result(&log);
    let statuses: Vec<(String, ToolStatus)> = results(&log)
        .into_iter()
        .map(|(id, status, _)| (id, status))
        .collect();
    assert_eq!(
        statuses,
        [
            ("call_1".to_string(), ToolStatus::Aborted),
            ("call_2".to_string(), ToolStatus::NotRun),
            ("call_3".to_string(), ToolStatus::NotRun)
        ]
    );
    assert_eq!(h.board.journal(), ["start 1", "dropped 1"]);
}

#[tokio::test]
async fn a_prompt_sent_while_a_cancelled_turn_converges_runs_next_with_its_own_receipt() {
    let h = Harness::start().await;
    h.server
        .push(tool_calls(&[call("call_gate", "sleepy", "gate")]));
    h.server.push(openai::text(["fresh"]));
    let session = h.session(json!({}));
    let (_, first) = h.prompt(&session, "one");
    h.board.wait_for("start gate").await;

    // No await in between: the session task cannot run, so the turn is
    // still winding down when the prompt arrives.
    h.daemon.cancel(&session.id, false).expect("cancel");
    let (_, second) = h.prompt(&session, "two");

    let first = first.get().await;
    assert_eq!(first.stop_reason, StopReason::Cancelled);
    assert_eq!(first.turn_id.as_deref(), Some("t1"));
    let second = second.get().await;
    assert_eq!(second.stop_reason, StopReason::EndTurn, "{second:?}");
    assert_eq!(second.turn_id.as_deref(), Some("t2"));
    let log = h.log(&session);
    assert_every_call_has_one_result(&log);
    assert_eq!(
        turn_ends(&log),
        [
            ("t1".to_string(), StopReason::Cancelled),
            ("t2".to_string(), StopReason::EndTurn)
        ]
    );
    assert!(!log
        .iter()
        .any(|e| matches!(e, Event::InputDiscarded { .. })));
}

#[tokio::test]
async fn cancel_with_keep_inbox_keeps_a_queued_steer_which_then_opens_a_turn() {
    let h = Harness::start().await;
    h.server
        .push(tool_calls(&[call("call_gate", "sleepy", "gate")]));
    h.server.push(openai::text(["steer answered"]));
    let session = h.session(json!({}));
    let (_, first) = h.prompt(&session, "one");
    h.board.wait_for("start gate").await;
    let steer_id = h
        .daemon
        .steer(&h.client, &session.id, text_content("then this"), true)
        .expect("steer");

    h.daemon.cancel(&session.id, true).expect("cancel");
    assert_eq!(first.get().await.stop_reason, StopReason::Cancelled);
    h.sink
        .wait_for(
            "t2 ends",
            |e| matches!(e, Event::TurnEnd { turn_id, .. } if turn_id == "t2"),
        )
        .await;
    let log = h.log(&session);
    assert_eq!(
        turn_ends(&log),
        [
            ("t1".to_string(), StopReason::Cancelled),
            ("t2".to_string(), StopReason::EndTurn)
        ]
    );
    assert!(log.iter().any(|e| matches!(e,
        Event::UserMessage { message_id, turn_id, .. } if *message_id == steer_id && turn_id == "t2")));
    let requests = h.server.requests();
    assert_eq!(requests.len(), 2);
    let last = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(last.last().unwrap()["content"], "then this");
}
