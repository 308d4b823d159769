//! The model's context as a projection of the session log.
//!
//! [`Projection`] folds events into the provider-neutral message list. It is
//! updated incrementally as the driver records events (so a step never
//! rebuilds or copies the history), and a reloaded session gets the same
//! messages by folding its log from the start.
//!
//! Invariant: only completion anchors (`assistant_message`), entered user
//! messages and tool results reach the model; chunks, failed attempts and
//! bookkeeping events never do. The projection holds no state that cannot be
//! rebuilt from the log.
//!
//! Each message is kept beside its serialized forms ([`CachedMessage`]), so
//! a request body is assembled from pieces serialized once, and at a
//! turn's end old results and calls keep only that form
//! ([`Projection::keep_old_results_serialized`]); the repair
//! pipeline checks only the messages added since its last clean pass
//! ([`repair`]). Either cache is dropped for exactly what a change touches:
//! a changed message loses its serialized forms, and any change before the
//! checked prefix's end (a compaction, a trim, a repair, a result inserted
//! into an earlier block) sends the next check back to the start.
//!
//! The pieces: [`render`] is how user input and tool results read to the
//! model, [`compaction`] plans and applies summaries, [`repair`] is the
//! pipeline that makes any history acceptable to any provider, [`shrink`]
//! cuts the newest results when the provider says even that does not fit.

#[cfg(test)]
mod cache_tests;
mod compaction;
mod render;
mod repair;
mod shrink;
mod tool_images;

use crate::provider::{CachedMessage, ModelMessage};
use crate::vocab::event::Event;

pub use self::compaction::{summary_message, CompactionPlan};
pub use self::render::{render_tool_result, render_user_content, user_images};
pub use self::repair::{Repair, RepairLimits, RESULT_UNAVAILABLE};
pub use self::shrink::{cut_head_tail, RequestItem};

/// The model-visible history of a session.
#[derive(Debug, Clone)]
pub struct Projection {
    messages: Vec<CachedMessage>,
    /// Rough size of the history in characters, for token estimates.
    chars: usize,
    /// How far the repair pipeline's structural checks already passed.
    checked: repair::Checked,
    /// The files read and edited, folded from the same events.
    ledger: crate::core::ledger::Ledger,
    /// The system prompt without the instructions (`instructions` events
    /// append their text to it).
    system_base: String,
    /// Images of the current block of tool results ([`tool_images`]).
    tool_images: tool_images::PendingToolImages,
}

impl Projection {
    /// Starts a history with the system prompt as its first message.
    pub fn new(system_prompt: String) -> Self {
        let chars = system_prompt.len();
        Projection {
            messages: vec![CachedMessage::new(ModelMessage::System {
                text: system_prompt.clone(),
            })],
            chars,
            checked: Default::default(),
            ledger: Default::default(),
            system_base: system_prompt,
            tool_images: Default::default(),
        }
    }

    /// Puts the instructions' text at the end of the system prompt, the
    /// head that compaction always keeps (empty: none).
    fn set_instructions(&mut self, text: &str) {
        let system = if text.is_empty() {
            self.system_base.clone()
        } else {
            format!("{}\n\n{text}", self.system_base)
        };
        let message = ModelMessage::System { text: system };
        match self.messages.first_mut() {
            Some(first) if matches!(first.message(), ModelMessage::System { .. }) => {
                self.chars =
                    self.chars.saturating_sub(message_chars(first)) + message_chars(&message);
                *first = CachedMessage::new(message);
            }
            _ => {
                self.chars += message_chars(&message);
                self.messages.insert(0, CachedMessage::new(message));
            }
        }
        self.checked.touched(0);
    }

