//! What a model call used, after each one: its tokens added to the turn's
//! and the session's, its cost (at its own model's price) to theirs, and a
//! `usage_update` saying how much of the model's context is now in use —
//! which drops after a compaction.

use super::turn::Turn;
use crate::vocab::event::{ContextUse, Cost, Event, Usage};

impl Turn<'_> {
    /// Records the `usage_update` of a call whose tokens are already in
    /// the turn's and session's usage; `context_used` is what the model's
    /// context holds now.
    pub(super) fn record_usage(&mut self, call: Usage, context_used: u64) {
        let price = self.price();
        let cost = price.map(|price| {
            let call_cost = price.cost(&call);
            let turn = self.cost.unwrap_or(0.0) + call_cost;
            let session = self.session_cost.unwrap_or(0.0) + call_cost;
            self.cost = Some(turn);
            *self.session_cost = Some(session);
            Cost {
                call: call_cost,
                turn,
                session,
            }
        });
        self.record(Event::UsageUpdate {
            turn_id: self.turn_id.clone(),
            call,
            turn: self.usage,
            session: *self.session_usage,
            cost,
            context: Some(ContextUse {
                used: context_used,
                size: self.model.config.context_window,
            }),
        });
    }
}
