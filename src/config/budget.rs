//! `[budget]`: hard caps on what a turn, a session and a workspace's day
//! may spend, in US dollars for models with a price and in tokens for
//! models without one. 0 means no cap.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct BudgetConfig {
    /// US dollars per turn (priced models).
    pub max_cost_per_turn: f64,
    /// US dollars per session, across daemon runs (priced models).
    pub max_cost_per_session: f64,
    /// US dollars per UTC day, summed over every session of the workspace
    /// in the session logs (priced models).
    pub max_cost_per_day: f64,
    /// Tokens (input + output) per turn, for models without a price.
    pub max_tokens_per_turn: u64,
    /// Tokens per session, for models without a price.
    pub max_tokens_per_session: u64,
    /// Tokens per UTC day over the workspace's sessions, for models
    /// without a price.
    pub max_tokens_per_day: u64,
}

impl BudgetConfig {
    /// Whether any cap is set.
    pub fn is_set(&self) -> bool {
        self.max_cost_per_turn > 0.0
            || self.max_cost_per_session > 0.0
            || self.max_cost_per_day > 0.0
            || self.max_tokens_per_turn > 0
            || self.max_tokens_per_session > 0
            || self.max_tokens_per_day > 0
    }
}
