//! OpenAI-compatible chat completions with SSE streaming: OpenAI itself,
//! Ollama, llama.cpp, vLLM, LM Studio and the rest of the family.
//!
//! Tool calls are accumulated by their `index`, never by `id`: servers send
//! the id (and the name) only in the first delta of a call, and parallel
//! calls may interleave. `finish_reason: length` is output truncation, not a
//! context overflow; only an error from the server means the prompt is too
//! long.

use std::collections::BTreeMap;

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::body::BodyParts;
use super::cached;
use super::http::{self, SseDecoder, SseEvent};
use super::{
    Completion, ErrorKind, ModelMessage, ModelRequest, Provider, ProviderError, ProviderStream,
    StreamEvent, ToolSpec,
};
use crate::config::ModelConfig;
use crate::vocab::event::{FinishReason, Thinking, ToolCallRequest, Usage};

/// A chat-completions endpoint. Holds no key: the key is read from the
/// environment on every call, so it is never stored or printed.
#[derive(Debug, Clone)]
pub struct OpenAiProvider {
    client: reqwest::Client,
    base_url: String,
    model: String,
    api_key_env: String,
    /// Fallback output cap when a request sets none (0 = server decides).
    default_max_tokens: u32,
    /// Sent as `reasoning_effort`, when the session picked one.
    reasoning_effort: Option<String>,
}

impl OpenAiProvider {
    pub fn new(config: &ModelConfig) -> Self {
        OpenAiProvider {
            client: http::client(),
            base_url: http::trim_base_url(&config.base_url),
            model: config.name.clone(),
            api_key_env: config.api_key_env.clone(),
            default_max_tokens: config.max_output_tokens,
            reasoning_effort: None,
        }
    }

    /// The same endpoint asking for `effort` as `reasoning_effort`.
    pub fn with_effort(mut self, effort: Option<&str>) -> Self {
        self.reasoning_effort = effort.map(str::to_string);
        self
    }

    fn chat_request<'a>(
        &'a self,
        request: ModelRequest<'a>,
        max_tokens: Option<u32>,
    ) -> ChatRequest<'a> {
        ChatRequest {
            reasoning_effort: self.reasoning_effort.as_deref(),
            ..ChatRequest::new(&self.model, request, max_tokens)
        }
    }

    /// The request's output cap, else the configured one (0 = none).
    fn max_tokens(&self, request: ModelRequest<'_>) -> Option<u32> {
        request
            .max_output_tokens
            .or((self.default_max_tokens > 0).then_some(self.default_max_tokens))
    }

    pub(super) fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(key) = http::api_key(&self.api_key_env) {
            match HeaderValue::from_str(&format!("Bearer {key}")) {
                Ok(mut value) => {
                    value.set_sensitive(true);
                    headers.insert(AUTHORIZATION, value);
                }
                // Say which variable is wrong, never what it holds.
                Err(_) => tracing::warn!(
                    "ignoring the API key in {}: it contains characters not allowed in an HTTP header",
                    self.api_key_env
                ),
            }
        }
        headers
    }

    /// The body: the frame around the messages' cached forms (serializing
    /// the ones not cached yet), borrowed, not copied.
    fn body_parts<'a>(&self, request: ModelRequest<'a>) -> BodyParts<'a> {
        let max_tokens = self.max_tokens(request);
        let no_messages = ModelRequest {
            messages: &[],
            ..request
        };
        let frame = serde_json::to_vec(&self.chat_request(no_messages, max_tokens))
            .expect("a request body serializes");
        let (head, tail) = cached::split_frame(&frame);
        let mut body = BodyParts::with_capacity(2 * request.messages.len() + 2);
        body.owned(head);
        for (i, m) in request.messages.iter().enumerate() {
            if i > 0 {
                body.borrowed(b",");
            }
            body.borrowed(m.wire.openai.get_or_init(|| {
                serde_json::to_vec(&ChatMessage::from(m.message()))
                    .expect("a message serializes")
                    .into_boxed_slice()
            }));
        }
        body.owned(tail);
        body
    }
}

