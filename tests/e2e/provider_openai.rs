//! The OpenAI-compatible provider against the scripted model server.

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use tandem::config::{ModelConfig, ProviderKind};
use tandem::provider::openai::OpenAiProvider;
use tandem::provider::{
    CachedMessage, ErrorKind, ModelMessage, ModelRequest, Provider, ProviderError, StreamEvent,
    ToolSpec,
};
use tandem::vocab::event::{FinishReason, Thinking, ToolCallRequest, Usage};

use crate::support::model_server::{
    openai, unused_base_url, ModelServer, Reply, SseStep, MODEL_NAME,
};
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

async fn start() -> (ModelServer, OpenAiProvider) {
    let server = ModelServer::start().await;
    let provider = OpenAiProvider::new(&server.model_config(ProviderKind::Openai));
    (server, provider)
}

/// Streams one request to the end.
async fn call(provider: &OpenAiProvider, messages: &[ModelMessage]) -> Drained {
    match provider.stream(request(&cached(messages))).await {
        Ok(stream) => drain(stream).await,
        Err(error) => panic!("request failed before streaming: {error:?}"),
    }
}

/// A request expected to fail before any of the body is streamed.
async fn call_err(provider: &OpenAiProvider) -> ProviderError {
    match provider.stream(request(&cached(&user("hi")))).await {
        Ok(stream) => panic!("expected an error, got a stream: {:?}", drain(stream).await),
        Err(error) => error,
    }
}

#[tokio::test]
async fn streamed_text_arrives_as_deltas_then_one_completion_with_text_and_usage() {
    let (server, provider) = start().await;
    server.push(openai::text(["Hel", "lo", " world"]));

    let drained = call(&provider, &user("hi")).await;

    assert_eq!(drained.text_deltas(), ["Hel", "lo", " world"]);
    assert_eq!(drained.completed_count(), 1);
    assert!(matches!(
        drained.events.last(),
        Some(StreamEvent::Completed(_))
    ));
    let completion = drained.completion();
    assert_eq!(completion.text, "Hello world");
    assert_eq!(completion.finish_reason, FinishReason::Stop);
    assert!(completion.tool_calls.is_empty());
    assert_eq!(completion.thinking, None);
    assert_eq!(
        completion.usage,
        Usage {
            input_tokens: openai::PROMPT_TOKENS,
            output_tokens: openai::COMPLETION_TOKENS,
            cached_tokens: openai::CACHED_TOKENS,
        }
    );
    assert_eq!(provider.name(), "openai");
    assert_eq!(provider.model(), MODEL_NAME);
}

#[tokio::test]
async fn request_body_carries_model_stream_options_tools_and_messages_in_order() {
    let (server, provider) = start().await;
    server.push(openai::text(["ok"]));
    let messages = vec![
        ModelMessage::System {
            text: "be brief".into(),
        },
        ModelMessage::user("read a and b"),
        ModelMessage::Assistant {
            text: String::new(),
            thinking: Some(Thinking {
                text: "hmm".into(),
                signature: None,
            }),
            tool_calls: vec![
                ToolCallRequest {
                    id: "call_a".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"a"}"#.into(),
                },
                ToolCallRequest {
                    id: "call_b".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"b"}"#.into(),
                },
            ],
        },
        ModelMessage::Tool {
            call_id: "call_a".into(),
            content: "A".into(),
        },
        ModelMessage::Tool {
            call_id: "call_b".into(),
            content: "B".into(),
        },
        ModelMessage::Assistant {
            text: "Both read.".into(),
            thinking: None,
            tool_calls: vec![],
        },
        ModelMessage::user("thanks"),
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
            max_output_tokens: Some(256),
        })
        .await
        .unwrap();
    drain(stream).await.completion();

    let requests = server.wait_for_requests(1).await;
    let sent = &requests[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(
        sent.body,
        json!({
            "model": MODEL_NAME,
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": 256,
            "tools": [{"type": "function", "function": {
                "name": "read_file",
                "description": "Reads a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}
            }}],
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "read a and b"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}},
                    {"id": "call_b", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"b\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_a", "content": "A"},
                {"role": "tool", "tool_call_id": "call_b", "content": "B"},
                {"role": "assistant", "content": "Both read."},
                {"role": "user", "content": "thanks"}
            ]
        })
    );
}

