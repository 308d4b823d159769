//! Scripts in the OpenAI chat-completions streaming format.

use serde_json::{json, Value};

use super::{Reply, SseStep};

/// Usage every finished script reports: 10 prompt tokens of which 4
/// cached, and 5 completion tokens.
pub const PROMPT_TOKENS: u64 = 10;
pub const CACHED_TOKENS: u64 = 4;
pub const COMPLETION_TOKENS: u64 = 5;

/// A `chat.completion.chunk` event whose only choice has `delta`.
pub fn delta(delta: Value) -> SseStep {
    chunk(json!([{"index": 0, "delta": delta, "finish_reason": null}]))
}

/// The chunk carrying `finish_reason` (`stop`, `tool_calls`, `length`, ...).
pub fn finish(reason: &str) -> SseStep {
    chunk(json!([{"index": 0, "delta": {}, "finish_reason": reason}]))
}

/// The usage chunk sent with `stream_options.include_usage`: `choices: []`.
pub fn usage(prompt: u64, completion: u64, cached: u64) -> SseStep {
    SseStep::data(
        json!({
            "id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0,
            "model": super::MODEL_NAME, "choices": [],
            "usage": {
                "prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached}
            }
        })
        .to_string(),
    )
}

/// `data: [DONE]`.
pub fn done() -> SseStep {
    SseStep::data("[DONE]")
}

/// An `{"error": {...}}` object inside the stream.
pub fn stream_error(kind: &str, message: &str) -> SseStep {
    SseStep::data(json!({"error": {"message": message, "type": kind}}).to_string())
}

/// An HTTP error with an OpenAI-shaped body.
pub fn error(status: u16, message: &str) -> Reply {
    Reply::status(
        status,
        json!({"error": {"message": message, "type": "invalid_request_error", "code": null}})
            .to_string(),
    )
}

/// `finish_reason`, usage, `[DONE]`: how every script ends.
pub fn ending(reason: &str) -> Vec<SseStep> {
    vec![
        finish(reason),
        usage(PROMPT_TOKENS, COMPLETION_TOKENS, CACHED_TOKENS),
        done(),
    ]
}

/// Text streamed in the given pieces, then `stop`.
pub fn text<const N: usize>(pieces: [&str; N]) -> Reply {
    let mut steps = vec![delta(json!({"role": "assistant", "content": ""}))];
    steps.extend(pieces.iter().map(|piece| delta(json!({"content": piece}))));
    steps.extend(ending("stop"));
    Reply::Sse(steps)
}

/// `reasoning_content` pieces, then text pieces, then `stop`.
pub fn reasoning_then_text(reasoning: &[&str], text: &[&str]) -> Reply {
    let mut steps = vec![delta(json!({"role": "assistant", "content": null}))];
    steps.extend(
        reasoning
            .iter()
            .map(|piece| delta(json!({"reasoning_content": piece}))),
    );
    steps.extend(text.iter().map(|piece| delta(json!({"content": piece}))));
    steps.extend(ending("stop"));
    Reply::Sse(steps)
}

/// Parallel tool calls `(id, name, arguments_json)`, then `tool_calls`.
/// Each call opens with a delta carrying index, id and name; its
/// arguments follow in two fragments that carry only the index, and the
/// fragments of different calls interleave, as some servers send them.
pub fn tool_calls(calls: &[(&str, &str, &str)]) -> Reply {
    let mut steps = vec![delta(json!({"role": "assistant", "content": null}))];
    let halves: Vec<(&str, &str)> = calls
        .iter()
        .map(|(_, _, args)| super::split_in_two(args))
        .collect();
    let call_delta = |body: Value| delta(json!({"tool_calls": [body]}));
    for (index, (id, name, _)) in calls.iter().enumerate() {
        steps.push(call_delta(
            json!({"index": index, "id": id, "type": "function",
                   "function": {"name": name, "arguments": ""}}),
        ));
        steps.push(call_delta(
            json!({"index": index, "function": {"arguments": halves[index].0}}),
        ));
    }
    for (index, (_, second)) in halves.iter().enumerate() {
        steps.push(call_delta(
            json!({"index": index, "function": {"arguments": second}}),
        ));
    }
    steps.extend(ending("tool_calls"));
    Reply::Sse(steps)
}

fn chunk(choices: Value) -> SseStep {
    SseStep::data(
        json!({
            "id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0,
            "model": super::MODEL_NAME, "choices": choices
        })
        .to_string(),
    )
}
