//! Work-done progress (`$/progress`) for running turns, when the client
//! offers `window.workDoneProgress`: begin when a turn starts, a report when
//! a tool runs or the turn waits for the user, end with the stop reason.
//! The progress is cancellable: `window/workDoneProgress/cancel` cancels the
//! turn.
//!
//! Invariant: a token's notifications go out in order and only after the
//! client answered `window/workDoneProgress/create` for it; a refused token
//! gets nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tower_lsp::lsp_types::{
    NumberOrString, ProgressParams, ProgressParamsValue, WorkDoneProgress, WorkDoneProgressBegin,
    WorkDoneProgressCreateParams, WorkDoneProgressEnd, WorkDoneProgressReport,
};

use super::outgoing::Outgoing;
use super::OutboundQueue;
use crate::vocab::bridge::BridgeOutcome;
use crate::vocab::event::Event;

/// Turns session events into `$/progress` notifications.
pub struct Progress {
    enabled: AtomicBool,
    out: OutboundQueue,
    outgoing: Arc<Outgoing>,
    /// Per running turn: where its progress items go, and its session.
    turns: Mutex<HashMap<String, (mpsc::UnboundedSender<WorkDoneProgress>, String)>>,
    /// A turn's title (a task's), by session and turn id; `tandem` without.
    titles: OnceLock<TitleSource>,
}

/// Looks up the title of a running turn: `(session_id, turn_id)`.
pub type TitleSource = Box<dyn Fn(&str, &str) -> Option<String> + Send + Sync>;

impl Progress {
    pub fn new(out: OutboundQueue, outgoing: Arc<Outgoing>) -> Arc<Progress> {
        Arc::new(Progress {
            enabled: AtomicBool::new(false),
            out,
            outgoing,
            turns: Mutex::new(HashMap::new()),
            titles: OnceLock::new(),
        })
    }

    /// Where turn titles come from (set once, after the daemon exists).
    pub fn set_title_source(&self, source: TitleSource) {
        let _ = self.titles.set(source);
    }

    /// Set from the client's `window.workDoneProgress` capability.
    pub fn set_enabled(&self, enabled: bool) {
        self.enabled.store(enabled, Ordering::Relaxed);
    }

    fn token(session_id: &str, turn_id: &str) -> String {
        format!("tandem/{session_id}/{turn_id}")
    }

    /// The session whose turn a token belongs to (for a cancel).
    pub fn session_of(&self, token: &str) -> Option<String> {
        self.turns
            .lock()
            .get(token)
            .map(|(_, session)| session.clone())
    }

    /// Called for every session event, in log order.
    pub fn on_event(&self, session_id: &str, event: &Event) {
        if !self.enabled.load(Ordering::Relaxed) {
            return;
        }
        let (turn_id, value) = match event {
            Event::TurnStart { turn_id } => {
                self.begin(session_id, turn_id);
                return;
            }
            Event::ToolCall { turn_id, title, .. } => {
                (turn_id, report(format!("running: {title}")))
            }
            Event::ToolWaiting {
                turn_id,
                waiting_for,
                ..
            } => (turn_id, report(format!("waiting for you ({waiting_for})"))),
            Event::StepStart { turn_id, step } => {
                (turn_id, report(format!("thinking (step {step})")))
            }
            Event::TurnEnd {
                turn_id,
                stop_reason,
                ..
            } => {
                let token = Self::token(session_id, turn_id);
                let entry = self.turns.lock().remove(&token);
                if let Some((tx, _)) = entry {
                    let _ = tx.send(WorkDoneProgress::End(WorkDoneProgressEnd {
                        message: Some(stop_reason.as_str().to_string()),
                    }));
                }
                return;
            }
            _ => return,
        };
        let token = Self::token(session_id, turn_id);
        if let Some((tx, _)) = self.turns.lock().get(&token) {
            let _ = tx.send(value);
        }
    }

    fn begin(&self, session_id: &str, turn_id: &str) {
        let token = Self::token(session_id, turn_id);
        let (tx, mut rx) = mpsc::unbounded_channel::<WorkDoneProgress>();
        let title = self
            .titles
            .get()
            .and_then(|title_of| title_of(session_id, turn_id))
            .unwrap_or_else(|| "tandem".to_string());
        let _ = tx.send(WorkDoneProgress::Begin(WorkDoneProgressBegin {
            title,
            message: Some("working".to_string()),
            cancellable: Some(true),
            percentage: None,
        }));
        self.turns
            .lock()
            .insert(token.clone(), (tx, session_id.to_string()));
        let out = self.out.clone();
        let outgoing = self.outgoing.clone();
        tokio::spawn(async move {
            // An editor that never answers gets no progress; dropping the
            // request at the deadline withdraws it rather than leaving it
            // pending.
            let created = tokio::time::timeout(
                std::time::Duration::from_secs(10),
                outgoing.request(
                    "window/workDoneProgress/create",
                    serde_json::to_value(WorkDoneProgressCreateParams {
                        token: NumberOrString::String(token.clone()),
                    })
                    .unwrap_or(Value::Null),
                    &CancellationToken::new(),
                ),
            )
            .await;
            if !matches!(created, Ok(BridgeOutcome::Answered(_))) {
                tracing::debug!(token, "the client refused a progress token");
                return;
            }
            while let Some(value) = rx.recv().await {
                let end = matches!(value, WorkDoneProgress::End(_));
                let params = ProgressParams {
                    token: NumberOrString::String(token.clone()),
                    value: ProgressParamsValue::WorkDone(value),
                };
                out.send_json(
                    &serde_json::to_value(ProgressNotification {
                        jsonrpc: "2.0",
                        method: "$/progress",
                        params,
                    })
                    .unwrap_or(Value::Null),
                );
                if end {
                    break;
                }
            }
        });
    }
}

/// A `report` of the turn's progress.
fn report(message: String) -> WorkDoneProgress {
    WorkDoneProgress::Report(WorkDoneProgressReport {
        cancellable: None,
        message: Some(message),
        percentage: None,
    })
}

/// `$/progress`: JSON-RPC's envelope around lsp-types' params.
#[derive(serde::Serialize)]
struct ProgressNotification {
    jsonrpc: &'static str,
    method: &'static str,
    params: ProgressParams,
}
