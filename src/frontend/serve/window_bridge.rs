//! Bridges to one window: a keybinding task's question (its instruction)
//! and its inline edit go to the window that asked for the task, through
//! that window's subscription to the task session, never to the other
//! windows following the session (a task session is shared by every window
//! on its folder).
//!
//! Their requests have ids of their own (`tandem-window-N-K`), so a
//! window's answer (`tandem/respond`) finds them without a session.
//!
//! Invariant: every request ends: answered, withdrawn, or failed when the
//! subscription it goes through ends (its window detached or closed).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use serde_json::Value;

use super::hub::Subscriber;
use crate::frontend::lsp::outgoing::Outgoing;
use crate::frontend::lsp::{Outbound, OutboundQueue};
use crate::vocab::bridge::ClientAbilities;

/// The prefix of window requests' ids.
pub const ID_PREFIX: &str = "tandem-window-";

struct Open {
    conn: usize,
    sub: u64,
    outgoing: Weak<Outgoing>,
}

/// The window bridges in use.
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
        let outgoing = Outgoing::with_id_prefix(queue, format!("{ID_PREFIX}{n}-"));
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

/// Sends the bridge's messages on through the subscriber; once it is gone,
/// what is still asked fails instead of waiting for an answer that cannot
/// come.
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
