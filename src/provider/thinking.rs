//! Anthropic's extended thinking for a session's reasoning effort: the
//! token budget of the effort (`config::models::ANTHROPIC_THINKING_BUDGETS`)
//! and the `max_tokens` that must exceed it.

use serde::Serialize;

/// `thinking` of a Messages request: `{"type": "enabled", "budget_tokens"}`.
#[derive(Serialize)]
pub(super) struct ThinkingParam {
    #[serde(rename = "type")]
    kind: &'static str,
    budget_tokens: u32,
}

/// The budget of `effort`; `None` for no effort, `none`, or an effort
/// without a budget (config refuses those for Anthropic models).
pub(super) fn budget_of(effort: Option<&str>) -> Option<u32> {
    effort.and_then(|e| crate::config::models::anthropic_thinking_budget(e).flatten())
}

/// The `max_tokens` and `thinking` of a call whose output cap is
/// `max_tokens`: with a budget, the cap is raised above it (the API
/// requires it) by the cap itself.
pub(super) fn output_limits(budget: Option<u32>, max_tokens: u32) -> (u32, Option<ThinkingParam>) {
    match budget {
        None => (max_tokens, None),
        Some(budget) => (
            if max_tokens > budget {
                max_tokens
            } else {
                budget + max_tokens
            },
            Some(ThinkingParam {
                kind: "enabled",
                budget_tokens: budget,
            }),
        ),
    }
}
