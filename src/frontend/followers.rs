//! Who follows which session, in a daemon with many editor connections
//! (`tandem serve`): the daemon's [`EventSink`], which hands each event to
//! the sinks of the connections following its session, and the
//! [`ClientLink`] of each connection, which asks a turn's questions of
//! every follower able to answer them.
//!
//! Each connection runs the same frontend as over stdio (its own writer,
//! its own `tandem/update` or `session/update` mapping, its own
//! `$/progress`); this module only decides which of them hear a session.
//! A connection follows a session it made, loaded, forked or gave input
//! to (the core says so through [`EventSink::follow`],
//! [`EventSink::begin_replay`] and [`EventSink::replay`]), until it closes
//! or the session is closed or deleted ([`EventSink::closed`]).
//!
//! Invariants:
//! - a follower hears each event of its session once and in log order: a
//!   load registers it before the log is read, live events wait until the
//!   history is out, and those the history already held are skipped by
//!   sequence number;
//! - a permission request or question goes to every follower that can
//!   answer it, and to one that starts following while it waits; the first
//!   answer wins and the other copies are withdrawn (`$/cancelRequest`);
//! - an edit, a language request, the client's files and terminal go only
//!   to the connection whose input opened the turn: its buffers are the
//!   ones the turn reads;
//! - only sessions someone follows have an entry: a closed session's goes
//!   when the core closes it, any session's when its last follower's
//!   connection closes (a long-running serve keeps nothing per session
//!   that is gone).

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use parking_lot::{Mutex, MutexGuard};

use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::core::client::ClientLink;
use crate::core::log::{EventSink, LoggedEvent};
use crate::core::output_budget::OutputBudget;
use crate::frontend::lsp::outgoing::CONNECTION_CLOSED;
use crate::vocab::bridge::{
    ApplyEditRequest, ApplyEditResponse, BridgeOutcome, ClientAbilities, ClientBridge,
    ClientFacilities, ClientFile, PermissionAnswer, PermissionRequest, TerminalCommand,
    TerminalRun, UserInputRequest,
};
use crate::vocab::language::{FileDiagnostics, LanguageAnswer, Location, Symbol, TextPoint};

/// One connection as the followers see it.
struct Conn {
    sink: Arc<dyn EventSink>,
    bridge: Arc<dyn ClientBridge>,
}

/// Where a follower's live events go.
enum Gate {
    /// Its history is being read: live events wait here.
    Replaying(Vec<LoggedEvent>),
    /// Events up to this sequence number were in its history.
    Live(u64),
}

struct Follower {
    client: u64,
    gate: Gate,
}

/// A question waiting for an answer: a follower that joins gets it too.
struct Ask {
    id: u64,
    joined: mpsc::UnboundedSender<Arc<dyn ClientBridge>>,
}

#[derive(Default)]
struct State {
    conns: HashMap<u64, Conn>,
    sessions: HashMap<String, Vec<Follower>>,
    asks: HashMap<String, Vec<Ask>>,
    next_ask: u64,
}

/// The sessions' followers; the daemon's sink in `tandem serve`.
#[derive(Default)]
pub struct Followers {
    state: Mutex<State>,
}

impl Followers {
    pub fn new() -> Arc<Followers> {
        Arc::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock()
    }

    /// Connection `client` hears its sessions through `sink` and is asked
    /// through `bridge`.
    pub fn register(&self, client: u64, sink: Arc<dyn EventSink>, bridge: Arc<dyn ClientBridge>) {
        self.state().conns.insert(client, Conn { sink, bridge });
    }

    /// Connection `client` closed: it follows nothing any more.
    pub fn unregister(&self, client: u64) {
        let mut state = self.state();
        state.conns.remove(&client);
        for followers in state.sessions.values_mut() {
            followers.retain(|f| f.client != client);
        }
        state.sessions.retain(|_, f| !f.is_empty());
    }

    /// How many connections follow `session_id`.
    pub fn count(&self, session_id: &str) -> usize {
        self.state().sessions.get(session_id).map_or(0, Vec::len)
    }

