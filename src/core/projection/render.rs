//! How the log's content reads to the model: user messages with their
//! attached files, and tool results prefixed by how the call ended, so the
//! model cannot mistake a failure for output.

use crate::provider::ImagePart;
use crate::vocab::event::{ToolStatus, UserContent};
use crate::vocab::image::{human_size, image_kind};

/// The text the model reads for a user message.
pub fn render_user_content(content: &[UserContent]) -> String {
    let mut out = String::new();
    for block in content {
        // An image in memory is sent as an image part, not as text.
        if let UserContent::Image { data, .. } = block {
            if data.base64().is_some() {
                continue;
            }
        }
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        match block {
            UserContent::Text { text } => out.push_str(text),
            UserContent::Resource {
                uri,
                text: Some(text),
            } => {
                out.push_str(&format!("<file uri=\"{uri}\">\n{text}\n</file>"));
            }
            UserContent::Resource { uri, text: None } => {
                out.push_str(&format!("<file uri=\"{uri}\" />"));
            }
            UserContent::Image {
                mime_type, bytes, ..
            } => out.push_str(&format!(
                "[an image ({}, {}) was attached here; its file is no longer available]",
                image_kind(mime_type),
                human_size(*bytes)
            )),
        }
    }
    out
}

/// The images of a user message that are in memory, in order.
pub fn user_images(content: &[UserContent]) -> Vec<ImagePart> {
    content
        .iter()
        .filter_map(|block| match block {
            UserContent::Image {
                mime_type,
                sha256,
                data,
                ..
            } => data.base64().map(|data| ImagePart {
                mime_type: mime_type.clone(),
                sha256: sha256.clone(),
                data: data.clone(),
            }),
            _ => None,
        })
        .collect()
}

/// The text the model reads for a tool result: the output, prefixed when
/// the call did not complete so the model cannot mistake it for output.
pub fn render_tool_result(status: ToolStatus, output: &str) -> String {
    match status {
        ToolStatus::Completed => output.to_string(),
        ToolStatus::Failed => format!("error: {output}"),
        ToolStatus::Aborted => format!("aborted: {output}"),
        ToolStatus::NotRun => format!("not run: {output}"),
        ToolStatus::Rejected => format!("rejected: {output}"),
    }
}
