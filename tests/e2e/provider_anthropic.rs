//! The Anthropic Messages provider against the scripted model server.

use serde_json::json;
use tandem::config::{ModelConfig, ProviderKind};
use tandem::provider::anthropic::{AnthropicProvider, DEFAULT_MAX_TOKENS};
use tandem::provider::{
    from_config, CachedMessage, ErrorKind, ModelMessage, ModelRequest, Provider, ProviderError,
    StreamEvent, ToolSpec,
};
use tandem::vocab::event::{FinishReason, Thinking, ToolCallRequest, Usage};

use crate::support::model_server::anthropic::{self, Block};
use crate::support::model_server::{ModelServer, Reply, SseStep, MODEL_NAME};
use crate::support::{drain, Drained};

fn user(text: &str) -> Vec<ModelMessage> {
    vec![ModelMessage::user(text)]
}

/// The messages as the projection holds them, beside their serialized forms.
fn cached(messages: &[ModelMessage]) -> Vec<CachedMessage> {
    messages.iter().cloned().map(CachedMessage::new).collect()
}

fn request(messages: &[CachedMessage]) -> ModelRequest<'_> {
    ModelRequest {
        messages,
        tools: &[],
        max_output_tokens: None,
    }
}

async fn start() -> (ModelServer, AnthropicProvider) {
    let server = ModelServer::start().await;
    let provider = AnthropicProvider::new(&server.model_config(ProviderKind::Anthropic));
    (server, provider)
}

async fn call(provider: &AnthropicProvider, messages: &[ModelMessage]) -> Drained {
    match provider.stream(request(&cached(messages))).await {
        Ok(stream) => drain(stream).await,
        Err(error) => panic!("request failed before streaming: {error:?}"),
    }
}

async fn call_err(provider: &AnthropicProvider) -> ProviderError {
    match provider.stream(request(&cached(&user("hi")))).await {
        Ok(stream) => panic!("expected an error, got a stream: {:?}", drain(stream).await),
        Err(error) => error,
    }
}

/// The whole prompt counts as input (uncached, cache reads and cache
/// writes); only cache reads are cached.
const SCRIPTED_USAGE: Usage = Usage {
    input_tokens: anthropic::INPUT_TOKENS
        + anthropic::CACHE_READ_TOKENS
        + anthropic::CACHE_CREATION_TOKENS,
    output_tokens: anthropic::OUTPUT_TOKENS,
    cached_tokens: anthropic::CACHE_READ_TOKENS,
};

#[tokio::test]
async fn text_streams_as_deltas_and_end_turn_completes_as_stop() {
    let (server, provider) = start().await;
    server.push(anthropic::text(["Hel", "lo"]));

    let drained = call(&provider, &user("hi")).await;

    assert_eq!(drained.text_deltas(), ["Hel", "lo"]);
    assert_eq!(drained.completed_count(), 1);
    let completion = drained.completion();
    assert_eq!(completion.text, "Hello");
    assert_eq!(completion.finish_reason, FinishReason::Stop);
    assert_eq!(completion.thinking, None);
    assert_eq!(completion.usage, SCRIPTED_USAGE);
    assert_eq!(provider.name(), "anthropic");
    assert_eq!(provider.model(), MODEL_NAME);
}

#[tokio::test]
async fn thinking_with_signature_text_and_two_tool_uses_complete_as_one_message() {
    let (server, provider) = start().await;
    server.push(anthropic::message(
        &[
            Block::Thinking {
                pieces: &["I should ", "read both."],
                signature: "EqQBCkYIARgCsig-abc123",
            },
            Block::Text(&["Reading ", "them."]),
            Block::ToolUse {
                id: "toolu_01",
                name: "read_file",
                input_json: r#"{"path":"src/lib.rs"}"#,
            },
            Block::ToolUse {
                id: "toolu_02",
                name: "grep",
                input_json: r#"{"pattern":"todo!","limit":5}"#,
            },
        ],
        "tool_use",
    ));

    let drained = call(&provider, &user("look")).await;

    assert_eq!(drained.thought_deltas(), ["I should ", "read both."]);
    assert_eq!(drained.text_deltas(), ["Reading ", "them."]);
    let started: Vec<_> = drained
        .events
        .iter()
        .filter(|e| matches!(e, StreamEvent::ToolCallStarted { .. }))
        .collect();
    assert_eq!(
        started,
        [
            &StreamEvent::ToolCallStarted {
                index: 0,
                id: "toolu_01".into(),
                name: "read_file".into()
            },
            &StreamEvent::ToolCallStarted {
                index: 1,
                id: "toolu_02".into(),
                name: "grep".into()
            },
        ]
    );
    let completion = drained.completion();
    assert_eq!(
        completion.thinking,
        Some(Thinking {
            text: "I should read both.".into(),
            signature: Some("EqQBCkYIARgCsig-abc123".into()),
        })
    );
    assert_eq!(completion.text, "Reading them.");
    assert_eq!(
        completion.tool_calls,
        [
            ToolCallRequest {
                id: "toolu_01".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"src/lib.rs"}"#.into()
            },
            ToolCallRequest {
                id: "toolu_02".into(),
                name: "grep".into(),
                arguments: r#"{"pattern":"todo!","limit":5}"#.into()
            },
        ]
    );
    assert_eq!(completion.finish_reason, FinishReason::ToolCalls);
    assert_eq!(completion.usage, SCRIPTED_USAGE);
}

