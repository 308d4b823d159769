//! The message-repair pipeline, run before every provider call: merges
//! system messages, fixes call ids, pairs every call with exactly one result,
//! shortens old results and trims to the context window, keeping the head
//! and the last prompt. It only reads when nothing is wrong, and reports
//! each repair it made.

use super::{message_chars, Projection};
use crate::provider::ModelMessage;

/// One repair the pipeline made, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    /// Stable name: `merge_system`, `drop_orphan_results`, `reorder_results`,
    /// `synthesize_missing_results`, `fix_call_ids`, `shorten_old_results`,
    /// `trim_to_context`.
    pub repair: &'static str,
    pub reason: String,
}

/// Settings of the repair pipeline.
#[derive(Debug, Clone, Copy)]
pub struct RepairLimits {
    /// The model's context window in tokens.
    pub context_window: u64,
    /// Tool results newer than this many stay in full.
    pub keep_recent_results: usize,
    /// Older results longer than this (bytes) are shortened to it.
    pub shorten_results_to: usize,
}

impl Default for RepairLimits {
    fn default() -> Self {
        RepairLimits {
            context_window: 128_000,
            keep_recent_results: 8,
            shorten_results_to: 2_000,
        }
    }
}

/// Text that replaces the result of a call whose result is missing.
pub const RESULT_UNAVAILABLE: &str = "[result unavailable]";

