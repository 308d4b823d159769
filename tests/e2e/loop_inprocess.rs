//! The agent loop in-process: a `Daemon` built by the test, with tools whose
//! timing the test controls (they wait until released), still against the
//! loopback model server. What is asserted is observable: events the sink
//! was told about, the session log, the requests the model server got and
//! the prompts' receipts.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::Notify;

use tandem::core::daemon::{Daemon, DaemonOptions, NewSession};
use tandem::core::driver::{Admission, AdmissionHook, ClaimedInput};
use tandem::core::log::{read_log, Durability, EventSink, LoggedEvent};
use tandem::core::session::{Session, TurnReceipt};
use tandem::frontend::updates::session_update;
use tandem::protocol::SessionUpdate;
use tandem::tools::{ApprovalClass, ExecMode, Tool, ToolContext, ToolError};
use tandem::vocab::bridge::NoClient;
use tandem::vocab::event::{Event, InputQueue, StopReason, ToolStatus, UserContent};

use crate::support::model_server::{openai, within_real_time, ModelServer, Reply, SseStep};
use crate::support::TEST_DEADLINE;

/// Waits, with the test deadline as a guard, until `done` holds; `changed`
/// must be notified whenever what `done` reads changes.
async fn wait_until(changed: &Notify, done: impl Fn() -> bool, what: impl Fn() -> String) {
    let wait = async {
        loop {
            let notified = changed.notified();
            tokio::pin!(notified);
            // Registered before checking, so a change in between is not lost.
            notified.as_mut().enable();
            if done() {
                return;
            }
            notified.await;
        }
    };
    within_real_time(TEST_DEADLINE, wait, what).await
}

/// An `EventSink` that keeps everything it is told.
#[derive(Default)]
struct Collect {
    events: Mutex<Vec<LoggedEvent>>,
    changed: Notify,
}

impl EventSink for Collect {
    fn on_event(&self, _session_id: &str, event: &LoggedEvent) {
        self.events.lock().unwrap().push(event.clone());
        self.changed.notify_waiters();
    }
}

impl Collect {
    fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.event.clone())
            .collect()
    }

    async fn wait_for(&self, what: &str, pred: impl Fn(&Event) -> bool) {
        wait_until(
            &self.changed,
            || self.events.lock().unwrap().iter().any(|e| pred(&e.event)),
            || format!("an event: {what}"),
        )
        .await
    }
}

/// What the controlled tools did, and which of their calls may finish.
#[derive(Default)]
struct Board {
    /// `start K`, `end K`, `dropped K` in the order they happened.
    journal: Mutex<Vec<String>>,
    released: Mutex<HashSet<String>>,
    running: AtomicUsize,
    max_running: AtomicUsize,
    changed: Notify,
}

impl Board {
    fn note(&self, entry: String) {
        self.journal.lock().unwrap().push(entry);
        self.changed.notify_waiters();
    }

    fn journal(&self) -> Vec<String> {
        self.journal.lock().unwrap().clone()
    }

    fn has(&self, entry: &str) -> bool {
        self.journal.lock().unwrap().iter().any(|e| e == entry)
    }

    fn position(&self, entry: &str) -> usize {
        self.journal()
            .iter()
            .position(|e| e == entry)
            .unwrap_or_else(|| panic!("`{entry}` not in {:?}", self.journal()))
    }

    /// Lets the call with `key` finish.
    fn release(&self, key: &str) {
        self.released.lock().unwrap().insert(key.to_string());
        self.changed.notify_waiters();
    }

    async fn wait_for(&self, entry: &str) {
        wait_until(
            &self.changed,
            || self.has(entry),
            || format!("`{entry}` in {:?}", self.journal()),
        )
        .await
    }

    async fn wait_for_count(&self, prefix: &str, n: usize) {
        wait_until(
            &self.changed,
            || {
                self.journal()
                    .iter()
                    .filter(|e| e.starts_with(prefix))
                    .count()
                    >= n
            },
            || format!("{n} `{prefix}` in {:?}", self.journal()),
        )
        .await
    }
}

/// Marks a call as dropped if its future goes away before it finished.
struct Running<'a> {
    board: &'a Board,
    key: String,
    finished: bool,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.board.running.fetch_sub(1, Ordering::SeqCst);
        if !self.finished {
            self.board.note(format!("dropped {}", self.key));
        }
    }
}

/// A tool whose calls (`{"key": K}`) note `start K`, wait until the test
/// releases K, note `end K` and return `output of K`.
struct Controlled {
    name: &'static str,
    mode: ExecMode,
    board: Arc<Board>,
}

#[async_trait::async_trait]
impl Tool for Controlled {
    fn name(&self) -> &'static str {
        self.name
    }
    fn description(&self) -> &'static str {
        "a test tool that finishes when the test says so"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]})
    }
    fn mode(&self) -> ExecMode {
        self.mode
    }
    fn approval(&self) -> ApprovalClass {
        ApprovalClass::Read
    }
    fn kind(&self) -> &'static str {
        "other"
    }
    fn title(&self, args: &Value) -> String {
        format!("{} {}", self.name, args["key"])
    }
    async fn run(&self, args: Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        let key = args["key"]
            .as_str()
            .ok_or_else(|| ToolError::new("key: expected a string"))?
            .to_string();
        let board = &self.board;
        let now = board.running.fetch_add(1, Ordering::SeqCst) + 1;
        board.max_running.fetch_max(now, Ordering::SeqCst);
        let mut running = Running {
            board,
            key: key.clone(),
            finished: false,
        };
        board.note(format!("start {key}"));
        wait_until(
            &board.changed,
            || board.released.lock().unwrap().contains(&key),
            || format!("the test to release {key}"),
        )
        .await;
        running.finished = true;
        drop(running);
        board.note(format!("end {key}"));
        Ok(format!("output of {key}"))
    }
}