#[tokio::test]
async fn tools_and_max_tokens_are_omitted_when_not_given() {
    let (server, provider) = start().await;
    server.push(openai::text(["ok"]));
    call(&provider, &user("hi")).await.completion();

    let body = &server.wait_for_requests(1).await[0].body;
    assert!(body.get("tools").is_none(), "{body}");
    assert!(body.get("max_tokens").is_none(), "{body}");
}

#[tokio::test]
async fn parallel_tool_calls_are_accumulated_by_index_when_later_deltas_carry_no_id() {
    let (server, provider) = start().await;
    server.push(openai::tool_calls(&[
        ("call_1", "read_file", r#"{"path":"src/main.rs"}"#),
        ("call_2", "grep", r#"{"pattern":"fn main"}"#),
    ]));

    let drained = call(&provider, &user("look")).await;

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
                id: "call_1".into(),
                name: "read_file".into()
            },
            &StreamEvent::ToolCallStarted {
                index: 1,
                id: "call_2".into(),
                name: "grep".into()
            },
        ]
    );
    let completion = drained.completion();
    assert_eq!(completion.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        completion.tool_calls,
        [
            ToolCallRequest {
                id: "call_1".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"src/main.rs"}"#.into()
            },
            ToolCallRequest {
                id: "call_2".into(),
                name: "grep".into(),
                arguments: r#"{"pattern":"fn main"}"#.into()
            },
        ]
    );
}

#[tokio::test]
async fn reasoning_content_and_reasoning_become_thought_deltas_and_thinking() {
    let (server, provider) = start().await;
    server.push(openai::reasoning_then_text(
        &["Let me ", "think."],
        &["Answer"],
    ));
    let drained = call(&provider, &user("q")).await;
    assert_eq!(drained.thought_deltas(), ["Let me ", "think."]);
    assert_eq!(drained.text_deltas(), ["Answer"]);
    let completion = drained.completion();
    assert_eq!(
        completion.thinking,
        Some(Thinking {
            text: "Let me think.".into(),
            signature: None
        })
    );
    assert_eq!(completion.text, "Answer");

    // OpenRouter and some vLLM builds name the field `reasoning`.
    let mut steps = vec![
        openai::delta(json!({"reasoning": "hmm"})),
        openai::delta(json!({"content": "ok"})),
    ];
    steps.extend(openai::ending("stop"));
    server.push(Reply::Sse(steps));
    let drained = call(&provider, &user("q")).await;
    assert_eq!(drained.thought_deltas(), ["hmm"]);
    assert_eq!(drained.completion().text, "ok");
}

#[tokio::test]
async fn null_content_in_the_first_delta_is_tolerated() {
    let (server, provider) = start().await;
    // What llama.cpp's server sends.
    let mut steps = vec![
        openai::delta(json!({"role": "assistant", "content": null})),
        openai::delta(json!({"content": "Hi"})),
    ];
    steps.extend(openai::ending("stop"));
    server.push(Reply::Sse(steps));

    let drained = call(&provider, &user("hi")).await;
    assert_eq!(drained.text_deltas(), ["Hi"]);
    assert_eq!(drained.completion().text, "Hi");
}

#[tokio::test]
async fn finish_reason_length_is_output_truncation_not_context_overflow() {
    let (server, provider) = start().await;
    let mut steps = vec![openai::delta(json!({"content": "partial"}))];
    steps.extend(openai::ending("length"));
    server.push(Reply::Sse(steps));

    let drained = call(&provider, &user("write a lot")).await;
    assert!(drained.error.is_none());
    let completion = drained.completion();
    assert_eq!(completion.finish_reason, FinishReason::Length);
    assert_eq!(completion.text, "partial");
}

#[tokio::test]
async fn finish_reason_content_filter_maps_to_content_filter() {
    let (server, provider) = start().await;
    server.push(Reply::Sse(openai::ending("content_filter")));
    let drained = call(&provider, &user("x")).await;
    assert_eq!(
        drained.completion().finish_reason,
        FinishReason::ContentFilter
    );
}

