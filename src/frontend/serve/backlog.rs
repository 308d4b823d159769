//! A slow window's backlog: what waits for one `tandem/attachSession`
//! subscriber while its connection is behind (see `Subscriber::deliver`:
//! a subscriber that keeps up is sent to directly, with no queue), with
//! streamed text merged and its bytes counted against its session's
//! output budget.
//!
//! Merging is the stdio frontends' rule ([`PendingFrames`]): while a
//! window is behind, a chunk that follows a pending chunk of the same
//! message joins it, so the window receives fewer, larger chunks with the
//! same text; anything else keeps its place. Chunks queued before the
//! window's replay is out never merge (the pump skips the replayed ones).
//!
//! The budget is the session's: every subscriber's backlog of the session
//! charges it, so above the cap the session's turn stops reading the
//! model stream until its slowest window has caught up. A backlog whose
//! connection is gone (its pump ended) releases everything at once and
//! takes nothing more, so a closed window never holds a turn.
//!
//! Invariant: every byte charged is released exactly once (when its frame
//! is handed to the pump, when merging frees it, or when the backlog
//! closes).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::hub::{item_message, Item};
use crate::core::log::LoggedEvent;
use crate::core::output_budget::{OutputBudget, DEFAULT_OUTPUT_CAP};
use crate::frontend::coalesce::{is_chunk, Pending, PendingFrames};
use crate::frontend::stdout::chunk_charge;

/// Messages a connection's jsonrpsee sink holds: a window that keeps up
/// is sent to straight into it; once it is full, messages wait in the
/// subscriber's backlog, where chunks merge and bytes count.
pub const SINK_MESSAGES: u32 = 32;

/// One output budget per session, shared by its subscribers.
#[derive(Default)]
pub struct SessionBudgets {
    budgets: Mutex<HashMap<String, Arc<OutputBudget>>>,
}

impl SessionBudgets {
    pub fn get(&self, session_id: &str) -> Arc<OutputBudget> {
        self.budgets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(session_id.to_string())
            .or_insert_with(|| Arc::new(OutputBudget::new(DEFAULT_OUTPUT_CAP)))
            .clone()
    }
}

struct Inner {
    frames: PendingFrames<(Item, usize)>,
    /// Bytes charged and not yet released.
    charged: usize,
    /// The replay is out: chunks queued from now on may merge.
    live: bool,
    /// The pump is gone: nothing is queued or charged any more.
    closed: bool,
}

/// The frames waiting for one subscriber.
pub struct Backlog {
    session_id: String,
    inner: Mutex<Inner>,
    ready: Notify,
    budget: Arc<OutputBudget>,
}

