//! `tandem lsp --attach`: what an editor spawns when it should share the
//! user's serve. It speaks LSP on stdio exactly like `tandem lsp` and
//! relays to the serve over one WebSocket; closing it (a window reload)
//! ends only the relay — the serve's turns run on.
//!
//! What it changes on the way:
//! - editor → serve: a notification becomes a request with an id of ours
//!   (jsonrpsee handles each message on its own task, so order is kept by
//!   waiting for its answer before relaying the next message); an answer
//!   to one of the daemon's requests becomes `tandem/respond`;
//!   `tandem/loadSession` becomes `tandem/attachSession`, answered when
//!   the replay ends; after a `tandem/newSession` answer the shim attaches
//!   to the new session; `shutdown` is answered here, `exit` ends the shim.
//! - serve → editor: the messages inside the attach subscriptions are
//!   written out unwrapped (`tandem/update`, `tandem/requestPermission`,
//!   `$/cancelRequest`, ...); answers to our own requests are dropped.
//!
//! Invariant: the serve's messages reach stdout in the order it sent them,
//! so a turn's updates still precede its `tandem/prompt` answer.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jsonrpsee::core::client::{ReceivedMessage, TransportReceiverT, TransportSenderT};
use serde_json::{json, Value};
use tokio::io::AsyncRead;
use tokio::sync::{mpsc, oneshot};

use super::client::{connect_or_start, WsReceiver};
use crate::frontend::lsp::framing::{encode, Frame, FrameReader};
use crate::frontend::lsp::{stdout_writer, OutboundQueue};

/// What an id of ours is waiting for.
pub(super) enum Ours {
    /// A relayed notification: release the editor's next message.
    Ack(oneshot::Sender<()>),
    /// Drop the answer.
    Ignore,
    /// The answer is a subscription id for an attach; `load` is the
    /// editor's `tandem/loadSession` request id, if it asked.
    Attach { load: Option<Value> },
    /// The editor's `tandem/newSession` (`session/new`) request `id`:
    /// attach to the new session, then pass the answer on.
    NewSession { id: Value },
    /// Answer the editor's request `id` with the serve's answer, rewritten.
    Reply {
        id: Value,
        rewrite: fn(Value) -> Value,
    },
}

#[derive(Default)]
pub(super) struct Relay {
    pub ours: HashMap<String, Ours>,
    /// Subscription id → the editor's `tandem/loadSession` id to answer
    /// when the replay ends.
    pub loads: HashMap<String, Value>,
    next: u64,
}

impl Relay {
    pub fn id(&mut self, what: Ours) -> String {
        self.next += 1;
        let id = format!("shim-{}", self.next);
        self.ours.insert(id.clone(), what);
        id
    }
}

/// How the shim ended (like `tandem lsp`: `exit` without `shutdown` is 1).
pub async fn run<R>(stdin: R, home: PathBuf) -> u8
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let Some(link) = Link::open(&home, "tandem lsp --attach").await else {
        return 1;
    };
    let out = stdout_writer(encode);
    let relay = Arc::new(Mutex::new(Relay::default()));
    let reader = tokio::spawn(from_serve(
        link.rx,
        out.clone(),
        link.to_ws.clone(),
        relay.clone(),
    ));
    let code = from_editor(
        stdin,
        out.clone(),
        link.to_ws.clone(),
        relay.clone(),
        reader,
    )
    .await;
    drop(link.to_ws);
    let _ = tokio::time::timeout(Duration::from_secs(2), link.writer).await;
    out.close().await;
    code
}

/// A connection to the serve: a queue in front of its one writer task (so
/// what we send goes out in the order it was queued) and its receiver.
pub(super) struct Link {
    pub to_ws: mpsc::UnboundedSender<String>,
    pub rx: WsReceiver,
    pub writer: tokio::task::JoinHandle<()>,
}

