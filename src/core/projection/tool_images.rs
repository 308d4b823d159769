//! Images tools returned (an MCP server's, for a model with vision). A
//! Chat Completions tool message carries only text, and nothing may come
//! between an assistant's calls and their results; so the images of a
//! block of results are held until its last result is in, then read by
//! the model as one user message right after the block (the Messages API
//! merges it into the results' user turn). Folded from the log's
//! `tool_image` events, so a reload places them where the live turn did.

use super::{message_chars, Projection};
use crate::provider::{CachedMessage, ImagePart, ModelMessage};
use crate::vocab::image::{human_size, image_kind};

/// Images of the current block of results, waiting for its end.
#[derive(Debug, Clone, Default)]
pub(super) struct PendingToolImages {
    call_ids: Vec<String>,
    images: Vec<ImagePart>,
    /// Images whose files are gone, as the model reads them.
    missing: Vec<String>,
}

impl Projection {
    /// Holds a `tool_image` event's image for the end of its block.
    pub(super) fn hold_tool_image(
        &mut self,
        call_id: &str,
        mime_type: &str,
        sha256: &str,
        bytes: u64,
        data: Option<&std::sync::Arc<str>>,
    ) {
        let pending = &mut self.tool_images;
        if !pending.call_ids.iter().any(|id| id == call_id) {
            pending.call_ids.push(call_id.to_string());
        }
        match data {
            Some(data) => pending.images.push(ImagePart {
                mime_type: mime_type.to_string(),
                sha256: sha256.to_string(),
                data: data.clone(),
            }),
            None => pending.missing.push(format!(
                "[an image ({}, {}) returned by tool call {call_id}; its file is no longer available]",
                image_kind(mime_type),
                human_size(bytes)
            )),
        }
    }

    /// After a result: the held images follow the block once every call
    /// of the assistant message before it has its result.
    pub(super) fn release_tool_images_if_block_done(&mut self) {
        if self.tool_images.call_ids.is_empty() {
            return;
        }
        let end = self.messages.len();
        let block_start = self
            .messages
            .iter()
            .rposition(|m| !matches!(m.message(), ModelMessage::Tool { .. }))
            .map_or(0, |i| i + 1);
        let done = match block_start.checked_sub(1).map(|i| self.messages[i].message()) {
            Some(ModelMessage::Assistant { tool_calls, .. }) => tool_calls.iter().all(|call| {
                self.messages[block_start..end].iter().any(
                    |m| matches!(m.message(), ModelMessage::Tool { call_id, .. } if *call_id == call.id),
                )
            }),
            _ => true,
        };
        if done {
            self.release_tool_images();
        }
    }

    /// Appends the held images as a user message (before any other
    /// message is added, whatever the block's state).
    pub(super) fn release_tool_images(&mut self) {
        let pending = std::mem::take(&mut self.tool_images);
        if pending.call_ids.is_empty() {
            return;
        }
        let plural = if pending.images.len() + pending.missing.len() == 1 {
            "The image"
        } else {
            "The images"
        };
        let calls = if pending.call_ids.len() == 1 {
            "tool call"
        } else {
            "tool calls"
        };
        let mut text = format!(
            "{plural} returned by {calls} {}:",
            pending.call_ids.join(", ")
        );
        for note in &pending.missing {
            text.push('\n');
            text.push_str(note);
        }
        let message = ModelMessage::User {
            text,
            images: pending.images,
        };
        self.chars += message_chars(&message);
        self.messages.push(CachedMessage::new(message));
    }
}
