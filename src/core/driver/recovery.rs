//! The typed recovery policy around a provider call: each failure kind
//! has a recovery (back off and retry, shrink and retry, or fail at once)
//! and a retry bucket; every failed attempt is recorded before the retry.
//! A request the provider said does not fit is never sent again
//! (`overflow.rs` makes it smaller or stops the turn).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use super::overflow::OverflowFix;
use super::stream::AttemptFailure;
use super::turn::{Turn, TurnEnd};
use crate::config::LimitsConfig;
use crate::provider::{Completion, ErrorKind};
use crate::vocab::event::{Event, StopReason};

/// What the recovery policy does with a failure kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// Wait (exponential backoff with jitter, or `Retry-After`) and retry.
    BackoffRetry,
    /// Make the request smaller (cut the newest results, or compact the
    /// history), then retry at once; stop when nothing can shrink.
    CompactRetry,
    /// Give up at once: retrying cannot help.
    Fail,
}

/// The recovery hint and retry bucket size of each failure kind.
pub fn recovery_policy(kind: ErrorKind) -> (Recovery, u32) {
    match kind {
        ErrorKind::RateLimited => (Recovery::BackoffRetry, 4),
        ErrorKind::Overloaded => (Recovery::BackoffRetry, 3),
        ErrorKind::StreamDropped | ErrorKind::StreamStalled => (Recovery::BackoffRetry, 3),
        // Summarize the history harder and try again.
        ErrorKind::ContextOverflow => (Recovery::CompactRetry, 2),
        // A refused connection is a configuration problem, not a blip: say
        // so at once instead of making the user wait through backoff.
        ErrorKind::Connect => (Recovery::Fail, 0),
        ErrorKind::Auth | ErrorKind::BadRequest | ErrorKind::Protocol => (Recovery::Fail, 0),
    }
}

/// Delay before retry number `retry` (1-based).
pub(super) fn backoff_delay(
    limits: &LimitsConfig,
    retry: u32,
    retry_after: Option<Duration>,
) -> Duration {
    if let Some(after) = retry_after {
        return after.min(Duration::from_secs(300));
    }
    let base = limits.retry_base_delay_ms as f64 * 2f64.powi(retry.saturating_sub(1) as i32);
    let capped = base.min(limits.retry_max_delay_ms as f64);
    // Jitter in [0.75, 1.25) keeps many clients from retrying in lockstep.
    let jittered = capped * (0.75 + fastrand::f64() * 0.5);
    Duration::from_millis(jittered as u64)
}

