//! The one input loop of the LSP frontend: each message the frame reader
//! parsed goes, as the typed value tower-lsp takes, where it belongs —
//! the buffer cache, a waiting request of the daemon's, or tower-lsp's
//! `LspService` called as a tower `Service` — and each answer is
//! serialized once, into the one stdout writer's queue.
//!
//! **Invariant:** messages are taken in wire order, and each handler
//! runs up to its first wait before the next message is looked at: a
//! document notification, a `tandem/cancel`, the queueing of a prompt
//! all happen in the order the editor sent them. What then waits (a
//! prompt's turn, `shutdown`) goes on as a task of its own, up to
//! [`MAX_IN_FLIGHT`] at once (tower-lsp's own server loop buffered its
//! handlers the same way), so a slow request never holds up a
//! `codeAction` behind it; what answers at once (codeAction, most
//! requests) is answered from here, without a task of its own.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use serde_json::{Map, Value};
use tokio::sync::Semaphore;
use tower::Service;
use tower_lsp::jsonrpc::{Id, Request, Response};
use tower_lsp::{ClientSocket, Loopback, LspService};

use super::cancel_request::{RequestCancels, TURN_ANSWERED, TURN_REQUEST};
use super::framing::{Frame, FrameReader};
use super::outgoing::Outgoing;
use super::progress::Progress;
use super::server::Backend;
use super::{documents, language, LspEnd, OutboundQueue};
use crate::core::client::Client;
use crate::core::daemon::Daemon;

/// Where the editor's answers to tower-lsp's `Client` go.
type ResponseSink = <ClientSocket as Loopback>::ResponseSink;

/// Requests handled at once, at most; past it the loop stops reading
/// until one ends. A pending `tandem/prompt` holds its place until its
/// turn ends, so the limit is far above any number of queued prompts.
pub(super) const MAX_IN_FLIGHT: usize = 4096;

/// Notifications that tower-lsp drops or this loop handles itself.
const LOOP_NOTIFICATIONS: [&str; 5] = [
    "$/cancelRequest",
    "$/setTrace",
    "$/logTrace",
    "$/progress",
    "window/workDoneProgress/cancel",
];

pub(super) struct Input {
    pub(super) daemon: Arc<Daemon>,
    /// The editor: document notifications update its buffers.
    pub(super) client: Arc<Client>,
    pub(super) out: OutboundQueue,
    pub(super) outgoing: Arc<Outgoing>,
    pub(super) progress: Arc<Progress>,
    pub(super) request_cancels: Arc<RequestCancels>,
    pub(super) shutdown_requested: Arc<AtomicBool>,
    pub(super) service: LspService<Backend>,
    pub(super) client_responses: ResponseSink,
    pub(super) in_flight: Arc<Semaphore>,
}

/// What to do after a message.
enum Next {
    Read,
    End(LspEnd),
}

