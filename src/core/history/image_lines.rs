//! How `tandem replay` names images: `image (png, 120 KB)`, from what the
//! log says of them (replay never reads the image files).

use crate::vocab::event::UserContent;
use crate::vocab::image::{human_size, image_kind};

/// `image (png, 120 KB)`.
pub(super) fn image_note(mime_type: &str, bytes: u64) -> String {
    format!("image ({}, {})", image_kind(mime_type), human_size(bytes))
}

/// A user input without its images, and the images' notes.
pub(super) fn split_images(content: &[UserContent]) -> (Vec<UserContent>, Vec<String>) {
    let mut rest = Vec::with_capacity(content.len());
    let mut notes = Vec::new();
    for block in content {
        match block {
            UserContent::Image {
                mime_type, bytes, ..
            } => notes.push(image_note(mime_type, *bytes)),
            other => rest.push(other.clone()),
        }
    }
    (rest, notes)
}

/// `text [image (png, 120 KB)]`, or the note alone for an image-only input.
pub(super) fn with_notes(text: String, notes: Vec<String>) -> String {
    notes.into_iter().fold(text, |text, note| {
        if text.is_empty() {
            note
        } else {
            format!("{text} [{note}]")
        }
    })
}
