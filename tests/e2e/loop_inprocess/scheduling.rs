//! Tool scheduling: parallel where safe, bounded by `parallel_tools`, an
//! exclusive tool a barrier, and results always in the model's order.

use std::sync::atomic::Ordering;

use serde_json::json;

use tandem::vocab::event::{StopReason, ToolStatus};

use super::{call, results, started, tool_calls, Harness};
use crate::support::model_server::openai;

#[tokio::test]
async fn parallel_calls_are_shown_as_they_finish_and_returned_in_model_order() {
    let h = Harness::start().await;
    h.server.push(tool_calls(&[
        call("call_1", "sleepy", "1"),
        call("call_2", "sleepy", "2"),
        call("call_3", "sleepy", "3"),
    ]));
    h.server.push(openai::text(["done"]));
    let session = h.session(json!({}));
    let (_, receipt) = h.prompt(&session, "go");

    // All three run at once...
    h.board.wait_for_count("start", 3).await;
    // ...and finish in the order 3, 1, 2; each result is logged (and so
    // shown) when its call ends, before the slower siblings finish.
    for key in ["3", "1", "2"] {
        h.board.release(key);
        h.board.wait_for(&format!("end {key}")).await;
        let call_id = format!("call_{key}");
        let mut polls = 0;
        while !results(&h.log(&session)).iter().any(|r| r.0 == call_id) {
            polls += 1;
            assert!(
                polls < 500,
                "{call_id}'s result was not logged when it ended"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
    assert_eq!(receipt.get().await.stop_reason, StopReason::EndTurn);
    let journal = h.board.journal();
    let ends: Vec<&str> = journal
        .iter()
        .filter(|e| e.starts_with("end"))
        .map(String::as_str)
        .collect();
    assert_eq!(ends, ["end 3", "end 1", "end 2"]);

    let log = h.log(&session);
    let logged: Vec<(String, ToolStatus, String)> = results(&log);
    assert_eq!(
        logged,
        ["3", "1", "2"]
            .iter()
            .map(|k| (
                format!("call_{k}"),
                ToolStatus::Completed,
                format!("output of {k}")
            ))
            .collect::<Vec<_>>()
    );
    let requests = h.server.wait_for_requests(2).await;
    assert_eq!(
        requests[1].tool_messages(),
        ["1", "2", "3"]
            .iter()
            .map(|k| (format!("call_{k}"), format!("output of {k}")))
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn no_more_than_parallel_tools_calls_run_at_once() {
    let h = Harness::start().await;
    let calls: Vec<_> = (1..=5)
        .map(|i| call(&format!("call_{i}"), "sleepy", &i.to_string()))
        .collect();
    h.server.push(tool_calls(&calls));
    h.server.push(openai::text(["done"]));
    let session = h.session(json!({"parallel_tools": 2}));
    let (_, receipt) = h.prompt(&session, "go");

    // Release each call only once the pool is full (or the calls run out).
    for i in 1..=5usize {
        h.board.wait_for_count("start", (i + 1).min(5)).await;
        h.board.release(&i.to_string());
    }
    assert_eq!(receipt.get().await.stop_reason, StopReason::EndTurn);
    assert_eq!(h.board.max_running.load(Ordering::SeqCst), 2);
    // Logged as they ended; given to the model in call order.
    let log = h.log(&session);
    assert_eq!(results(&log).len(), 5);
    let requests = h.server.wait_for_requests(2).await;
    let ids: Vec<String> = requests[1]
        .tool_messages()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(ids, ["call_1", "call_2", "call_3", "call_4", "call_5"]);
}

#[tokio::test]
async fn an_exclusive_tool_is_a_barrier_between_the_calls_around_it() {
    let h = Harness::start().await;
    h.server.push(tool_calls(&[
        call("call_a", "sleepy", "a"),
        call("call_b", "sleepy", "b"),
        call("call_x", "barrier", "x"),
        call("call_c", "sleepy", "c"),
    ]));
    h.server.push(openai::text(["done"]));
    let session = h.session(json!({}));
    let (_, receipt) = h.prompt(&session, "go");

    // The two calls before the barrier run together.
    h.board.wait_for("start a").await;
    h.board.wait_for("start b").await;
    h.board.release("b");
    h.board.wait_for("end b").await;
    assert!(!h.board.has("start x"), "{:?}", h.board.journal());
    h.board.release("a");
    h.board.wait_for("start x").await;
    // Nothing after the barrier starts while it runs. `c` is released
    // already, so it would finish at once if it had been started.
    h.board.release("c");
    h.board.release("x");
    assert_eq!(receipt.get().await.stop_reason, StopReason::EndTurn);

    let (end_a, end_b) = (h.board.position("end a"), h.board.position("end b"));
    let (start_x, end_x) = (h.board.position("start x"), h.board.position("end x"));
    let start_c = h.board.position("start c");
    assert!(
        end_a < start_x && end_b < start_x,
        "{:?}",
        h.board.journal()
    );
    assert!(end_x < start_c, "{:?}", h.board.journal());
    let log = h.log(&session);
    let ids: Vec<String> = results(&log).into_iter().map(|(id, _, _)| id).collect();
    assert_eq!(
        ids,
        ["call_b", "call_a", "call_x", "call_c"],
        "as they ended"
    );
    assert_eq!(started(&log), ["call_a", "call_b", "call_x", "call_c"]);
    let requests = h.server.wait_for_requests(2).await;
    let ids: Vec<String> = requests[1]
        .tool_messages()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(
        ids,
        ["call_a", "call_b", "call_x", "call_c"],
        "in call order"
    );
}
