//! The message-repair pipeline, run before every provider call: merges
//! system messages, fixes call ids, pairs every call with exactly one result,
//! shortens old results and trims to the context window, keeping the head
//! and the last prompt. It only reads when nothing is wrong, and reports
//! each repair it made.
//!
//! Incremental: the structural checks (one leading system message, valid
//! and unique call ids, every call answered right after it) remember how
//! far they passed ([`Checked`]) and look only at the messages added since.
//! Any change before that point resets it; a failed check runs the whole
//! pipeline as before. Either way the history comes out as a pass over all
//! of it would leave it.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use super::{message_chars, Projection};
use crate::provider::{CachedMessage, ModelMessage};

/// How far the structural checks passed on an unchanged prefix.
#[derive(Debug, Clone, Default)]
pub(super) struct Checked {
    /// `messages[..len]` passed, and `len` is where a unit (a message and
    /// the results of its calls) starts.
    len: usize,
    /// Hashes of the call ids in `messages[..len]`. A collision only makes
    /// the check fail, and the full pipeline then compares the ids.
    ids: HashSet<u64>,
    /// Every tool result before this index is older than the newest
    /// `keep_recent_results` and no longer than the limit, for these
    /// (keep, shorten-to) settings.
    shortened_before: usize,
    shorten_settings: Option<(usize, usize)>,
    /// Tool results before this index that could keep only their
    /// serialized form do (`Projection::keep_old_results_serialized`).
    pub(super) serialized_before: usize,
    /// The message list was changed from outside (tests): `chars` is to
    /// be counted again.
    pub(super) chars_stale: bool,
}

impl Checked {
    /// Messages before this index are read by neither check again (until
    /// a change before it sends them back to the start).
    pub(super) fn settled(&self) -> usize {
        self.len.min(self.shortened_before)
    }

    /// The history changed at `at`: what was checked before it still holds
    /// only if `at` is past the checked prefix.
    pub(super) fn touched(&mut self, at: usize) {
        if at < self.len.max(self.shortened_before) {
            let chars_stale = self.chars_stale;
            *self = Checked {
                chars_stale,
                ..Checked::default()
            };
        }
    }
}

fn id_hash(id: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    id.hash(&mut hasher);
    hasher.finish()
}

