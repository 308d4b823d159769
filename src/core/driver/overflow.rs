//! Recovery from `context_overflow`: the provider said the request does not
//! fit its context window. The same request is never sent again: first the
//! newest tool results are cut head-and-tail (once per step), else the old
//! history is compacted, else the turn stops with `context_overflow`,
//! naming the biggest parts of the request and their sizes.

use super::turn::{Turn, TurnEnd};
use crate::vocab::event::{Event, ShrunkResult, StopReason};

/// How a request that overflowed is made smaller before its retry.
#[derive(Debug)]
pub(super) enum OverflowFix {
    /// Cut these newest tool results.
    Shrink(Vec<ShrunkResult>),
    /// Summarize the old history, keeping this much of the window.
    Compact { keep_ratio: f64 },
    /// Nothing in the request can be made smaller.
    Nothing,
}

/// The size of the server's context in tokens, when its error says it:
/// OpenAI-compatible servers (`maximum context length is 8192 tokens`),
/// Anthropic (`210000 tokens > 200000 maximum`), llama.cpp (`the available
/// context size (4096 tokens)`).
pub(super) fn server_context_tokens(message: &str) -> Option<u64> {
    let lower = message.to_ascii_lowercase();
    let after = |pattern: &str| {
        let at = lower.find(pattern)? + pattern.len();
        let digits: String = lower[at..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        digits.parse::<u64>().ok()
    };
    let before = |pattern: &str| {
        let at = lower.find(pattern)?;
        let head = lower[..at].trim_end();
        let start = head
            .rfind(|c: char| !c.is_ascii_digit())
            .map_or(0, |i| i + 1);
        head[start..].parse::<u64>().ok()
    };
    after("maximum context length is")
        .or_else(|| before(" maximum"))
        .or_else(|| after("context size ("))
        .filter(|&tokens| tokens > 0)
}

impl Turn<'_> {
    /// What would make the request that just overflowed smaller, without
    /// doing it yet (the failed attempt is logged first, saying whether it
    /// is retried). `shrunk_this_step`: the step's results were cut already.
    pub(super) fn overflow_fix(
        &self,
        provider_message: &str,
        failed: u32,
        shrunk_this_step: bool,
    ) -> OverflowFix {
        if !shrunk_this_step {
            let window_chars = self.model.config.context_window as usize * 4;
            let sent_chars = self.projection.estimated_tokens() as usize * 4;
            // About 4 characters a token, a quarter left for the answer;
            // without the server's figure, half of what did not fit.
            let budget = match server_context_tokens(provider_message) {
                Some(tokens) => tokens as usize * 3,
                None => sent_chars / 2,
            }
            .min(window_chars / 10 * 9);
            let plan = self.projection.shrink_plan(budget);
            if !plan.is_empty() {
                return OverflowFix::Shrink(plan);
            }
        }
        // Each compaction keeps less of the recent history.
        let keep_ratio = self.limits.compact_keep_ratio / f64::from(failed + 1);
        let window = self.model.config.context_window as f64;
        let keep_chars = (window * keep_ratio * 4.0) as usize;
        if self.projection.compaction_plan(keep_chars).is_some() {
            return OverflowFix::Compact { keep_ratio };
        }
        OverflowFix::Nothing
    }

    /// Applies a fix; `Err` when a compaction ends the turn (a spiral).
    pub(super) async fn apply_overflow_fix(
        &mut self,
        step: u32,
        fix: OverflowFix,
    ) -> Result<(), TurnEnd> {
        match fix {
            OverflowFix::Shrink(results) => {
                let saved: usize = results.iter().map(|r| r.from_bytes - r.kept_bytes).sum();
                tracing::info!(
                    results = results.len(),
                    saved,
                    "context overflow: cutting the newest tool results"
                );
                self.record(Event::ResultsShrunk {
                    turn_id: self.turn_id.clone(),
                    step,
                    results,
                });
                Ok(())
            }
            OverflowFix::Compact { keep_ratio } => {
                self.compact(
                    step,
                    keep_ratio,
                    "the provider said the request does not fit the context window",
                )
                .await;
                match self.compaction_spiral() {
                    Some(end) => Err(end),
                    None => Ok(()),
                }
            }
            OverflowFix::Nothing => Ok(()),
        }
    }

    /// The end of a turn whose request does not fit and cannot be made to:
    /// `context_overflow`, naming the biggest parts of the request.
    pub(super) fn context_exhausted(&self, why: &str, provider_message: &str) -> TurnEnd {
        let items: Vec<String> = self
            .projection
            .biggest_items(3)
            .iter()
            .map(|item| {
                format!(
                    "{} ({} chars, about {} tokens)",
                    item.label,
                    item.chars,
                    item.chars / 4
                )
            })
            .collect();
        TurnEnd::new(
            StopReason::ContextOverflow,
            format!(
                "the request does not fit the model's context window and {why}; the biggest parts: {}. \
                 Send less (a smaller file or selection), start a new session, or give the model server \
                 a larger context (the provider said: {provider_message})",
                items.join(", ")
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_context_size_is_read_from_the_common_error_texts() {
        let openai = "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.";
        assert_eq!(server_context_tokens(openai), Some(8192));
        let anthropic = "prompt is too long: 210000 tokens > 200000 maximum";
        assert_eq!(server_context_tokens(anthropic), Some(200000));
        let llama =
            "the request exceeds the available context size (4096 tokens), try increasing it";
        assert_eq!(server_context_tokens(llama), Some(4096));
        assert_eq!(server_context_tokens("request too large"), None);
    }
}
