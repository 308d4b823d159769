//! Compaction of the model's history: plans that never separate a call
//! from its result, the transcript handed to the summarizer, and the
//! replacement of the old part by one summary message. The head (system
//! prompt and first user message) is never compacted away.

use super::{message_chars, Projection};
use crate::provider::{CachedMessage, ModelMessage};

/// What compaction would do: summarize `messages[from..to]` and keep the
/// `keep_last` messages after them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionPlan {
    pub from: usize,
    pub to: usize,
    pub keep_last: usize,
}

/// How a summary appears in the model's context.
pub fn summary_message(summary: Option<&str>, ledger: Option<&str>, removed: usize) -> String {
    match (summary, ledger) {
        (Some(summary), _) => {
            format!("[Summary of the earlier conversation ({removed} messages)]\n{summary}")
        }
        (None, ledger) => {
            let dropped = format!(
                "[{removed} earlier messages were removed to fit the context window; the first request and the most recent work are kept]"
            );
            match ledger {
                Some(ledger) => format!("{dropped}\n\n{ledger}"),
                None => dropped,
            }
        }
    }
}

impl Projection {
    /// Messages kept at the head whatever happens: the system prompt and
    /// the first user message.
    pub(super) fn head_len(&self) -> usize {
        let mut head = usize::from(matches!(
            self.messages.first().map(|m| m.message()),
            Some(ModelMessage::System { .. })
        ));
        if matches!(
            self.messages.get(head).map(|m| m.message()),
            Some(ModelMessage::User { .. })
        ) {
            head += 1;
        }
        head
    }

    /// Plans a compaction that keeps the most recent messages within
    /// `keep_chars` (at least the last message), never starting the kept
    /// part at a tool result, so no call is separated from its result.
    /// `None` when there is nothing between the head and the kept part.
    pub fn compaction_plan(&self, keep_chars: usize) -> Option<CompactionPlan> {
        let head = self.head_len();
        let len = self.messages.len();
        let mut cut = len;
        let mut kept = 0;
        while cut > head {
            let size = message_chars(&self.messages[cut - 1]);
            if kept + size > keep_chars && cut < len {
                break;
            }
            kept += size;
            cut -= 1;
        }
        // The kept part must not start with results whose call is cut off:
        // keep the whole step (the newest results are what the model is
        // about to read).
        while cut > head && cut < len && matches!(*self.messages[cut], ModelMessage::Tool { .. }) {
            cut -= 1;
        }
        (cut > head).then_some(CompactionPlan {
            from: head,
            to: cut,
            keep_last: len - cut,
        })
    }

    /// The messages of a plan as a transcript for the summarizer.
    pub fn transcript(&self, plan: CompactionPlan) -> String {
        let mut out = String::new();
        for message in &self.messages[plan.from..plan.to] {
            let line = match message.message() {
                ModelMessage::System { text } => format!("[system] {text}"),
                ModelMessage::User { text, .. } => format!("[user] {text}"),
                ModelMessage::Assistant {
                    text, tool_calls, ..
                } => {
                    let calls: Vec<String> = tool_calls
                        .iter()
                        .map(|c| format!("{}({})", c.name, c.arguments))
                        .collect();
                    if calls.is_empty() {
                        format!("[assistant] {text}")
                    } else {
                        format!("[assistant] {text} [calls: {}]", calls.join(", "))
                    }
                }
                ModelMessage::Tool { call_id, content } => {
                    format!("[tool result {call_id}] {content}")
                }
            };
            out.push_str(&line);
            out.push_str("\n\n");
        }
        out
    }

    /// Replaces everything between the head and the last `keep_last`
    /// messages with one summary message.
    pub(super) fn compact(
        &mut self,
        summary: Option<&str>,
        ledger: Option<&str>,
        removed: usize,
        keep_last: usize,
    ) {
        let head = self.head_len();
        let len = self.messages.len();
        let cut = len.saturating_sub(keep_last).max(head);
        self.checked.touched(head);
        self.messages.splice(
            head..cut,
            [CachedMessage::new(ModelMessage::user(summary_message(
                summary, ledger, removed,
            )))],
        );
        self.chars = self.messages.iter().map(|m| message_chars(m)).sum();
    }
}
