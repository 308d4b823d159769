//! What is left to do when the provider says a request does not fit its
//! context and compaction cannot help: cut the newest tool results
//! head-and-tail (the style of `exec_command`'s output cap, with a note the
//! model reads), and otherwise name the biggest parts of the request for the
//! turn's stop message. A fingerprint of the history lets the driver refuse
//! to send a request that already overflowed.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use super::{message_chars, Projection};
use crate::provider::ModelMessage;
use crate::vocab::event::ShrunkResult;

/// The least of a result that a cut keeps: its first and last lines are
/// what a model most often needs (a file's head, a command's last error).
pub const MIN_KEPT_BYTES: usize = 1024;

/// A cut that would save less than this is not worth a retry.
const MIN_SAVED_BYTES: usize = 256;

/// The first `keep / 2` and the last `keep - keep / 2` bytes of `text`,
/// cut at character boundaries, with the elided middle named. `text` within
/// `keep` comes back whole.
pub fn cut_head_tail(text: &str, keep: usize) -> String {
    if text.len() <= keep {
        return text.to_string();
    }
    let head = text.floor_char_boundary(keep / 2);
    let tail = text.ceil_char_boundary(text.len() - (keep - head));
    let elided = tail - head;
    format!(
        "{}\n[... {elided} bytes elided: this result did not fit the model's context window; \
         ask for a narrower part of it (a line range, a tighter pattern, less output) to see them ...]\n{}",
        &text[..head],
        &text[tail..]
    )
}

/// One part of a request, for the stop message: what it is and its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestItem {
    pub label: String,
    pub chars: usize,
}

impl Projection {
    /// The tool results after the last assistant message (those the model
    /// is about to read), as (index, call id, size).
    fn newest_results(&self) -> Vec<(usize, String, usize)> {
        let start = self
            .messages
            .iter()
            .rposition(|m| !matches!(**m, ModelMessage::Tool { .. }))
            .map_or(0, |i| i + 1);
        (start..self.messages.len())
            .filter_map(|i| match self.messages[i].message() {
                ModelMessage::Tool { call_id, content } => {
                    Some((i, call_id.clone(), content.len()))
                }
                _ => None,
            })
            .collect()
    }

    /// The cuts that bring the newest tool results within what is left of
    /// `budget_chars` after the rest of the history: the results share it
    /// evenly (a result under its share keeps all of it, and leaves the
    /// rest to the others), none is cut below [`MIN_KEPT_BYTES`], and a
    /// cut that saves too little is left out. Empty when nothing can be cut.
    pub fn shrink_plan(&self, budget_chars: usize) -> Vec<ShrunkResult> {
        let results = self.newest_results();
        let block: usize = results.iter().map(|(_, _, len)| len).sum();
        let rest = self.chars.saturating_sub(block);
        let mut room = budget_chars.saturating_sub(rest);
        let mut by_size: Vec<&(usize, String, usize)> = results.iter().collect();
        by_size.sort_by_key(|(_, _, len)| *len);
        let mut plan = Vec::new();
        for (n, (_, call_id, len)) in by_size.iter().enumerate() {
            let share = (room / (by_size.len() - n)).max(MIN_KEPT_BYTES);
            if *len <= share + MIN_SAVED_BYTES {
                room = room.saturating_sub(*len);
                continue;
            }
            room = room.saturating_sub(share);
            plan.push(ShrunkResult {
                call_id: call_id.clone(),
                from_bytes: *len,
                kept_bytes: share,
            });
        }
        plan
    }

    /// Applies a `results_shrunk` event: each named result, found in the
    /// newest block (or anywhere, for an old log), is cut head-and-tail.
    pub(super) fn apply_shrunk(&mut self, results: &[ShrunkResult]) {
        for cut in results {
            let Some(at) = self.messages.iter().rposition(
                |m| matches!(&**m, ModelMessage::Tool { call_id, .. } if *call_id == cut.call_id),
            ) else {
                continue;
            };
            let before = message_chars(&self.messages[at]);
            if let ModelMessage::Tool { content, .. } = self.messages[at].message_mut() {
                *content = cut_head_tail(content, cut.kept_bytes);
            }
            let after = message_chars(&self.messages[at]);
            self.chars = self.chars - before + after;
            self.checked.touched(at);
        }
    }

    /// The `n` biggest parts of the history, biggest first, named so a
    /// user can tell them apart (`user message 1`, `tool result read_file
    /// [call_1]`, ...).
    pub fn biggest_items(&self, n: usize) -> Vec<RequestItem> {
        let mut users = 0;
        let mut assistants = 0;
        let mut items: Vec<RequestItem> = self
            .messages
            .iter()
            .map(|m| {
                let label = match m.message() {
                    ModelMessage::System { .. } => "system prompt".to_string(),
                    ModelMessage::User { .. } => {
                        users += 1;
                        format!("user message {users}")
                    }
                    ModelMessage::Assistant { .. } => {
                        assistants += 1;
                        format!("assistant message {assistants}")
                    }
                    ModelMessage::Tool { call_id, .. } => match self.tool_name(call_id) {
                        Some(name) => format!("tool result {name} [{call_id}]"),
                        None => format!("tool result [{call_id}]"),
                    },
                };
                RequestItem {
                    label,
                    chars: message_chars(m),
                }
            })
            .collect();
        items.sort_by_key(|item| std::cmp::Reverse(item.chars));
        items.truncate(n);
        items
    }

