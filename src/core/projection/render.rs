//! How the log's content reads to the model: user messages with their
//! attached files, and tool results prefixed by how the call ended, so the
//! model cannot mistake a failure for output.

use crate::vocab::event::{ToolStatus, UserContent};

/// The text the model reads for a user message.
pub fn render_user_content(content: &[UserContent]) -> String {
    let mut out = String::new();
    for block in content {
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
        }
    }
    out
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
