//! The relay both shims (`tandem lsp --attach`, `tandem acp --attach`) run
//! between an editor's stdio and the serve: one WebSocket, the ids of our
//! own requests and what each answer is for, attaching to sessions, and the
//! serve's messages written to stdout.
//!
//! The serve → editor path is one thread: it sleeps in a blocking `read`
//! on the WebSocket's socket (`ws_link`: no runtime, no `epoll`) and writes
//! each message to stdout the moment it has read it. Every chunk costs one
//! wake-up and one `read` in the shim. The editor → serve path (and the
//! shim's own messages to the editor) queue to a second thread that writes
//! the socket.
//!
//! A shim supplies its [`Dialect`]: how a frame is written, what a session's
//! message becomes for its editor, and what a load is answered.
//!
//! Invariant: the serve's messages reach stdout in the order it sent them,
//! so a turn's updates still precede its prompt's answer.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::net::Shutdown;
use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::client::link_or_start;
use super::ws_link::{Frames, Message, Sender, Socket};

/// How a shim speaks to its editor.
pub trait Dialect: Send + Sync + 'static {
    /// One message body as written to stdout.
    fn frame(&self, body: &[u8]) -> Vec<u8>;
    /// The bodies the editor gets for one message of a session (`raw`: the
    /// whole JSON-RPC message, as the serve sent it).
    fn session_message(&self, raw: &str) -> Vec<Vec<u8>>;
    /// What the editor gets once the replay of its load request `id` is
    /// out (`attached`: the params of `tandem/attached`): the answer, and
    /// whatever follows it.
    fn loaded(&self, id: Value, attached: &Value) -> Vec<Value>;
}

/// What an id of ours is waiting for.
pub enum Ours {
    /// A relayed notification: release the editor's next message.
    Ack(oneshot::Sender<()>),
    /// Drop the answer.
    Ignore,
    /// The answer is a subscription id for an attach; `load` is the
    /// editor's load request id, if it asked; `done` is told once the
    /// serve has answered (the subscription is in place, or failed).
    Attach {
        load: Option<Value>,
        done: Option<oneshot::Sender<()>>,
    },
    /// The editor's `tandem/newSession` (`session/new`) request `id`:
    /// attach to the new session, then pass the answer on; `attached` is
    /// told once the attach is answered (dropped if there is none).
    NewSession {
        id: Value,
        attached: oneshot::Sender<()>,
    },
    /// Hand the whole answer to the shim's own waiting call.
    Answer(oneshot::Sender<Value>),
    /// Answer the editor's request `id` with the serve's answer, rewritten.
    Reply {
        id: Value,
        rewrite: fn(Value) -> Value,
    },
}

#[derive(Default)]
struct State {
    ours: HashMap<String, Ours>,
    /// Subscription id → the editor's load request id to answer when the
    /// replay ends.
    loads: HashMap<String, Value>,
    /// Sessions this shim attached to (made, loaded or followed for a task).
    attached: HashSet<String>,
    next: u64,
}

impl State {
    fn id(&mut self, what: Ours) -> String {
        self.next += 1;
        let id = format!("shim-{}", self.next);
        self.ours.insert(id.clone(), what);
        id
    }
}

/// What the sending thread writes, in order.
enum ToLink {
    /// A message for the serve.
    Serve(String),
    /// A message body for the editor.
    Editor(Vec<u8>),
    /// The answer to the serve's ping.
    Pong(Vec<u8>),
    /// Close the WebSocket and end.
    Close,
}