    fn tool_name(&self, call_id: &str) -> Option<&str> {
        self.messages.iter().rev().find_map(|m| match m.message() {
            ModelMessage::Assistant { tool_calls, .. } => tool_calls
                .iter()
                .find(|c| c.id == call_id)
                .map(|c| c.name.as_str()),
            _ => None,
        })
    }

    /// A hash of everything the history sends: two requests with the same
    /// fingerprint (and the same tools) are the same request.
    pub fn fingerprint(&self) -> u64 {
        let mut hasher = DefaultHasher::new();
        for message in &self.messages {
            match message.message() {
                ModelMessage::System { text } => (0u8, text).hash(&mut hasher),
                ModelMessage::User { text, images } => {
                    (1u8, text).hash(&mut hasher);
                    for image in images {
                        image.sha256.hash(&mut hasher);
                    }
                }
                ModelMessage::Assistant {
                    text,
                    thinking,
                    tool_calls,
                } => {
                    (2u8, text).hash(&mut hasher);
                    thinking.as_ref().map(|t| &t.text).hash(&mut hasher);
                    for call in tool_calls {
                        (&call.id, &call.name, &call.arguments).hash(&mut hasher);
                    }
                }
                ModelMessage::Tool { call_id, content } => {
                    (3u8, call_id, content).hash(&mut hasher)
                }
            }
        }
        hasher.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::event::{Event, FinishReason, ToolCallRequest, ToolStatus, Usage};

    fn history(outputs: &[(&str, String)]) -> Vec<Event> {
        let mut events = vec![Event::AssistantMessage {
            turn_id: "t1".into(),
            step: 1,
            attempt: 1,
            provider: "openai".into(),
            model: "m".into(),
            text: String::new(),
            thinking: None,
            tool_calls: outputs
                .iter()
                .map(|(id, _)| ToolCallRequest {
                    id: id.to_string(),
                    name: "read_file".into(),
                    arguments: "{}".into(),
                })
                .collect(),
            finish_reason: FinishReason::ToolCalls,
            usage: Usage::default(),
        }];
        events.extend(outputs.iter().map(|(id, output)| Event::ToolResult {
            turn_id: "t1".into(),
            call_id: id.to_string(),
            status: ToolStatus::Completed,
            output: output.clone(),
        }));
        events
    }

    #[test]
    fn a_cut_keeps_head_and_tail_at_char_boundaries_and_says_what_it_dropped() {
        let text = format!("HEAD{}TAIL", "€".repeat(1000));
        let cut = cut_head_tail(&text, 100);
        assert!(cut.starts_with("HEAD") && cut.ends_with("TAIL"), "{cut}");
        assert!(cut.contains("bytes elided: this result did not fit the model's context window"));
        assert_eq!(cut_head_tail("short", 100), "short");
    }

    #[test]
    fn the_plan_cuts_only_the_big_results_and_lets_small_ones_be() {
        let events = history(&[("small", "s".repeat(500)), ("big", "b".repeat(50_000))]);
        let mut projection = Projection::from_events("sys".into(), &events);
        let plan = projection.shrink_plan(4_000);
        assert_eq!(plan.len(), 1, "{plan:?}");
        assert_eq!(plan[0].call_id, "big");
        assert!(plan[0].kept_bytes < 4_000 && plan[0].kept_bytes >= MIN_KEPT_BYTES);
        let before = projection.fingerprint();
        projection.apply_shrunk(&plan);
        assert_ne!(projection.fingerprint(), before);
        assert!(projection.estimated_tokens() * 4 < 6_000);
        assert!(
            projection.shrink_plan(4_000).is_empty(),
            "cut once, nothing more to cut for the same budget"
        );
    }

    #[test]
    fn a_reloaded_log_folds_the_cut_into_the_same_history() {
        let mut events = history(&[("big", "b".repeat(20_000))]);
        let mut live = Projection::from_events("sys".into(), &events);
        let plan = live.shrink_plan(3_000);
        assert_eq!(plan.len(), 1);
        let shrunk = Event::ResultsShrunk {
            turn_id: "t1".into(),
            step: 2,
            results: plan,
        };
        live.apply(&shrunk);
        events.push(shrunk);
        let reloaded = Projection::from_events("sys".into(), &events);
        assert_eq!(reloaded.fingerprint(), live.fingerprint());
        assert_eq!(reloaded.estimated_tokens(), live.estimated_tokens());
    }

    #[test]
    fn results_at_the_floor_cannot_be_cut_and_the_biggest_items_are_named() {
        let events = history(&[("c1", "x".repeat(900))]);
        let projection = Projection::from_events("a long system prompt".repeat(10), &events);
        assert!(projection.shrink_plan(0).is_empty());
        let items = projection.biggest_items(2);
        assert_eq!(items[0].label, "tool result read_file [c1]");
        assert_eq!(items[0].chars, 900 + 2);
        assert_eq!(items[1].label, "system prompt");
    }
}