    /// How many sessions have followers (and questions waiting): what the
    /// serve keeps per session.
    pub fn sessions(&self) -> (usize, usize) {
        let state = self.state();
        (state.sessions.len(), state.asks.len())
    }

    /// The link of connection `client`: `own` asks it alone.
    pub fn link(self: &Arc<Followers>, own: Arc<dyn ClientBridge>) -> Arc<dyn ClientLink> {
        Arc::new(FollowerLink {
            followers: Arc::downgrade(self),
            own,
        })
    }

    /// The bridges of `session_id`'s followers (other than `owner`'s).
    fn bridges(&self, session_id: &str) -> Vec<Arc<dyn ClientBridge>> {
        let state = self.state();
        state
            .sessions
            .get(session_id)
            .into_iter()
            .flatten()
            .filter_map(|f| state.conns.get(&f.client).map(|c| c.bridge.clone()))
            .collect()
    }

    /// A follower that joined `session_id` gets the questions still open.
    fn joined(state: &mut State, session_id: &str, client: u64) {
        let Some(bridge) = state.conns.get(&client).map(|c| c.bridge.clone()) else {
            return;
        };
        if let Some(asks) = state.asks.get_mut(session_id) {
            asks.retain(|ask| ask.joined.send(bridge.clone()).is_ok());
        }
    }

    fn open_ask(&self, session_id: &str) -> (u64, mpsc::UnboundedReceiver<Arc<dyn ClientBridge>>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut state = self.state();
        state.next_ask += 1;
        let id = state.next_ask;
        state
            .asks
            .entry(session_id.to_string())
            .or_default()
            .push(Ask { id, joined: tx });
        (id, rx)
    }

    fn close_ask(&self, session_id: &str, id: u64) {
        let mut state = self.state();
        if let Some(asks) = state.asks.get_mut(session_id) {
            asks.retain(|a| a.id != id);
            if asks.is_empty() {
                state.asks.remove(session_id);
            }
        }
    }
}

impl EventSink for Followers {
    fn on_event(&self, session_id: &str, event: &LoggedEvent) {
        // Delivered under the lock: a follow or a replay never interleaves
        // with an event (each sink only queues).
        let mut state = self.state();
        let followed = state
            .sessions
            .get(session_id)
            .is_some_and(|f| !f.is_empty());
        if !followed && matches!(event.event, crate::vocab::event::Event::TurnEnd { .. }) {
            // The turn's request bodies are freed. A follower's sink asks
            // its writer to give them back once the turn's frames are
            // written (a second trim here would race that one).
            crate::frontend::memory::return_freed_memory_soon();
        }
        let State {
            conns, sessions, ..
        } = &mut *state;
        for follower in sessions.get_mut(session_id).into_iter().flatten() {
            match &mut follower.gate {
                Gate::Replaying(waiting) => waiting.push(event.clone()),
                Gate::Live(upto) if event.seq <= *upto => {}
                Gate::Live(_) => {
                    if let Some(conn) = conns.get(&follower.client) {
                        conn.sink.on_event(session_id, event);
                    }
                }
            }
        }
    }

    /// Replays go to the one connection that loaded, through
    /// [`EventSink::replay`].
    fn on_replay(&self, _session_id: &str, _event: &LoggedEvent) {}

    /// The followers' budgets together: a model call waits while any of
    /// them is over its cap, so a window that stops reading holds the turn
    /// back (and a closed one holds nothing: its budget closes).
    fn output_budget(&self, session_id: &str) -> Option<Arc<OutputBudget>> {
        let state = self.state();
        let mut budgets: Vec<Arc<OutputBudget>> = state
            .sessions
            .get(session_id)
            .into_iter()
            .flatten()
            .filter_map(|f| state.conns.get(&f.client)?.sink.output_budget(session_id))
            .collect();
        match budgets.len() {
            0 | 1 => budgets.pop(),
            _ => Some(Arc::new(OutputBudget::all_of(budgets))),
        }
    }

    fn follow(&self, client: u64, session_id: &str) {
        let mut state = self.state();
        if !state.conns.contains_key(&client) {
            return;
        }
        let followers = state.sessions.entry(session_id.to_string()).or_default();
        if followers.iter().any(|f| f.client == client) {
            return;
        }
        followers.push(Follower {
            client,
            gate: Gate::Live(0),
        });
        Self::joined(&mut state, session_id, client);
    }

