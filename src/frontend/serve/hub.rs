//! The hub: who follows which session. It is the serve daemon's
//! [`EventSink`] (every logged event goes to each subscriber of its
//! session), holds the connections' clients, and keeps each session's
//! [`ClientBridge`] (a request to the editor goes to every attached client
//! that can answer it; the first answer wins and the others are withdrawn;
//! edits, files and terminal go to the window whose input opened the turn).
//!
//! Invariant: a subscriber hears every event of its session exactly once
//! and in log order: it is registered before the log is read for its
//! replay, and live events it already replayed (by sequence number) are
//! skipped. A request still unanswered when a client attaches is sent to
//! it too, so a reloaded window gets its question back.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::watch;

use jsonrpsee::core::server::{SubscriptionSink, TrySendError};
use serde_json::value::RawValue;

use super::backlog::{Backlog, BacklogReceiver, SessionBudgets};
use super::clients::{Clients, ConnLink, WindowBridges, WINDOW_ID_PREFIX};
use super::progress::{SubscriberProgress, ID_PREFIX as PROGRESS_ID_PREFIX};
use super::session_client::{is_owner_facility, offers, SessionClient};
use crate::core::client::Client;
use crate::core::daemon::Daemon;
use crate::core::log::{EventSink, LoggedEvent};
use crate::core::output_budget::OutputBudget;
use crate::frontend::lsp::outgoing::Outgoing;
use crate::frontend::lsp::{Outbound, OutboundQueue};
use crate::frontend::updates::notification;
use crate::vocab::bridge::{ClientAbilities, ClientBridge, NoClient};

/// What a subscriber's pump sends, in order.
pub enum Item {
    Event(Arc<LoggedEvent>),
    /// A request to the editor, or the `$/cancelRequest` withdrawing one.
    Message(Arc<Value>),
}

/// The whole JSON-RPC message a subscriber sends for `item` (`None` for
/// events editors do not see). Updates are serialized straight from the
/// wire structs, with no JSON tree: this is the path of every chunk.
pub fn item_message(session_id: &str, item: &Item) -> Option<Box<RawValue>> {
    match item {
        Item::Event(event) => update_message(session_id, event),
        Item::Message(message) => serde_json::value::to_raw_value(&**message).ok(),
    }
}

/// An event's whole `tandem/update` message, if editors see the event:
/// the body `update_notification` writes, serialized straight into a
/// `RawValue` (no second pass to validate what serde just wrote).
pub fn update_message(session_id: &str, event: &LoggedEvent) -> Option<Box<RawValue>> {
    serde_json::value::to_raw_value(&notification(session_id, event)?).ok()
}

/// A live event on its way to its session's subscribers: its message is
/// made once for all of them, and the shared copy only for a backlog.
struct LiveEvent<'a> {
    session_id: &'a str,
    event: &'a LoggedEvent,
    message: OnceLock<Option<Box<RawValue>>>,
    shared: OnceLock<Arc<LoggedEvent>>,
}

impl LiveEvent<'_> {
    fn message(&self) -> Option<Box<RawValue>> {
        self.message
            .get_or_init(|| update_message(self.session_id, self.event))
            .clone()
    }

    fn shared(&self) -> Arc<LoggedEvent> {
        self.shared
            .get_or_init(|| Arc::new(self.event.clone()))
            .clone()
    }
}

/// One `tandem/attachSession` subscription.
pub struct Subscriber {
    pub id: u64,
    pub conn: usize,
    session_id: String,
    /// What waits while the connection is behind: chunks merged, bytes
    /// counted against the session's output budget (see backlog.rs).
    backlog: Arc<Backlog>,
    /// Once its replay is out and its queue is empty, live messages go
    /// straight into the connection's sink from the appending task (no
    /// hop through the subscription's task); `None` while they queue.
    direct: Mutex<Option<SubscriptionSink>>,
    /// The last sequence number the replay sent: live events up to it are
    /// already out.
    replayed_up_to: AtomicU64,
    /// The sequence number of the last event this subscriber has sent on
    /// (or skipped): what a `tandem/prompt` answer waits for.
    processed: watch::Sender<u64>,
    /// `$/progress` for its client, when the client asked for it.
    pub progress: OnceLock<SubscriberProgress>,
}