/// The editor side's handle on the relay.
pub struct Relay {
    state: Arc<Mutex<State>>,
    to_link: mpsc::Sender<ToLink>,
    /// Cancelled when the connection to the serve ends.
    pub serve_gone: CancellationToken,
    /// The sending thread.
    done: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Relay {
    /// Connects to the serve (starting one if none runs) and starts the
    /// link's two threads; says why not on stderr.
    pub async fn open(home: &Path, who: &str, dialect: impl Dialect) -> Option<Relay> {
        let max = super::serve_config(home)
            .map(|c| c.max_message_bytes)
            .unwrap_or(64 << 20) as usize;
        let opened = link_or_start(home)
            .await
            .map_err(|e| tracing::error!("{who}: {e}"))
            .ok()?;
        let sending = opened
            .socket
            .try_clone()
            .map_err(|e| tracing::error!("{who}: cannot share the socket: {e}"))
            .ok()?;
        let out = editor_out()
            .map_err(|e| tracing::error!("{who}: cannot open stdout: {e}"))
            .ok()?;
        let out = Arc::new(Mutex::new(out));
        let state = Arc::new(Mutex::new(State::default()));
        let (to_link, queue) = mpsc::channel();
        let serve_gone = CancellationToken::new();
        let dialect = Arc::new(dialect);
        let link = Link {
            state: state.clone(),
            dialect: dialect.clone(),
            out: out.clone(),
            to_send: to_link.clone(),
            gone: serve_gone.clone(),
        };
        let frames = Frames::new(opened.socket, opened.leftover, max);
        let sender = Sending {
            ws: Sender::new(sending, max),
            dialect,
            out,
            gone: serve_gone.clone(),
        };
        let sending = std::thread::Builder::new()
            .name("tandem-shim-send".to_string())
            .spawn(move || sender.run(queue))
            .map_err(|e| tracing::error!("{who}: cannot start the sending thread: {e}"))
            .ok()?;
        std::thread::Builder::new()
            .name("tandem-shim-link".to_string())
            .spawn(move || link.run(frames))
            .map_err(|e| tracing::error!("{who}: cannot start the link thread: {e}"))
            .ok()?;
        Some(Relay {
            state,
            to_link,
            serve_gone,
            done: Mutex::new(Some(sending)),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends `message` to the serve under an id of ours standing for `what`.
    pub fn request(&self, what: Ours, mut message: Value) {
        message["id"] = json!(self.state().id(what));
        self.send(&message);
    }

    /// Sends `message` to the serve as it is.
    pub fn send(&self, message: &Value) {
        let _ = self.to_link.send(ToLink::Serve(message.to_string()));
    }

    /// Sends a notification as a request of ours and waits (up to 10 s)
    /// until the serve has handled it: the serve handles a connection's
    /// messages concurrently, and the editor's order must hold.
    pub async fn notify_in_order(&self, mut message: Value) {
        let (done_tx, done_rx) = oneshot::channel();
        if message.get("params").is_none_or(Value::is_null) {
            message["params"] = json!({});
        }
        let method = message["method"].clone();
        self.request(Ours::Ack(done_tx), message);
        if tokio::time::timeout(Duration::from_secs(10), done_rx)
            .await
            .is_err()
        {
            tracing::warn!("the serve took more than 10 s to handle {method}");
        }
    }

    /// The editor's answer to one of the daemon's requests, as
    /// `tandem/respond`.
    pub fn respond(&self, answer: &Value) {
        let mut params = json!({"id": answer["id"]});
        match answer.get("error") {
            Some(error) => params["error"] = error.clone(),
            None => params["result"] = answer.get("result").cloned().unwrap_or(Value::Null),
        }
        self.request(
            Ours::Ignore,
            json!({"jsonrpc": "2.0", "method": "tandem/respond", "params": params}),
        );
    }

    /// Relays the editor's `tandem/newSession` (`message`, the editor's id
    /// `id`) and waits (up to 10 s) until the shim is attached to the new
    /// session: the serve handles a connection's messages concurrently, and
    /// a prompt relayed before the attach is in place could start a turn
    /// this window then gets no `$/progress` for.
    pub async fn new_session(&self, id: Value, message: Value) {
        let (attached, done) = oneshot::channel();
        self.request(Ours::NewSession { id, attached }, message);
        if tokio::time::timeout(Duration::from_secs(10), done)
            .await
            .is_err()
        {
            tracing::warn!("the serve did not attach to a new session within 10 s");
        }
    }

    /// Sends a request of the shim's own and waits (up to 10 s) for the
    /// serve's whole answer; `None` when none came.
    pub async fn call(&self, method: &str, params: Value) -> Option<Value> {
        let (tx, rx) = oneshot::channel();
        self.request(
            Ours::Answer(tx),
            json!({"jsonrpc": "2.0", "method": method, "params": params}),
        );
        match tokio::time::timeout(Duration::from_secs(10), rx).await {
            Ok(Ok(answer)) => Some(answer),
            _ => {
                tracing::warn!("the serve did not answer {method} within 10 s");
                None
            }
        }
    }

    /// Follows the session a task on `uri` runs in (`session_id`'s, else
    /// its folder's task session) before the task is relayed, without a
    /// replay: over stdio an editor hears every session's updates, through
    /// the serve only those of sessions it attached to. Errors are left
    /// for the task request itself to answer.
    pub async fn follow_task_session(&self, task: &Value, uri: &Value, session_id: &Value) {
        let mut params = json!({"task": task, "uri": uri});
        if !session_id.is_null() {
            params["sessionId"] = session_id.clone();
        }
        let Some(answer) = self.call("tandem/taskSession", params).await else {
            return;
        };
        let Some(session) = answer["result"]["sessionId"].as_str() else {
            return;
        };
        if !self.state().attached.insert(session.to_string()) {
            return;
        }
        // Its answer comes once the subscription is in place: what the
        // task's turn sends from then on reaches this editor.
        self.call(
            "tandem/attachSession",
            json!({"sessionId": session, "replay": false}),
        )
        .await;
    }

    /// Attaches to the session of a `tandem/loadSession`'s `params` (its
    /// `additionalDirectories` go along; the serve checks them); `load` is
    /// the editor's request to answer when the replay ends.
    pub fn attach_load(&self, params: &Value, load: Value) {
        let mut attach = json!({"sessionId": params["sessionId"]});
        if let Some(dirs) = params.get("additionalDirectories") {
            attach["additionalDirectories"] = dirs.clone();
        }
        self.attach_with(attach, Some(load));
    }

    fn attach_with(&self, params: Value, load: Option<Value>) {
        if let Some(id) = params["sessionId"].as_str() {
            self.state().attached.insert(id.to_string());
        }
        self.request(
            Ours::Attach { load, done: None },
            json!({"jsonrpc": "2.0", "method": "tandem/attachSession", "params": params}),
        );
    }

    /// Writes a message of the shim's own to the editor.
    pub fn to_editor(&self, message: &Value) {
        match serde_json::to_vec(message) {
            Ok(body) => {
                let _ = self.to_link.send(ToLink::Editor(body));
            }
            Err(e) => tracing::error!("cannot serialize a message for the editor: {e}"),
        }
    }

    /// Ends the relay: what is queued goes out, the WebSocket closes.
    pub async fn close(self) {
        let Relay { to_link, done, .. } = self;
        let _ = to_link.send(ToLink::Close);
        let thread = done.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(thread) = thread {
            let joined = tokio::task::spawn_blocking(move || thread.join());
            let _ = tokio::time::timeout(Duration::from_secs(2), joined).await;
        }
    }
}

/// The link thread: reads the WebSocket, writes stdout.
struct Link<D> {
    state: Arc<Mutex<State>>,
    dialect: Arc<D>,
    out: Arc<Mutex<std::fs::File>>,
    /// To the sending thread: the replies to the serve's messages.
    to_send: mpsc::Sender<ToLink>,
    gone: CancellationToken,
}

/// The link's own handle on stdout (a duplicate of fd 1), unbuffered: a
/// frame is one `write(2)`. Rust's `Stdout` is line-buffered, which wrote
/// an LSP frame as two (the header up to its blank line, then the body at
/// the flush), waking the editor for half a frame.
fn editor_out() -> std::io::Result<std::fs::File> {
    use std::os::fd::AsFd;
    Ok(std::fs::File::from(
        std::io::stdout().as_fd().try_clone_to_owned()?,
    ))
}

/// Writes one framed message to stdout; false once stdout is gone.
fn write_frame(out: &Mutex<std::fs::File>, frame: &[u8]) -> bool {
    let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
    match out.write_all(frame) {
        Ok(()) => true,
        Err(e) => {
            tracing::error!("cannot write to stdout: {e}");
            false
        }
    }
}

/// The sending thread: writes the serve's socket, and the shim's own
/// messages to stdout.
struct Sending<D> {
    ws: Sender<Socket>,
    dialect: Arc<D>,
    out: Arc<Mutex<std::fs::File>>,
    gone: CancellationToken,
}

impl<D: Dialect> Sending<D> {
    fn run(mut self, queue: mpsc::Receiver<ToLink>) {
        for item in queue {
            let sent = match item {
                ToLink::Serve(text) => self
                    .ws
                    .text(&text)
                    .map_err(|e| tracing::warn!("cannot write to the serve: {e}"))
                    .is_ok(),
                ToLink::Editor(body) => write_frame(&self.out, &self.dialect.frame(&body)),
                ToLink::Pong(payload) => self.ws.pong(&payload).is_ok(),
                ToLink::Close => break,
            };
            if !sent {
                // The link is broken: wake the reading thread too.
                self.ws.get_ref().shutdown(Shutdown::Both);
                self.gone.cancel();
                return;
            }
        }
        let _ = self.ws.close();
        self.ws.get_ref().shutdown(Shutdown::Write);
    }
}

impl<D: Dialect> Link<D> {
    fn run(self, mut frames: Frames<Socket>) {
        loop {
            match frames.next_message() {
                Ok(Message::Text(text)) => {
                    let mut replies = Vec::new();
                    if !self.on_serve_message(&text, &mut replies) {
                        break;
                    }
                    for reply in replies {
                        let _ = self.to_send.send(ToLink::Serve(reply));
                    }
                }
                Ok(Message::Ping(payload)) => {
                    let _ = self.to_send.send(ToLink::Pong(payload));
                }
                Ok(Message::Close) => {
                    tracing::warn!("the serve closed the connection");
                    break;
                }
                Err(e) => {
                    tracing::warn!("connection to the serve ended: {e}");
                    break;
                }
            }
        }
        self.gone.cancel();
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes one body to stdout; false once stdout is gone.
    fn write(&self, body: &[u8]) -> bool {
        write_frame(&self.out, &self.dialect.frame(body))
    }

    fn write_json(&self, message: &Value) -> bool {
        match serde_json::to_vec(message) {
            Ok(body) => self.write(&body),
            Err(_) => true,
        }
    }

    /// Handles one message from the serve; what must go back to the serve
    /// goes into `replies`. False once stdout is gone.
    fn on_serve_message(&self, text: &str, replies: &mut Vec<String>) -> bool {
        if let Some(session) = session_message(text) {
            if session.attached.is_none() {
                for body in self.dialect.session_message(session.raw) {
                    if !self.write(&body) {
                        return false;
                    }
                }
                return true;
            }
            let load = self.state().loads.remove(session.subscription);
            return match (load, session.attached) {
                (Some(load), Some(params)) => self
                    .dialect
                    .loaded(load, &params)
                    .iter()
                    .all(|message| self.write_json(message)),
                _ => true,
            };
        }
        let Ok(mut message) = serde_json::from_str::<Value>(text) else {
            tracing::error!("the serve sent something that is not JSON");
            return true;
        };
        let ours = message["id"]
            .as_str()
            .and_then(|id| self.state().ours.remove(id));
        match ours {
            Some(Ours::Ack(done)) => {
                let _ = done.send(());
                true
            }
            Some(Ours::Ignore) => true,
            Some(Ours::Answer(waiter)) => {
                let _ = waiter.send(message);
                true
            }
            Some(Ours::Reply { id, rewrite }) => {
                let mut answer = rewrite(message);
                answer["id"] = id;
                self.write_json(&answer)
            }
            Some(Ours::Attach { load, done }) => match (message.get("result"), load, done) {
                (_, _, Some(done)) => {
                    let _ = done.send(());
                    true
                }
                (Some(subscription), Some(load), None) => {
                    self.state().loads.insert(subscription.to_string(), load);
                    true
                }
                (None, Some(load), None) => {
                    // The attach failed: that is the load's answer.
                    message["id"] = load;
                    self.write_json(&message)
                }
                _ => true,
            },
            Some(Ours::NewSession { id, attached }) => {
                if let Some(session_id) = message["result"].get("sessionId").cloned() {
                    if let Some(id) = session_id.as_str() {
                        self.state().attached.insert(id.to_string());
                    }
                    // Attached before the editor hears of the session, so
                    // nothing it asks next can outrun the attach.
                    let ours = self.state().id(Ours::Attach {
                        load: None,
                        done: Some(attached),
                    });
                    replies.push(
                        json!({"jsonrpc": "2.0", "id": ours, "method": "tandem/attachSession",
                               "params": {"sessionId": session_id}})
                        .to_string(),
                    );
                }
                message["id"] = id;
                self.write_json(&message)
            }
            // The answer to a request relayed with the editor's own id.
            None => self.write_json(&message),
        }
    }
}

/// A `tandem/sessionMessage`, read without building a JSON tree (the path
/// of every streamed chunk).
struct SessionMessage<'a> {
    /// The subscription id, as JSON text.
    subscription: &'a str,
    /// The whole JSON-RPC message inside, as the serve sent it.
    raw: &'a str,
    /// The params of `tandem/attached`, when it is that.
    attached: Option<Value>,
}

/// How jsonrpsee (`=0.26.1`) writes a subscription's message: this, the
/// subscription id, `,"result":`, the message, `}}`.
const ENVELOPE_HEAD: &str =
    r#"{"jsonrpc":"2.0","method":"tandem/sessionMessage","params":{"subscription":"#;
/// How every `tandem/update` the serve sends begins.
const UPDATE_HEAD: &str = r#"{"jsonrpc":"2.0","method":"tandem/update","#;

fn session_message(text: &str) -> Option<SessionMessage<'_>> {
    update_message(text).or_else(|| session_message_parsed(text))
}

/// The fast path, for a streamed update in the envelope exactly as
/// jsonrpsee writes it: found by its fixed head and tail, with no pass
/// over the update itself; anything else takes the parser.
fn update_message(text: &str) -> Option<SessionMessage<'_>> {
    let rest = text.strip_prefix(ENVELOPE_HEAD)?;
    let (subscription, rest) = rest.split_once(r#","result":"#)?;
    let plain_id = subscription
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'"' | b'-' | b'_'));
    let raw = rest.strip_suffix("}}")?;
    (plain_id && raw.starts_with(UPDATE_HEAD)).then_some(SessionMessage {
        subscription,
        raw,
        attached: None,
    })
}

fn session_message_parsed(text: &str) -> Option<SessionMessage<'_>> {
    #[derive(Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow)]
        params: Option<&'a RawValue>,
    }
    #[derive(Deserialize)]
    struct Params<'a> {
        #[serde(borrow)]
        subscription: &'a RawValue,
        #[serde(borrow)]
        result: &'a RawValue,
    }
    #[derive(Deserialize)]
    struct Inner<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
        params: Option<Value>,
    }
    let envelope: Envelope<'_> = serde_json::from_str(text).ok()?;
    if envelope.method.as_deref() != Some("tandem/sessionMessage") {
        return None;
    }
    let params: Params<'_> = serde_json::from_str(envelope.params?.get()).ok()?;
    // Only `tandem/attached` needs its params; skip building them
    // otherwise (an update's params are the bulk of it).
    let is_attached = params.result.get().contains("\"tandem/attached\"");
    let attached = if is_attached {
        let inner: Inner<'_> = serde_json::from_str(params.result.get()).ok()?;
        (inner.method.as_deref() == Some("tandem/attached"))
            .then(|| inner.params.unwrap_or(Value::Null))
    } else {
        None
    };
    Some(SessionMessage {
        subscription: params.subscription.get(),
        raw: params.result.get(),
        attached,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonrpsee::types::{SubscriptionId, SubscriptionPayload, SubscriptionResponse};

    #[test]
    fn a_session_message_is_read_without_its_params_unless_it_is_attached() {
        let update = r#"{"jsonrpc":"2.0","method":"tandem/sessionMessage","params":{"subscription":7,"result":{"jsonrpc":"2.0","method":"tandem/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"tandem/attached"}}}}}}"#;
        let message = session_message(update).unwrap();
        assert_eq!(message.subscription, "7");
        assert!(message.attached.is_none());
        assert!(message
            .raw
            .starts_with(r#"{"jsonrpc":"2.0","method":"tandem/update""#));

        let attached = r#"{"jsonrpc":"2.0","method":"tandem/sessionMessage","params":{"subscription":"a","result":{"jsonrpc":"2.0","method":"tandem/attached","params":{"sessionId":"s","replayed":3}}}}"#;
        let message = session_message(attached).unwrap();
        assert_eq!(message.subscription, r#""a""#);
        assert_eq!(message.attached.unwrap()["replayed"], 3);

        assert!(session_message(r#"{"jsonrpc":"2.0","id":"shim-1","result":5}"#).is_none());
    }

    /// A subscription message as the serve's jsonrpsee writes it.
    fn enveloped(subscription: SubscriptionId<'static>, message: &str) -> String {
        let result = RawValue::from_string(message.to_string()).unwrap();
        serde_json::to_string(&SubscriptionResponse::new(
            "tandem/sessionMessage".into(),
            SubscriptionPayload {
                subscription,
                result,
            },
        ))
        .unwrap()
    }

    #[test]
    fn the_fast_path_reads_an_update_as_the_parser_does_and_leaves_the_rest_to_it() {
        let update = r#"{"jsonrpc":"2.0","method":"tandem/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"}} \"result\":"}}}}"#;
        for id in [
            SubscriptionId::Num(8_446_744_073_709_551),
            SubscriptionId::Str("a1b2".into()),
        ] {
            let text = enveloped(id, update);
            let fast = update_message(&text).expect("an update takes the fast path");
            let parsed = session_message_parsed(&text).unwrap();
            assert_eq!(fast.raw, update);
            assert_eq!(
                (fast.raw, fast.subscription),
                (parsed.raw, parsed.subscription)
            );
            assert!(fast.attached.is_none());
        }
        // Anything but an update (here the end of a replay) takes the parser.
        let attached = enveloped(
            SubscriptionId::Num(3),
            r#"{"jsonrpc":"2.0","method":"tandem/attached","params":{"sessionId":"s","replayed":2}}"#,
        );
        assert!(update_message(&attached).is_none());
        assert_eq!(
            session_message(&attached).unwrap().attached.unwrap()["replayed"],
            2
        );
        let request = enveloped(
            SubscriptionId::Num(3),
            r#"{"jsonrpc":"2.0","id":"tandem-1-1","method":"tandem/requestPermission","params":{}}"#,
        );
        assert!(update_message(&request).is_none());
        assert!(session_message(&request)
            .unwrap()
            .raw
            .contains("requestPermission"));
    }
}