    fn begin_replay(&self, client: u64, session_id: &str) {
        let mut state = self.state();
        if !state.conns.contains_key(&client) {
            return;
        }
        let followers = state.sessions.entry(session_id.to_string()).or_default();
        match followers.iter_mut().find(|f| f.client == client) {
            Some(follower) => {
                if let Gate::Live(_) = follower.gate {
                    follower.gate = Gate::Replaying(Vec::new());
                }
            }
            None => followers.push(Follower {
                client,
                gate: Gate::Replaying(Vec::new()),
            }),
        }
    }

    fn replay(&self, client: u64, session_id: &str, events: &[LoggedEvent], send: bool) {
        let mut state = self.state();
        let State {
            conns, sessions, ..
        } = &mut *state;
        let Some(sink) = conns.get(&client).map(|c| c.sink.clone()) else {
            return;
        };
        let Some(follower) = sessions
            .get_mut(session_id)
            .and_then(|f| f.iter_mut().find(|f| f.client == client))
        else {
            return;
        };
        let upto = events.last().map_or(0, |e| e.seq);
        for event in events.iter().filter(|_| send) {
            sink.on_replay(session_id, event);
        }
        if let Gate::Replaying(waiting) = std::mem::replace(&mut follower.gate, Gate::Live(upto)) {
            for event in waiting.iter().filter(|e| e.seq > upto) {
                sink.on_event(session_id, event);
            }
        }
        Self::joined(&mut state, session_id, client);
    }

    /// Its followers are forgotten: its task ended, so no event and no
    /// question of it is to come (its asks went with its turn); a window
    /// that loads it again follows it anew.
    fn closed(&self, session_id: &str) {
        let sinks: Vec<_> = {
            let mut state = self.state();
            let followers = state.sessions.remove(session_id).unwrap_or_default();
            followers
                .iter()
                .filter_map(|f| state.conns.get(&f.client).map(|c| c.sink.clone()))
                .collect()
        };
        // Each follower's own sink forgets what it keeps of the session
        // (ACP's mode and model), outside the lock, as events are sent.
        for sink in sinks {
            sink.closed(session_id);
        }
    }
}

/// A connection's link: its turns ask through [`TurnBridge`], its tasks
/// through its own bridge alone.
struct FollowerLink {
    followers: Weak<Followers>,
    own: Arc<dyn ClientBridge>,
}

impl ClientLink for FollowerLink {
    fn turn_bridge(&self, session_id: &str) -> Arc<dyn ClientBridge> {
        Arc::new(TurnBridge {
            followers: self.followers.clone(),
            session_id: session_id.to_string(),
            owner: self.own.clone(),
        })
    }

    fn own_bridge(&self, _session_id: &str) -> Arc<dyn ClientBridge> {
        self.own.clone()
    }
}

/// The bridge of a turn one connection opened.
struct TurnBridge {
    followers: Weak<Followers>,
    session_id: String,
    /// The opener: its buffers, edits, files, terminal, language servers.
    owner: Arc<dyn ClientBridge>,
}

impl TurnBridge {
    /// The followers' bridges (the owner's among them when it follows).
    fn askable(&self) -> Vec<Arc<dyn ClientBridge>> {
        match self.followers.upgrade() {
            Some(followers) => followers.bridges(&self.session_id),
            None => Vec::new(),
        }
    }

