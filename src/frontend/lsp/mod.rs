//! The LSP frontend: tower-lsp behind tandem's own frame reader and writer.
//!
//! ```text
//! stdin ─► FrameReader ─► (well-formed only) ─► duplex ─► tower-lsp ─► duplex ─► forwarder ─┐
//!              └─ bad frame: error response ─────────────────────────────────────────────────┤
//!   session events ─► LspSink ─► tandem/update notification ─────────────────────────────────┤
//!                                                                                  Outbound ─► stdout
//! ```
//!
//! Invariant: one writer task owns stdout and writes frames in the order
//! they were queued. A session's updates are queued synchronously as its
//! events are logged, before the driver hands the turn's receipt to the
//! `tandem/prompt` handler — so every update of a turn precedes that turn's
//! response, which has to travel through tower-lsp to reach the same queue.

pub mod cancel_request;
pub mod documents;
pub mod framing;
pub mod outgoing;
pub mod progress;
pub mod server;
pub mod tasks;
pub mod workspace_edit;

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWriteExt};
use tower_lsp::Server;

use self::cancel_request::RequestCancels;
use self::framing::{encode, Frame, FrameReader};
use self::outgoing::Outgoing;
use self::progress::Progress;
use crate::core::daemon::{Daemon, DaemonOptions};
use crate::core::log::{Durability, EventSink, LoggedEvent};
use crate::core::output_budget::OutputBudget;
pub use crate::frontend::stdout::OutboundQueue;
pub(crate) use crate::frontend::stdout::{stdout_writer, Outbound};

/// Turns session events into `tandem/update` notifications (and
/// `$/progress` for running turns).
struct LspSink {
    out: OutboundQueue,
    progress: Arc<Progress>,
}

impl EventSink for LspSink {
    fn on_replay(&self, session_id: &str, event: &LoggedEvent) {
        // History: updates, but no progress for turns long over.
        self.send_update(session_id, event);
    }

    fn on_event(&self, session_id: &str, event: &LoggedEvent) {
        if matches!(event.event, crate::vocab::event::Event::TurnEnd { .. }) {
            // The turn's request bodies are freed; asked before its update
            // is queued, so the writer trims once that is written.
            crate::frontend::memory::trim_when_idle();
        }
        self.progress.on_event(session_id, &event.event);
        self.send_update(session_id, event);
    }

    fn output_budget(&self, _session_id: &str) -> Option<Arc<OutputBudget>> {
        self.out.output_budget()
    }
}

impl LspSink {
    fn send_update(&self, session_id: &str, event: &LoggedEvent) {
        self.out.send_update(session_id, event);
    }
}

/// Smooths over two ways editors send "no params" that tower-lsp refuses:
/// `"params": null` is dropped, and a `tandem/*` request without params gets
/// `{}` (every tandem method takes an object whose fields may all be
/// optional). Returns whether the message changed.
fn normalize_params(message: &mut Value) -> bool {
    let Some(object) = message.as_object_mut() else {
        return false;
    };
    let mut changed = false;
    if object.get("params").is_some_and(Value::is_null) {
        object.remove("params");
        changed = true;
    }
    let is_tandem = object
        .get("method")
        .and_then(Value::as_str)
        .is_some_and(|m| m.starts_with("tandem/"));
    if is_tandem && !object.contains_key("params") {
        object.insert("params".to_string(), Value::Object(Default::default()));
        changed = true;
    }
    changed
}

/// How the LSP session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LspEnd {
    /// `exit` after `shutdown`, or EOF on stdin.
    Clean,
    /// `exit` without `shutdown` (LSP says: exit code 1).
    ExitWithoutShutdown,
}

