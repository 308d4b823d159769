//! The output budget: how many bytes of output are waiting for a client
//! that reads slowly, and a cap on them. A frontend charges what it queues
//! and releases it as the bytes reach the client's pipe; a turn waits for
//! room before it reads more of the model's stream, so a slow client
//! slows the model stream down (TCP backpressure to the model server)
//! instead of the daemon's memory growing.
//!
//! Invariant: charging never blocks and never fails, so nothing queued is
//! dropped and no event waits; only the reading of the model stream
//! waits, and only while more than the cap is pending.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::Notify;

/// Bytes of pending output above which turns stop reading the model
/// stream: an editor that reads nothing for a while holds at most this
/// much of the daemon's memory (plus one model chunk and the updates that
/// are not streamed text).
pub const DEFAULT_OUTPUT_CAP: usize = 1 << 20;

/// Pending output bytes against a cap (one per client connection: every
/// session writing to it shares it).
#[derive(Debug)]
pub struct OutputBudget {
    cap: usize,
    pending: AtomicUsize,
    /// Set once the client is gone: nothing will be written again, so
    /// nobody waits for room.
    closed: AtomicBool,
    room: Notify,
    /// A budget made of others (a session several clients follow): room
    /// only while each of them has room.
    all_of: Vec<std::sync::Arc<OutputBudget>>,
}

impl OutputBudget {
    pub fn new(cap: usize) -> OutputBudget {
        OutputBudget {
            cap,
            pending: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            room: Notify::new(),
            all_of: Vec::new(),
        }
    }

    /// A budget with room while each of `budgets` has room: a turn that
    /// several clients follow waits for the slowest of them.
    pub fn all_of(budgets: Vec<std::sync::Arc<OutputBudget>>) -> OutputBudget {
        OutputBudget {
            all_of: budgets,
            ..OutputBudget::new(usize::MAX)
        }
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Bytes queued and not yet written to the client.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// Counts `bytes` queued for the client. Never waits.
    pub fn charge(&self, bytes: usize) {
        self.pending.fetch_add(bytes, Ordering::AcqRel);
    }

    /// Counts `bytes` as gone to the client (written, or given up at
    /// shutdown); wakes the turns waiting for room when it makes some.
    pub fn release(&self, bytes: usize) {
        let before = self
            .pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_sub(bytes))
            })
            .unwrap_or_default();
        // Only the release that brings the count down to the cap wakes
        // anyone: the waiters saw it above the cap.
        if before > self.cap && before.saturating_sub(bytes) <= self.cap {
            self.room.notify_waiters();
        }
    }

    /// Whether no more than the cap is pending (or the client is gone).
    pub fn has_room(&self) -> bool {
        (self.pending() <= self.cap || self.closed.load(Ordering::Acquire))
            && self.all_of.iter().all(|b| b.has_room())
    }

    /// The client is gone (its pipe broke): from now on nobody waits.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.room.notify_waiters();
    }

    /// Returns once no more than the cap is pending (at once when so, or
    /// when the client is gone).
    pub async fn room(&self) {
        if self.has_room() {
            // The common case, once per model chunk: no waiter to register.
            return;
        }
        if !self.all_of.is_empty() {
            while !self.has_room() {
                for budget in &self.all_of {
                    Box::pin(budget.room()).await;
                }
            }
            return;
        }
        loop {
            let notified = self.room.notified();
            tokio::pin!(notified);
            // Registered before the check, so a release in between wakes it.
            notified.as_mut().enable();
            if self.has_room() {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn room_waits_while_more_than_the_cap_is_pending() {
        let budget = Arc::new(OutputBudget::new(100));
        budget.charge(80);
        budget.room().await;
        budget.charge(80);
        let waiting = tokio::spawn({
            let budget = budget.clone();
            async move { budget.room().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "160 of 100 pending: must wait");
        budget.release(40);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "120 of 100 pending: must wait");
        budget.release(20);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("100 of 100 pending: room")
            .unwrap();
        assert_eq!(budget.pending(), 100);
    }
}
