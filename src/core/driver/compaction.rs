//! Keeping the history within the context window: tier-2 compaction
//! (the model summarizes the oldest part; if that fails, it is dropped) and
//! the repair pipeline. Each is recorded as an event, so replay rebuilds
//! the same model context.

use super::stream::{stream_completion, AttemptFailure};
use super::turn::{Turn, TurnEnd};
use crate::core::ledger::FileFacts;
use crate::core::projection::RepairLimits;
use crate::provider::{
    CachedMessage, Completion, ErrorKind, ModelMessage, ModelRequest, ProviderError,
};
use crate::vocab::event::{Event, StopReason, Usage};

/// The summarizer's instructions (tier-2 compaction).
const SUMMARY_PROMPT: &str = "You are compacting the history of a coding session so it can continue in a \
smaller context. Summarize the transcript you are given: the user's goals and constraints, decisions made, \
files read or changed (with paths), commands run and their outcomes, errors met, and what remains to do. \
Be specific and concise; keep names, paths and numbers exact. Answer with the summary only.";

impl Turn<'_> {
    /// Tier-2 compaction: when the request would fill more than
    /// `compact_threshold` of the context window, summarize the oldest part.
    pub(super) async fn compact_if_needed(&mut self, step: u32) {
        let window = self.model.config.context_window.max(1);
        let used = self.projection.estimated_tokens() as f64 / window as f64;
        if used > self.limits.compact_threshold {
            let why = format!(
                "the history fills {:.0}% of the {window}-token context window",
                used * 100.0
            );
            self.compact(step, self.limits.compact_keep_ratio, &why)
                .await;
        }
    }

    /// Summarizes everything but the head and the most recent messages
    /// (within `keep_ratio` of the window) with the model; if that fails,
    /// drops them instead. Either way the result is a `compacted` event.
    pub(super) async fn compact(&mut self, step: u32, keep_ratio: f64, why: &str) {
        let window = self.model.config.context_window as f64;
        let keep_chars = (window * keep_ratio * 4.0) as usize;
        let Some(plan) = self.projection.compaction_plan(keep_chars) else {
            tracing::info!(
                "compaction wanted ({why}) but there is nothing old enough to summarize"
            );
            return;
        };
        tracing::info!(removed = plan.to - plan.from, "compacting: {why}");
        let transcript = self.projection.transcript(plan);
        let (summary, error, usage) = match self.summarize(step, transcript).await {
            Ok(done) if !done.text.trim().is_empty() => {
                (Some(self.with_ledger(done.text.trim())), None, done.usage)
            }
            Ok(done) => (None, Some("the summary was empty".to_string()), done.usage),
            Err(e) => {
                tracing::warn!("summarizing failed, dropping the oldest messages instead: {e}");
                (None, Some(e.message), Usage::default())
            }
        };
        // Without a summary the ledger goes into the log on its own, so the
        // model still knows which files it changed and must re-read.
        let ledger = if summary.is_none() {
            self.ledger_text()
        } else {
            None
        };
        self.usage.add(&usage);
        self.session_usage.add(&usage);
        self.record(Event::Compacted {
            turn_id: self.turn_id.clone(),
            summary,
            removed: plan.to - plan.from,
            keep_last: plan.keep_last,
            error,
            ledger,
            usage,
        });
        self.charge(&usage);
        let used = self.projection.estimated_tokens();
        self.record_usage(usage, used);
        // Progress (answer text, a completed tool call) moves
        // `last_progress`; if it has not moved since the last compaction,
        // this one made no headway either.
        if self.progress_at_compaction == Some(self.last_progress) {
            self.compactions_without_progress += 1;
        } else {
            self.compactions_without_progress = 1;
            self.progress_at_compaction = Some(self.last_progress);
        }
    }

    /// The summary with the file ledger appended verbatim: the model's
    /// summary may lose paths, the ledger does not.
    fn with_ledger(&self, summary: &str) -> String {
        match self.ledger_text() {
            Some(ledger) => format!("{summary}\n\n{ledger}"),
            None => summary.to_string(),
        }
    }

    /// The file ledger as the model reads it, with each file's size and
    /// whether the user has unsaved changes now; `None` when empty.
    fn ledger_text(&self) -> Option<String> {
        let buffers = &self.buffers;
        let workspace = &self.env.workspace;
        let facts = |path: &str| {
            let path = workspace.resolve(path).ok()?;
            let on_disk = std::fs::read_to_string(&path).ok();
            let size = std::fs::metadata(&path).ok().map(|m| m.len());
            let unsaved = buffers
                .snapshot(&path)
                .is_some_and(|open| on_disk.as_deref() != Some(open.rope.to_string().as_str()));
            Some(FileFacts { size, unsaved })
        };
        self.projection.ledger().render(facts)
    }

    /// The compaction-spiral stop: `Some` once the turn has compacted
    /// `max_compactions_without_progress` times with no progress between.
    pub(super) fn compaction_spiral(&self) -> Option<TurnEnd> {
        let max = self.limits.max_compactions_without_progress;
        let done = self.compactions_without_progress;
        (max > 0 && done >= max).then(|| {
            TurnEnd::new(
                StopReason::CompactionSpiral,
                format!(
                    "stopped after {done} compactions without progress (max_compactions_without_progress = {max})"
                ),
            )
        })
    }

    /// One summarization call: no tools, the stream timeouts of a step.
    async fn summarize(&self, step: u32, transcript: String) -> Result<Completion, ProviderError> {
        let messages = [
            CachedMessage::new(ModelMessage::System {
                text: SUMMARY_PROMPT.to_string(),
            }),
            CachedMessage::new(ModelMessage::user(transcript)),
        ];
        let request = ModelRequest {
            messages: &messages,
            tools: &[],
            max_output_tokens: Some(2048),
        };
        let input_tokens = (messages[1].len_hint() / 4) as u64;
        // A summary is a model call like any other: it is not made if it
        // could cross a cap (the history is dropped instead, and the next
        // call stops the turn).
        if let Some(crossed) = self.cap_crossed(input_tokens, 2048) {
            return Err(ProviderError::new(
                ErrorKind::BadRequest,
                super::budget::stop_message(&crossed),
            ));
        }
        self.session.log.append(Event::ModelRequest {
            turn_id: self.turn_id.clone(),
            step,
            attempt: 0,
            purpose: "compaction".to_string(),
            provider: self.provider.name().to_string(),
            model: self.provider.model().to_string(),
            messages: messages.len(),
            tools: 0,
            estimated_input_tokens: input_tokens,
        });
        stream_completion(
            self.provider.as_ref(),
            request,
            self.limits,
            input_tokens,
            &self.cancel,
            // A summary shows nothing to the client: nothing to wait for.
            None,
            |_| {},
        )
        .await
        .map_err(|failure| match failure {
            AttemptFailure::Cancelled => ProviderError::new(ErrorKind::StreamDropped, "cancelled"),
            AttemptFailure::Provider { error, .. } => error,
        })
    }

    /// Runs the message-repair pipeline and logs each repair that fired.
    pub(super) fn repair_history(&mut self) {
        let limits = RepairLimits {
            context_window: self.model.config.context_window,
            ..RepairLimits::default()
        };
        for repair in self.projection.repair(limits) {
            tracing::info!(
                repair = repair.repair,
                "history repaired: {}",
                repair.reason
            );
            self.session.log.append(Event::HistoryRepaired {
                turn_id: self.turn_id.clone(),
                repair: repair.repair.to_string(),
                reason: repair.reason,
            });
        }
    }
}
