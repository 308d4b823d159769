//! Images in prompts. Before a prompt is queued its images are checked
//! (the session's model reads images, a type every provider takes, within
//! the size cap) and each is stored once, by the SHA-256 of its bytes, in
//! `<session>.images/` beside the session log; the log's events name the
//! file, never hold the bytes. A loaded log gets its images read back
//! from there, so the reloaded projection sends what the live one sent.
//!
//! Invariant: a refused image refuses its whole prompt, before anything is
//! logged or sent to the model.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use sha2::{Digest, Sha256};

use crate::core::log::LoggedEvent;
use crate::vocab::event::{Event, TurnId, UserContent};
use crate::vocab::image::{human_size, image_kind, ImageData};

pub use crate::vocab::image::IMAGE_TYPES as SUPPORTED_TYPES;

/// What a session's configuration allows.
#[derive(Debug, Clone)]
pub struct ImagePolicy {
    /// The model's name, for the error.
    pub model: String,
    pub vision: bool,
    /// Largest decoded image, in bytes.
    pub max_bytes: u64,
}

/// The folder of a session's images: `<id>.images` beside `<id>.jsonl`.
pub fn images_dir(log_path: &Path) -> PathBuf {
    log_path.with_extension("images")
}

/// The file holding an image's bytes.
pub fn image_path(dir: &Path, sha256: &str, mime_type: &str) -> PathBuf {
    dir.join(format!("{sha256}.{}", image_kind(mime_type)))
}

/// Checks a prompt's images and stores each in `dir` (once per content
/// hash); returns the content with every image named by its hash and size.
/// A prompt without images is returned as it is, and touches nothing.
pub fn admit_images(
    content: Vec<UserContent>,
    dir: &Path,
    policy: &ImagePolicy,
) -> Result<Vec<UserContent>, String> {
    let count = content
        .iter()
        .filter(|b| matches!(b, UserContent::Image { .. }))
        .count();
    if count == 0 {
        return Ok(content);
    }
    if !policy.vision {
        return Err(format!(
            "the prompt carries {} but the model `{}` is configured without vision \
             (`[model] vision = false`); remove the image or use a model that reads images",
            if count == 1 {
                "an image".to_string()
            } else {
                format!("{count} images")
            },
            policy.model
        ));
    }
    // Every image is checked before any is stored: a refused prompt
    // leaves nothing behind.
    let mut checked = Vec::with_capacity(content.len());
    for (index, block) in content.into_iter().enumerate() {
        checked.push(match block {
            UserContent::Image {
                mime_type, data, ..
            } => {
                let (bytes, base64) = check_image(index, &mime_type, &data, policy.max_bytes)?;
                (
                    UserContent::Image {
                        sha256: hex(&Sha256::digest(&bytes)),
                        bytes: bytes.len() as u64,
                        mime_type,
                        data: ImageData(Some(base64)),
                    },
                    Some(bytes),
                )
            }
            other => (other, None),
        });
    }
    let mut admitted = Vec::with_capacity(checked.len());
    for (block, bytes) in checked {
        if let (
            UserContent::Image {
                mime_type, sha256, ..
            },
            Some(bytes),
        ) = (&block, bytes)
        {
            store(&image_path(dir, sha256, mime_type), &bytes)
                .map_err(|e| format!("could not store the image in {}: {e}", dir.display()))?;
        }
        admitted.push(block);
    }
    Ok(admitted)
}

/// A tool's image, stored beside the session log at `log_path`, as the
/// `tool_image` event of the call; `None` (and a warning) when it cannot
/// be: the tool's text already says what it returned.
pub fn tool_image_event(
    log_path: &Path,
    (turn_id, call_id): (&TurnId, &str),
    mime_type: String,
    data: String,
) -> Option<Event> {
    let checked = check_image(0, &mime_type, &ImageData(Some(data.into())), u64::MAX).and_then(
        |(bytes, base64)| {
            let sha256 = hex(&Sha256::digest(&bytes));
            let dir = images_dir(log_path);
            store(&image_path(&dir, &sha256, &mime_type), &bytes)
                .map_err(|e| format!("could not store it in {}: {e}", dir.display()))?;
            Ok((sha256, bytes.len() as u64, base64))
        },
    );
    match checked {
        Ok((sha256, bytes, base64)) => Some(Event::ToolImage {
            turn_id: turn_id.clone(),
            call_id: call_id.to_string(),
            mime_type,
            sha256,
            bytes,
            data: ImageData(Some(base64)),
        }),
        Err(e) => {
            tracing::warn!("the image of tool call {call_id} is dropped: {e}");
            None
        }
    }
}

