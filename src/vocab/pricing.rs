//! What tokens cost: a table of known models' prices, overridable and
//! extendable with `[pricing."<model>"]` in the configuration.
//!
//! Invariant: a model that is in neither table has no cost — tandem shows
//! its tokens only and never guesses a price.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::event::Usage;

/// Prices in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    /// Cached input; defaults to the input price.
    #[serde(default)]
    pub cached_per_mtok: Option<f64>,
}

impl Price {
    const fn new(input: f64, output: f64, cached: f64) -> Price {
        Price {
            input_per_mtok: input,
            output_per_mtok: output,
            cached_per_mtok: Some(cached),
        }
    }

    /// The cost of `usage` in US dollars. `cached_tokens` are part of
    /// `input_tokens` and billed at the cached price.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let cached = usage.cached_tokens.min(usage.input_tokens);
        let uncached = usage.input_tokens - cached;
        let cached_price = self.cached_per_mtok.unwrap_or(self.input_per_mtok);
        (uncached as f64 * self.input_per_mtok
            + cached as f64 * cached_price
            + usage.output_tokens as f64 * self.output_per_mtok)
            / 1_000_000.0
    }
}

/// Published list prices of common hosted models (USD per million tokens:
/// input, output, cached input). Names match by prefix, longest first, so
/// dated snapshots (`claude-sonnet-4-20250514`) find their family.
const KNOWN: &[(&str, Price)] = &[
    ("gpt-4o-mini", Price::new(0.15, 0.60, 0.075)),
    ("gpt-4o", Price::new(2.50, 10.00, 1.25)),
    ("gpt-4.1-nano", Price::new(0.10, 0.40, 0.025)),
    ("gpt-4.1-mini", Price::new(0.40, 1.60, 0.10)),
    ("gpt-4.1", Price::new(2.00, 8.00, 0.50)),
    ("o4-mini", Price::new(1.10, 4.40, 0.275)),
    ("o3-mini", Price::new(1.10, 4.40, 0.55)),
    ("o3", Price::new(2.00, 8.00, 0.50)),
    ("claude-opus-4", Price::new(15.00, 75.00, 1.50)),
    ("claude-sonnet-4", Price::new(3.00, 15.00, 0.30)),
    ("claude-3-7-sonnet", Price::new(3.00, 15.00, 0.30)),
    ("claude-3-5-sonnet", Price::new(3.00, 15.00, 0.30)),
    ("claude-3-5-haiku", Price::new(0.80, 4.00, 0.08)),
];

/// The price of `model`: the configured table first (exact name), then the
/// built-in one (longest matching prefix). `None` for unknown models.
pub fn price_of(model: &str, configured: &BTreeMap<String, Price>) -> Option<Price> {
    if let Some(price) = configured.get(model) {
        return Some(*price);
    }
    KNOWN
        .iter()
        .filter(|(name, _)| model.starts_with(name))
        .max_by_key(|(name, _)| name.len())
        .map(|(_, price)| *price)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64, cached: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cached_tokens: cached,
        }
    }

    #[test]
    fn cached_input_is_billed_at_the_cached_price() {
        let price = Price::new(2.0, 8.0, 0.5);
        // 1M input of which 400k cached, 100k output.
        let cost = price.cost(&usage(1_000_000, 100_000, 400_000));
        assert!(
            (cost - (0.6 * 2.0 + 0.4 * 0.5 + 0.1 * 8.0)).abs() < 1e-9,
            "{cost}"
        );
    }

    #[test]
    fn dated_snapshots_find_their_family_and_the_longest_prefix_wins() {
        let none = BTreeMap::new();
        assert_eq!(
            price_of("claude-sonnet-4-20250514", &none),
            Some(Price::new(3.0, 15.0, 0.3))
        );
        assert_eq!(
            price_of("gpt-4o-mini-2024-07-18", &none),
            Some(Price::new(0.15, 0.60, 0.075))
        );
        assert_eq!(
            price_of("gpt-4o-2024-08-06", &none),
            Some(Price::new(2.50, 10.00, 1.25))
        );
    }

    #[test]
    fn unknown_models_have_no_price_unless_configured() {
        let mut configured = BTreeMap::new();
        assert_eq!(price_of("qwen2.5-coder", &configured), None);
        configured.insert(
            "qwen2.5-coder".to_string(),
            Price {
                input_per_mtok: 0.1,
                output_per_mtok: 0.2,
                cached_per_mtok: None,
            },
        );
        let price = price_of("qwen2.5-coder", &configured).unwrap();
        assert!((price.cost(&usage(1_000_000, 1_000_000, 500_000)) - 0.3).abs() < 1e-9);
    }
}