/// What became of a message offered to a subscriber's sink.
enum Direct {
    /// Sent (or nothing to send): done.
    Done,
    /// Not in direct mode, or the sink is full: it goes to the backlog.
    Queue,
}

impl Subscriber {
    /// Sends `item` on: straight into the sink in direct mode, else (or
    /// when the sink is full) through the backlog.
    fn deliver(&self, item: Item) {
        let seq = match &item {
            Item::Event(event) => Some(event.seq),
            Item::Message(_) => None,
        };
        let mut direct = self.direct.lock().unwrap_or_else(|e| e.into_inner());
        if let Direct::Queue =
            self.try_direct(&mut direct, seq, || item_message(&self.session_id, &item))
        {
            self.backlog.push(item);
        }
    }

    /// [`Subscriber::deliver`] for a live event, without copying it unless
    /// it must wait in the backlog.
    fn deliver_live(&self, live: &LiveEvent<'_>) {
        let mut direct = self.direct.lock().unwrap_or_else(|e| e.into_inner());
        if let Direct::Queue = self.try_direct(&mut direct, Some(live.event.seq), || live.message())
        {
            self.backlog.push(Item::Event(live.shared()));
        }
    }

    /// Offers a message (`seq`: its event's, if it is one) to the sink in
    /// direct mode; `direct` is the locked mode, left once the sink is full.
    fn try_direct(
        &self,
        direct: &mut Option<SubscriptionSink>,
        seq: Option<u64>,
        message: impl FnOnce() -> Option<Box<RawValue>>,
    ) -> Direct {
        let Some(sink) = direct.as_mut() else {
            return Direct::Queue;
        };
        if seq.is_some_and(|seq| seq <= self.replayed_up_to.load(Ordering::SeqCst)) {
            return Direct::Done;
        }
        let sent = match message() {
            None => true,
            Some(message) => match sink.try_send(message) {
                Ok(()) => true,
                Err(TrySendError::Closed(_)) => return Direct::Done,
                // The connection is slow: queue from now on, in order.
                Err(TrySendError::Full(_)) => false,
            },
        };
        if !sent {
            *direct = None;
            return Direct::Queue;
        }
        if let Some(seq) = seq {
            self.mark_processed(seq);
        }
        Direct::Done
    }

    /// Sends a message (a request, a notification) to this subscriber.
    pub fn send_message(&self, message: Arc<Value>) {
        self.deliver(Item::Message(message));
    }

    /// Called by the subscription's task once the replay is out: switches
    /// to direct mode if nothing is queued. Returns whether it did.
    pub fn go_direct(
        &self,
        sink: &SubscriptionSink,
        queue: &BacklogReceiver,
        replayed_up_to: u64,
    ) -> bool {
        self.replayed_up_to.store(replayed_up_to, Ordering::SeqCst);
        self.backlog.go_live(replayed_up_to);
        let mut direct = self.direct.lock().unwrap_or_else(|e| e.into_inner());
        if queue.is_empty() {
            *direct = Some(sink.clone());
            true
        } else {
            false
        }
    }

    pub fn mark_processed(&self, seq: u64) {
        self.processed.send_if_modified(|v| {
            let newer = seq > *v;
            if newer {
                *v = seq;
            }
            newer
        });
    }
}

/// A session's requests to the editor: the `Outgoing` the core calls, and
/// what is still unanswered.
struct SessionBridge {
    outgoing: Arc<Outgoing>,
    /// The bridge the core holds: `outgoing`, and the owner's files and
    /// terminal.
    client: Arc<SessionClient>,
    /// Unanswered requests by id, with the connections they went to.
    pending: BTreeMap<String, Arc<Value>>,
    /// Whether a client able to answer permission requests (questions)
    /// ever followed this session: if so, requests wait for one to come
    /// back instead of counting as refused.
    sticky: ClientAbilities,
}