/// Decodes one image and checks its type and size; returns its bytes and
/// its canonical base64 (what the model is sent, live and after a reload).
fn check_image(
    index: usize,
    mime_type: &str,
    data: &ImageData,
    max_bytes: u64,
) -> Result<(Vec<u8>, Arc<str>), String> {
    let at = format!("prompt block {index} (image)");
    if !SUPPORTED_TYPES.contains(&mime_type) {
        return Err(format!(
            "{at}: unsupported image type `{mime_type}`; supported: {}",
            SUPPORTED_TYPES.join(", ")
        ));
    }
    let Some(text) = data.base64() else {
        return Err(format!("{at}: `data` is missing"));
    };
    // Refuse by the encoded length first: a huge blob is never decoded.
    let estimate = (text.len() as u64 / 4) * 3;
    let too_big = |size: u64| {
        format!(
            "{at}: the image is {} ({size} bytes), over the {} limit \
             (`[limits] max_image_bytes = {max_bytes}`); nothing was sent",
            human_size(size),
            human_size(max_bytes),
        )
    };
    if estimate > max_bytes.saturating_add(3) {
        return Err(too_big(estimate));
    }
    let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(compact.as_bytes())
        .map_err(|e| format!("{at}: `data` is not valid base64: {e}"))?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_big(bytes.len() as u64));
    }
    if bytes.is_empty() {
        return Err(format!("{at}: the image is empty"));
    }
    let canonical = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Ok((bytes, canonical.into()))
}

/// Writes `bytes` to `path` unless it exists (the name is the hash of the
/// content), through a temporary file renamed into place.
fn store(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if path.exists() {
        return Ok(());
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("image")
    ));
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads the images the events name back from `dir` into them (each file
/// once). An image whose file is missing stays unloaded: the model then
/// reads a notice in its place.
pub fn load_images(dir: &Path, events: &mut [LoggedEvent]) {
    let mut loaded: HashMap<String, ImageData> = HashMap::new();
    for logged in events.iter_mut() {
        let content = match &mut logged.event {
            Event::UserMessage { content, .. } | Event::InputQueued { content, .. } => content,
            Event::ToolImage {
                mime_type,
                sha256,
                data,
                ..
            } => {
                if data.base64().is_none() {
                    *data = loaded
                        .entry(sha256.clone())
                        .or_insert_with(|| read_image(&image_path(dir, sha256, mime_type)))
                        .clone();
                }
                continue;
            }
            _ => continue,
        };
        for block in content.iter_mut() {
            if let UserContent::Image {
                mime_type,
                sha256,
                data,
                ..
            } = block
            {
                if data.base64().is_some() {
                    continue;
                }
                *data = loaded
                    .entry(sha256.clone())
                    .or_insert_with(|| read_image(&image_path(dir, sha256, mime_type)))
                    .clone();
            }
        }
    }
}

fn read_image(path: &Path) -> ImageData {
    match std::fs::read(path) {
        Ok(bytes) => ImageData(Some(
            base64::engine::general_purpose::STANDARD
                .encode(bytes)
                .into(),
        )),
        Err(e) => {
            tracing::warn!("image {} could not be read: {e}", path.display());
            ImageData(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(mime: &str, data: &str) -> UserContent {
        UserContent::Image {
            mime_type: mime.into(),
            sha256: String::new(),
            bytes: 0,
            data: ImageData(Some(data.into())),
        }
    }

    fn policy(vision: bool, max_bytes: u64) -> ImagePolicy {
        ImagePolicy {
            model: "m".into(),
            vision,
            max_bytes,
        }
    }

    #[test]
    fn an_image_is_stored_once_by_hash_and_named_in_the_content() {
        let dir = tempfile::tempdir().unwrap();
        let data = base64::engine::general_purpose::STANDARD.encode(b"\x89PNG fake");
        let content = vec![image("image/png", &data), image("image/png", &data)];
        let admitted = admit_images(content, dir.path(), &policy(true, 1024)).unwrap();
        let UserContent::Image { sha256, bytes, .. } = &admitted[0] else {
            panic!("{admitted:?}")
        };
        assert_eq!(*bytes, 9);
        assert_eq!(sha256.len(), 64);
        let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(files.len(), 1);
        assert_eq!(
            std::fs::read(image_path(dir.path(), sha256, "image/png")).unwrap(),
            b"\x89PNG fake"
        );
    }

    #[test]
    fn refusals_say_why_and_store_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let big = base64::engine::general_purpose::STANDARD.encode(vec![7u8; 2000]);
        let small = base64::engine::general_purpose::STANDARD.encode(b"ok");
        let cases = [
            (
                vec![image("image/png", &small)],
                policy(false, 1024),
                "without vision",
            ),
            (
                vec![image("image/png", &small), image("image/png", &big)],
                policy(true, 1024),
                "over the 1 KB limit",
            ),
            (
                vec![image("image/bmp", &small)],
                policy(true, 1024),
                "unsupported image type `image/bmp`",
            ),
            (
                vec![image("image/png", "not base64!")],
                policy(true, 1024),
                "not valid base64",
            ),
        ];
        for (content, policy, needle) in cases {
            let error = admit_images(content, dir.path(), &policy).unwrap_err();
            assert!(error.contains(needle), "{error}");
        }
        assert!(!dir.path().join("x").exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