    /// Asks every follower `able` says can answer, and any that joins
    /// while no answer came: the first answer (or dismissal) wins.
    async fn ask_all<T, F, Fut>(
        &self,
        able: fn(ClientAbilities) -> bool,
        ask: F,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<T>
    where
        F: Fn(Arc<dyn ClientBridge>) -> Fut,
        Fut: std::future::Future<Output = BridgeOutcome<T>>,
    {
        let Some(followers) = self.followers.upgrade() else {
            return ask(self.owner.clone()).await;
        };
        let (ask_id, mut joined) = followers.open_ask(&self.session_id);
        let _close = CloseAsk {
            followers: &followers,
            session_id: &self.session_id,
            id: ask_id,
        };
        let mut running = FuturesUnordered::new();
        for bridge in self.askable() {
            if able(bridge.abilities()) {
                running.push(ask(bridge));
            }
        }
        if running.is_empty() {
            // Nobody who can answer follows: the owner says why not.
            return ask(self.owner.clone()).await;
        }
        loop {
            tokio::select! {
                outcome = running.next(), if !running.is_empty() => match outcome {
                    // A window that went away: the others (or one that
                    // comes back, a reloaded window) may still answer, so
                    // the ask waits until the turn ends.
                    Some(BridgeOutcome::Unavailable(why)) if why == CONNECTION_CLOSED => {}
                    // An editor that cannot answer, when no other can.
                    Some(BridgeOutcome::Unavailable(why)) if running.is_empty() => {
                        return BridgeOutcome::Unavailable(why)
                    }
                    Some(BridgeOutcome::Unavailable(_)) | None => {}
                    Some(answer) => return answer,
                },
                Some(bridge) = joined.recv() => {
                    if able(bridge.abilities()) {
                        running.push(ask(bridge));
                    }
                }
                _ = cancel.cancelled() => return BridgeOutcome::Cancelled,
            }
        }
    }
}

/// Forgets an ask when it ends, however it ends.
struct CloseAsk<'a> {
    followers: &'a Followers,
    session_id: &'a str,
    id: u64,
}

impl Drop for CloseAsk<'_> {
    fn drop(&mut self) {
        self.followers.close_ask(self.session_id, self.id);
    }
}

#[async_trait::async_trait]
impl ClientBridge for TurnBridge {
    fn abilities(&self) -> ClientAbilities {
        let mut abilities = self.owner.abilities();
        for bridge in self.askable() {
            let a = bridge.abilities();
            abilities.request_permission |= a.request_permission;
            abilities.request_user_input |= a.request_user_input;
        }
        abilities
    }

    fn facilities(&self) -> ClientFacilities {
        self.owner.facilities()
    }

