//! A history message kept beside its serialized forms, one per provider
//! wire shape, so a request body is assembled from pieces serialized once
//! instead of re-serializing the whole history on every step.
//!
//! Invariant: a cached form is never stale. The message is reachable
//! mutably only through [`CachedMessage::message_mut`], which drops the
//! cached forms; a form is filled (once) from the message as it is when a
//! body is built. Moving a message (reordering, dropping its neighbours)
//! keeps its forms: a message's serialized form does not depend on where
//! it stands. Every body built from the cache is byte-identical to one
//! built from scratch ([`Provider::request_body_from_scratch`]).
//!
//! One copy of old history, not two: a tool result or an assistant
//! message that nothing reads any more but the request body can keep only
//! its serialized form
//! ([`CachedMessage::keep_serialized_only`]), from which the message is
//! read back, exactly, the first time anything asks for it.
//!
//! [`Provider::request_body_from_scratch`]: super::Provider::request_body_from_scratch

use std::ops::Deref;
use std::sync::OnceLock;

use super::ModelMessage;

/// A message of the model's context with its serialized forms.
#[derive(Debug, Clone)]
pub struct CachedMessage {
    /// Empty when only the serialized form is kept; read back from it on
    /// first use. Boxed, like the forms, so that a list of thousands of
    /// messages costs 56 bytes for each, not 168.
    message: OnceLock<Box<ModelMessage>>,
    pub(super) wire: WireForms,
}

/// The serialized forms of one message, filled on first use.
#[derive(Debug, Clone, Default)]
pub(super) struct WireForms {
    /// Chat completions: the message object.
    pub(super) openai: OnceLock<Box<[u8]>>,
    /// Messages API: its role and content blocks.
    pub(super) anthropic: OnceLock<Box<super::anthropic::Blocks>>,
}

impl CachedMessage {
    pub fn new(message: ModelMessage) -> Self {
        CachedMessage {
            message: OnceLock::from(Box::new(message)),
            wire: WireForms::default(),
        }
    }

    pub fn message(&self) -> &ModelMessage {
        self.message.get_or_init(|| {
            self.wire
                .openai
                .get()
                .and_then(|wire| super::openai::message_from_wire(wire))
                .map(Box::new)
                .expect("a message kept serialized only reads back from its form")
        })
    }

    /// The message, to change: its serialized forms are dropped.
    pub fn message_mut(&mut self) -> &mut ModelMessage {
        self.message();
        self.wire = WireForms::default();
        self.message
            .get_mut()
            .expect("the message was read back just above")
    }

    pub fn into_message(self) -> ModelMessage {
        self.message();
        *self
            .message
            .into_inner()
            .expect("the message was read back just above")
    }

    /// How many bytes of serialized forms this message holds.
    pub fn cached_bytes(&self) -> usize {
        self.wire.openai.get().map_or(0, |b| b.len())
            + self.wire.anthropic.get().map_or(0, |b| b.bytes())
    }

    /// Drops the structured message of a tool result or an assistant
    /// message whose Chat Completions form is cached and reads back to
    /// exactly it, keeping that form alone (one copy instead of two); says
    /// whether it did. Anything else (user and system messages, thinking,
    /// a message not yet serialized, or only in the Messages API's form)
    /// is left as it is.
    pub fn keep_serialized_only(&mut self) -> bool {
        let (Some(message), Some(wire)) = (self.message.get(), self.wire.openai.get()) else {
            return false;
        };
        if !matches!(
            **message,
            ModelMessage::Tool { .. } | ModelMessage::Assistant { .. }
        ) || super::openai::message_from_wire(wire).as_ref() != Some(&**message)
        {
            return false;
        }
        self.message.take();
        true
    }

    /// Whether the structured message is held (not only its serialized
    /// form).
    pub fn holds_message(&self) -> bool {
        self.message.get().is_some()
    }
}

impl From<ModelMessage> for CachedMessage {
    fn from(message: ModelMessage) -> Self {
        CachedMessage::new(message)
    }
}

impl Deref for CachedMessage {
    type Target = ModelMessage;

    fn deref(&self) -> &ModelMessage {
        self.message()
    }
}

impl PartialEq for CachedMessage {
    fn eq(&self, other: &Self) -> bool {
        self.message() == other.message()
    }
}

impl PartialEq<ModelMessage> for CachedMessage {
    fn eq(&self, other: &ModelMessage) -> bool {
        self.message() == other
    }
}

/// Splits a body serialized with an empty `messages` array around it:
/// (everything up to and including `[`, everything from `]` on). The first
/// `"messages":[]` is the key's own: inside a JSON string its quotes would
/// be escaped, and the only fields before it are the model name, the
/// output cap and (Anthropic) the system prompt.
pub(super) fn split_frame(frame: &[u8]) -> (&[u8], &[u8]) {
    const KEY: &[u8] = b"\"messages\":[]";
    let at = frame
        .windows(KEY.len())
        .position(|w| w == KEY)
        .expect("a request frame has an empty messages array");
    let open = at + KEY.len() - 1;
    (&frame[..open], &frame[open..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_costs_the_list_56_bytes() {
        // The list of a 5,000-message session is 5,000 of these, whether
        // or not their messages are held (BENCHMARKS.md §2).
        assert!(std::mem::size_of::<CachedMessage>() <= 56);
    }
}