    /// Folds a whole log.
    pub fn from_events<'a>(
        system_prompt: String,
        events: impl IntoIterator<Item = &'a Event>,
    ) -> Self {
        let mut projection = Projection::new(system_prompt);
        // A conversation rewind takes what it undid out of the context.
        let events: Vec<&Event> = events.into_iter().collect();
        let dropped = crate::core::checkpoints::dropped_by_rewinds(&events);
        for (event, dropped) in events.into_iter().zip(dropped) {
            if !dropped {
                projection.apply(event);
            }
        }
        // Growing by doubling left up to half the list unused (BENCHMARKS.md
        // §2, "Smaller list"): keep an eighth more than it holds, room for
        // the turns to come.
        let len = projection.messages.len();
        projection.messages.shrink_to(len + len / 8);
        projection
    }

    /// The same history folded again from a whole log, with the same
    /// system prompt (after a conversation rewind).
    pub fn refolded<'a>(&self, events: impl IntoIterator<Item = &'a Event>) -> Self {
        Projection::from_events(self.system_base.clone(), events)
    }

    pub fn messages(&self) -> &[CachedMessage] {
        &self.messages
    }

    /// The files the session read and edited so far.
    pub fn ledger(&self) -> &crate::core::ledger::Ledger {
        &self.ledger
    }

    /// Estimated input tokens of a request carrying this history (about
    /// four characters a token).
    pub fn estimated_tokens(&self) -> u64 {
        (self.chars / 4) as u64
    }

    /// Keeps only the serialized form of the tool results and assistant
    /// messages that nothing but the request body reads any more (before
    /// where the repair pipeline's checks resume) and whose Chat
    /// Completions form is cached: the history's text is then held once,
    /// not twice (sessions on the Messages API keep both for now).
    /// Whatever reads such a message again (a compaction, a provider
    /// switch, a repair that starts over) gets it read back from that form.
    /// Returns how many it dropped.
    pub fn keep_old_results_serialized(&mut self) -> usize {
        let end = self.checked.settled().min(self.messages.len());
        let from = self.checked.serialized_before.min(end);
        let kept = self.messages[from..end]
            .iter_mut()
            .map(CachedMessage::keep_serialized_only)
            .filter(|dropped| *dropped)
            .count();
        self.checked.serialized_before = end;
        kept
    }

    /// Mutable access for tests that need a deliberately broken history:
    /// the repair pipeline checks everything again.
    pub fn messages_mut(&mut self) -> &mut Vec<CachedMessage> {
        self.checked = Default::default();
        self.checked.chars_stale = true;
        &mut self.messages
    }

    /// Applies one event; events that do not reach the model are ignored.
    pub fn apply(&mut self, event: &Event) {
        self.ledger.apply(event);
        let message = match event {
            Event::UserMessage { content, .. } => ModelMessage::User {
                text: render_user_content(content),
                images: user_images(content),
            },
            Event::AssistantMessage {
                text,
                thinking,
                tool_calls,
                ..
            } => ModelMessage::Assistant {
                text: text.clone(),
                thinking: thinking.clone(),
                tool_calls: tool_calls.clone(),
            },
            Event::Compacted {
                summary,
                removed,
                keep_last,
                ledger,
                ..
            } => {
                self.compact(summary.as_deref(), ledger.as_deref(), *removed, *keep_last);
                return;
            }
            Event::Instructions { text, .. } => {
                self.set_instructions(text);
                return;
            }
            Event::ResultsShrunk { results, .. } => {
                self.apply_shrunk(results);
                return;
            }
            Event::ToolImage {
                call_id,
                mime_type,
                sha256,
                bytes,
                data,
                ..
            } => {
                self.hold_tool_image(call_id, mime_type, sha256, *bytes, data.base64());
                return;
            }
            Event::ToolResult {
                call_id,
                status,
                output,
                ..
            } => {
                let message = ModelMessage::Tool {
                    call_id: call_id.clone(),
                    content: render_tool_result(*status, output),
                };
                self.chars += message_chars(&message);
                let at = self.result_position(call_id);
                self.checked.touched(at);
                self.messages.insert(at, CachedMessage::new(message));
                self.release_tool_images_if_block_done();
                return;
            }
            _ => return,
        };
        self.release_tool_images();
        self.chars += message_chars(&message);
        self.messages.push(CachedMessage::new(message));
    }

    /// Where a result goes: in the block of results after the assistant
    /// message that made the call, in the order of its calls (results are
    /// logged as calls end, which may be another order). A result whose
    /// call is not in the newest block goes last, for repair to judge.
    fn result_position(&self, call_id: &str) -> usize {
        let end = self.messages.len();
        let block_start = self.messages[..end]
            .iter()
            .rposition(|m| !matches!(**m, ModelMessage::Tool { .. }))
            .map_or(0, |i| i + 1);
        let Some(ModelMessage::Assistant { tool_calls, .. }) = block_start
            .checked_sub(1)
            .map(|i| self.messages[i].message())
        else {
            return end;
        };
        let order = |id: &str| tool_calls.iter().position(|c| c.id == id);
        let Some(mine) = order(call_id) else {
            return end;
        };
        self.messages[block_start..end]
            .iter()
            .position(|m| match m.message() {
                ModelMessage::Tool { call_id, .. } => order(call_id).is_some_and(|o| o > mine),
                _ => false,
            })
            .map_or(end, |i| block_start + i)
    }
}