#[async_trait::async_trait]
impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        "openai"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn request_body(&self, request: ModelRequest<'_>) -> Vec<u8> {
        self.body_parts(request).to_vec()
    }

    fn request_body_from_scratch(&self, request: ModelRequest<'_>) -> Vec<u8> {
        serde_json::to_vec(&self.chat_request(request, self.max_tokens(request)))
            .expect("a request body serializes")
    }

    async fn stream(&self, request: ModelRequest<'_>) -> Result<ProviderStream, ProviderError> {
        let body = self.body_parts(request);
        let url = format!("{}/chat/completions", self.base_url);
        let response = body
            .send(|body| http::post_json(&self.client, &self.base_url, &url, self.headers(), body))
            .await?;
        Ok(http::sse_stream(response, ChatDecoder::default()))
    }
}

// ---- request body: borrowed views of the ModelRequest ----

#[derive(Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: Vec<ChatMessage<'a>>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<ChatTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'a str>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum ChatMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    /// A user message with images: its content as parts.
    #[serde(rename = "user")]
    UserParts {
        content: Vec<super::images::ChatPart<'a>>,
    },
    Assistant {
        /// `null` when the message is only tool calls, as OpenAI sends it.
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ChatToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Serialize)]
struct ChatToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: ChatFunctionCall<'a>,
}

#[derive(Serialize)]
struct ChatFunctionCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct ChatTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: &'a ToolSpec,
}

impl<'a> ChatRequest<'a> {
    fn new(model: &'a str, request: ModelRequest<'a>, max_tokens: Option<u32>) -> Self {
        ChatRequest {
            model,
            messages: request
                .messages
                .iter()
                .map(|m| ChatMessage::from(m.message()))
                .collect(),
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            tools: request
                .tools
                .iter()
                .map(|function| ChatTool {
                    kind: "function",
                    function,
                })
                .collect(),
            max_tokens,
            reasoning_effort: None,
        }
    }
}

impl<'a> From<&'a ModelMessage> for ChatMessage<'a> {
    fn from(message: &'a ModelMessage) -> Self {
        match message {
            ModelMessage::System { text } => ChatMessage::System { content: text },
            ModelMessage::User { text, images } if images.is_empty() => {
                ChatMessage::User { content: text }
            }
            ModelMessage::User { text, images } => ChatMessage::UserParts {
                content: super::images::chat_parts(text, images),
            },
            // Reasoning is not sent back: chat-completions servers neither
            // need nor accept it.
            ModelMessage::Assistant {
                text,
                thinking: _,
                tool_calls,
            } => ChatMessage::Assistant {
                content: (!text.is_empty() || tool_calls.is_empty()).then_some(text.as_str()),
                tool_calls: tool_calls
                    .iter()
                    .map(|call| ChatToolCall {
                        id: &call.id,
                        kind: "function",
                        function: ChatFunctionCall {
                            name: &call.name,
                            arguments: &call.arguments,
                        },
                    })
                    .collect(),
            },
            ModelMessage::Tool { call_id, content } => ChatMessage::Tool {
                tool_call_id: call_id,
                content,
            },
        }
    }
}

/// A tool result or an assistant message read back from its serialized
/// form (`None` for other messages, or a form this does not read). The
/// form has no thinking: an assistant message with thinking reads back
/// without it, so the caller compares before trusting it.
pub(super) fn message_from_wire(wire: &[u8]) -> Option<ModelMessage> {
    #[derive(Deserialize)]
    struct WireMessage {
        role: String,
        #[serde(default)]
        tool_call_id: Option<String>,
        #[serde(default)]
        content: Option<String>,
        #[serde(default)]
        tool_calls: Vec<WireCall>,
    }
    #[derive(Deserialize)]
    struct WireCall {
        id: String,
        function: WireFunction,
    }
    #[derive(Deserialize)]
    struct WireFunction {
        name: String,
        arguments: String,
    }
    let message: WireMessage = serde_json::from_slice(wire).ok()?;
    match message.role.as_str() {
        "tool" => Some(ModelMessage::Tool {
            call_id: message.tool_call_id?,
            content: message.content?,
        }),
        "assistant" => Some(ModelMessage::Assistant {
            text: message.content.unwrap_or_default(),
            thinking: None,
            tool_calls: message
                .tool_calls
                .into_iter()
                .map(|call| ToolCallRequest {
                    id: call.id,
                    name: call.function.name,
                    arguments: call.function.arguments,
                })
                .collect(),
        }),
        _ => None,
    }
}