impl Backlog {
    pub fn new(session_id: &str, budget: Arc<OutputBudget>) -> Arc<Backlog> {
        Arc::new(Backlog {
            session_id: session_id.to_string(),
            inner: Mutex::new(Inner {
                frames: PendingFrames::default(),
                charged: 0,
                live: false,
                closed: false,
            }),
            ready: Notify::new(),
            budget,
        })
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `item` for the pump, merging a chunk into the pending chunk
    /// before it once the window is live; charges the session's budget.
    pub fn push(&self, item: Item) {
        let mut inner = self.inner();
        if inner.closed {
            return;
        }
        let (frame, charge) = match item {
            Item::Event(event) if is_chunk(&event.event) => {
                let charge = chunk_charge(&self.session_id, &event);
                let event: Box<LoggedEvent> = Box::new((*event).clone());
                let frame = Pending::Chunk {
                    session: self.session_id.clone(),
                    event,
                    charge,
                };
                (frame, charge)
            }
            other => {
                let charge = item_message(&self.session_id, &other).map_or(0, |m| m.get().len());
                (Pending::Other((other, charge)), charge)
            }
        };
        self.budget.charge(charge);
        inner.charged += charge;
        let freed = if inner.live {
            inner.frames.push(frame)
        } else {
            inner.frames.push_unmerged(frame);
            0
        };
        inner.charged -= freed;
        drop(inner);
        self.budget.release(freed);
        self.ready.notify_one();
    }

    /// The next frame for the pump, its charge released.
    fn pop(&self) -> Option<Item> {
        let mut inner = self.inner();
        let (item, charge) = match inner.frames.pop()? {
            Pending::Chunk { event, charge, .. } => (Item::Event(Arc::new(*event)), charge),
            Pending::Other((item, charge)) => (item, charge),
        };
        inner.charged -= charge;
        drop(inner);
        self.budget.release(charge);
        Some(item)
    }

    pub fn is_empty(&self) -> bool {
        self.inner().frames.is_empty()
    }

    /// The replay is out up to `replayed_up_to`: live events it already
    /// sent are dropped, and chunks merge from now on (what waits too).
    pub fn go_live(&self, replayed_up_to: u64) {
        let mut inner = self.inner();
        if inner.live || inner.closed {
            return;
        }
        inner.live = true;
        let mut freed = 0;
        let mut kept = PendingFrames::default();
        kept.eager = true;
        while let Some(frame) = inner.frames.pop() {
            match &frame {
                Pending::Chunk { event, charge, .. } if event.seq <= replayed_up_to => {
                    freed += charge;
                }
                Pending::Other((Item::Event(event), charge)) if event.seq <= replayed_up_to => {
                    freed += charge;
                }
                _ => freed += kept.push(frame),
            }
        }
        inner.frames = kept;
        inner.charged -= freed;
        drop(inner);
        self.budget.release(freed);
    }

    /// The pump is gone: releases everything and takes nothing more.
    fn close(&self) {
        let mut inner = self.inner();
        inner.closed = true;
        inner.frames = PendingFrames::default();
        let charged = std::mem::take(&mut inner.charged);
        drop(inner);
        self.budget.release(charged);
    }
}

/// The pump's end of a backlog; dropping it (the pump ended: the window
/// closed or detached) closes the backlog.
pub struct BacklogReceiver(pub(super) Arc<Backlog>);

impl BacklogReceiver {
    /// The next item, waiting for one. Cancel-safe.
    pub async fn recv(&mut self) -> Option<Item> {
        loop {
            let notified = self.0.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(item) = self.0.pop() {
                return Some(item);
            }
            if self.0.inner().closed {
                return None;
            }
            notified.await;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Drop for BacklogReceiver {
    fn drop(&mut self) {
        self.0.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::event::Event;

    fn chunk(seq: u64, text: &str) -> Item {
        Item::Event(Arc::new(LoggedEvent {
            seq,
            ts: String::new(),
            recovered: None,
            event: Event::AssistantChunk {
                turn_id: "t1".into(),
                step: 1,
                attempt: 1,
                text: text.into(),
            },
        }))
    }

    fn text(item: Item) -> (u64, String) {
        match item {
            Item::Event(event) => match &event.event {
                Event::AssistantChunk { text, .. } => (event.seq, text.clone()),
                _ => unreachable!(),
            },
            Item::Message(m) => (0, m.to_string()),
        }
    }

    #[tokio::test]
    async fn replayed_events_are_dropped_live_chunks_merge_and_every_byte_is_released() {
        let budget = Arc::new(OutputBudget::new(1 << 20));
        let backlog = Backlog::new("s", budget.clone());
        let mut rx = BacklogReceiver(backlog.clone());
        backlog.push(chunk(1, "replayed "));
        backlog.push(chunk(2, "Hel"));
        backlog.go_live(1);
        backlog.push(chunk(3, "lo"));
        backlog.push(Item::Message(Arc::new(serde_json::json!({"id": "r"}))));
        backlog.push(chunk(4, "!"));
        backlog.push(chunk(5, "?"));
        assert!(budget.pending() > 0);
        assert_eq!(text(rx.recv().await.unwrap()), (3, "Hello".into()));
        assert_eq!(text(rx.recv().await.unwrap()).1, r#"{"id":"r"}"#);
        assert_eq!(text(rx.recv().await.unwrap()), (5, "!?".into()));
        assert!(rx.is_empty());
        assert_eq!(budget.pending(), 0, "what the pump took is released");

        backlog.push(chunk(6, "waiting for a closed window"));
        assert!(budget.pending() > 0);
        drop(rx);
        assert_eq!(budget.pending(), 0, "a closed window holds nothing");
        backlog.push(chunk(7, "after"));
        assert_eq!(budget.pending(), 0, "nor takes anything more");
    }
}