/// The end of a result shortened by `shorten_old_results`; such a result is
/// not shortened again.
const OMITTED_NOTE_END: &str = " bytes of this old result omitted; run the tool again to see them]";

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
        if self.checked.chars_stale {
            self.chars = self.messages.iter().map(|m| message_chars(m)).sum();
            self.checked.chars_stale = false;
        }
        let mut repairs = Vec::new();
        if !self.structure_ok() {
            self.checked = Checked::default();
            self.merge_system_messages(&mut repairs);
            self.fix_call_ids(&mut repairs);
            self.pair_tool_results(&mut repairs);
        }
        self.shorten_old_results(limits, &mut repairs);
        self.trim_to_context(limits, &mut repairs);
        if !repairs.is_empty() {
            self.chars = self.messages.iter().map(|m| message_chars(m)).sum();
        }
        repairs
    }

    /// The pipeline checking the whole history, as if nothing had been
    /// checked before: the reference the incremental checks must match.
    #[cfg(test)]
    pub(super) fn repair_whole(&mut self, limits: RepairLimits) -> Vec<Repair> {
        self.checked = Checked::default();
        self.chars = self.messages.iter().map(|m| message_chars(m)).sum();
        self.repair(limits)
    }

    /// Whether the history needs none of the structural repairs, looking
    /// only past the checked prefix: the whole-history checks of
    /// `merge_system_messages`, `call_ids_ok` and `results_well_paired`,
    /// continued from where they last passed.
    fn structure_ok(&mut self) -> bool {
        if !matches!(
            self.messages.first().map(|m| m.message()),
            Some(ModelMessage::System { .. })
        ) {
            return false;
        }
        let checked = &mut self.checked;
        let mut i = checked.len.max(1);
        while i < self.messages.len() {
            match self.messages[i].message() {
                ModelMessage::Assistant { tool_calls, .. } => {
                    for call in tool_calls {
                        if !valid_call_id(&call.id) || !checked.ids.insert(id_hash(&call.id)) {
                            *checked = Checked::default();
                            return false;
                        }
                        i += 1;
                        match self.messages.get(i).map(|m| m.message()) {
                            Some(ModelMessage::Tool { call_id, .. }) if *call_id == call.id => {}
                            _ => {
                                *checked = Checked::default();
                                return false;
                            }
                        }
                    }
                }
                ModelMessage::User { .. } => {}
                ModelMessage::System { .. } | ModelMessage::Tool { .. } => {
                    *checked = Checked::default();
                    return false;
                }
            }
            i += 1;
        }
        checked.len = self.messages.len();
        true
    }

    fn merge_system_messages(&mut self, repairs: &mut Vec<Repair>) {
        let extra = self
            .messages
            .iter()
            .enumerate()
            .filter(|(i, m)| *i > 0 && matches!(m.message(), ModelMessage::System { .. }))
            .count();
        let first_is_system = matches!(
            self.messages.first().map(|m| m.message()),
            Some(ModelMessage::System { .. })
        );
        if extra == 0 && first_is_system {
            return;
        }
        let mut texts = Vec::new();
        self.messages.retain(|m| match m.message() {
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
            CachedMessage::new(ModelMessage::System {
                text: texts.join("\n\n"),
            }),
        );
        repairs.push(Repair {
            repair: "merge_system",
            reason: format!("{count} system messages merged into one leading system message"),
        });
    }

    /// Whether every tool-call id is valid and unique (borrowing only).
    fn call_ids_ok(&self) -> bool {
        let mut seen = std::collections::HashSet::new();
        self.messages.iter().all(|m| match m.message() {
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
            let ModelMessage::Assistant { tool_calls, .. } = self.messages[i].message() else {
                continue;
            };
            // (index of the call, old id, new id)
            let mut renames: Vec<(usize, String, String)> = Vec::new();
            for (k, call) in tool_calls.iter().enumerate() {
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
                renames.push((k, call.id.clone(), new_id));
                renamed += 1;
            }
            if renames.is_empty() {
                continue;
            }
            // Only the messages that change lose their serialized forms.
            if let ModelMessage::Assistant { tool_calls, .. } = self.messages[i].message_mut() {
                for (k, _, new) in &renames {
                    tool_calls[*k].id = new.clone();
                }
            }
            // The results that answer a renamed call follow it: rename the
            // first result with the old id after this message.
            for (_, old, new) in renames {
                if let Some(result) = self.messages[i + 1..].iter_mut().find(
                    |m| matches!(m.message(), ModelMessage::Tool { call_id, .. } if *call_id == old),
                ) {
                    if let ModelMessage::Tool { call_id, .. } = result.message_mut() {
                        *call_id = new;
                    }
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
        let mut results: std::collections::HashMap<String, CachedMessage> =
            std::collections::HashMap::new();
        let mut orphans = 0;
        let mut duplicates = 0;
        let call_ids: std::collections::HashSet<String> = self
            .messages
            .iter()
            .flat_map(|m| match m.message() {
                ModelMessage::Assistant { tool_calls, .. } => {
                    tool_calls.iter().map(|c| c.id.clone()).collect()
                }
                _ => Vec::new(),
            })
            .collect();
        let moved = self.results_out_of_place(&call_ids);
        let mut rest = Vec::with_capacity(self.messages.len());
        for message in self.messages.drain(..) {
            let ModelMessage::Tool { call_id, .. } = message.message() else {
                rest.push(message);
                continue;
            };
            if !call_ids.contains(call_id) {
                orphans += 1;
            } else if results.contains_key(call_id) {
                duplicates += 1;
            } else {
                results.insert(call_id.clone(), message);
            }
        }
        let mut synthesized = 0;
        let mut out = Vec::with_capacity(rest.len() + results.len());
        for message in rest {
            let calls: Vec<String> = match message.message() {
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
                        out.push(CachedMessage::new(ModelMessage::Tool {
                            call_id: id,
                            content: RESULT_UNAVAILABLE.to_string(),
                        }));
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
            match message.message() {
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
            match self.messages[i].message() {
                ModelMessage::Assistant { tool_calls, .. } => {
                    for call in tool_calls {
                        i += 1;
                        match self.messages.get(i).map(|m| m.message()) {
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
        // Results before `shortened_before` were old at the last pass and
        // left short: they only grow older, so they are not looked at again.
        let settings = (limits.keep_recent_results, limits.shorten_results_to);
        let from = if self.checked.shorten_settings == Some(settings) {
            self.checked.shortened_before
        } else {
            0
        };
        let mut seen = 0;
        let mut shortened = 0;
        let mut saved = 0;
        let mut newest_old = None;
        for i in (from..self.messages.len()).rev() {
            let ModelMessage::Tool { content, .. } = self.messages[i].message() else {
                continue;
            };
            seen += 1;
            if seen <= limits.keep_recent_results {
                continue;
            }
            newest_old.get_or_insert(i);
            if content.len() <= limits.shorten_results_to || content.ends_with(OMITTED_NOTE_END) {
                continue;
            }
            // Only the results that change lose their serialized forms.
            let ModelMessage::Tool { content, .. } = self.messages[i].message_mut() else {
                continue;
            };
            let cut = content.floor_char_boundary(limits.shorten_results_to);
            let omitted = content.len() - cut;
            content.truncate(cut);
            content.push_str(&format!("\n[... {omitted}{OMITTED_NOTE_END}"));
            shortened += 1;
            saved += omitted;
        }
        self.checked.shorten_settings = Some(settings);
        self.checked.shortened_before = newest_old.map_or(from, |i| i + 1);
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
        // `chars` is kept equal to the sum of `message_chars` over the
        // history, but is counted again only after this pass's repairs.
        let mut total = if !repairs.is_empty() {
            self.messages.iter().map(|m| message_chars(m)).sum()
        } else {
            self.chars
        };
        if total <= budget {
            return;
        }
        let last_user = self
            .messages
            .iter()
            .rposition(|m| matches!(m.message(), ModelMessage::User { .. }))
            .unwrap_or(self.messages.len());
        // The system prompt and the first request stay.
        let start = self.head_len().min(last_user);
        // Drop whole units from the oldest: a message plus the tool results
        // that follow it, so no call is separated from its result.
        let mut end = start;
        let mut dropped = 0;
        while total > budget && end < last_user {
            let mut unit_end = end + 1;
            while matches!(
                self.messages.get(unit_end).map(|m| m.message()),
                Some(ModelMessage::Tool { .. })
            ) {
                unit_end += 1;
            }
            if unit_end > last_user {
                break;
            }
            total -= self.messages[end..unit_end]
                .iter()
                .map(|m| message_chars(m))
                .sum::<usize>();
            dropped += unit_end - end;
            end = unit_end;
        }
        if dropped == 0 {
            return;
        }
        self.checked.touched(start);
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
        ModelMessage::user(text)
    }

    fn with(messages: Vec<ModelMessage>) -> Projection {
        let mut p = Projection::new("sys".into());
        p.messages_mut()
            .extend(messages.into_iter().map(CachedMessage::new));
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
            .any(|m| matches!(m.message(), ModelMessage::Tool { .. })));
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
            .filter_map(|m| match m.message() {
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
            .filter_map(|m| match m.message() {
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
        assert!(matches!(*p.messages()[0], ModelMessage::System { .. }));
        assert_eq!(
            p.messages().last().map(|m| m.message()),
            Some(&user("latest"))
        );
        // Every remaining tool result still follows its call.
        assert!(p.results_well_paired());
    }
}