// ---- stream decoding ----

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<ChunkUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    /// OpenRouter and some vLLM versions use `reasoning`.
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ToolCallDelta>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct ChunkUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Deserialize)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: u64,
}

/// Accumulates one chat-completions stream.
#[derive(Default)]
struct ChatDecoder {
    text: String,
    reasoning: String,
    /// Tool calls by the server's `index`; a BTreeMap keeps model order.
    tool_calls: BTreeMap<usize, ToolCallRequest>,
    finish_reason: Option<FinishReason>,
    usage: Usage,
}

impl ChatDecoder {
    fn on_tool_call_delta(&mut self, delta: ToolCallDelta, out: &mut Vec<StreamEvent>) {
        let index = delta
            .index
            .unwrap_or_else(|| self.guess_index(delta.id.as_deref()));
        let (name, arguments) = match delta.function {
            Some(f) => (f.name, f.arguments),
            None => (None, None),
        };
        let call = self.tool_calls.entry(index).or_insert_with(|| {
            let id = delta
                .id
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| format!("call_{index}"));
            let call = ToolCallRequest {
                id,
                name: name.clone().unwrap_or_default(),
                arguments: String::new(),
            };
            out.push(StreamEvent::ToolCallStarted {
                index,
                id: call.id.clone(),
                name: call.name.clone(),
            });
            call
        });
        // Later deltas may repeat the name; the first one wins.
        if call.name.is_empty() {
            if let Some(name) = name {
                call.name = name;
            }
        }
        if let Some(fragment) = arguments {
            call.arguments.push_str(&fragment);
        }
    }

    /// For servers that omit `index`: a delta with a new id starts a new
    /// call, anything else continues the last one.
    fn guess_index(&self, id: Option<&str>) -> usize {
        let last = self.tool_calls.keys().next_back().copied();
        match (id, last) {
            (Some(id), Some(last)) if !id.is_empty() && self.tool_calls[&last].id != id => last + 1,
            (_, Some(last)) => last,
            (_, None) => 0,
        }
    }

    fn completion(&mut self) -> Completion {
        let tool_calls: Vec<ToolCallRequest> =
            std::mem::take(&mut self.tool_calls).into_values().collect();
        let mut finish_reason = self.finish_reason.unwrap_or(FinishReason::Stop);
        // Some servers (older Ollama, vLLM) say `stop` after tool calls;
        // the calls are what the driver must act on.
        if finish_reason == FinishReason::Stop && !tool_calls.is_empty() {
            finish_reason = FinishReason::ToolCalls;
        }
        let reasoning = std::mem::take(&mut self.reasoning);
        Completion {
            text: std::mem::take(&mut self.text),
            thinking: (!reasoning.is_empty()).then_some(Thinking {
                text: reasoning,
                signature: None,
            }),
            tool_calls,
            finish_reason,
            usage: self.usage,
        }
    }
}

impl SseDecoder for ChatDecoder {
    fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<StreamEvent>,
    ) -> Result<Option<Completion>, ProviderError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            // An explicit end: whole even if no finish_reason came.
            return Ok(Some(self.completion()));
        }
        let chunk: Chunk =
            serde_json::from_str(data).map_err(|e| http::malformed_event(data, &e))?;
        if let Some(error) = chunk.error {
            return Err(stream_error(&error));
        }
        if let Some(usage) = chunk.usage {
            self.usage = Usage {
                input_tokens: usage.prompt_tokens,
                output_tokens: usage.completion_tokens,
                cached_tokens: usage.prompt_tokens_details.map_or(0, |d| d.cached_tokens),
            };
        }
        // `n` is always 1 here; any further choices would be alternatives.
        let Some(choice) = chunk.choices.into_iter().next() else {
            return Ok(None);
        };
        let delta = choice.delta.unwrap_or_default();
        for reasoning in [delta.reasoning_content, delta.reasoning]
            .into_iter()
            .flatten()
        {
            if !reasoning.is_empty() {
                self.reasoning.push_str(&reasoning);
                out.push(StreamEvent::ThoughtDelta(reasoning));
            }
        }
        if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
            self.text.push_str(&text);
            out.push(StreamEvent::TextDelta(text));
        }
        for call in delta.tool_calls {
            self.on_tool_call_delta(call, out);
        }
        if let Some(reason) = choice.finish_reason {
            self.finish_reason = Some(finish_reason(&reason));
        }
        Ok(None)
    }

    fn on_eof(&mut self) -> Result<Completion, ProviderError> {
        // Some servers end the body without `[DONE]`; after a finish reason
        // the answer is whole, before one it is not.
        if self.finish_reason.is_none() {
            return Err(http::ended_early("the model said why it stopped"));
        }
        Ok(self.completion())
    }
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "length" => FinishReason::Length,
        "content_filter" => FinishReason::ContentFilter,
        "stop" => FinishReason::Stop,
        other => {
            tracing::debug!(
                finish_reason = other,
                "unknown finish_reason, treating it as stop"
            );
            FinishReason::Stop
        }
    }
}

