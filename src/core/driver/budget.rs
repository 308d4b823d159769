//! The hard spending caps of `[budget]`, checked before every model call:
//! a call whose worst case (the input about to be sent plus the maximum
//! output) could cross a cap is not made, and the turn ends with
//! `budget_exceeded`. Money for models with a price, tokens for the rest.

use super::turn::{Turn, TurnEnd};
use crate::vocab::event::{Event, StopReason, Usage};

/// The output a call may produce when `max_output_tokens` leaves it to the
/// server: Anthropic's default, which tandem sends when nothing is set.
pub(super) const ASSUMED_MAX_OUTPUT: u64 = 8192;

/// A cap the next call could cross.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct CapCrossed {
    pub(super) cap: &'static str,
    pub(super) unit: &'static str,
    pub(super) spent: f64,
    pub(super) limit: f64,
    pub(super) estimate: f64,
}

/// The first cap in `caps` (name, limit, spent; a limit of 0 is no cap)
/// that `estimate` more would cross.
fn first_crossed(
    caps: [(&'static str, f64, f64); 3],
    unit: &'static str,
    estimate: f64,
) -> Option<CapCrossed> {
    caps.into_iter()
        .find(|(_, limit, spent)| *limit > 0.0 && spent + estimate > *limit)
        .map(|(cap, limit, spent)| CapCrossed {
            cap,
            unit,
            spent,
            limit,
            estimate,
        })
}

impl Turn<'_> {
    /// The most a call may output.
    pub(super) fn max_output_tokens(&self) -> u64 {
        match self.model.config.max_output_tokens {
            0 => ASSUMED_MAX_OUTPUT,
            n => u64::from(n),
        }
    }

    /// Which cap a call of `input_tokens` in and at most `max_output` out
    /// could cross, if any.
    pub(super) fn cap_crossed(&self, input_tokens: u64, max_output: u64) -> Option<CapCrossed> {
        let budget = &self.session.config.budget;
        if !budget.is_set() {
            return None;
        }
        let config = &self.session.config;
        let roots = self.env.workspace.roots();
        let day = || {
            self.env
                .spend
                .today(&roots, &config.pricing, &self.model.config.name)
        };
        match self.price() {
            Some(price) => {
                let worst = Usage {
                    input_tokens,
                    output_tokens: max_output,
                    cached_tokens: 0,
                };
                let day_usd = if budget.max_cost_per_day > 0.0 {
                    day().usd
                } else {
                    0.0
                };
                first_crossed(
                    [
                        (
                            "max_cost_per_turn",
                            budget.max_cost_per_turn,
                            price.cost(&self.usage),
                        ),
                        (
                            "max_cost_per_session",
                            budget.max_cost_per_session,
                            price.cost(self.session_usage),
                        ),
                        ("max_cost_per_day", budget.max_cost_per_day, day_usd),
                    ],
                    "usd",
                    price.cost(&worst),
                )
            }
            None => {
                let day_tokens = if budget.max_tokens_per_day > 0 {
                    day().tokens
                } else {
                    0
                };
                first_crossed(
                    [
                        (
                            "max_tokens_per_turn",
                            budget.max_tokens_per_turn as f64,
                            self.usage.total() as f64,
                        ),
                        (
                            "max_tokens_per_session",
                            budget.max_tokens_per_session as f64,
                            self.session_usage.total() as f64,
                        ),
                        (
                            "max_tokens_per_day",
                            budget.max_tokens_per_day as f64,
                            day_tokens as f64,
                        ),
                    ],
                    "tokens",
                    (input_tokens + max_output) as f64,
                )
            }
        }
    }

    /// Checks the caps before the turn's next model call; a crossed cap is
    /// logged and ends the turn.
    pub(super) fn check_budget(&mut self) -> Result<(), TurnEnd> {
        let input = self.projection.estimated_tokens();
        let Some(crossed) = self.cap_crossed(input, self.max_output_tokens()) else {
            return Ok(());
        };
        self.record(Event::BudgetExceeded {
            turn_id: self.turn_id.clone(),
            cap: crossed.cap.to_string(),
            unit: crossed.unit.to_string(),
            spent: crossed.spent,
            limit: crossed.limit,
            estimate: crossed.estimate,
        });
        Err(TurnEnd::new(
            StopReason::BudgetExceeded,
            stop_message(&crossed),
        ))
    }

    /// Adds a logged call to the workspace's day.
    pub(super) fn charge(&self, usage: &Usage) {
        let usd = self.price().map_or(0.0, |p| p.cost(usage));
        self.env
            .spend
            .charge(&self.env.workspace.roots(), usd, usage.total());
    }
}

/// `stopped before a model call: max_cost_per_day is $5.0000; spent $4.9731, and the call could cost up to $0.0412`
pub(super) fn stop_message(crossed: &CapCrossed) -> String {
    let amount = |v| crate::core::guards::amount(crossed.unit, v);
    format!(
        "stopped before a model call: {} is {}; spent {}, and the call could cost up to {}",
        crossed.cap,
        amount(crossed.limit),
        amount(crossed.spent),
        amount(crossed.estimate)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_cap_the_estimate_would_cross_is_named_and_zero_is_no_cap() {
        let caps = [
            ("max_cost_per_turn", 0.0, 100.0),
            ("max_cost_per_session", 1.0, 0.5),
            ("max_cost_per_day", 5.0, 4.9),
        ];
        assert_eq!(first_crossed(caps, "usd", 0.05), None);
        let crossed = first_crossed(caps, "usd", 0.2).unwrap();
        assert_eq!(crossed.cap, "max_cost_per_day");
        let crossed = first_crossed(caps, "usd", 0.6).unwrap();
        assert_eq!(crossed.cap, "max_cost_per_session");
        assert_eq!(
            stop_message(&crossed),
            "stopped before a model call: max_cost_per_session is $1.0000; spent $0.5000, and the call could cost up to $0.6000"
        );
    }
}