    async fn read_text_file(
        &self,
        file: ClientFile,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<String> {
        self.owner.read_text_file(file, cancel).await
    }

    async fn write_text_file(
        &self,
        file: ClientFile,
        text: String,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<()> {
        self.owner.write_text_file(file, text, cancel).await
    }

    async fn run_in_terminal(
        &self,
        command: TerminalCommand,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<TerminalRun> {
        self.owner.run_in_terminal(command, cancel).await
    }

    async fn request_permission(
        &self,
        request: PermissionRequest,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<PermissionAnswer> {
        self.ask_all(
            |a| a.request_permission,
            |bridge| {
                let (request, cancel) = (request.clone(), cancel.clone());
                async move { bridge.request_permission(request, &cancel).await }
            },
            cancel,
        )
        .await
    }

    async fn request_user_input(
        &self,
        request: UserInputRequest,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<Value> {
        self.ask_all(
            |a| a.request_user_input,
            |bridge| {
                let (request, cancel) = (request.clone(), cancel.clone());
                async move { bridge.request_user_input(request, &cancel).await }
            },
            cancel,
        )
        .await
    }

    async fn apply_edit(
        &self,
        request: ApplyEditRequest,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<ApplyEditResponse> {
        self.owner.apply_edit(request, cancel).await
    }

    async fn diagnostics(
        &self,
        paths: Option<Vec<std::path::PathBuf>>,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<LanguageAnswer<FileDiagnostics>> {
        self.owner.diagnostics(paths, cancel).await
    }

    async fn definition(
        &self,
        at: TextPoint,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<LanguageAnswer<Location>> {
        self.owner.definition(at, cancel).await
    }

    async fn references(
        &self,
        at: TextPoint,
        include_declaration: bool,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<LanguageAnswer<Location>> {
        self.owner.references(at, include_declaration, cancel).await
    }

    async fn workspace_symbols(
        &self,
        query: String,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<LanguageAnswer<Symbol>> {
        self.owner.workspace_symbols(query, cancel).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::daemon::{Daemon, DaemonOptions, NewSession};
    use crate::core::log::{Durability, NullSink};
    use crate::vocab::bridge::NoClient;

    /// A serve's daemon with the followers as its sink, and `n` connections
    /// registered with them.
    fn serve_daemon(
        home: &std::path::Path,
        n: usize,
    ) -> (
        Arc<Daemon>,
        Arc<Followers>,
        Vec<Arc<crate::core::client::Client>>,
    ) {
        let followers = Followers::new();
        let daemon = Daemon::new(DaemonOptions {
            home: home.to_path_buf(),
            durability: Durability::Flush,
            sink: followers.clone(),
        });
        let clients = (0..n)
            .map(|_| {
                let bridge: Arc<dyn ClientBridge> = Arc::new(NoClient);
                let client = daemon.connect(followers.link(bridge.clone()));
                client.workspace().set_roots(vec![home.to_path_buf()]);
                followers.register(client.id(), Arc::new(NullSink), bridge);
                client
            })
            .collect();
        (daemon, followers, clients)
    }

    #[tokio::test]
    async fn closed_and_deleted_sessions_leave_no_entry_while_their_windows_stay() {
        let home = tempfile::tempdir().unwrap();
        let (daemon, followers, clients) = serve_daemon(home.path(), 2);
        let kept = daemon
            .new_session(&clients[0], NewSession::default())
            .unwrap();
        for round in 0..20 {
            let session = daemon
                .new_session(&clients[round % 2], NewSession::default())
                .unwrap();
            // The other window follows it too (as a load or a prompt does).
            followers.follow(clients[(round + 1) % 2].id(), &session.id);
            assert_eq!(followers.count(&session.id), 2);
            if round % 2 == 0 {
                assert!(daemon.close_session(&session.id).await);
            } else {
                daemon.delete_session(&session.id).await.unwrap();
            }
            assert_eq!(followers.count(&session.id), 0, "round {round}");
        }
        // Twenty sessions opened and closed, both windows still there: only
        // the session still open is kept, with its one follower.
        assert_eq!(followers.sessions(), (1, 0));
        assert_eq!(followers.count(&kept.id), 1);
        // Closing a session the daemon does not have forgets nothing.
        assert!(
            !daemon
                .close_session("0123456789abcdef0123456789abcdef")
                .await
        );
        assert_eq!(followers.count(&kept.id), 1);
        // Its last follower's connection closing forgets it too.
        followers.unregister(clients[0].id());
        assert_eq!(followers.sessions(), (0, 0));
    }

    #[test]
    fn a_window_that_loads_a_closed_session_again_follows_it_anew() {
        let followers = Followers::new();
        followers.register(1, Arc::new(NullSink), Arc::new(NoClient));
        followers.follow(1, "s");
        followers.closed("s");
        assert_eq!(followers.sessions(), (0, 0));
        followers.begin_replay(1, "s");
        followers.replay(1, "s", &[], false);
        assert_eq!(followers.count("s"), 1);
    }

    /// Records the sessions it is told are closed.
    #[derive(Default)]
    struct ClosedSink(parking_lot::Mutex<Vec<String>>);

    impl EventSink for ClosedSink {
        fn on_event(&self, _session_id: &str, _event: &LoggedEvent) {}

        fn closed(&self, session_id: &str) {
            self.0.lock().push(session_id.to_string());
        }
    }

    #[test]
    fn each_follower_of_a_closed_session_and_only_those_hear_it_closed() {
        let followers = Followers::new();
        let sinks: Vec<Arc<ClosedSink>> = (0..3).map(|_| Arc::default()).collect();
        for (client, sink) in sinks.iter().enumerate() {
            followers.register(client as u64, sink.clone(), Arc::new(NoClient));
        }
        followers.follow(0, "s");
        followers.follow(1, "s");
        followers.follow(2, "t");
        followers.closed("s");
        let heard: Vec<Vec<String>> = sinks.iter().map(|s| s.0.lock().clone()).collect();
        assert_eq!(
            heard,
            [vec!["s".to_string()], vec!["s".to_string()], vec![]]
        );
        // A session nobody follows: nobody is told.
        followers.closed("u");
        assert!(sinks[2].0.lock().is_empty());
    }
}
