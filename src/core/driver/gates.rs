//! The budget gates, checked before every step in a fixed order: shutdown,
//! cancellation, iterations, idle progress, activity, token budget. The
//! first that trips ends the turn with its typed stop reason.

use tokio::time::Instant;

use super::turn::{Turn, TurnEnd};
use crate::vocab::event::StopReason;

impl Turn<'_> {
    /// The budget gates, in order; `Some` stops the turn before the step.
    pub(super) fn gate(&self, steps_done: u32) -> Option<TurnEnd> {
        if self.session.shutdown.is_cancelled() {
            return Some(TurnEnd::new(
                StopReason::Cancelled,
                "the daemon is shutting down",
            ));
        }
        if self.cancel.is_cancelled() {
            return Some(TurnEnd::cancelled());
        }
        let max = self.limits.max_iterations;
        if steps_done >= max {
            return Some(TurnEnd::new(
                StopReason::MaxIterations,
                format!("stopped after {steps_done} model calls (max_iterations = {max})"),
            ));
        }
        let now = Instant::now();
        let idle = now.duration_since(self.last_progress);
        if idle > self.limits.idle_timeout() {
            return Some(TurnEnd::new(
                StopReason::Timeout,
                format!(
                    "stopped after {:.0} s without progress (idle_timeout_secs = {})",
                    idle.as_secs_f64(),
                    self.limits.idle_timeout_secs
                ),
            ));
        }
        let active = now.duration_since(self.started);
        if active > self.limits.activity_timeout() && idle > self.limits.activity_recent() {
            return Some(TurnEnd::new(
                StopReason::Timeout,
                format!(
                    "stopped after {:.0} s of work with no progress in the last {:.0} s (activity_timeout_secs = {})",
                    active.as_secs_f64(),
                    idle.as_secs_f64(),
                    self.limits.activity_timeout_secs
                ),
            ));
        }
        let budget = self.limits.max_tokens;
        let used = self.usage.total();
        if budget > 0 && used >= budget {
            return Some(TurnEnd::new(
                StopReason::TokenBudget,
                format!("stopped after using {used} tokens (max_tokens = {budget})"),
            ));
        }
        None
    }
}