impl Link {
    /// Connects (starting a serve if none runs); says why not on stderr.
    pub async fn open(home: &std::path::Path, who: &str) -> Option<Link> {
        let max = super::serve_config(home)
            .map(|c| c.max_message_bytes)
            .unwrap_or(64 << 20);
        let (mut ws_tx, rx) = match connect_or_start(home, max).await {
            Ok(pair) => pair,
            Err(e) => {
                tracing::error!("{who}: {e}");
                return None;
            }
        };
        let (to_ws, mut queue) = mpsc::unbounded_channel::<String>();
        let writer = tokio::spawn(async move {
            while let Some(text) = queue.recv().await {
                if ws_tx.send(text).await.is_err() {
                    break;
                }
            }
            let _ = ws_tx.close().await;
        });
        Some(Link { to_ws, rx, writer })
    }
}

/// The next text message from the serve; `None` once the connection ends.
pub(super) async fn receive_text(rx: &mut WsReceiver) -> Option<String> {
    loop {
        return match rx.receive().await {
            Ok(ReceivedMessage::Text(text)) => Some(text),
            Ok(ReceivedMessage::Bytes(bytes)) => Some(String::from_utf8_lossy(&bytes).into_owned()),
            Ok(ReceivedMessage::Pong) => continue,
            Err(e) => {
                tracing::warn!("connection to the serve ended: {e}");
                None
            }
        };
    }
}

/// The next message from the serve, parsed.
pub(super) async fn receive(rx: &mut WsReceiver) -> Option<Value> {
    loop {
        let text = receive_text(rx).await?;
        match serde_json::from_str::<Value>(&text) {
            Ok(message) => return Some(message),
            Err(_) => tracing::error!("the serve sent something that is not JSON"),
        }
    }
}

/// The fast path of every streamed chunk: a subscription message that is
/// not `tandem/attached` is written out as the bytes it came in, without
/// building a JSON tree or serializing again.
fn passthrough(text: &str) -> Option<Vec<u8>> {
    use serde_json::value::RawValue;
    #[derive(serde::Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow)]
        params: Option<&'a RawValue>,
    }
    #[derive(serde::Deserialize)]
    struct Notification<'a> {
        #[serde(borrow)]
        result: &'a RawValue,
    }
    #[derive(serde::Deserialize)]
    struct Method<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    let envelope: Envelope<'_> = serde_json::from_str(text).ok()?;
    if envelope.method.as_deref() != Some("tandem/sessionMessage") {
        return None;
    }
    let inner: Notification<'_> = serde_json::from_str(envelope.params?.get()).ok()?;
    let method: Method<'_> = serde_json::from_str(inner.result.get()).ok()?;
    (method.method.as_deref() != Some("tandem/attached"))
        .then(|| inner.result.get().as_bytes().to_vec())
}

pub(super) fn lock(relay: &Mutex<Relay>) -> std::sync::MutexGuard<'_, Relay> {
    relay.lock().unwrap_or_else(|e| e.into_inner())
}

