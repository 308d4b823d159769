//! Scripts in the Anthropic Messages streaming format: named events
//! (`event: message_start` ...) whose data repeats the type.

use serde_json::{json, Value};

use super::{Reply, SseStep};

/// Usage every finished script reports: `message_start` gives 20 input
/// tokens, 6 read from the cache and 2 written to it; `message_delta`
/// gives 7 output tokens.
pub const INPUT_TOKENS: u64 = 20;
pub const CACHE_READ_TOKENS: u64 = 6;
pub const CACHE_CREATION_TOKENS: u64 = 2;
pub const OUTPUT_TOKENS: u64 = 7;

/// One content block of a scripted message.
#[derive(Debug, Clone, Copy)]
pub enum Block<'a> {
    /// `thinking_delta`s with these pieces, then the signature in two
    /// `signature_delta`s.
    Thinking {
        pieces: &'a [&'a str],
        signature: &'a str,
    },
    /// `text_delta`s with these pieces.
    Text(&'a [&'a str]),
    /// A `tool_use` block whose input JSON arrives in two
    /// `input_json_delta`s.
    ToolUse {
        id: &'a str,
        name: &'a str,
        input_json: &'a str,
    },
}

/// An event named after its data's `type`.
pub fn event(data: Value) -> SseStep {
    let name = data["type"].as_str().unwrap_or("message").to_string();
    SseStep::event(name, data.to_string())
}

pub fn message_start() -> SseStep {
    event(json!({"type": "message_start", "message": {
        "id": "msg_scripted", "type": "message", "role": "assistant",
        "model": super::MODEL_NAME, "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {
            "input_tokens": INPUT_TOKENS, "output_tokens": 1,
            "cache_read_input_tokens": CACHE_READ_TOKENS,
            "cache_creation_input_tokens": CACHE_CREATION_TOKENS
        }
    }}))
}

pub fn ping() -> SseStep {
    event(json!({"type": "ping"}))
}

/// `message_delta` with `stop_reason` (`end_turn`, `tool_use`,
/// `max_tokens`, `stop_sequence`, `refusal`) and the output usage.
pub fn message_delta(stop_reason: &str) -> SseStep {
    event(json!({"type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": null},
        "usage": {"output_tokens": OUTPUT_TOKENS}}))
}

pub fn message_stop() -> SseStep {
    event(json!({"type": "message_stop"}))
}

/// The steps of content block `index`: start, deltas, stop.
pub fn block(index: usize, block: &Block<'_>) -> Vec<SseStep> {
    let delta = |delta: Value| {
        event(json!({"type": "content_block_delta", "index": index, "delta": delta}))
    };
    let (start, deltas): (Value, Vec<SseStep>) = match *block {
        Block::Thinking { pieces, signature } => {
            let (a, b) = super::split_in_two(signature);
            let mut deltas: Vec<SseStep> = pieces
                .iter()
                .map(|p| delta(json!({"type": "thinking_delta", "thinking": p})))
                .collect();
            deltas.push(delta(json!({"type": "signature_delta", "signature": a})));
            deltas.push(delta(json!({"type": "signature_delta", "signature": b})));
            (
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                deltas,
            )
        }
        Block::Text(pieces) => (
            json!({"type": "text", "text": ""}),
            pieces
                .iter()
                .map(|p| delta(json!({"type": "text_delta", "text": p})))
                .collect(),
        ),
        Block::ToolUse {
            id,
            name,
            input_json,
        } => {
            let (a, b) = super::split_in_two(input_json);
            (
                json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                [a, b]
                    .iter()
                    .map(|p| delta(json!({"type": "input_json_delta", "partial_json": p})))
                    .collect(),
            )
        }
    };
    let mut steps = vec![event(
        json!({"type": "content_block_start", "index": index, "content_block": start}),
    )];
    steps.extend(deltas);
    steps.push(event(json!({"type": "content_block_stop", "index": index})));
    steps
}

/// A whole message: `message_start`, a `ping`, the blocks,
/// `message_delta` with `stop_reason`, `message_stop`.
pub fn message(blocks: &[Block<'_>], stop_reason: &str) -> Reply {
    let mut steps = vec![message_start(), ping()];
    for (index, b) in blocks.iter().enumerate() {
        steps.extend(block(index, b));
    }
    steps.push(message_delta(stop_reason));
    steps.push(message_stop());
    Reply::Sse(steps)
}

/// Text streamed in the given pieces, then `end_turn`.
pub fn text<const N: usize>(pieces: [&str; N]) -> Reply {
    message(&[Block::Text(&pieces)], "end_turn")
}

/// A signed thinking block, then `tool_use` blocks `(id, name,
/// input_json)`, then `tool_use`.
pub fn thinking_and_tool_calls(
    thinking: &str,
    signature: &str,
    calls: &[(&str, &str, &str)],
) -> Reply {
    let pieces = [thinking];
    let mut blocks = vec![Block::Thinking {
        pieces: &pieces,
        signature,
    }];
    blocks.extend(calls.iter().map(|&(id, name, input_json)| Block::ToolUse {
        id,
        name,
        input_json,
    }));
    message(&blocks, "tool_use")
}

/// An `error` event inside the stream (`overloaded_error`, ...).
pub fn error_event(kind: &str, message: &str) -> SseStep {
    event(json!({"type": "error", "error": {"type": kind, "message": message}}))
}

/// An HTTP error with an Anthropic-shaped body.
pub fn error(status: u16, kind: &str, message: &str) -> Reply {
    Reply::status(
        status,
        json!({"type": "error", "error": {"type": kind, "message": message}}).to_string(),
    )
}