impl Turn<'_> {
    /// One provider call, with retries per the recovery policy.
    pub(super) async fn call_model(&mut self, step: u32) -> Result<(Completion, u32), TurnEnd> {
        let mut failures: HashMap<ErrorKind, u32> = HashMap::new();
        let mut attempt = 0;
        // Requests the provider said do not fit: none is sent twice.
        let mut overflowed: HashSet<u64> = HashSet::new();
        let mut shrunk_this_step = false;
        loop {
            self.check_budget()?;
            if !overflowed.is_empty() && overflowed.contains(&self.projection.fingerprint()) {
                return Err(self.context_exhausted(
                    "making it smaller changed nothing",
                    "the same request did not fit before",
                ));
            }
            attempt += 1;
            let (error, streamed) = match self.attempt(step, attempt).await {
                Ok(completion) => return Ok((completion, attempt)),
                Err(AttemptFailure::Cancelled) => return Err(TurnEnd::cancelled()),
                Err(AttemptFailure::Provider { error, streamed }) => (error, streamed),
            };
            let failed = failures.entry(error.kind).or_insert(0);
            *failed += 1;
            let (recovery, bucket) = recovery_policy(error.kind);
            let mut retry = recovery != Recovery::Fail && *failed <= bucket;
            let failed = *failed;
            // An overflow is retried only once the request is smaller.
            let overflow_fix = (recovery == Recovery::CompactRetry).then(|| {
                overflowed.insert(self.projection.fingerprint());
                self.overflow_fix(&error.message, failed, shrunk_this_step)
            });
            if matches!(overflow_fix, Some(OverflowFix::Nothing)) {
                retry = false;
            }
            *self
                .failures
                .entry(error.kind.as_str().to_string())
                .or_insert(0) += 1;
            // One budget across every kind and step of the turn, on top of
            // the buckets: a 429, then a reset, then a 5xx must not retry
            // up to the sum of all buckets.
            let max_retries = self.limits.max_retries_per_turn;
            let budget_spent = retry && max_retries > 0 && self.retries >= max_retries;
            if budget_spent {
                retry = false;
            } else if retry {
                self.retries += 1;
            }
            self.session.log.append(Event::AttemptFailed {
                turn_id: self.turn_id.clone(),
                step,
                attempt,
                error_kind: error.kind.as_str().to_string(),
                message: error.message.clone(),
                retry,
                streamed,
            });
            if budget_spent {
                self.record(Event::RetryBudgetSpent {
                    turn_id: self.turn_id.clone(),
                    retries: self.retries,
                    max_retries,
                    errors: self.failures.clone(),
                });
                return Err(TurnEnd::new(
                    StopReason::Error,
                    format!(
                        "retry budget spent: {} retries in this turn (max_retries_per_turn = {max_retries}); failures seen: {}; last: {}",
                        self.retries,
                        failure_counts(&self.failures),
                        error.message
                    ),
                ));
            }
            if !retry && recovery == Recovery::CompactRetry {
                let why = match overflow_fix {
                    Some(OverflowFix::Nothing) if failed == 1 => {
                        "nothing in it can be shrunk".to_string()
                    }
                    Some(OverflowFix::Nothing) => {
                        format!("nothing more in it can be shrunk after {failed} attempts")
                    }
                    _ => format!("it still did not fit after {failed} attempts to shrink it"),
                };
                return Err(self.context_exhausted(&why, &error.message));
            }
            if !retry {
                let message = if recovery == Recovery::Fail {
                    error.message
                } else {
                    format!(
                        "{} after {failed} attempts: {}",
                        error.kind.as_str(),
                        error.message
                    )
                };
                return Err(TurnEnd::new(StopReason::Error, message));
            }
            if let Some(fix) = overflow_fix {
                shrunk_this_step |= matches!(fix, OverflowFix::Shrink(_));
                self.apply_overflow_fix(step, fix).await?;
                continue;
            }
            let delay = backoff_delay(self.limits, failed, error.retry_after);
            tracing::info!(
                kind = error.kind.as_str(),
                ?delay,
                "retrying model call: {}",
                error.message
            );
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = self.cancel.cancelled() => return Err(TurnEnd::cancelled()),
            }
        }
    }
}

/// `3 overloaded, 1 rate_limited`: failures by kind, in name order.
fn failure_counts(failures: &std::collections::BTreeMap<String, u32>) -> String {
    failures
        .iter()
        .map(|(kind, n)| format!("{n} {kind}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_honours_retry_after() {
        let limits = LimitsConfig::default();
        for retry in 1..=3u32 {
            let base = 1000.0 * 2f64.powi(retry as i32 - 1);
            let delay = backoff_delay(&limits, retry, None).as_millis() as f64;
            assert!(
                delay >= base * 0.75 && delay < base * 1.25,
                "retry {retry}: {delay}"
            );
        }
        assert_eq!(
            backoff_delay(&limits, 1, Some(Duration::from_secs(7))),
            Duration::from_secs(7)
        );
        let capped = backoff_delay(&limits, 30, None).as_millis() as f64;
        assert!(capped < 30_000.0 * 1.25);
    }

    #[test]
    fn recovery_policy_fails_fast_on_auth_and_bad_requests() {
        assert_eq!(recovery_policy(ErrorKind::Auth), (Recovery::Fail, 0));
        assert_eq!(recovery_policy(ErrorKind::BadRequest), (Recovery::Fail, 0));
        assert_eq!(
            recovery_policy(ErrorKind::RateLimited),
            (Recovery::BackoffRetry, 4)
        );
    }
}
