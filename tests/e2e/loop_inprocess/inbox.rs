//! The inbox and steps in-process: a steer entering the next step, a queued
//! prompt's own receipt, admission hooks, and a waking steer during the
//! final answer.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use tandem::core::driver::{Admission, AdmissionHook, ClaimedInput};
use tandem::frontend::updates::session_update;
use tandem::protocol::{InputStatus, SessionUpdate};
use tandem::vocab::event::{Event, InputQueue, StopReason, UserContent};

use super::{call, text_content, tool_calls, turn_ends, Harness};
use crate::support::model_server::{openai, Reply, SseStep};

#[tokio::test]
async fn steer_during_a_tool_enters_the_next_step_after_the_tool_result() {
    let h = Harness::start().await;
    h.server
        .push(tool_calls(&[call("call_gate", "sleepy", "gate")]));
    h.server.push(openai::text(["steered"]));
    let session = h.session(json!({}));
    let (_, receipt) = h.prompt(&session, "start");

    h.board.wait_for("start gate").await;
    let steer_id = h
        .daemon
        .steer(
            &h.client,
            &session.id,
            text_content("also check the tests"),
            true,
        )
        .expect("steer");
    h.board.release("gate");
    let receipt = receipt.get().await;
    assert_eq!(receipt.stop_reason, StopReason::EndTurn, "{receipt:?}");
    assert_eq!(receipt.turn_id.as_deref(), Some("t1"));

    let requests = h.server.wait_for_requests(2).await;
    assert_eq!(requests.len(), 2);
    assert!(!requests[0].raw_body.contains("also check the tests"));
    let messages = requests[1].body["messages"].as_array().unwrap();
    let result_at = messages
        .iter()
        .position(|m| m["role"] == "tool" && m["tool_call_id"] == "call_gate")
        .expect("the tool result");
    assert_eq!(messages[result_at]["content"], "output of gate");
    assert_eq!(messages[result_at + 1]["role"], "user");
    assert_eq!(messages[result_at + 1]["content"], "also check the tests");
    assert_eq!(messages.len(), result_at + 2);

    // pending -> claimed -> entered, at the boundary before step 2.
    let events = h.sink.events();
    let at = |pred: &dyn Fn(&Event) -> bool| {
        events
            .iter()
            .position(pred)
            .unwrap_or_else(|| panic!("{events:#?}"))
    };
    let queued = at(
        &|e| matches!(e, Event::InputQueued { message_id, queue: InputQueue::NextStep, .. } if *message_id == steer_id),
    );
    let claimed = at(
        &|e| matches!(e, Event::InputClaimed { message_ids, .. } if *message_ids == [steer_id.clone()]),
    );
    let entered = at(
        &|e| matches!(e, Event::UserMessage { message_id, turn_id, .. } if *message_id == steer_id && turn_id == "t1"),
    );
    let tool_result = at(&|e| matches!(e, Event::ToolResult { .. }));
    let step_two = at(&|e| matches!(e, Event::StepStart { step: 2, .. }));
    assert!(queued < tool_result && tool_result < claimed);
    assert!(claimed < entered && entered < step_two);
    // On the wire these are `input_status` pending then claimed.
    let statuses: Vec<InputStatus> = [queued, claimed]
        .iter()
        .map(|&i| match session_update(&events[i]) {
            Some(SessionUpdate::InputStatus { status, .. }) => status,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(statuses, [InputStatus::Pending, InputStatus::Claimed]);
    assert_eq!(
        turn_ends(&events),
        [("t1".to_string(), StopReason::EndTurn)]
    );
}

#[tokio::test]
async fn a_prompt_queued_behind_a_running_turn_gets_its_own_receipt_after_it() {
    let h = Harness::start().await;
    h.server
        .push(tool_calls(&[call("call_gate", "sleepy", "gate")]));
    h.server.push(openai::text(["first done"]));
    h.server.push(openai::text(["second done"]));
    let session = h.session(json!({}));
    let (_, first) = h.prompt(&session, "one");
    h.board.wait_for("start gate").await;
    let (second_id, second) = h.prompt(&session, "two");
    assert_eq!(session.queued_prompts(), 1);
    h.board.release("gate");

    let first = first.get().await;
    assert_eq!(first.turn_id.as_deref(), Some("t1"));
    assert_eq!(first.stop_reason, StopReason::EndTurn);
    let second = second.get().await;
    assert_eq!(second.turn_id.as_deref(), Some("t2"));
    assert_eq!(second.stop_reason, StopReason::EndTurn);

    let requests = h.server.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        !requests[1].raw_body.contains("\"two\""),
        "two waits for its own turn"
    );
    let log = h.log(&session);
    assert_eq!(
        turn_ends(&log),
        [
            ("t1".to_string(), StopReason::EndTurn),
            ("t2".to_string(), StopReason::EndTurn)
        ]
    );
    let entered_in = log.iter().find_map(|e| match e {
        Event::UserMessage {
            message_id,
            turn_id,
            ..
        } if *message_id == second_id => Some(turn_id.clone()),
        _ => None,
    });
    assert_eq!(entered_in.as_deref(), Some("t2"));
}

/// Rewrites every input's text to upper case.
struct Shout;

impl AdmissionHook for Shout {
    fn admit(&self, _session_id: &str, batch: Vec<ClaimedInput>) -> Admission {
        Admission::Enter(
            batch
                .into_iter()
                .map(|mut input| {
                    for block in &mut input.content {
                        if let UserContent::Text { text } = block {
                            *text = text.to_uppercase();
                        }
                    }
                    input
                })
                .collect(),
        )
    }
}

/// Rejects any batch mentioning `forbidden`.
struct Forbid;

impl AdmissionHook for Forbid {
    fn admit(&self, _session_id: &str, batch: Vec<ClaimedInput>) -> Admission {
        let mentions = batch.iter().any(|i| {
            i.content
                .iter()
                .any(|c| matches!(c, UserContent::Text { text } if text.contains("forbidden")))
        });
        if mentions {
            Admission::Reject {
                reason: "it mentions something forbidden".to_string(),
            }
        } else {
            Admission::Enter(batch)
        }
    }
}

#[tokio::test]
async fn admission_hooks_rewrite_what_they_admit_and_a_rejection_blocks_a_zero_step_turn() {
    let h = Harness::start().await;
    h.daemon.add_admission_hook(Arc::new(Forbid));
    h.daemon.add_admission_hook(Arc::new(Shout));
    h.server.push(openai::text(["ok"]));
    let session = h.session(json!({}));

    let (rejected_id, receipt) = h.prompt(&session, "do the forbidden thing");
    let receipt = receipt.get().await;
    assert_eq!(receipt.stop_reason, StopReason::Blocked);
    assert_eq!(receipt.turn_id.as_deref(), Some("t1"));
    assert_eq!(
        receipt.message.as_deref(),
        Some("the input was rejected at admission: it mentions something forbidden")
    );
    assert!(h.server.requests().is_empty());

    let (_, receipt) = h.prompt(&session, "quiet please");
    assert_eq!(receipt.get().await.stop_reason, StopReason::EndTurn);
    let requests = h.server.requests();
    assert_eq!(requests.len(), 1);
    let messages = requests[0].body["messages"].as_array().unwrap();
    let users: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        users,
        ["QUIET PLEASE"],
        "rewritten, and the rejected input is gone"
    );

    let log = h.log(&session);
    let steps_in_t1 = log
        .iter()
        .filter(|e| matches!(e, Event::StepStart { turn_id, .. } if turn_id == "t1"))
        .count();
    assert_eq!(steps_in_t1, 0);
    assert!(log.iter().any(|e| matches!(e,
        Event::InputDiscarded { message_id, reason }
            if *message_id == rejected_id && reason.contains("it mentions something forbidden"))));
}