fn message_chars(message: &ModelMessage) -> usize {
    match message {
        ModelMessage::System { text } => text.len(),
        ModelMessage::User { text, images } => {
            text.len() + images.len() * crate::provider::ImagePart::ESTIMATED_CHARS
        }
        ModelMessage::Assistant {
            text,
            thinking,
            tool_calls,
        } => {
            text.len()
                + thinking.as_ref().map_or(0, |t| t.text.len())
                + tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.len() + c.id.len())
                    .sum::<usize>()
        }
        ModelMessage::Tool { content, call_id } => content.len() + call_id.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::event::{FinishReason, ToolCallRequest, ToolStatus, Usage, UserContent};

    #[test]
    fn results_logged_as_calls_end_reach_the_model_in_call_order() {
        let call = |id: &str| ToolCallRequest {
            id: id.into(),
            name: "read_file".into(),
            arguments: "{}".into(),
        };
        let result = |id: &str| Event::ToolResult {
            turn_id: "t1".into(),
            call_id: id.into(),
            status: ToolStatus::Completed,
            output: id.into(),
        };
        let mut events = vec![Event::AssistantMessage {
            turn_id: "t1".into(),
            step: 1,
            attempt: 1,
            provider: "openai".into(),
            model: "m".into(),
            text: "".into(),
            thinking: None,
            tool_calls: vec![call("c1"), call("c2"), call("c3")],
            finish_reason: FinishReason::ToolCalls,
            usage: Usage::default(),
        }];
        events.extend([result("c3"), result("c1"), result("c2")]);
        let projection = Projection::from_events("sys".into(), &events);
        let ids: Vec<&str> = projection
            .messages()
            .iter()
            .filter_map(|m| match m.message() {
                ModelMessage::Tool { call_id, .. } => Some(call_id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(ids, ["c1", "c2", "c3"]);
    }

    #[test]
    fn instructions_end_the_system_prompt_are_replaced_whole_and_outlive_compaction() {
        let instructions = |text: &str| Event::Instructions {
            turn_id: None,
            files: Vec::new(),
            text: text.into(),
            cut: None,
            about: None,
        };
        let user = |text: &str| Event::UserMessage {
            turn_id: "t1".into(),
            message_id: "m1".into(),
            content: vec![UserContent::Text { text: text.into() }],
        };
        let mut p = Projection::from_events(
            "sys".into(),
            &[instructions("RULE ONE"), user("first"), user("second")],
        );
        let system = |p: &Projection| match p.messages()[0].message() {
            ModelMessage::System { text } => text.clone(),
            other => panic!("not a system message: {other:?}"),
        };
        assert_eq!(system(&p), "sys\n\nRULE ONE");
        p.apply(&instructions("RULE TWO"));
        assert_eq!(system(&p), "sys\n\nRULE TWO", "replaced, not appended");
        assert_eq!(p.messages().len(), 3);
        p.apply(&user("third"));
        p.apply(&Event::Compacted {
            turn_id: "t2".into(),
            summary: Some("S".into()),
            removed: 1,
            keep_last: 1,
            error: None,
            ledger: None,
            usage: Usage::default(),
        });
        assert_eq!(system(&p), "sys\n\nRULE TWO", "compaction keeps the head");
        let chars: usize = p.messages().iter().map(|m| message_chars(m)).sum();
        assert_eq!(p.chars, chars);
        p.apply(&instructions(""));
        assert_eq!(system(&p), "sys", "none any more");
        let chars: usize = p.messages().iter().map(|m| message_chars(m)).sum();
        assert_eq!(p.chars, chars, "the size estimate follows");
    }

    #[test]
    fn chunks_and_failed_attempts_do_not_reach_the_model() {
        let events = vec![
            Event::UserMessage {
                turn_id: "t1".into(),
                message_id: "m1".into(),
                content: vec![UserContent::Text { text: "hi".into() }],
            },
            Event::AssistantChunk {
                turn_id: "t1".into(),
                step: 1,
                attempt: 1,
                text: "partial".into(),
            },
            Event::AttemptFailed {
                turn_id: "t1".into(),
                step: 1,
                attempt: 1,
                error_kind: "stream_dropped".into(),
                message: "dropped".into(),
                retry: true,
                streamed: true,
            },
            Event::AssistantMessage {
                turn_id: "t1".into(),
                step: 1,
                attempt: 2,
                provider: "openai".into(),
                model: "m".into(),
                text: "".into(),
                thinking: None,
                tool_calls: vec![ToolCallRequest {
                    id: "c1".into(),
                    name: "read_file".into(),
                    arguments: "{}".into(),
                }],
                finish_reason: FinishReason::ToolCalls,
                usage: Usage::default(),
            },
            Event::ToolResult {
                turn_id: "t1".into(),
                call_id: "c1".into(),
                status: ToolStatus::Failed,
                output: "no such file".into(),
            },
        ];
        let projection = Projection::from_events("sys".into(), &events);
        let messages = projection.messages();
        assert_eq!(messages.len(), 4);
        assert_eq!(messages[1], ModelMessage::user("hi"));
        assert!(
            matches!(messages[2].message(), ModelMessage::Assistant { text, tool_calls, .. } if text.is_empty() && tool_calls.len() == 1)
        );
        assert_eq!(
            messages[3],
            ModelMessage::Tool {
                call_id: "c1".into(),
                content: "error: no such file".into()
            }
        );
    }
}
