//! How `tandem replay`'s trajectory names what it walks: model requests,
//! what they streamed, finish reasons and tool statuses.

use serde::Serialize;

use crate::vocab::event::{FinishReason, ToolStatus};

pub(super) fn request_name(purpose: &str, step: u32, attempt: u32) -> String {
    match purpose {
        "compaction" => format!("model request (step {step}, compaction summary)"),
        _ => format!("model request (step {step}, attempt {attempt})"),
    }
}

pub(super) fn streamed(chunks: usize, text: &str) -> String {
    match chunks {
        0 => ", nothing streamed".to_string(),
        1 => format!(
            ", 1 chunk streamed ({} chars of answer)",
            text.chars().count()
        ),
        n => format!(
            ", {n} chunks streamed ({} chars of answer)",
            text.chars().count()
        ),
    }
}

/// A value's protocol name: its serde name (`tool_calls`, `not_run`).
pub(super) fn serde_name<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

pub(super) fn finish_name(finish: FinishReason) -> String {
    serde_name(&finish)
}

pub(super) fn status_name(status: ToolStatus) -> String {
    serde_name(&status)
}