#[tokio::test]
async fn a_body_ending_after_finish_reason_without_done_still_completes() {
    let (server, provider) = start().await;
    server.push(Reply::Sse(vec![
        openai::delta(json!({"content": "ok"})),
        openai::finish("stop"),
        openai::usage(3, 1, 0),
    ]));
    let drained = call(&provider, &user("x")).await;
    let completion = drained.completion();
    assert_eq!(completion.text, "ok");
    assert_eq!(
        completion.usage,
        Usage {
            input_tokens: 3,
            output_tokens: 1,
            cached_tokens: 0
        }
    );
}

#[tokio::test]
async fn a_body_ending_before_finish_reason_is_stream_dropped_not_an_answer() {
    let (server, provider) = start().await;
    // A clean end of the body, but the answer never said it finished.
    server.push(Reply::Sse(vec![openai::delta(
        json!({"content": "half an ans"}),
    )]));
    let drained = call(&provider, &user("x")).await;
    assert_eq!(drained.text_deltas(), ["half an ans"]);
    assert_eq!(drained.completed_count(), 0);
    let error = drained.error.expect("an error");
    assert_eq!(error.kind, ErrorKind::StreamDropped);
    assert!(error.message.contains("incomplete"), "{}", error.message);
}

#[tokio::test]
async fn a_connection_dropped_mid_stream_is_stream_dropped_without_completion() {
    let (server, provider) = start().await;
    server.push(Reply::Sse(vec![
        openai::delta(json!({"content": "Hel"})),
        SseStep::Drop,
    ]));
    let drained = call(&provider, &user("x")).await;
    assert_eq!(drained.text_deltas(), ["Hel"]);
    assert_eq!(drained.completed_count(), 0);
    let error = drained.error.expect("an error");
    assert_eq!(error.kind, ErrorKind::StreamDropped, "{error:?}");
}

