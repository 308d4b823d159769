//! The agent loop in-process: a `Daemon` built by the test, with tools whose
//! timing the test controls (they wait until released), still against the
//! loopback model server. What is asserted is observable: events the sink
//! was told about, the session log, the requests the model server got and
//! the prompts' receipts.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::sync::Notify;

use tandem::core::client::{Client, OneBridge};
use tandem::core::daemon::{Daemon, DaemonOptions, NewSession};
use tandem::core::log::{read_log, Durability, EventSink, LoggedEvent};
use tandem::core::session::{Session, TurnReceipt};
use tandem::tools::{ApprovalClass, ExecMode, Tool, ToolContext, ToolError};
use tandem::vocab::bridge::NoClient;
use tandem::vocab::event::{Event, StopReason, ToolStatus, UserContent};
use tandem::vocab::tool_call::ToolKind;

use crate::support::model_server::{openai, within_real_time, ModelServer, Reply};
use crate::support::TEST_DEADLINE;

mod cancel;
mod clients;
mod inbox;
mod scheduling;

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
    fn kind(&self) -> ToolKind {
        ToolKind::Other
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
    /// The one client, which cannot be asked anything.
    client: Arc<Client>,
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
        });
        let client = daemon.connect(Arc::new(OneBridge(Arc::new(NoClient))));
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
            client,
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
            .new_session(
                &self.client,
                NewSession {
                    workspace_folder: Some(self.root.path().to_path_buf()),
                    title: None,
                    config: Some(config),
                },
            )
            .expect("new session")
    }

    fn prompt(&self, session: &Session, text: &str) -> (String, Receipt) {
        let (id, rx) = self
            .daemon
            .prompt(&self.client, &session.id, text_content(text))
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