#[derive(Default)]
struct State {
    subs: HashMap<String, Vec<Arc<Subscriber>>>,
    last_seq: HashMap<String, u64>,
    bridges: HashMap<String, SessionBridge>,
    /// The connection whose input opened each session's latest turn.
    owner: HashMap<String, usize>,
}

pub struct Hub {
    state: Mutex<State>,
    next_sub: AtomicU64,
    next_bridge: AtomicU64,
    pub clients: Clients,
    daemon: Weak<Daemon>,
    /// Each session's output budget, charged by its subscribers' backlogs.
    budgets: SessionBudgets,
    windows: WindowBridges,
}

impl Hub {
    pub fn new(daemon: Weak<Daemon>) -> Arc<Hub> {
        Arc::new(Hub {
            state: Mutex::new(State::default()),
            next_sub: AtomicU64::new(1),
            next_bridge: AtomicU64::new(1),
            clients: Clients::default(),
            daemon,
            budgets: SessionBudgets::default(),
            windows: WindowBridges::default(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Connection `conn`'s client (registered with the daemon on first use).
    pub fn client(self: &Arc<Hub>, conn: usize) -> Arc<Client> {
        self.clients.get_or_insert(conn, || {
            let link = Arc::new(ConnLink {
                hub: Arc::downgrade(self),
                conn,
            });
            match self.daemon.upgrade() {
                Some(daemon) => daemon.connect(link),
                None => Client::new(link),
            }
        })
    }

    /// The bridge of a turn `conn`'s input opened: `conn` owns the session's
    /// turn from now on (its edits, files and terminal go there).
    pub fn turn_bridge(self: &Arc<Hub>, session_id: &str, conn: usize) -> Arc<dyn ClientBridge> {
        let changed = self.state().owner.insert(session_id.to_string(), conn) != Some(conn);
        let bridge = self.session_bridge(session_id);
        if changed {
            self.refresh(session_id);
        }
        bridge
    }

    /// The session's bridge, made on first use.
    fn session_bridge(self: &Arc<Hub>, session_id: &str) -> Arc<dyn ClientBridge> {
        if let Some(bridge) = self.state().bridges.get(session_id) {
            return bridge.client.clone();
        }
        let (queue, mut rx) = OutboundQueue::channel();
        // Ids unique across the serve's sessions (`tandem-<session n>-<n>`):
        // an answer names only its id, and two sessions' first requests
        // must not both be `tandem-1`.
        let n = self.next_bridge.fetch_add(1, Ordering::Relaxed);
        let outgoing = Outgoing::with_id_prefix(queue.clone(), format!("tandem-{n}-"));
        let client = SessionClient::new(outgoing.clone(), queue);
        self.state().bridges.insert(
            session_id.to_string(),
            SessionBridge {
                outgoing: outgoing.clone(),
                client: client.clone(),
                pending: BTreeMap::new(),
                sticky: ClientAbilities::default(),
            },
        );
        self.refresh(session_id);
        let hub = Arc::downgrade(self);
        let session = session_id.to_string();
        tokio::spawn(async move {
            while let Some(Outbound::Frame(body)) = rx.recv().await {
                let Some(hub) = hub.upgrade() else { return };
                match serde_json::from_slice::<Value>(&body) {
                    Ok(message) => hub.route(&session, message),
                    Err(e) => tracing::error!("unreadable request to the editor: {e}"),
                }
            }
        });
        client
    }

    /// A bridge to window `conn` alone, through its subscription to the
    /// session (a task's question and inline edit); a window not attached
    /// to the session cannot be asked.
    pub fn window_bridge(&self, session_id: &str, conn: usize) -> Arc<dyn ClientBridge> {
        let sub = self
            .state()
            .subs
            .get(session_id)
            .and_then(|subs| subs.iter().find(|s| s.conn == conn).cloned());
        match sub {
            Some(sub) => self.windows.open(&sub, self.clients.abilities(conn)),
            None => Arc::new(NoClient),
        }
    }

    /// Sends a request (or its withdrawal) to the clients that should see it.
    fn route(&self, session_id: &str, message: Value) {
        let message = Arc::new(message);
        let mut state = self.state();
        let method = message.get("method").and_then(Value::as_str);
        if method == Some("$/cancelRequest") {
            if let (Some(bridge), Some(id)) = (
                state.bridges.get_mut(session_id),
                message["params"]["id"].as_str(),
            ) {
                bridge.pending.remove(id);
            }
            for sub in state.subs.get(session_id).into_iter().flatten() {
                sub.deliver(Item::Message(message.clone()));
            }
            return;
        }
        let Some(id) = message.get("id").and_then(Value::as_str) else {
            // The session's own notification (the owner's terminal shown
            // in its tool call): to the owner alone.
            let owner = state.owner.get(session_id).copied();
            for sub in state.subs.get(session_id).into_iter().flatten() {
                if Some(sub.conn) == owner && method == Some("tandem/update") {
                    sub.deliver(Item::Message(message.clone()));
                }
            }
            return;
        };
        if let Some(bridge) = state.bridges.get_mut(session_id) {
            bridge.pending.insert(id.to_string(), message.clone());
        }
        let owner = state.owner.get(session_id).copied();
        for sub in state.subs.get(session_id).into_iter().flatten() {
            if self.answers(sub.conn, &message, owner) {
                sub.deliver(Item::Message(message.clone()));
            }
        }
    }

    /// Whether connection `conn` should be asked `request`: permission and
    /// questions go to every client that can answer them; an edit only to
    /// the client whose buffers the turn reads.
    fn answers(&self, conn: usize, request: &Value, owner: Option<usize>) -> bool {
        let abilities = self.clients.abilities(conn);
        match request.get("method").and_then(Value::as_str) {
            Some("workspace/applyEdit") => owner == Some(conn) && abilities.apply_edit,
            Some(m) if is_owner_facility(m) => {
                owner == Some(conn) && offers(self.clients.capabilities(conn).facilities, m)
            }
            Some("tandem/requestUserInput") => abilities.request_user_input,
            // The owner's language servers read the owner's buffers.
            Some(m) if is_language_request(m) => owner == Some(conn),
            _ => abilities.request_permission,
        }
    }

    /// Recomputes what a session's bridge says the editor can do (the
    /// language features are the owner's, as the buffers are).
    pub fn refresh(&self, session_id: &str) {
        let mut state = self.state();
        let owner = state.owner.get(session_id).copied();
        let attached: Vec<usize> = state
            .subs
            .get(session_id)
            .into_iter()
            .flatten()
            .map(|s| s.conn)
            .collect();
        let mut abilities = ClientAbilities::default();
        let facilities = owner
            .filter(|o| attached.contains(o))
            .map(|o| self.clients.capabilities(o).facilities)
            .unwrap_or_default();
        for conn in &attached {
            let a = self.clients.abilities(*conn);
            abilities.request_permission |= a.request_permission;
            abilities.request_user_input |= a.request_user_input;
            if Some(*conn) == owner {
                abilities.apply_edit = a.apply_edit;
                abilities.change_annotations = a.change_annotations;
                abilities.resource_operations = a.resource_operations;
                abilities.language = a.language;
            }
        }
        if let Some(bridge) = state.bridges.get_mut(session_id) {
            bridge.sticky.request_permission |= abilities.request_permission;
            bridge.sticky.request_user_input |= abilities.request_user_input;
            abilities.request_permission = bridge.sticky.request_permission;
            abilities.request_user_input = bridge.sticky.request_user_input;
            bridge.outgoing.set_abilities(abilities);
            bridge.client.set_facilities(facilities);
            // A request for the owner's files or terminal that no attached
            // owner can answer any more fails (its tool reports it).
            let orphaned: Vec<String> = bridge
                .pending
                .iter()
                .filter(|(_, r)| {
                    let method = r["method"].as_str().unwrap_or_default();
                    is_owner_facility(method) && !offers(facilities, method)
                })
                .map(|(id, _)| id.clone())
                .collect();
            for id in orphaned {
                bridge.pending.remove(&id);
                bridge
                    .outgoing
                    .complete(&json!({"jsonrpc": "2.0", "id": id, "error":
                    {"code": -32603, "message": "the editor that owns the turn went away"}}));
            }
        }
    }

    /// Registers a subscriber before its replay is read. Requests of the
    /// session still unanswered are queued to it first.
    pub fn subscribe(
        self: &Arc<Hub>,
        session_id: &str,
        conn: usize,
    ) -> (Arc<Subscriber>, BacklogReceiver) {
        // The session's bridge remembers which clients followed it.
        self.session_bridge(session_id);
        let backlog = Backlog::new(session_id, self.budgets.get(session_id));
        let rx = BacklogReceiver(backlog.clone());
        let sub = Arc::new(Subscriber {
            id: self.next_sub.fetch_add(1, Ordering::Relaxed),
            conn,
            session_id: session_id.to_string(),
            backlog,
            direct: Mutex::new(None),
            replayed_up_to: AtomicU64::new(0),
            processed: watch::channel(0).0,
            progress: OnceLock::new(),
        });
        {
            let mut state = self.state();
            let owner = state.owner.get(session_id).copied();
            if let Some(bridge) = state.bridges.get(session_id) {
                for request in bridge.pending.values() {
                    if self.answers(conn, request, owner) {
                        sub.backlog.push(Item::Message(request.clone()));
                    }
                }
            }
            state
                .subs
                .entry(session_id.to_string())
                .or_default()
                .push(sub.clone());
        }
        self.refresh(session_id);
        (sub, rx)
    }

    pub fn unsubscribe(&self, session_id: &str, sub_id: u64) {
        if let Some(subs) = self.state().subs.get_mut(session_id) {
            subs.retain(|s| s.id != sub_id);
        }
        self.windows.ended(|_, sub| sub == sub_id);
        self.refresh(session_id);
    }

    /// A client's answer to a request: the first one is delivered, the
    /// others' copies are withdrawn. Returns false for an id no session is
    /// waiting on (already answered, withdrawn, or unknown).
    pub fn respond(
        &self,
        conn: usize,
        id: &str,
        result: Option<Value>,
        error: Option<Value>,
    ) -> bool {
        if id.starts_with(PROGRESS_ID_PREFIX) {
            return self.respond_progress(conn, id, result, error);
        }
        if id.starts_with(WINDOW_ID_PREFIX) {
            let mut answer = json!({"jsonrpc": "2.0", "id": id});
            match error {
                Some(error) => answer["error"] = error,
                None => answer["result"] = result.unwrap_or(Value::Null),
            }
            return self.windows.respond(conn, &answer);
        }
        let mut state = self.state();
        let Some((session_id, outgoing)) = state.bridges.iter_mut().find_map(|(sid, b)| {
            b.pending
                .remove(id)
                .map(|_| (sid.clone(), b.outgoing.clone()))
        }) else {
            return false;
        };
        let cancel =
            Arc::new(json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": id}}));
        for sub in state.subs.get(&session_id).into_iter().flatten() {
            if sub.conn != conn {
                sub.deliver(Item::Message(cancel.clone()));
            }
        }
        drop(state);
        let mut answer = json!({"jsonrpc": "2.0", "id": id});
        match error {
            Some(error) => answer["error"] = error,
            None => answer["result"] = result.unwrap_or(Value::Null),
        }
        outgoing.complete(&answer);
        true
    }

    /// A client's answer to one of its progress-token requests.
    fn respond_progress(
        &self,
        conn: usize,
        id: &str,
        result: Option<Value>,
        error: Option<Value>,
    ) -> bool {
        let mut answer = json!({"jsonrpc": "2.0", "id": id});
        match error {
            Some(error) => answer["error"] = error,
            None => answer["result"] = result.unwrap_or(Value::Null),
        }
        let outgoings: Vec<Arc<Outgoing>> = self
            .state()
            .subs
            .values()
            .flatten()
            .filter(|s| s.conn == conn)
            .filter_map(|s| s.progress.get().map(|p| p.outgoing.clone()))
            .collect();
        outgoings.iter().any(|o| o.complete(&answer))
    }

    /// Waits until `conn`'s subscribers of the session have sent on every
    /// event logged so far (bounded), so an answer never overtakes the
    /// updates it concludes.
    pub async fn flushed(&self, session_id: &str, conn: usize) {
        let (target, waiting): (u64, Vec<watch::Receiver<u64>>) = {
            let state = self.state();
            let target = state.last_seq.get(session_id).copied().unwrap_or(0);
            let subs = state.subs.get(session_id).into_iter().flatten();
            (
                target,
                subs.filter(|s| s.conn == conn)
                    .map(|s| s.processed.subscribe())
                    .collect(),
            )
        };
        for mut rx in waiting {
            let wait = rx.wait_for(|seq| *seq >= target);
            if tokio::time::timeout(Duration::from_secs(5), wait)
                .await
                .is_err()
            {
                tracing::warn!(
                    session = session_id,
                    "a subscriber fell behind by more than 5 s"
                );
            }
        }
    }

    /// A connection closed: it owns nothing any more.
    pub fn disconnected(&self, conn: usize) {
        let sessions: Vec<String> = {
            let mut state = self.state();
            state.owner.retain(|_, c| *c != conn);
            for subs in state.subs.values_mut() {
                subs.retain(|s| s.conn != conn);
            }
            state.bridges.keys().cloned().collect()
        };
        self.windows.ended(|c, _| c == conn);
        if let Some(client) = self.clients.remove(conn) {
            match self.daemon.upgrade() {
                Some(daemon) => daemon.disconnect(&client),
                None => client.disconnect(),
            }
        }
        for session in sessions {
            self.refresh(&session);
        }
    }
}

impl EventSink for Hub {
    fn on_event(&self, session_id: &str, event: &LoggedEvent) {
        if matches!(event.event, crate::vocab::event::Event::TurnEnd { .. }) {
            // The turn's request bodies are freed.
            crate::frontend::memory::return_freed_memory_soon();
        }
        let mut state = self.state();
        match state.last_seq.get_mut(session_id) {
            Some(last) => *last = (*last).max(event.seq),
            None => {
                state.last_seq.insert(session_id.to_string(), event.seq);
            }
        }
        if let Some(subs) = state.subs.get(session_id).filter(|s| !s.is_empty()) {
            let live = LiveEvent {
                session_id,
                event,
                message: OnceLock::new(),
                shared: OnceLock::new(),
            };
            for sub in subs {
                sub.deliver_live(&live);
                if let Some(progress) = sub.progress.get() {
                    progress.progress.on_event(session_id, &event.event);
                }
            }
        }
    }

    /// Replays go to the one subscriber that asked, from the log itself
    /// (see `tandem/attachSession`), never to everyone.
    fn on_replay(&self, _session_id: &str, _event: &LoggedEvent) {}

    /// The session's: what its subscribers' backlogs hold (see backlog.rs).
    fn output_budget(&self, session_id: &str) -> Option<Arc<OutputBudget>> {
        Some(self.budgets.get(session_id))
    }
}

/// Whether `method` asks the editor's language servers (`tandem/diagnostics`, …).
fn is_language_request(method: &str) -> bool {
    matches!(
        method,
        "tandem/diagnostics"
            | "tandem/definition"
            | "tandem/references"
            | "tandem/workspaceSymbols"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontend::updates::update_notification;
    use crate::vocab::event::Event;

    fn logged(seq: u64, event: Event) -> LoggedEvent {
        LoggedEvent {
            seq,
            ts: "2026-12-03T17:00:00.000Z".into(),
            recovered: None,
            event,
        }
    }

    #[test]
    fn an_update_message_is_the_stdio_notification_byte_for_byte() {
        let chunk = logged(
            7,
            Event::AssistantChunk {
                turn_id: "t1".into(),
                step: 1,
                attempt: 1,
                text: "a \"quoted\"\nline é".into(),
            },
        );
        let message = update_message("s1", &chunk).expect("editors see chunks");
        let stdio = update_notification("s1", &chunk).expect("editors see chunks");
        assert_eq!(message.get().as_bytes(), &stdio[..]);
        let parsed: Value = serde_json::from_str(message.get()).unwrap();
        assert_eq!(
            parsed["params"]["update"]["content"]["text"],
            "a \"quoted\"\nline é"
        );
    }
}