impl Input {
    /// Takes in frames until `exit`, EOF, or the service stops, and hands
    /// the loop back (its service answers what is still in flight).
    ///
    /// The loop runs as a task of the runtime, not on the thread that
    /// awaits this: the worker whose reactor saw stdin become readable
    /// polls it at once, where a loop on another thread would have to be
    /// woken (a thread wake-up per request, a time slice on a loaded
    /// machine: BENCHMARKS.md §7).
    pub(super) async fn run<R>(self, stdin: R) -> (LspEnd, Input)
    where
        R: tokio::io::AsyncRead + Unpin + Send + 'static,
    {
        let mut input = self;
        let looping = tokio::spawn(async move {
            let end = input.read(stdin).await;
            (end, input)
        });
        match looping.await {
            Ok(ended) => ended,
            // Never cancelled: the runtime outlives this wait.
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }

    async fn read<R>(&mut self, stdin: R) -> LspEnd
    where
        R: tokio::io::AsyncRead + Unpin + Send + 'static,
    {
        let mut reader = FrameReader::new(stdin);
        while let Some(frame) = reader.next().await {
            let message = match frame {
                Frame::Invalid(error) => {
                    tracing::warn!("bad input frame: {error}");
                    self.out.send_json(&error.to_response());
                    continue;
                }
                Frame::Message {
                    value: Value::Object(message),
                    ..
                } => message,
                // The reader hands out objects only.
                Frame::Message { .. } => continue,
            };
            if let Next::End(end) = self.take(message).await {
                return end;
            }
        }
        LspEnd::Clean
    }

    /// One message, checked by the frame reader to be a well-formed
    /// request, notification or response.
    async fn take(&mut self, mut message: Map<String, Value>) -> Next {
        let method = match message.remove("method") {
            Some(Value::String(method)) => method,
            _ => {
                self.response(message).await;
                return Next::Read;
            }
        };
        let id = message.remove("id");
        let params = match message.remove("params") {
            // Not JSON-RPC, but editors send it for `shutdown` and `exit`.
            Some(Value::Null) | None if method.starts_with("tandem/") => {
                // Every tandem method takes an object whose fields may all
                // be optional.
                Some(Value::Object(Map::new()))
            }
            Some(Value::Null) => None,
            params => params,
        };
        if let Some(id) = &id {
            if let Some(refusal) = notification_with_an_id(&method, id) {
                self.out.send_json(&refusal);
                return Next::Read;
            }
        }
        if id.is_none() {
            match method.as_str() {
                m if documents::is_document_notification(m) => {
                    documents::apply(self.client.buffers(), m, params, &self.out);
                    return Next::Read;
                }
                // In wire order too: after the `didChange` it speaks of.
                language::DIAGNOSTICS_CHANGED => {
                    language::diagnostics_changed(self.client.buffers(), params);
                    return Next::Read;
                }
                "window/workDoneProgress/cancel" => {
                    // tower-lsp 0.20 has no handler for it; the token names
                    // the turn.
                    let token = params.as_ref().and_then(|p| p.get("token"));
                    if let Some(session) = token
                        .and_then(Value::as_str)
                        .and_then(|t| self.progress.session_of(t))
                    {
                        let _ = self.daemon.cancel(&session, true);
                    }
                    return Next::Read;
                }
                // The prompt's handler answers once its turn has ended.
                "$/cancelRequest" if self.request_cancels.cancel(params.as_ref()) => {
                    return Next::Read;
                }
                _ => {}
            }
        }
        if method == "exit" {
            let shut_down = self.shutdown_requested.load(Ordering::SeqCst);
            return Next::End(if shut_down {
                LspEnd::Clean
            } else {
                LspEnd::ExitWithoutShutdown
            });
        }
        self.call(method, id, params).await
    }

    /// Hands a request or notification to tower-lsp's service.
    async fn call(&mut self, method: String, id: Option<Value>, params: Option<Value>) -> Next {
        let Ok(permit) = self.in_flight.clone().acquire_owned().await else {
            return Next::End(LspEnd::Clean);
        };
        if let Err(e) = futures::future::poll_fn(|cx| self.service.poll_ready(cx)).await {
            tracing::error!("the LSP service stopped: {e}");
            return Next::End(LspEnd::Clean);
        }
        let tracked = match &id {
            Some(id) if TURN_ANSWERED.contains(&method.as_str()) => self.request_cancels.track(id),
            _ => None,
        };
        let mut request = Request::build(method);
        if let Some(params) = params {
            request = request.params(params);
        }
        if let Some(id) = id {
            request = request.id(wire_id(id));
        }
        let answer = self.service.call(request.finish());
        let out = self.out.clone();
        let cancels = self.request_cancels.clone();
        let (key, token) = tracked.unzip();
        let task = TURN_REQUEST.scope(token, async move {
            let response = answer.await;
            if let Some(key) = key {
                cancels.answered(&key);
            }
            match response {
                Ok(Some(response)) => match serde_json::to_vec(&response) {
                    Ok(body) => out.send_body(body),
                    Err(e) => tracing::error!("cannot serialize a response: {e}"),
                },
                Ok(None) => {}
                Err(e) => tracing::warn!("a request met the end of the LSP service: {e}"),
            }
            drop(permit);
        });
        let mut task = Box::pin(task);
        // Up to its first wait here, in wire order; the rest on its own.
        if futures::poll!(task.as_mut()).is_pending() {
            tokio::spawn(task);
        }
        Next::Read
    }

    /// A response from the editor: to one of our requests, or to one of
    /// tower-lsp's `Client` (unused by tandem, routed all the same).
    async fn response(&mut self, message: Map<String, Value>) {
        let message = Value::Object(message);
        if Outgoing::is_ours(&message) {
            self.outgoing.complete(&message);
            return;
        }
        let Value::Object(mut message) = message else {
            return;
        };
        let id = wire_id(message.remove("id").unwrap_or(Value::Null));
        let body = match message.remove("error") {
            Some(error) => match serde_json::from_value(error) {
                Ok(error) => Err(error),
                Err(e) => {
                    tracing::warn!("ignoring an error response with a bad `error`: {e}");
                    return;
                }
            },
            None => Ok(message.remove("result").unwrap_or(Value::Null)),
        };
        if let Err(e) = self
            .client_responses
            .send(Response::from_parts(id, body))
            .await
        {
            tracing::debug!("a response after the LSP service ended: {e}");
        }
    }
}

/// Forwards what tower-lsp's `Client` sends to the editor (tandem's
/// handlers never use it; its own requests go through [`Outgoing`]).
pub(super) fn forward_client_requests(
    socket: ClientSocket,
    out: OutboundQueue,
) -> (ResponseSink, tokio::task::JoinHandle<()>) {
    let (mut requests, responses) = socket.split();
    let forwarder = tokio::spawn(async move {
        while let Some(request) = requests.next().await {
            match serde_json::to_vec(&request) {
                Ok(body) => out.send_body(body),
                Err(e) => tracing::error!("cannot serialize a request to the editor: {e}"),
            }
        }
    });
    (responses, forwarder)
}

/// A JSON-RPC id as tower-lsp holds it; the frame reader lets through
/// only strings, integers that fit `i64`, and `null`.
fn wire_id(id: Value) -> Id {
    match id {
        Value::String(id) => Id::String(id),
        Value::Number(n) => n.as_i64().map_or(Id::Null, Id::Number),
        _ => Id::Null,
    }
}

/// The answer to a request (a message with an `id`) whose method is one
/// of [`LOOP_NOTIFICATIONS`] or any other `$/` method: tower-lsp never
/// answers those, and a client waiting on the id would wait forever. A
/// known notification is `-32600` (as tower-lsp answers other
/// notifications sent with an id); an unknown `$/` method `-32601`, as
/// the LSP specification asks.
fn notification_with_an_id(method: &str, id: &Value) -> Option<Value> {
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
