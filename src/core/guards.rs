//! What the turn guards' events read like in `tandem replay`: the retry
//! budget and the budget caps. Kept apart from `history` so the replay's
//! own rendering and the guards change independently.

use crate::vocab::event::Event;

/// The replay line of a guard's event, or `None` for any other event.
pub fn describe(event: &Event) -> Option<String> {
    match event {
        Event::RetryBudgetSpent {
            retries,
            max_retries,
            errors,
            ..
        } => {
            let seen: Vec<String> = errors
                .iter()
                .map(|(kind, n)| format!("{kind} ×{n}"))
                .collect();
            Some(format!(
                "retry budget spent: {retries} of {max_retries} retries; failures seen: {}",
                seen.join(", ")
            ))
        }
        Event::BudgetExceeded {
            cap,
            unit,
            spent,
            limit,
            estimate,
            ..
        } => Some(format!(
            "budget cap {cap} reached: spent {}, the next call could cost up to {}, cap {}",
            amount(unit, *spent),
            amount(unit, *estimate),
            amount(unit, *limit)
        )),
        _ => None,
    }
}

/// `$0.0123` for dollars, `1234 tokens` for tokens.
pub fn amount(unit: &str, value: f64) -> String {
    if unit == "usd" {
        format!("${value:.4}")
    } else {
        format!("{value:.0} tokens")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retry_budget_line_names_each_kind_with_its_count() {
        let event = Event::RetryBudgetSpent {
            turn_id: "t1".into(),
            retries: 8,
            max_retries: 8,
            errors: [
                ("overloaded".to_string(), 3),
                ("rate_limited".to_string(), 6),
            ]
            .into_iter()
            .collect(),
        };
        assert_eq!(
            describe(&event).unwrap(),
            "retry budget spent: 8 of 8 retries; failures seen: overloaded ×3, rate_limited ×6"
        );
    }
}
