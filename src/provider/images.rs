//! Images in user messages (and in tool results the model reads), as each
//! provider's wire takes them: a Chat Completions `image_url` part with a
//! `data:` URL, a Messages API `image` block with a base64 source. Kept
//! apart from the message shapes so a body without images is exactly what
//! it was before images existed.

use std::sync::Arc;

use serde::Serialize;

/// One image of a message: its type, its content hash (its identity) and
/// its base64 text.
#[derive(Debug, Clone, PartialEq)]
pub struct ImagePart {
    pub mime_type: String,
    pub sha256: String,
    pub data: Arc<str>,
}

impl ImagePart {
    /// Rough size in characters for token estimates: what providers bill
    /// a typical image (about 1,600 tokens), never its base64 length.
    pub const ESTIMATED_CHARS: usize = 6400;
}

/// A Chat Completions content part of a user message with images.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum ChatPart<'a> {
    Text { text: &'a str },
    ImageUrl { image_url: DataUrl },
}

#[derive(Serialize)]
pub(super) struct DataUrl {
    url: String,
}

/// A user message's text (when any) and images as Chat Completions parts.
pub(super) fn chat_parts<'a>(text: &'a str, images: &'a [ImagePart]) -> Vec<ChatPart<'a>> {
    let mut parts = Vec::with_capacity(images.len() + 1);
    if !text.is_empty() {
        parts.push(ChatPart::Text { text });
    }
    parts.extend(images.iter().map(|image| ChatPart::ImageUrl {
        image_url: DataUrl {
            url: format!("data:{};base64,{}", image.mime_type, image.data),
        },
    }));
    parts
}

/// The Messages API's base64 image source.
#[derive(Debug, Serialize)]
pub(super) struct ImageSource<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    media_type: &'a str,
    data: &'a str,
}

impl<'a> From<&'a ImagePart> for ImageSource<'a> {
    fn from(image: &'a ImagePart) -> Self {
        ImageSource {
            kind: "base64",
            media_type: &image.mime_type,
            data: &image.data,
        }
    }
}