fn valid_call_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl Projection {
    /// The message-repair pipeline, run before every provider call. Fixes
    /// the history in place so that any provider accepts it, and says what
    /// it did. When nothing is wrong it only reads (no allocation of
    /// message text).
    pub fn repair(&mut self, limits: RepairLimits) -> Vec<Repair> {
        let mut repairs = Vec::new();
        self.merge_system_messages(&mut repairs);
        self.fix_call_ids(&mut repairs);
        self.pair_tool_results(&mut repairs);
        self.shorten_old_results(limits, &mut repairs);
        self.trim_to_context(limits, &mut repairs);
        if !repairs.is_empty() {
            self.chars = self.messages.iter().map(message_chars).sum();
        }
        repairs
    }

    fn merge_system_messages(&mut self, repairs: &mut Vec<Repair>) {
        let extra = self
            .messages
            .iter()
            .enumerate()
            .filter(|(i, m)| *i > 0 && matches!(m, ModelMessage::System { .. }))
            .count();
        let first_is_system = matches!(self.messages.first(), Some(ModelMessage::System { .. }));
        if extra == 0 && first_is_system {
            return;
        }
        let mut texts = Vec::new();
        self.messages.retain(|m| match m {
            ModelMessage::System { text } => {
                texts.push(text.clone());
                false
            }
            _ => true,
        });
        if texts.is_empty() {
            return;
        }
        let count = texts.len();
        self.messages.insert(
            0,
            ModelMessage::System {
                text: texts.join("\n\n"),
            },
        );
        repairs.push(Repair {
            repair: "merge_system",
            reason: format!("{count} system messages merged into one leading system message"),
        });
    }

    /// Whether every tool-call id is valid and unique (borrowing only).
    fn call_ids_ok(&self) -> bool {
        let mut seen = std::collections::HashSet::new();
        self.messages.iter().all(|m| match m {
            ModelMessage::Assistant { tool_calls, .. } => tool_calls
                .iter()
                .all(|c| valid_call_id(&c.id) && seen.insert(c.id.as_str())),
            _ => true,
        })
    }

    fn fix_call_ids(&mut self, repairs: &mut Vec<Repair>) {
        if self.call_ids_ok() {
            return;
        }
        let mut seen = std::collections::HashSet::new();
        let mut renamed = 0;
        let mut next = 0usize;
        for i in 0..self.messages.len() {
            let ModelMessage::Assistant { tool_calls, .. } = &mut self.messages[i] else {
                continue;
            };
            let mut renames: Vec<(String, String)> = Vec::new();
            for call in tool_calls.iter_mut() {
                if valid_call_id(&call.id) && !seen.contains(&call.id) {
                    seen.insert(call.id.clone());
                    continue;
                }
                let mut base: String = call
                    .id
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                            c
                        } else {
                            '_'
                        }
                    })
                    .take(48)
                    .collect();
                if base.is_empty() {
                    base = "call".to_string();
                }
                let new_id = loop {
                    next += 1;
                    let candidate = format!("{base}_{next}");
                    if !seen.contains(&candidate) {
                        break candidate;
                    }
                };
                seen.insert(new_id.clone());
                renames.push((call.id.clone(), new_id.clone()));
                call.id = new_id;
                renamed += 1;
            }
            // The results that answer a renamed call follow it: rename the
            // first result with the old id after this message.
            for (old, new) in renames {
                if let Some(ModelMessage::Tool { call_id, .. }) = self.messages[i + 1..]
                    .iter_mut()
                    .find(|m| matches!(m, ModelMessage::Tool { call_id, .. } if *call_id == old))
                {
                    *call_id = new;
                }
            }
        }
        if renamed > 0 {
            repairs.push(Repair {
                repair: "fix_call_ids",
                reason: format!("{renamed} tool-call ids were duplicated or invalid for the provider and were renamed"),
            });
        }
    }

    /// Puts each tool result right after the assistant message that made
    /// the call, drops results that answer no call, and synthesizes
    /// results for calls that have none.
    fn pair_tool_results(&mut self, repairs: &mut Vec<Repair>) {
        if self.results_well_paired() {
            return;
        }
        let mut results: std::collections::HashMap<String, ModelMessage> =
            std::collections::HashMap::new();
        let mut orphans = 0;
        let mut duplicates = 0;
        let call_ids: std::collections::HashSet<String> = self
            .messages
            .iter()
            .flat_map(|m| match m {
                ModelMessage::Assistant { tool_calls, .. } => {
                    tool_calls.iter().map(|c| c.id.clone()).collect()
                }
                _ => Vec::new(),
            })
            .collect();
        let moved = self.results_out_of_place(&call_ids);
        let mut rest = Vec::with_capacity(self.messages.len());
        for message in self.messages.drain(..) {
            match message {
                ModelMessage::Tool { ref call_id, .. } => {
                    if !call_ids.contains(call_id) {
                        orphans += 1;
                    } else if results.contains_key(call_id) {
                        duplicates += 1;
                    } else {
                        results.insert(call_id.clone(), message);
                    }
                }
                other => rest.push(other),
            }
        }
        let mut synthesized = 0;
        let mut out = Vec::with_capacity(rest.len() + results.len());
        for message in rest {
            let calls: Vec<String> = match &message {
                ModelMessage::Assistant { tool_calls, .. } => {
                    tool_calls.iter().map(|c| c.id.clone()).collect()
                }
                _ => Vec::new(),
            };
            out.push(message);
            for id in calls {
                match results.remove(&id) {
                    Some(result) => out.push(result),
                    None => {
                        synthesized += 1;
                        out.push(ModelMessage::Tool {
                            call_id: id,
                            content: RESULT_UNAVAILABLE.to_string(),
                        });
                    }
                }
            }
        }
        self.messages = out;
        if orphans > 0 || duplicates > 0 {
            repairs.push(Repair {
                repair: "drop_orphan_results",
                reason: format!("{orphans} tool results answered no call and {duplicates} answered a call twice; dropped"),
            });
        }
        if synthesized > 0 {
            repairs.push(Repair {
                repair: "synthesize_missing_results",
                reason: format!(
                    "{synthesized} tool calls had no result; `{RESULT_UNAVAILABLE}` supplied"
                ),
            });
        }
        if moved {
            repairs.push(Repair {
                repair: "reorder_results",
                reason: "tool results moved to follow the assistant message that called them"
                    .to_string(),
            });
        }
    }

    /// Whether some answering tool result is not in the block of tool
    /// messages right after the assistant message that made its call.
    fn results_out_of_place(&self, call_ids: &std::collections::HashSet<String>) -> bool {
        let mut block_calls: Option<&Vec<crate::vocab::event::ToolCallRequest>> = None;
        for message in &self.messages {
            match message {
                ModelMessage::Assistant { tool_calls, .. } => block_calls = Some(tool_calls),
                ModelMessage::Tool { call_id, .. } => {
                    let in_block =
                        block_calls.is_some_and(|calls| calls.iter().any(|c| c.id == *call_id));
                    if call_ids.contains(call_id) && !in_block {
                        return true;
                    }
                }
                _ => block_calls = None,
            }
        }
        false
    }

    /// True when every assistant message's calls are answered, in order,
    /// by the tool messages right after it, and no tool message is extra.
    fn results_well_paired(&self) -> bool {
        let mut i = 0;
        while i < self.messages.len() {
            match &self.messages[i] {
                ModelMessage::Assistant { tool_calls, .. } => {
                    for call in tool_calls {
                        i += 1;
                        match self.messages.get(i) {
                            Some(ModelMessage::Tool { call_id, .. }) if *call_id == call.id => {}
                            _ => return false,
                        }
                    }
                }
                ModelMessage::Tool { .. } => return false,
                _ => {}
            }
            i += 1;
        }
        true
    }

    fn shorten_old_results(&mut self, limits: RepairLimits, repairs: &mut Vec<Repair>) {
        let mut seen = 0;
        let mut shortened = 0;
        let mut saved = 0;
        for message in self.messages.iter_mut().rev() {
            let ModelMessage::Tool { content, .. } = message else {
                continue;
            };
            seen += 1;
            if seen <= limits.keep_recent_results || content.len() <= limits.shorten_results_to {
                continue;
            }
            let cut = content.floor_char_boundary(limits.shorten_results_to);
            let omitted = content.len() - cut;
            content.truncate(cut);
            content.push_str(&format!("\n[... {omitted} bytes of this old result omitted; run the tool again to see them]"));
            shortened += 1;
            saved += omitted;
        }
        if shortened > 0 {
            repairs.push(Repair {
                repair: "shorten_old_results",
                reason: format!(
                    "{shortened} tool results older than the newest {} shortened ({saved} bytes)",
                    limits.keep_recent_results
                ),
            });
        }
    }

    fn trim_to_context(&mut self, limits: RepairLimits, repairs: &mut Vec<Repair>) {
        // Leave a tenth of the window for the answer.
        let budget = (limits.context_window as usize).saturating_mul(4) / 10 * 9;
        let mut total: usize = self.messages.iter().map(message_chars).sum();
        if total <= budget {
            return;
        }
        let last_user = self
            .messages
            .iter()
            .rposition(|m| matches!(m, ModelMessage::User { .. }))
            .unwrap_or(self.messages.len());
        // The system prompt and the first request stay.
        let start = self.head_len().min(last_user);
        // Drop whole units from the oldest: a message plus the tool results
        // that follow it, so no call is separated from its result.
        let mut end = start;
        let mut dropped = 0;
        while total > budget && end < last_user {
            let mut unit_end = end + 1;
            while matches!(self.messages.get(unit_end), Some(ModelMessage::Tool { .. })) {
                unit_end += 1;
            }
            if unit_end > last_user {
                break;
            }
            total -= self.messages[end..unit_end]
                .iter()
                .map(message_chars)
                .sum::<usize>();
            dropped += unit_end - end;
            end = unit_end;
        }
        if dropped == 0 {
            return;
        }
        self.messages.drain(start..end);
        repairs.push(Repair {
            repair: "trim_to_context",
            reason: format!(
                "{dropped} oldest messages dropped to fit the context window of {} tokens",
                limits.context_window
            ),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::event::ToolCallRequest;

    fn assistant(calls: &[&str]) -> ModelMessage {
        ModelMessage::Assistant {
            text: String::new(),
            thinking: None,
            tool_calls: calls
                .iter()
                .map(|id| ToolCallRequest {
                    id: id.to_string(),
                    name: "read_file".into(),
                    arguments: "{}".into(),
                })
                .collect(),
        }
    }

    fn tool(id: &str, content: &str) -> ModelMessage {
        ModelMessage::Tool {
            call_id: id.into(),
            content: content.into(),
        }
    }

    fn user(text: &str) -> ModelMessage {
        ModelMessage::User { text: text.into() }
    }

    fn with(messages: Vec<ModelMessage>) -> Projection {
        let mut p = Projection::new("sys".into());
        p.messages_mut().extend(messages);
        p
    }

    fn names(repairs: &[Repair]) -> Vec<&'static str> {
        repairs.iter().map(|r| r.repair).collect()
    }

    #[test]
    fn a_healthy_history_needs_no_repair() {
        let mut p = with(vec![
            user("q"),
            assistant(&["a"]),
            tool("a", "r"),
            user("q2"),
        ]);
        assert!(p.repair(RepairLimits::default()).is_empty());
    }

    #[test]
    fn system_messages_are_merged_into_one_leading_message() {
        let mut p = with(vec![
            user("q"),
            ModelMessage::System {
                text: "late".into(),
            },
        ]);
        let repairs = p.repair(RepairLimits::default());
        assert_eq!(names(&repairs), vec!["merge_system"]);
        assert_eq!(
            p.messages()[0],
            ModelMessage::System {
                text: "sys\n\nlate".into()
            }
        );
        assert_eq!(p.messages().len(), 2);
    }

    #[test]
    fn results_are_moved_right_after_their_call() {
        let mut p = with(vec![
            user("q"),
            assistant(&["a"]),
            user("interjection"),
            tool("a", "r"),
        ]);
        let repairs = p.repair(RepairLimits::default());
        assert!(names(&repairs).contains(&"reorder_results"));
        assert_eq!(p.messages()[3], tool("a", "r"));
        assert_eq!(p.messages()[4], user("interjection"));
    }

    #[test]
    fn dropping_an_orphan_is_not_reported_as_a_reorder() {
        let mut p = with(vec![
            user("q"),
            assistant(&["a"]),
            tool("a", "r"),
            tool("ghost", "x"),
            user("q2"),
        ]);
        let repairs = p.repair(RepairLimits::default());
        assert_eq!(names(&repairs), vec!["drop_orphan_results"]);
    }

    #[test]
    fn orphan_results_are_dropped() {
        let mut p = with(vec![
            user("q"),
            tool("ghost", "r"),
            assistant(&[]),
            user("q2"),
        ]);
        let repairs = p.repair(RepairLimits::default());
        assert!(names(&repairs).contains(&"drop_orphan_results"));
        assert!(!p
            .messages()
            .iter()
            .any(|m| matches!(m, ModelMessage::Tool { .. })));
    }

    #[test]
    fn calls_without_results_get_a_synthetic_result() {
        let mut p = with(vec![
            user("q"),
            assistant(&["a", "b"]),
            tool("a", "r"),
            user("q2"),
        ]);
        let repairs = p.repair(RepairLimits::default());
        assert!(names(&repairs).contains(&"synthesize_missing_results"));
        assert_eq!(p.messages()[4], tool("b", RESULT_UNAVAILABLE));
    }

    #[test]
    fn duplicate_and_invalid_call_ids_are_made_unique_and_valid() {
        let mut p = with(vec![
            user("q"),
            assistant(&["dup"]),
            tool("dup", "first"),
            assistant(&["dup"]),
            tool("dup", "second"),
            assistant(&["bad id!"]),
            tool("bad id!", "third"),
        ]);
        let repairs = p.repair(RepairLimits::default());
        assert_eq!(names(&repairs), vec!["fix_call_ids"]);
        let ids: Vec<String> = p
            .messages()
            .iter()
            .filter_map(|m| match m {
                ModelMessage::Tool { call_id, .. } => Some(call_id.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(ids[0], "dup");
        assert_ne!(ids[1], "dup");
        assert!(valid_call_id(&ids[2]), "{}", ids[2]);
        // Each result still follows its (renamed) call.
        assert!(p.repair(RepairLimits::default()).is_empty());
    }

    #[test]
    fn old_tool_results_are_shortened_and_recent_ones_kept() {
        let big = "x".repeat(5_000);
        let mut messages = vec![user("q")];
        for i in 0..10 {
            let id = format!("c{i}");
            messages.push(assistant(&[&id]));
            messages.push(tool(&id, &big));
        }
        let mut p = with(messages);
        let repairs = p.repair(RepairLimits::default());
        assert_eq!(names(&repairs), vec!["shorten_old_results"]);
        let lens: Vec<usize> = p
            .messages()
            .iter()
            .filter_map(|m| match m {
                ModelMessage::Tool { content, .. } => Some(content.len()),
                _ => None,
            })
            .collect();
        assert!(lens[0] < 2_200 && lens[1] < 2_200, "{lens:?}");
        assert!(lens[2..].iter().all(|&l| l == 5_000), "{lens:?}");
    }

    #[test]
    fn trimming_drops_oldest_units_and_keeps_pairs_and_last_prompt() {
        let big = "y".repeat(4_000);
        let mut messages = vec![user("old question")];
        for i in 0..6 {
            let id = format!("c{i}");
            messages.push(assistant(&[&id]));
            messages.push(tool(&id, &big));
        }
        messages.push(user("latest"));
        let mut p = with(messages);
        let limits = RepairLimits {
            context_window: 3_000,
            keep_recent_results: 100,
            shorten_results_to: 1_000_000,
        };
        let repairs = p.repair(limits);
        assert_eq!(names(&repairs), vec!["trim_to_context"]);
        assert!(matches!(p.messages()[0], ModelMessage::System { .. }));
        assert_eq!(p.messages().last(), Some(&user("latest")));
        // Every remaining tool result still follows its call.
        assert!(p.results_well_paired());
    }
}
