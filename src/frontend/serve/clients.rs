//! The serve's connections, each a core [`Client`] (its documents,
//! folders, capabilities and `initializationOptions`) with a [`ConnLink`]:
//! how the core asks that window.
//!
//! A prompt or steer names its connection's client, so the turn it opens
//! reads that window's documents, whichever window prompts next, and its
//! edits go to that window: the link's turn bridge makes the connection
//! the owner of the session's turn the moment the core starts it. A
//! keybinding task's question and inline edit go to its window alone,
//! through that window's subscription to the task session (the link's own
//! bridge; requests with ids `tandem-window-N-K`).
//!
//! Invariant: changes from two windows are never mixed into one buffer,
//! and a turn never reads another window's documents than its opener's.
//! Every request to one window ends: answered, withdrawn, or failed when
//! the subscription it goes through ends.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use serde_json::Value;

use super::hub::{Hub, Subscriber};
use crate::buffers::{BufferCache, PositionEncoding, TextChange};
use crate::core::client::{Client, ClientCapabilities, ClientLink};
use crate::frontend::lsp::outgoing::Outgoing;
use crate::frontend::lsp::{Outbound, OutboundQueue};
use crate::vocab::bridge::{ClientAbilities, ClientBridge, NoClient};

/// A document-sync operation, applied to a connection's cache.
pub enum DocOp<'a> {
    Open {
        path: PathBuf,
        version: i32,
        text: &'a str,
    },
    Change {
        path: &'a Path,
        version: i32,
        changes: &'a [TextChange],
    },
    Close(&'a Path),
    Saved {
        path: &'a Path,
        text: Option<&'a str>,
    },
}

impl DocOp<'_> {
    fn apply(&self, cache: &BufferCache) -> Result<(), String> {
        match self {
            DocOp::Open {
                path,
                version,
                text,
            } => cache.open(path.clone(), *version, text),
            DocOp::Change {
                path,
                version,
                changes,
            } => {
                return cache
                    .change(path, *version, changes)
                    .map_err(|e| e.to_string())
            }
            DocOp::Close(path) => cache.close(path),
            DocOp::Saved { path, text } => cache.saved(path, *text),
        }
        Ok(())
    }
}

#[derive(Default)]
pub struct Clients {
    clients: Mutex<HashMap<usize, Arc<Client>>>,
}

impl Clients {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<usize, Arc<Client>>> {
        self.clients.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Connection `conn`'s client, made by `make` on first use.
    pub fn get_or_insert(&self, conn: usize, make: impl FnOnce() -> Arc<Client>) -> Arc<Client> {
        self.lock().entry(conn).or_insert_with(make).clone()
    }

    pub fn get(&self, conn: usize) -> Option<Arc<Client>> {
        self.lock().get(&conn).cloned()
    }

    /// Records what a connection said in `initialize` (its options already
    /// checked).
    pub fn initialize(
        &self,
        client: &Client,
        capabilities: ClientCapabilities,
        roots: Vec<PathBuf>,
        init_options: Value,
        encoding: PositionEncoding,
    ) {
        client.set_capabilities(capabilities);
        client.workspace().set_roots(roots);
        if let Err(e) = client.set_init_options(init_options) {
            tracing::error!("initializationOptions: {e}");
        }
        client.buffers().set_encoding(encoding);
    }

    pub fn capabilities(&self, conn: usize) -> ClientCapabilities {
        self.get(conn).map(|c| c.capabilities()).unwrap_or_default()
    }

    pub fn abilities(&self, conn: usize) -> ClientAbilities {
        self.capabilities(conn).abilities
    }

    /// Changes a connection's root folders (`didChangeWorkspaceFolders`).
    pub fn change_roots(&self, conn: usize, removed: &[PathBuf], added: Vec<PathBuf>) {
        if let Some(client) = self.get(conn) {
            for root in removed {
                client.workspace().remove_root(root);
            }
            for root in added {
                client.workspace().add_root(root);
            }
        }
    }

    /// Applies a document-sync operation from `conn`.
    pub fn document(&self, conn: usize, op: DocOp<'_>) -> Result<(), String> {
        match self.get(conn) {
            Some(own) => op.apply(own.buffers()),
            None => Ok(()),
        }
    }

