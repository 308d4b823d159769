//! Unit tests of the Anthropic provider's body building and decoding.

use super::*;
use serde_json::json;

#[test]
fn malformed_tool_arguments_are_sent_as_an_empty_object() {
    let call = |arguments: &str| ToolCallRequest {
        id: "t".into(),
        name: "grep".into(),
        arguments: arguments.into(),
    };
    let input = |arguments: &str| match tool_use_block(&call(arguments)) {
        Block::ToolUse { input, .. } => input,
        _ => unreachable!(),
    };
    assert_eq!(input(r#"{"pattern":"x"}"#), json!({"pattern": "x"}));
    assert_eq!(input(r#"{"pattern":"#), json!({}));
    assert_eq!(input(r#"[1]"#), json!({}));
    assert_eq!(input(""), json!({}));
}

#[test]
fn unsigned_thinking_and_empty_text_are_not_sent() {
    let messages = [
        ModelMessage::user("q"),
        ModelMessage::Assistant {
            text: String::new(),
            thinking: Some(Thinking {
                text: "from another provider".into(),
                signature: None,
            }),
            tool_calls: vec![],
        },
        ModelMessage::user("again"),
    ];
    let body = serde_json::to_value(conversation(messages.iter())).unwrap();
    assert_eq!(
        body,
        json!([{"role": "user", "content": [
            {"type": "text", "text": "q"},
            {"type": "text", "text": "again"}
        ]}])
    );
}

#[test]
fn stream_errors_are_classified_by_type() {
    let kind = |kind: &str, message: &str| {
        stream_error(&ApiError {
            kind: kind.into(),
            message: message.into(),
        })
        .kind
    };
    assert_eq!(
        kind("overloaded_error", "Overloaded"),
        ErrorKind::Overloaded
    );
    assert_eq!(kind("rate_limit_error", "slow"), ErrorKind::RateLimited);
    assert_eq!(kind("authentication_error", "bad key"), ErrorKind::Auth);
    assert_eq!(kind("permission_error", "no"), ErrorKind::Auth);
    assert_eq!(
        kind(
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000 maximum"
        ),
        ErrorKind::ContextOverflow
    );
    assert_eq!(
        kind("invalid_request_error", "bad field"),
        ErrorKind::BadRequest
    );
}