/// Serves LSP on stdin and the process's stdout until `exit` or EOF.
pub async fn serve<R>(stdin: R, home: PathBuf, durability: Durability) -> LspEnd
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let out = stdout_writer(encode);

    let outgoing = Outgoing::new(out.clone());
    let progress = Progress::new(out.clone(), outgoing.clone());
    let daemon = Daemon::new(DaemonOptions {
        home,
        durability,
        sink: Arc::new(LspSink {
            out: out.clone(),
            progress: progress.clone(),
        }),
        bridge: outgoing.clone(),
    });
    let titled = Arc::downgrade(&daemon);
    progress.set_title_source(Box::new(move |session_id, turn_id| {
        titled
            .upgrade()?
            .session(session_id)
            .ok()?
            .turn_title(turn_id)
    }));
    let shutdown_requested = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let request_cancels = Arc::new(RequestCancels::default());
    let (service, socket) = server::build_service(
        daemon.clone(),
        shutdown_requested.clone(),
        outgoing.clone(),
        progress.clone(),
        request_cancels.clone(),
    );

    // tower-lsp reads only well-formed frames from us, and what it writes
    // is read back, unframed, and queued for the one stdout writer.
    let (mut to_lsp, lsp_stdin) = tokio::io::duplex(1 << 20);
    let (lsp_stdout, from_lsp) = tokio::io::duplex(1 << 20);
    let server = tokio::spawn(
        Server::new(lsp_stdin, lsp_stdout, socket)
            // A `tandem/prompt` is answered when its turn ends; with the
            // default limit of 4 in-flight requests, four queued prompts
            // would stall every other request, `shutdown` included.
            .concurrency_level(4096)
            .serve(service),
    );
    let forward_out = out.clone();
    let answered = request_cancels.clone();
    let forwarder = tokio::spawn(async move {
        let mut reader = FrameReader::new(from_lsp);
        while let Some(frame) = reader.next().await {
            match frame {
                Frame::Message { body, value } => {
                    answered.answered(&value);
                    forward_out.send_body(body);
                }
                Frame::Invalid(e) => tracing::error!("tower-lsp wrote a bad frame: {e}"),
            }
        }
    });

    let mut reader = FrameReader::new(stdin);
    let mut end = LspEnd::Clean;
    while let Some(frame) = reader.next().await {
        match frame {
            Frame::Invalid(error) => {
                tracing::warn!("bad input frame: {error}");
                out.send_json(&error.to_response());
            }
            Frame::Message {
                mut body,
                mut value,
            } => {
                let normalized = normalize_params(&mut value);
                let tagged = request_cancels.track(&mut value);
                if normalized || tagged {
                    body = serde_json::to_vec(&value).unwrap_or(body);
                }
                if Outgoing::is_ours(&value) {
                    outgoing.complete(&value);
                    continue;
                }
                if let Some(refusal) = notification_with_an_id(&value) {
                    out.send_json(&refusal);
                    continue;
                }
                if documents::apply(daemon.buffers(), &value) {
                    continue;
                }
                if value.get("method").and_then(Value::as_str)
                    == Some("window/workDoneProgress/cancel")
                {
                    // tower-lsp 0.20 has no handler for it; the token names
                    // the turn.
                    let token = value["params"]["token"].as_str().unwrap_or_default();
                    if let Some(session) = progress.session_of(token) {
                        let _ = daemon.cancel(&session, true);
                    }
                    continue;
                }
                if value.get("method").and_then(Value::as_str) == Some("$/cancelRequest")
                    && request_cancels.cancel(&value)
                {
                    // The prompt's handler answers once its turn has ended.
                    continue;
                }
                let is_exit = value.get("method").and_then(|m| m.as_str()) == Some("exit");
                if is_exit {
                    if !shutdown_requested.load(std::sync::atomic::Ordering::SeqCst) {
                        end = LspEnd::ExitWithoutShutdown;
                    }
                    break;
                }
                if let Err(e) = to_lsp.write_all(&encode(&body)).await {
                    tracing::error!("LSP service stopped reading: {e}");
                    break;
                }
            }
        }
    }
    tracing::info!("LSP input ended ({end:?}); shutting down");
    outgoing.fail_all();
    daemon.shutdown().await;
    // Answer what was asked before the end: closing tower-lsp's input lets
    // it finish its in-flight requests (turns are cancelled by now, so
    // prompts answer at once) and close its output, which ends the
    // forwarder once everything it wrote is queued. Bounded, in case a
    // handler hangs.
    drop(to_lsp);
    let drained = async {
        let _ = server.await;
        let _ = forwarder.await;
    };
    if tokio::time::timeout(std::time::Duration::from_secs(2), drained)
        .await
        .is_err()
    {
        tracing::warn!("gave up waiting for in-flight requests at exit");
    }
    out.close().await;
    end
}

/// Notifications that tower-lsp drops or this loop handles itself.
const LOOP_NOTIFICATIONS: [&str; 5] = [
    "$/cancelRequest",
    "$/setTrace",
    "$/logTrace",
    "$/progress",
    "window/workDoneProgress/cancel",
];

/// The answer to a request (a message with an `id`) whose method is one
/// of [`LOOP_NOTIFICATIONS`] or any other `$/` method: tower-lsp never
/// answers those, and a client waiting on the id would wait forever. A
/// known notification is `-32600` (as tower-lsp answers other
/// notifications sent with an id); an unknown `$/` method `-32601`, as
/// the LSP specification asks.
fn notification_with_an_id(message: &Value) -> Option<Value> {
    let id = message.get("id")?;
    let method = message.get("method").and_then(Value::as_str)?;
    let (code, text) = if LOOP_NOTIFICATIONS.contains(&method) {
        (
            -32600,
            format!("`{method}` is a notification; send it without an `id`"),
        )
    } else if method.starts_with("$/") {
        (-32601, format!("method not found: {method}"))
    } else {
        return None;
    };
    Some(serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": text}}))
}