    /// A connection closed: forget it.
    pub fn remove(&self, conn: usize) -> Option<Arc<Client>> {
        self.lock().remove(&conn)
    }
}

/// How the core asks window `conn`.
pub struct ConnLink {
    pub hub: Weak<Hub>,
    pub conn: usize,
}

impl ClientLink for ConnLink {
    /// The session's bridge, with `conn` as the owner of the turn: its
    /// permission requests and questions go to every window following the
    /// session that can answer, its edits, files and terminal to `conn`.
    fn turn_bridge(&self, session_id: &str) -> Arc<dyn ClientBridge> {
        match self.hub.upgrade() {
            Some(hub) => hub.turn_bridge(session_id, self.conn),
            None => Arc::new(NoClient),
        }
    }

    /// A bridge to this window alone, through its subscription to the
    /// session; a window not attached to the session cannot be asked.
    fn own_bridge(&self, session_id: &str) -> Arc<dyn ClientBridge> {
        match self.hub.upgrade() {
            Some(hub) => hub.window_bridge(session_id, self.conn),
            None => Arc::new(NoClient),
        }
    }
}

/// The prefix of window requests' ids.
pub const WINDOW_ID_PREFIX: &str = "tandem-window-";

struct Open {
    conn: usize,
    sub: u64,
    outgoing: Weak<Outgoing>,
}

/// The bridges to one window in use.
#[derive(Default)]
pub struct WindowBridges {
    next: AtomicU64,
    open: Mutex<Vec<Open>>,
}

impl WindowBridges {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Open>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A bridge whose requests go out through `sub` only. It asks
    /// questions and proposes edits as far as `abilities` say the window
    /// can; it never asks permission (a task's turn asks through its
    /// session, like any turn).
    pub fn open(&self, sub: &Arc<Subscriber>, mut abilities: ClientAbilities) -> Arc<Outgoing> {
        let (queue, rx) = OutboundQueue::channel();
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let outgoing = Outgoing::with_id_prefix(queue, format!("{WINDOW_ID_PREFIX}{n}-"));
        abilities.request_permission = false;
        outgoing.set_abilities(abilities);
        let mut open = self.lock();
        open.retain(|o| o.outgoing.strong_count() > 0);
        open.push(Open {
            conn: sub.conn,
            sub: sub.id,
            outgoing: Arc::downgrade(&outgoing),
        });
        tokio::spawn(drain(rx, Arc::downgrade(sub), Arc::downgrade(&outgoing)));
        outgoing
    }

    /// A window's answer to one of these requests; false when none waits.
    pub fn respond(&self, conn: usize, answer: &Value) -> bool {
        let outgoings: Vec<Arc<Outgoing>> = self
            .lock()
            .iter()
            .filter(|o| o.conn == conn)
            .filter_map(|o| o.outgoing.upgrade())
            .collect();
        outgoings.iter().any(|o| o.complete(answer))
    }

    /// The subscriptions `gone` accepts (by connection and id) ended: their
    /// requests fail.
    pub fn ended(&self, gone: impl Fn(usize, u64) -> bool) {
        let failed: Vec<Arc<Outgoing>> = {
            let mut open = self.lock();
            let (ended, kept) = open.drain(..).partition(|o| gone(o.conn, o.sub));
            *open = kept;
            ended
                .into_iter()
                .filter_map(|o: Open| o.outgoing.upgrade())
                .collect()
        };
        for outgoing in failed {
            outgoing.fail_all();
        }
    }
}

/// Sends a window bridge's messages on through the subscriber; once it is
/// gone, what is still asked fails instead of waiting for an answer that
/// cannot come.
async fn drain(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Outbound>,
    sub: Weak<Subscriber>,
    outgoing: Weak<Outgoing>,
) {
    while let Some(Outbound::Frame(body)) = rx.recv().await {
        let Some(sub) = sub.upgrade() else {
            if let Some(outgoing) = outgoing.upgrade() {
                outgoing.fail_all();
            }
            continue;
        };
        match serde_json::from_slice::<Value>(&body) {
            Ok(message) => sub.send_message(Arc::new(message)),
            Err(e) => tracing::error!("unreadable request to a window: {e}"),
        }
    }
}