struct Harness {
    daemon: Arc<Daemon>,
    sink: Arc<Collect>,
    board: Arc<Board>,
    server: ModelServer,
    home: tempfile::TempDir,
    root: tempfile::TempDir,
}

impl Harness {
    /// A daemon with the controlled tools `sleepy` (parallel) and
    /// `barrier` (exclusive).
    async fn start() -> Harness {
        let home = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let sink = Arc::new(Collect::default());
        let daemon = Daemon::new(DaemonOptions {
            home: home.path().to_path_buf(),
            durability: Durability::Flush,
            sink: sink.clone(),
            bridge: Arc::new(NoClient),
        });
        let board = Arc::new(Board::default());
        for (name, mode) in [
            ("sleepy", ExecMode::Parallel),
            ("barrier", ExecMode::Exclusive),
        ] {
            daemon.register_tool(Arc::new(Controlled {
                name,
                mode,
                board: board.clone(),
            }));
        }
        Harness {
            daemon,
            sink,
            board,
            server: ModelServer::start().await,
            home,
            root,
        }
    }

    fn session(&self, limits: Value) -> Arc<Session> {
        let config = self.server.session_config_with(limits);
        self.daemon
            .new_session(NewSession {
                workspace_folder: Some(self.root.path().to_path_buf()),
                title: None,
                config: Some(config),
            })
            .expect("new session")
    }

    fn prompt(&self, session: &Session, text: &str) -> (String, Receipt) {
        let (id, rx) = self
            .daemon
            .prompt(&session.id, text_content(text))
            .expect("prompt");
        (id, Receipt(rx))
    }

    /// The session's events as read back from its log file.
    fn log(&self, session: &Session) -> Vec<Event> {
        let path = self
            .home
            .path()
            .join("sessions")
            .join(format!("{}.jsonl", session.id));
        let (_, events) = read_log(&path).expect("read the session log");
        events.into_iter().map(|e| e.event).collect()
    }
}

fn text_content(text: &str) -> Vec<UserContent> {
    vec![UserContent::Text {
        text: text.to_string(),
    }]
}

struct Receipt(tokio::sync::oneshot::Receiver<TurnReceipt>);

impl Receipt {
    async fn get(self) -> TurnReceipt {
        within_real_time(TEST_DEADLINE, self.0, || "a prompt's receipt".to_string())
            .await
            .expect("the session answered the receipt")
    }
}

fn call(id: &str, tool: &str, key: &str) -> (String, String, String) {
    (
        id.to_string(),
        tool.to_string(),
        json!({ "key": key }).to_string(),
    )
}

fn tool_calls(calls: &[(String, String, String)]) -> Reply {
    let borrowed: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
        .collect();
    openai::tool_calls(&borrowed)
}

/// `(call_id, status, output)` of every `tool_result`, in log order.
fn results(events: &[Event]) -> Vec<(String, ToolStatus, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ToolResult {
                call_id,
                status,
                output,
                ..
            } => Some((call_id.clone(), *status, output.clone())),
            _ => None,
        })
        .collect()
}

fn started(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ToolStarted { call_id, .. } => Some(call_id.clone()),
            _ => None,
        })
        .collect()
}

/// Every `tool_call` has exactly one `tool_result`, and no result lacks its call.
fn assert_every_call_has_one_result(events: &[Event]) {
    let calls: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCall { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    let results = results(events);
    for id in &calls {
        let n = results.iter().filter(|(r, _, _)| r == id).count();
        assert_eq!(n, 1, "call {id} has {n} results: {events:#?}");
    }
    assert_eq!(calls.len(), results.len(), "{events:#?}");
}

fn turn_ends(events: &[Event]) -> Vec<(String, StopReason)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::TurnEnd {
                turn_id,
                stop_reason,
                ..
            } => Some((turn_id.clone(), *stop_reason)),
            _ => None,
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Inbox and steps

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
        .steer(&session.id, text_content("also check the tests"), true)
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
    let statuses: Vec<String> = [queued, claimed]
        .iter()
        .map(|&i| match session_update(&events[i]) {
            Some(SessionUpdate::InputStatus { status, .. }) => status,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(statuses, ["pending", "claimed"]);
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

// ---------------------------------------------------------------------------
// Tools: parallel where safe, ordered always

#[tokio::test]
async fn parallel_calls_finishing_out_of_order_are_returned_in_model_order() {
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
    // ...and finish in the order 3, 1, 2.
    for key in ["3", "1", "2"] {
        h.board.release(key);
        h.board.wait_for(&format!("end {key}")).await;
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
        ["1", "2", "3"]
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
    let log = h.log(&session);
    let ids: Vec<String> = results(&log).into_iter().map(|(id, _, _)| id).collect();
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
    assert_eq!(ids, ["call_a", "call_b", "call_x", "call_c"]);
    assert_eq!(started(&log), ["call_a", "call_b", "call_x", "call_c"]);
}

// ---------------------------------------------------------------------------
// Cancellation

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
        .steer(&session.id, text_content("then this"), true)
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
        .steer(&session.id, text_content("one more thing"), true)
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