#[tokio::test]
async fn a_tool_use_without_input_deltas_gets_empty_object_arguments() {
    let (server, provider) = start().await;
    let mut steps = vec![anthropic::message_start()];
    steps.push(anthropic::event(
        json!({"type": "content_block_start", "index": 0,
        "content_block": {"type": "tool_use", "id": "toolu_9", "name": "list_files", "input": {}}}),
    ));
    steps.push(anthropic::event(
        json!({"type": "content_block_stop", "index": 0}),
    ));
    steps.push(anthropic::message_delta("tool_use"));
    steps.push(anthropic::message_stop());
    server.push(Reply::Sse(steps));

    let completion = call(&provider, &user("ls")).await.completion().clone();
    assert_eq!(completion.tool_calls[0].arguments, "{}");
}

#[tokio::test]
async fn stop_reasons_map_to_finish_reasons() {
    let (server, provider) = start().await;
    for (stop_reason, expected) in [
        ("end_turn", FinishReason::Stop),
        ("tool_use", FinishReason::ToolCalls),
        ("max_tokens", FinishReason::Length),
        ("stop_sequence", FinishReason::StopSequence),
        ("refusal", FinishReason::ContentFilter),
    ] {
        server.push(anthropic::message(&[Block::Text(&["x"])], stop_reason));
        let completion = call(&provider, &user("x")).await.completion().clone();
        assert_eq!(completion.finish_reason, expected, "{stop_reason}");
    }
}

#[tokio::test]
async fn request_body_has_top_level_system_max_tokens_tool_results_and_signed_thinking_first() {
    let (server, provider) = start().await;
    server.push(anthropic::text(["done"]));
    let messages = vec![
        ModelMessage::System {
            text: "You are tandem.".into(),
        },
        ModelMessage::System {
            text: "Workspace: /w".into(),
        },
        ModelMessage::user("read a and b"),
        ModelMessage::Assistant {
            text: "Reading.".into(),
            thinking: Some(Thinking {
                text: "need both".into(),
                signature: Some("sig-1".into()),
            }),
            tool_calls: vec![
                ToolCallRequest {
                    id: "toolu_a".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"a"}"#.into(),
                },
                ToolCallRequest {
                    id: "toolu_b".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"#.into(),
                },
            ],
        },
        ModelMessage::Tool {
            call_id: "toolu_a".into(),
            content: "A".into(),
        },
        ModelMessage::Tool {
            call_id: "toolu_b".into(),
            content: "B".into(),
        },
        ModelMessage::user("also check c"),
    ];
    let tools = vec![ToolSpec {
        name: "read_file".into(),
        description: "Reads a file".into(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    }];

    let stream = provider
        .stream(ModelRequest {
            messages: &cached(&messages),
            tools: &tools,
            max_output_tokens: None,
        })
        .await
        .unwrap();
    drain(stream).await.completion();

    let requests = server.wait_for_requests(1).await;
    let sent = &requests[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(
        sent.body,
        json!({
            "model": MODEL_NAME,
            "max_tokens": DEFAULT_MAX_TOKENS,
            "stream": true,
            "system": "You are tandem.\n\nWorkspace: /w",
            "tools": [{
                "name": "read_file",
                "description": "Reads a file",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}
            }],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "read a and b"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "need both", "signature": "sig-1"},
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {"path": "a"}},
                    // Malformed arguments go back as an empty object.
                    {"type": "tool_use", "id": "toolu_b", "name": "read_file", "input": {}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": "A"},
                    {"type": "tool_result", "tool_use_id": "toolu_b", "content": "B"},
                    {"type": "text", "text": "also check c"}
                ]}
            ]
        })
    );
}

#[tokio::test]
async fn max_tokens_comes_from_the_request_when_set() {
    let (server, provider) = start().await;
    server.push(anthropic::text(["ok"]));
    let messages = user("x");
    let stream = provider
        .stream(ModelRequest {
            messages: &cached(&messages),
            tools: &[],
            max_output_tokens: Some(512),
        })
        .await
        .unwrap();
    drain(stream).await.completion();
    assert_eq!(server.wait_for_requests(1).await[0].body["max_tokens"], 512);
}