#[tokio::test]
async fn an_error_object_inside_the_stream_is_a_classified_error() {
    let (server, provider) = start().await;
    server.push(Reply::Sse(vec![
        openai::delta(json!({"content": "Hel"})),
        openai::stream_error(
            "server_error",
            "The server had an error while processing your request",
        ),
    ]));
    let drained = call(&provider, &user("x")).await;
    assert_eq!(drained.completed_count(), 0);
    let error = drained.error.expect("an error");
    assert_eq!(error.kind, ErrorKind::Overloaded);
    assert!(
        error.message.contains("The server had an error"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn a_chunk_that_is_not_json_is_a_protocol_error() {
    let (server, provider) = start().await;
    server.push(Reply::Sse(vec![SseStep::data("{not json")]));
    let error = call(&provider, &user("x")).await.error.expect("an error");
    assert_eq!(error.kind, ErrorKind::Protocol);
}

#[tokio::test]
async fn http_500_is_overloaded_naming_the_status_and_the_server_message() {
    let (server, provider) = start().await;
    server.push(openai::error(500, "backend exploded"));
    let error = call_err(&provider).await;
    assert_eq!(error.kind, ErrorKind::Overloaded);
    assert_eq!(error.status, Some(500));
    assert_eq!(
        error.message,
        "model server returned HTTP 500 Internal Server Error: backend exploded"
    );
}

#[tokio::test]
async fn an_unscripted_request_gets_500_no_scripted_reply() {
    let (_server, provider) = start().await;
    let error = call_err(&provider).await;
    assert_eq!(error.status, Some(500));
    assert!(
        error.message.contains("no scripted reply"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn http_429_is_rate_limited_with_retry_after() {
    let (server, provider) = start().await;
    server.push(openai::error(429, "Rate limit reached").with_header("Retry-After", "2"));
    let error = call_err(&provider).await;
    assert_eq!(error.kind, ErrorKind::RateLimited);
    assert_eq!(error.status, Some(429));
    assert_eq!(error.retry_after, Some(Duration::from_secs(2)));
}

#[tokio::test]
async fn http_401_is_an_auth_error() {
    let (server, provider) = start().await;
    server.push(openai::error(401, "Incorrect API key provided"));
    let error = call_err(&provider).await;
    assert_eq!(error.kind, ErrorKind::Auth);
    assert!(
        error.message.contains("Incorrect API key provided"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn http_400_about_context_length_is_context_overflow() {
    let (server, provider) = start().await;
    server.push(openai::error(
        400,
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
    ));
    let error = call_err(&provider).await;
    assert_eq!(error.kind, ErrorKind::ContextOverflow);
    assert_eq!(error.status, Some(400));

    server.push(openai::error(400, "Invalid value for 'temperature'"));
    assert_eq!(call_err(&provider).await.kind, ErrorKind::BadRequest);
}

#[tokio::test]
async fn a_refused_connection_is_a_connect_error_naming_the_url_and_what_to_set() {
    let base_url = unused_base_url();
    let provider = OpenAiProvider::new(&ModelConfig {
        base_url: base_url.clone(),
        ..ModelConfig::default()
    });
    let error = call_err(&provider).await;
    assert_eq!(error.kind, ErrorKind::Connect);
    assert_eq!(error.status, None);
    assert_eq!(
        error.message,
        format!(
            "could not connect to the model server at {base_url} (connection refused). \
             Start a server there or set [model] base_url in config.toml (or TANDEM_BASE_URL)."
        )
    );
}

#[tokio::test]
async fn the_api_key_is_sent_as_bearer_only_when_its_variable_is_set() {
    let server = ModelServer::start().await;
    let config = ModelConfig {
        api_key_env: "TANDEM_TEST_OPENAI_KEY_BEARER".into(),
        ..server.model_config(ProviderKind::Openai)
    };
    let provider = OpenAiProvider::new(&config);

    server.push(openai::text(["a"]));
    call(&provider, &user("x")).await.completion();
    std::env::set_var("TANDEM_TEST_OPENAI_KEY_BEARER", "sk-test-123");
    server.push(openai::text(["b"]));
    call(&provider, &user("x")).await.completion();

    let requests = server.wait_for_requests(2).await;
    assert_eq!(requests[0].header("authorization"), None);
    assert_eq!(
        requests[1].header("authorization"),
        Some("Bearer sk-test-123")
    );
}

#[tokio::test]
async fn a_trailing_slash_in_base_url_is_trimmed() {
    let server = ModelServer::start().await;
    let config = ModelConfig {
        base_url: format!("{}/", server.base_url()),
        ..server.model_config(ProviderKind::Openai)
    };
    server.push(openai::text(["ok"]));
    call(&OpenAiProvider::new(&config), &user("x"))
        .await
        .completion();
    assert_eq!(
        server.wait_for_requests(1).await[0].path,
        "/v1/chat/completions"
    );
}

#[tokio::test]
async fn each_delta_is_forwarded_before_the_server_writes_the_next_chunk() {
    let (server, provider) = start().await;
    let mut steps = vec![
        openai::delta(json!({"content": "first"})),
        SseStep::Delay(Duration::from_millis(300)),
        openai::delta(json!({"content": "second"})),
    ];
    steps.extend(openai::ending("stop"));
    server.push(Reply::Sse(steps));

    let mut stream = provider.stream(request(&cached(&user("x")))).await.unwrap();
    let first = stream.next().await.unwrap().unwrap();
    let first_received = Instant::now();
    assert_eq!(first, StreamEvent::TextDelta("first".into()));
    drain(stream).await.completion();

    let written = server.chunk_write_times();
    assert!(
        first_received < written[1],
        "the first delta reached the consumer only after the second chunk was written"
    );
}

#[tokio::test]
async fn dropping_a_stalled_stream_closes_the_connection() {
    let (server, provider) = start().await;
    server.push(Reply::Sse(vec![
        openai::delta(json!({"content": "Hel"})),
        SseStep::Stall,
    ]));

    let mut stream = provider.stream(request(&cached(&user("x")))).await.unwrap();
    assert_eq!(
        stream.next().await.unwrap().unwrap(),
        StreamEvent::TextDelta("Hel".into())
    );
    drop(stream);

    server.wait_for_hangups(1).await;
}

#[tokio::test]
async fn abandoning_a_request_that_got_no_answer_closes_the_connection() {
    let (server, provider) = start().await;
    server.push(Reply::Hang);
    let messages = cached(&user("x"));

    tokio::select! {
        _ = provider.stream(request(&messages)) => panic!("a hung server answered"),
        _ = server.wait_for_requests(1) => {}
    }

    server.wait_for_hangups(1).await;
}