/// Classifies an `{"error": {...}}` object sent inside the stream.
fn stream_error(error: &Value) -> ProviderError {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| error.as_str())
        .unwrap_or("unknown error");
    let label = |key: &str| {
        error
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_ascii_lowercase()
    };
    let (kind_label, code_label) = (label("type"), label("code"));
    // llama.cpp puts the HTTP status it would have used in `code`.
    let status = error
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|code| u16::try_from(code).ok());
    let kind = if let Some(status) = status.and_then(|s| reqwest::StatusCode::from_u16(s).ok()) {
        http::classify_status(status, message)
    } else if http::is_context_overflow(message) || code_label == "context_length_exceeded" {
        ErrorKind::ContextOverflow
    } else if kind_label.contains("rate_limit") || code_label.contains("rate_limit") {
        ErrorKind::RateLimited
    } else if kind_label.contains("auth") || code_label == "invalid_api_key" {
        ErrorKind::Auth
    } else if kind_label == "invalid_request_error" {
        ErrorKind::BadRequest
    } else {
        // server_error, overloaded and unknown: the server failed mid-answer.
        ErrorKind::Overloaded
    };
    ProviderError {
        kind,
        status,
        message: format!("the model server reported an error mid-stream: {message}"),
        retry_after: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn assistant_content_is_null_only_when_it_is_just_tool_calls() {
        let call = ToolCallRequest {
            id: "c1".into(),
            name: "read_file".into(),
            arguments: "{}".into(),
        };
        let only_calls = ModelMessage::Assistant {
            text: String::new(),
            thinking: None,
            tool_calls: vec![call],
        };
        let empty = ModelMessage::Assistant {
            text: String::new(),
            thinking: None,
            tool_calls: vec![],
        };
        let as_json = |m: &ModelMessage| serde_json::to_value(ChatMessage::from(m)).unwrap();
        assert_eq!(as_json(&only_calls)["content"], Value::Null);
        assert_eq!(as_json(&empty), json!({"role": "assistant", "content": ""}));
    }

    #[test]
    fn in_stream_errors_are_classified() {
        let kind = |v: Value| stream_error(&v).kind;
        assert_eq!(
            kind(json!({"message": "Overloaded", "type": "server_error"})),
            ErrorKind::Overloaded
        );
        assert_eq!(
            kind(json!({"message": "x", "code": "context_length_exceeded"})),
            ErrorKind::ContextOverflow
        );
        assert_eq!(
            kind(json!({"message": "slow down", "type": "rate_limit_error"})),
            ErrorKind::RateLimited
        );
        assert_eq!(
            kind(
                json!({"code": 400, "message": "the request exceeds the available context size", "type": "exceed_context_size_error"})
            ),
            ErrorKind::ContextOverflow
        );
        assert_eq!(
            kind(json!({"code": 500, "message": "boom"})),
            ErrorKind::Overloaded
        );
    }

    #[test]
    fn stop_with_tool_calls_means_tool_calls() {
        let mut decoder = ChatDecoder::default();
        let mut out = Vec::new();
        decoder.on_tool_call_delta(
            ToolCallDelta {
                index: None,
                id: Some("a".into()),
                function: Some(FunctionDelta {
                    name: Some("grep".into()),
                    arguments: Some("{}".into()),
                }),
            },
            &mut out,
        );
        decoder.finish_reason = Some(FinishReason::Stop);
        assert_eq!(
            decoder.on_eof().unwrap().finish_reason,
            FinishReason::ToolCalls
        );
    }
}