async fn from_editor<R>(
    stdin: R,
    out: OutboundQueue,
    to_ws: mpsc::UnboundedSender<String>,
    relay: Arc<Mutex<Relay>>,
    mut reader: tokio::task::JoinHandle<()>,
) -> u8
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let mut frames = FrameReader::new(stdin);
    let mut shutdown = false;
    loop {
        let frame = tokio::select! {
            frame = frames.next() => frame,
            _ = &mut reader => {
                tracing::error!("the serve closed the connection");
                return 1;
            }
        };
        let Some(frame) = frame else { return 0 };
        let mut message = match frame {
            Frame::Message { value, .. } => value,
            Frame::Invalid(error) => {
                out.send_json(&error.to_response());
                continue;
            }
        };
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_string);
        let id = message.get("id").cloned();
        match (method.as_deref(), id) {
            (Some("exit"), _) => return if shutdown { 0 } else { 1 },
            (Some("shutdown"), Some(id)) => {
                shutdown = true;
                out.send_json(&json!({"jsonrpc": "2.0", "id": id, "result": null}));
            }
            (Some("tandem/loadSession"), Some(id)) => {
                let ours = lock(&relay).id(Ours::Attach { load: Some(id) });
                message["id"] = json!(ours);
                message["method"] = json!("tandem/attachSession");
                let _ = to_ws.send(message.to_string());
            }
            (Some("tandem/newSession"), Some(id)) => {
                let ours = lock(&relay).id(Ours::NewSession { id });
                message["id"] = json!(ours);
                let _ = to_ws.send(message.to_string());
            }
            (Some(_), Some(_)) => {
                let _ = to_ws.send(message.to_string());
            }
            (Some(_), None) => {
                // A notification: relayed as a request, and nothing after
                // it until it has been handled.
                let (done_tx, done_rx) = oneshot::channel();
                let ours = lock(&relay).id(Ours::Ack(done_tx));
                message["id"] = json!(ours);
                if message.get("params").is_none_or(Value::is_null) {
                    message["params"] = json!({});
                }
                let _ = to_ws.send(message.to_string());
                if tokio::time::timeout(Duration::from_secs(10), done_rx)
                    .await
                    .is_err()
                {
                    tracing::warn!("the serve took more than 10 s to handle {method:?}");
                }
            }
            (None, Some(id)) => {
                // The editor's answer to one of the daemon's requests.
                let ours = lock(&relay).id(Ours::Ignore);
                let mut params = json!({"id": id});
                match message.get("error") {
                    Some(error) => params["error"] = error.clone(),
                    None => {
                        params["result"] = message.get("result").cloned().unwrap_or(Value::Null)
                    }
                }
                let respond = json!({"jsonrpc": "2.0", "id": ours, "method": "tandem/respond", "params": params});
                let _ = to_ws.send(respond.to_string());
            }
            (None, None) => tracing::warn!("ignoring a message with neither method nor id"),
        }
    }
}

async fn from_serve(
    mut rx: WsReceiver,
    out: OutboundQueue,
    to_ws: mpsc::UnboundedSender<String>,
    relay: Arc<Mutex<Relay>>,
) {
    while let Some(text) = receive_text(&mut rx).await {
        if let Some(body) = passthrough(&text) {
            out.send_body(body);
            continue;
        }
        let Ok(message) = serde_json::from_str::<Value>(&text) else {
            tracing::error!("the serve sent something that is not JSON");
            continue;
        };
        if message.get("method").and_then(Value::as_str) == Some("tandem/sessionMessage") {
            let params = &message["params"];
            let inner = &params["result"];
            if inner.get("method").and_then(Value::as_str) == Some("tandem/attached") {
                let subscription = params["subscription"].to_string();
                if let Some(load) = lock(&relay).loads.remove(&subscription) {
                    out.send_json(
                        &json!({"jsonrpc": "2.0", "id": load, "result": inner["params"]}),
                    );
                }
                continue;
            }
            out.send_json(inner);
            continue;
        }
        let ours = message["id"]
            .as_str()
            .and_then(|id| lock(&relay).ours.remove(id));
        match ours {
            Some(Ours::Ack(done)) => {
                let _ = done.send(());
            }
            Some(Ours::Ignore) => {}
            Some(Ours::Reply { id, rewrite }) => {
                let mut answer = rewrite(message);
                answer["id"] = id;
                out.send_json(&answer);
            }
            Some(Ours::Attach { load }) => match (message.get("result"), load) {
                (Some(subscription), Some(load)) => {
                    lock(&relay).loads.insert(subscription.to_string(), load);
                }
                (None, Some(load)) => {
                    // The attach failed: that is the loadSession's answer.
                    let mut answer = message.clone();
                    answer["id"] = load;
                    out.send_json(&answer);
                }
                _ => {}
            },
            Some(Ours::NewSession { id }) => {
                if let Some(session_id) = message["result"]["sessionId"].as_str() {
                    // Attached before the editor hears of the session, so
                    // nothing it asks next can outrun the attach.
                    let ours = lock(&relay).id(Ours::Attach { load: None });
                    let attach = json!({"jsonrpc": "2.0", "id": ours,
                        "method": "tandem/attachSession", "params": {"sessionId": session_id}});
                    let _ = to_ws.send(attach.to_string());
                }
                let mut answer = message;
                answer["id"] = id;
                out.send_json(&answer);
            }
            None => out.send_json(&message),
        }
    }
}