#[tokio::test]
async fn the_api_key_is_sent_as_x_api_key_only_when_its_variable_is_set() {
    let server = ModelServer::start().await;
    let config = ModelConfig {
        api_key_env: "TANDEM_TEST_ANTHROPIC_KEY_HEADER".into(),
        ..server.model_config(ProviderKind::Anthropic)
    };
    let provider = AnthropicProvider::new(&config);

    server.push(anthropic::text(["a"]));
    call(&provider, &user("x")).await.completion();
    std::env::set_var("TANDEM_TEST_ANTHROPIC_KEY_HEADER", "sk-ant-test");
    server.push(anthropic::text(["b"]));
    call(&provider, &user("x")).await.completion();

    let requests = server.wait_for_requests(2).await;
    assert_eq!(requests[0].header("x-api-key"), None);
    assert_eq!(requests[1].header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(requests[1].header("authorization"), None);
}

#[tokio::test]
async fn an_overloaded_error_event_mid_stream_is_overloaded_without_completion() {
    let (server, provider) = start().await;
    server.push(Reply::Sse(vec![
        anthropic::message_start(),
        anthropic::event(json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}})),
        anthropic::event(json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "Hel"}})),
        anthropic::error_event("overloaded_error", "Overloaded"),
    ]));

    let drained = call(&provider, &user("x")).await;
    assert_eq!(drained.text_deltas(), ["Hel"]);
    assert_eq!(drained.completed_count(), 0);
    let error = drained.error.expect("an error");
    assert_eq!(error.kind, ErrorKind::Overloaded);
    assert!(error.message.contains("Overloaded"), "{}", error.message);
}

#[tokio::test]
async fn http_529_is_overloaded() {
    let (server, provider) = start().await;
    server.push(anthropic::error(529, "overloaded_error", "Overloaded"));
    let error = call_err(&provider).await;
    assert_eq!(error.kind, ErrorKind::Overloaded);
    assert_eq!(error.status, Some(529));
    assert_eq!(error.message, "model server returned HTTP 529: Overloaded");
}

#[tokio::test]
async fn http_400_prompt_too_long_is_context_overflow() {
    let (server, provider) = start().await;
    server.push(anthropic::error(
        400,
        "invalid_request_error",
        "prompt is too long: 210000 tokens > 200000 maximum",
    ));
    let error = call_err(&provider).await;
    assert_eq!(error.kind, ErrorKind::ContextOverflow);
}

#[tokio::test]
async fn a_connection_dropped_mid_stream_is_stream_dropped() {
    let (server, provider) = start().await;
    let mut steps = match anthropic::text(["Hel", "lo"]) {
        Reply::Sse(steps) => steps,
        _ => unreachable!(),
    };
    // Cut after the first text delta: start, ping, block start, delta.
    steps.truncate(4);
    steps.push(SseStep::Drop);
    server.push(Reply::Sse(steps));

    let drained = call(&provider, &user("x")).await;
    assert_eq!(drained.text_deltas(), ["Hel"]);
    assert_eq!(drained.completed_count(), 0);
    assert_eq!(
        drained.error.expect("an error").kind,
        ErrorKind::StreamDropped
    );
}

#[tokio::test]
async fn from_config_builds_the_configured_provider() {
    let server = ModelServer::start().await;
    let anthropic_provider = from_config(&server.model_config(ProviderKind::Anthropic));
    let openai_provider = from_config(&server.model_config(ProviderKind::Openai));
    assert_eq!(anthropic_provider.name(), "anthropic");
    assert_eq!(openai_provider.name(), "openai");
    assert_eq!(openai_provider.model(), MODEL_NAME);
}

#[tokio::test]
async fn an_effort_asks_for_thinking_with_its_budget_and_room_above_it() {
    let server = ModelServer::start().await;
    let config = server.model_config(ProviderKind::Anthropic);
    let thinking = AnthropicProvider::new(&config).with_effort(Some("medium"));
    server.push(anthropic::text(["a"]));
    call(&thinking, &user("x")).await.completion();
    let none = AnthropicProvider::new(&config).with_effort(Some("none"));
    server.push(anthropic::text(["b"]));
    call(&none, &user("x")).await.completion();

    let requests = server.wait_for_requests(2).await;
    assert_eq!(
        requests[0].body["thinking"],
        json!({"type": "enabled", "budget_tokens": 8192})
    );
    assert_eq!(
        requests[0].body["max_tokens"],
        8192 + DEFAULT_MAX_TOKENS,
        "max_tokens must exceed the budget"
    );
    assert!(requests[1].body.get("thinking").is_none());
    assert_eq!(requests[1].body["max_tokens"], DEFAULT_MAX_TOKENS);
}
