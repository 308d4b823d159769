//! An image's bytes as the model gets them (base64), carried beside the
//! logged reference to it (`sha256`, mime type, size) but never written
//! into the log: the log keeps each image once, in a file named by its
//! hash beside the session log, and a reload reads it back from there.

use std::fmt;
use std::sync::Arc;

/// The base64 text of an image, when it is in memory (`None` when the
/// event was read from a log and its file not read back yet, or the file
/// is gone). Two values always compare equal: the image's identity is its
/// hash, which the event holding this carries.
#[derive(Clone, Default)]
pub struct ImageData(pub Option<Arc<str>>);

impl ImageData {
    pub fn base64(&self) -> Option<&Arc<str>> {
        self.0.as_ref()
    }
}

impl PartialEq for ImageData {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl fmt::Debug for ImageData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(data) => write!(f, "ImageData({} base64 chars)", data.len()),
            None => f.write_str("ImageData(not loaded)"),
        }
    }
}

/// The image types every provider takes (OpenAI and Anthropic alike).
pub const IMAGE_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

/// The short name of an image type (`png` for `image/png`).
pub fn image_kind(mime_type: &str) -> &str {
    let kind = mime_type.strip_prefix("image/").unwrap_or(mime_type);
    match kind {
        "jpeg" => "jpg",
        "svg+xml" => "svg",
        other => other,
    }
}

/// A size as people read it: `120 KB`, `2.4 MB` (1 KB = 1024 bytes).
pub fn human_size(bytes: u64) -> String {
    const KB: f64 = 1024.0;
    let b = bytes as f64;
    if b < KB {
        format!("{bytes} B")
    } else if b < KB * KB {
        format!("{} KB", (b / KB).round() as u64)
    } else {
        format!("{:.1} MB", b / (KB * KB))
    }
}