#[tokio::test]
async fn a_waking_steer_during_the_final_answer_gives_the_model_one_more_step() {
    let h = Harness::start().await;
    // The answer pauses after its first chunk: the steer arrives mid-answer.
    h.server.push(Reply::Sse(
        [
            vec![
                openai::delta(json!({"role": "assistant", "content": ""})),
                openai::delta(json!({"content": "almost done"})),
                SseStep::Delay(Duration::from_millis(300)),
            ],
            openai::ending("stop"),
        ]
        .concat(),
    ));
    h.server.push(openai::text(["done, with the steer"]));
    let session = h.session(json!({}));
    let (_, receipt) = h.prompt(&session, "go");
    h.sink
        .wait_for(
            "the first chunk",
            |e| matches!(e, Event::AssistantChunk { text, .. } if text == "almost done"),
        )
        .await;
    h.daemon
        .steer(&h.client, &session.id, text_content("one more thing"), true)
        .expect("steer");

    let receipt = receipt.get().await;
    assert_eq!(receipt.stop_reason, StopReason::EndTurn);
    assert_eq!(receipt.turn_id.as_deref(), Some("t1"), "the same turn");
    let requests = h.server.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1].body["messages"].as_array().unwrap();
    let n = messages.len();
    assert_eq!(messages[n - 2]["role"], "assistant");
    assert_eq!(messages[n - 2]["content"], "almost done");
    assert_eq!(messages[n - 1]["role"], "user");
    assert_eq!(messages[n - 1]["content"], "one more thing");
    assert_eq!(
        turn_ends(&h.log(&session)),
        [("t1".to_string(), StopReason::EndTurn)]
    );
}
