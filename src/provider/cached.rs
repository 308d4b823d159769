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
//! [`Provider::request_body_from_scratch`]: super::Provider::request_body_from_scratch

use std::ops::Deref;
use std::sync::OnceLock;

use super::ModelMessage;

/// A message of the model's context with its serialized forms.
#[derive(Debug, Clone)]
pub struct CachedMessage {
    message: ModelMessage,
    pub(super) wire: WireForms,
}

/// The serialized forms of one message, filled on first use.
#[derive(Debug, Clone, Default)]
pub(super) struct WireForms {
    /// Chat completions: the message object.
    pub(super) openai: OnceLock<Box<[u8]>>,
    /// Messages API: its role and content blocks.
    pub(super) anthropic: OnceLock<super::anthropic::Blocks>,
}

impl CachedMessage {
    pub fn new(message: ModelMessage) -> Self {
        CachedMessage {
            message,
            wire: WireForms::default(),
        }
    }

    pub fn message(&self) -> &ModelMessage {
        &self.message
    }

    /// The message, to change: its serialized forms are dropped.
    pub fn message_mut(&mut self) -> &mut ModelMessage {
        self.wire = WireForms::default();
        &mut self.message
    }

    pub fn into_message(self) -> ModelMessage {
        self.message
    }

    /// How many bytes of serialized forms this message holds.
    pub fn cached_bytes(&self) -> usize {
        self.wire.openai.get().map_or(0, |b| b.len())
            + self.wire.anthropic.get().map_or(0, |b| b.bytes())
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
        &self.message
    }
}

impl PartialEq for CachedMessage {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message
    }
}

impl PartialEq<ModelMessage> for CachedMessage {
    fn eq(&self, other: &ModelMessage) -> bool {
        self.message == *other
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

/// `head`, the pieces joined by commas, `tail`: one allocation, one copy.
pub(super) fn join(head: &[u8], pieces: &[&[u8]], tail: &[u8]) -> Vec<u8> {
    let len = head.len() + tail.len() + pieces.iter().map(|p| p.len() + 1).sum::<usize>();
    let mut body = Vec::with_capacity(len);
    body.extend_from_slice(head);
    for (i, piece) in pieces.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(piece);
    }
    body.extend_from_slice(tail);
    body
}
