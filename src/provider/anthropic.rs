//! Anthropic Messages API with SSE streaming.
//!
//! A thinking block goes back to the API with its signature, first in its
//! assistant message: without it a thinking + tool-use turn is rejected, so
//! `signature_delta`s are accumulated as carefully as the text. Tool
//! results travel as `tool_result` blocks inside user messages, and
//! consecutive messages of one role are merged, as the API requires
//! alternating roles.

use std::borrow::Cow;
use std::collections::HashMap;

use reqwest::header::{HeaderMap, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::body::BodyParts;
use super::cached;
use super::http::{self, SseDecoder, SseEvent};
use super::thinking::{self, ThinkingParam};
use super::{
    Completion, ErrorKind, ModelMessage, ModelRequest, Provider, ProviderError, ProviderStream,
    StreamEvent, ToolSpec,
};
use crate::config::ModelConfig;
use crate::vocab::event::{FinishReason, Thinking, ToolCallRequest, Usage};

/// The API version this module speaks.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// `max_tokens` is required by the API; this is used when neither the
/// request nor the configuration sets one.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// A Messages API endpoint. Holds no key: the key is read from the
/// environment on every call, so it is never stored or printed.
#[derive(Debug, Clone)]
pub struct AnthropicProvider {
    client: reqwest::Client,
    base_url: String,
    model: String,
    api_key_env: String,
    default_max_tokens: u32,
    /// `thinking.budget_tokens`, when the session's effort asks for one.
    thinking_budget: Option<u32>,
}

impl AnthropicProvider {
    pub fn new(config: &ModelConfig) -> Self {
        AnthropicProvider {
            client: http::client(),
            base_url: http::trim_base_url(&config.base_url),
            model: config.name.clone(),
            api_key_env: config.api_key_env.clone(),
            default_max_tokens: if config.max_output_tokens > 0 {
                config.max_output_tokens
            } else {
                DEFAULT_MAX_TOKENS
            },
            thinking_budget: None,
        }
    }

    /// The same endpoint thinking with the budget of `effort` (see
    /// [`thinking`](super::thinking)).
    pub fn with_effort(mut self, effort: Option<&str>) -> Self {
        self.thinking_budget = thinking::budget_of(effort);
        self
    }

    pub(super) fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            "anthropic-version",
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        if let Some(key) = http::api_key(&self.api_key_env) {
            match HeaderValue::from_str(&key) {
                Ok(mut value) => {
                    value.set_sensitive(true);
                    headers.insert("x-api-key", value);
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

    /// The body: the frame around the messages' cached blocks (serializing
    /// the ones not cached yet), borrowed, not copied.
    fn body_parts<'a>(&self, request: ModelRequest<'a>) -> BodyParts<'a> {
        let max_tokens = request.max_output_tokens.unwrap_or(self.default_max_tokens);
        let (max_tokens, thinking) = thinking::output_limits(self.thinking_budget, max_tokens);
        let frame = MessagesRequest {
            model: &self.model,
            max_tokens,
            system: system_prompt(request.messages.iter().map(|m| m.message())),
            messages: Vec::new(),
            tools: request.tools.iter().map(Tool::from).collect(),
            stream: true,
            thinking,
        };
        let frame = serde_json::to_vec(&frame).expect("a request body serializes");
        let (head, tail) = cached::split_frame(&frame);
        let forms: Vec<&'a Blocks> = request
            .messages
            .iter()
            .map(|m| {
                &**m.wire
                    .anthropic
                    .get_or_init(|| Box::new(Blocks::of(m.message())))
            })
            .filter(|b| b.role.is_some())
            .collect();
        // Each block and its comma, and each merged message's frame.
        let parts = forms.iter().map(|f| 2 * f.blocks.len() + 3).sum::<usize>();
        let mut body = BodyParts::with_capacity(parts + 2);
        body.owned(head);
        write_conversation(&mut body, &forms);
        body.owned(tail);
        body
    }
}

#[async_trait::async_trait]
impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        "anthropic"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn request_body(&self, request: ModelRequest<'_>) -> Vec<u8> {
        self.body_parts(request).to_vec()
    }

    fn request_body_from_scratch(&self, request: ModelRequest<'_>) -> Vec<u8> {
        let max_tokens = request.max_output_tokens.unwrap_or(self.default_max_tokens);
        let (max_tokens, thinking) = thinking::output_limits(self.thinking_budget, max_tokens);
        serde_json::to_vec(&MessagesRequest {
            thinking,
            ..MessagesRequest::new(&self.model, request, max_tokens)
        })
        .expect("a request body serializes")
    }

    async fn stream(&self, request: ModelRequest<'_>) -> Result<ProviderStream, ProviderError> {
        let body = self.body_parts(request);
        let url = format!("{}/messages", self.base_url);
        let response = body
            .send(|body| http::post_json(&self.client, &self.base_url, &url, self.headers(), body))
            .await?;
        Ok(http::sse_stream(response, MessagesDecoder::default()))
    }
}

// ---- request body: borrowed views of the ModelRequest ----

#[derive(Serialize)]
struct MessagesRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<Cow<'a, str>>,
    messages: Vec<Message<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<ThinkingParam>,
}

#[derive(Serialize)]
struct Message<'a> {
    role: Role,
    content: Vec<Block<'a>>,
}

#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Role {
    User,
    Assistant,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    Text {
        text: &'a str,
    },
    Image {
        source: super::images::ImageSource<'a>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
    },
}

#[derive(Serialize)]
struct Tool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
}

impl<'a> MessagesRequest<'a> {
    fn new(model: &'a str, request: ModelRequest<'a>, max_tokens: u32) -> Self {
        let messages = request.messages.iter().map(|m| m.message());
        MessagesRequest {
            model,
            max_tokens,
            system: system_prompt(messages.clone()),
            messages: conversation(messages),
            tools: request.tools.iter().map(Tool::from).collect(),
            stream: true,
            thinking: None,
        }
    }
}

impl<'a> From<&'a ToolSpec> for Tool<'a> {
    fn from(spec: &'a ToolSpec) -> Self {
        Tool {
            name: &spec.name,
            description: &spec.description,
            input_schema: &spec.parameters,
        }
    }
}

/// All system messages, joined; borrowed when there is only one.
fn system_prompt<'a>(messages: impl Iterator<Item = &'a ModelMessage>) -> Option<Cow<'a, str>> {
    let mut texts = messages.filter_map(|m| match m {
        ModelMessage::System { text } if !text.is_empty() => Some(text.as_str()),
        _ => None,
    });
    let first = texts.next()?;
    let mut joined = Cow::Borrowed(first);
    for text in texts {
        let joined = joined.to_mut();
        joined.push_str("\n\n");
        joined.push_str(text);
    }
    Some(joined)
}

/// A message's role and content blocks; `None` for system messages and
/// messages without content (they are not sent).
fn message_blocks(message: &ModelMessage) -> Option<(Role, Vec<Block<'_>>)> {
    let (role, blocks) = match message {
        ModelMessage::System { .. } => return None,
        ModelMessage::User { text, images } => {
            let images = images.iter().map(|i| Block::Image { source: i.into() });
            (
                Role::User,
                text_block(text).into_iter().chain(images).collect(),
            )
        }
        ModelMessage::Tool { call_id, content } => (
            Role::User,
            vec![Block::ToolResult {
                tool_use_id: call_id,
                content,
            }],
        ),
        ModelMessage::Assistant {
            text,
            thinking,
            tool_calls,
        } => {
            let mut blocks = Vec::new();
            // An unsigned thinking block (reasoning from another
            // provider) would be rejected; a signed one must lead.
            if let Some(Thinking {
                text: thinking,
                signature: Some(signature),
            }) = thinking
            {
                blocks.push(Block::Thinking {
                    thinking,
                    signature,
                });
            }
            blocks.extend(text_block(text));
            blocks.extend(tool_calls.iter().map(tool_use_block));
            (Role::Assistant, blocks)
        }
    };
    (!blocks.is_empty()).then_some((role, blocks))
}

/// The user/assistant messages as content blocks, consecutive messages of
/// one role merged into one.
fn conversation<'a>(messages: impl Iterator<Item = &'a ModelMessage>) -> Vec<Message<'a>> {
    let mut merged: Vec<Message<'_>> = Vec::new();
    for (role, blocks) in messages.filter_map(message_blocks) {
        match merged.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => merged.push(Message {
                role,
                content: blocks,
            }),
        }
    }
    // The API wants tool results before any text in a user message.
    for message in merged.iter_mut().filter(|m| m.role == Role::User) {
        message
            .content
            .sort_by_key(|block| !matches!(block, Block::ToolResult { .. }));
    }
    merged
}

/// One message's serialized content blocks (the cached form), each marked
/// whether it is a tool result.
#[derive(Debug, Clone)]
pub(super) struct Blocks {
    role: Option<Role>,
    blocks: Vec<(bool, Box<[u8]>)>,
}

impl Blocks {
    fn of(message: &ModelMessage) -> Blocks {
        let Some((role, blocks)) = message_blocks(message) else {
            return Blocks {
                role: None,
                blocks: Vec::new(),
            };
        };
        let blocks = blocks
            .iter()
            .map(|block| {
                let json = serde_json::to_vec(block).expect("a block serializes");
                (matches!(block, Block::ToolResult { .. }), json.into())
            })
            .collect();
        Blocks {
            role: Some(role),
            blocks,
        }
    }

    pub(super) fn bytes(&self) -> usize {
        self.blocks.iter().map(|(_, b)| b.len()).sum()
    }
}

/// Writes the messages of [`conversation`] from cached blocks, comma
/// separated: runs of one role merged, tool results first in a user
/// message.
fn write_conversation<'a>(body: &mut BodyParts<'a>, forms: &[&'a Blocks]) {
    let mut start = 0;
    while start < forms.len() {
        let role = forms[start].role;
        let end = forms[start..]
            .iter()
            .position(|f| f.role != role)
            .map_or(forms.len(), |n| start + n);
        if start > 0 {
            body.borrowed(b",");
        }
        body.borrowed(match role {
            Some(Role::User) => b"{\"role\":\"user\",\"content\":[",
            _ => b"{\"role\":\"assistant\",\"content\":[",
        });
        let blocks = || forms[start..end].iter().flat_map(|f| f.blocks.iter());
        let user = role == Some(Role::User);
        // Tool results first (user messages only), then the rest, in order.
        let first = blocks().filter(|(result, _)| user && *result);
        let rest = blocks().filter(|(result, _)| !(user && *result));
        for (i, (_, block)) in first.chain(rest).enumerate() {
            if i > 0 {
                body.borrowed(b",");
            }
            body.borrowed(block);
        }
        body.borrowed(b"]}");
        start = end;
    }
}

/// The API rejects empty text blocks.
fn text_block(text: &str) -> Option<Block<'_>> {
    (!text.is_empty()).then_some(Block::Text { text })
}

fn tool_use_block(call: &ToolCallRequest) -> Block<'_> {
    // `input` must be an object; malformed arguments (the model's mistake,
    // already reported to it by the tool) are sent as `{}`.
    let input = match serde_json::from_str::<Value>(&call.arguments) {
        Ok(value @ Value::Object(_)) => value,
        _ => Value::Object(Default::default()),
    };
    Block::ToolUse {
        id: &call.id,
        name: &call.name,
        input,
    }
}

// ---- stream decoding ----

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StreamPayload {
    MessageStart {
        message: MessageStart,
    },
    ContentBlockStart {
        index: usize,
        content_block: BlockStart,
    },
    ContentBlockDelta {
        index: usize,
        delta: BlockDelta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: MessageDelta,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: ApiError,
    },
    /// Event types added after this was written.
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct MessageStart {
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockStart {
    Text,
    Thinking,
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct MessageDelta {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct ApiError {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

/// What a content block index of the stream is.
enum OpenBlock {
    Text,
    Thinking,
    /// Position in `tool_calls`, and the `input` given at the start.
    ToolUse {
        call: usize,
        initial_input: Value,
    },
    Ignored,
}

/// Accumulates one Messages API stream.
#[derive(Default)]
struct MessagesDecoder {
    text: String,
    thinking: Option<Thinking>,
    tool_calls: Vec<ToolCallRequest>,
    blocks: HashMap<usize, OpenBlock>,
    stop_reason: Option<FinishReason>,
    usage: Usage,
    raw_input: u64,
    raw_cache_read: u64,
    raw_cache_write: u64,
}

impl MessagesDecoder {
    fn thinking_mut(&mut self) -> &mut Thinking {
        self.thinking.get_or_insert_with(|| Thinking {
            text: String::new(),
            signature: None,
        })
    }

    /// Anthropic reports uncached input, cache reads and cache writes
    /// apart; tandem's `input_tokens` is the whole prompt (all three) and
    /// `cached_tokens` the part read from the cache, as for OpenAI.
    fn apply_usage(&mut self, usage: WireUsage) {
        if let Some(input) = usage.input_tokens {
            self.raw_input = input;
        }
        if let Some(read) = usage.cache_read_input_tokens {
            self.raw_cache_read = read;
        }
        if let Some(write) = usage.cache_creation_input_tokens {
            self.raw_cache_write = write;
        }
        if let Some(output) = usage.output_tokens {
            self.usage.output_tokens = output;
        }
        self.usage.input_tokens = self.raw_input + self.raw_cache_read + self.raw_cache_write;
        self.usage.cached_tokens = self.raw_cache_read;
    }

    fn on_block_start(&mut self, index: usize, block: BlockStart, out: &mut Vec<StreamEvent>) {
        let open = match block {
            BlockStart::Text => OpenBlock::Text,
            BlockStart::Thinking => {
                self.thinking_mut();
                OpenBlock::Thinking
            }
            BlockStart::ToolUse { id, name, input } => {
                let call = self.tool_calls.len();
                out.push(StreamEvent::ToolCallStarted {
                    index: call,
                    id: id.clone(),
                    name: name.clone(),
                });
                self.tool_calls.push(ToolCallRequest {
                    id,
                    name,
                    arguments: String::new(),
                });
                OpenBlock::ToolUse {
                    call,
                    initial_input: input,
                }
            }
            // redacted_thinking, server tools: nothing we can pass on.
            BlockStart::Other => OpenBlock::Ignored,
        };
        self.blocks.insert(index, open);
    }

    fn on_block_delta(
        &mut self,
        index: usize,
        delta: BlockDelta,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ProviderError> {
        match delta {
            BlockDelta::TextDelta { text } => {
                self.text.push_str(&text);
                out.push(StreamEvent::TextDelta(text));
            }
            BlockDelta::ThinkingDelta { thinking } => {
                self.thinking_mut().text.push_str(&thinking);
                out.push(StreamEvent::ThoughtDelta(thinking));
            }
            BlockDelta::SignatureDelta { signature } => self
                .thinking_mut()
                .signature
                .get_or_insert_with(String::new)
                .push_str(&signature),
            BlockDelta::InputJsonDelta { partial_json } => match self.blocks.get(&index) {
                Some(OpenBlock::ToolUse { call, .. }) => {
                    self.tool_calls[*call].arguments.push_str(&partial_json);
                }
                _ => {
                    return Err(ProviderError::new(
                        ErrorKind::Protocol,
                        format!("the model server sent tool input for content block {index}, which is not a tool call"),
                    ))
                }
            },
            BlockDelta::Other => {}
        }
        Ok(())
    }

    fn on_block_stop(&mut self, index: usize) {
        if let Some(OpenBlock::ToolUse {
            call,
            initial_input,
        }) = self.blocks.remove(&index)
        {
            let arguments = &mut self.tool_calls[call].arguments;
            // A call without arguments streams no input_json_delta at all.
            if arguments.is_empty() {
                *arguments = match initial_input {
                    Value::Object(map) if !map.is_empty() => Value::Object(map).to_string(),
                    _ => "{}".to_string(),
                };
            }
        }
    }

    fn completion(&mut self) -> Completion {
        Completion {
            text: std::mem::take(&mut self.text),
            thinking: self.thinking.take(),
            tool_calls: std::mem::take(&mut self.tool_calls),
            finish_reason: self.stop_reason.unwrap_or(FinishReason::Stop),
            usage: self.usage,
        }
    }
}

impl SseDecoder for MessagesDecoder {
    fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<StreamEvent>,
    ) -> Result<Option<Completion>, ProviderError> {
        let payload: StreamPayload = serde_json::from_str(&event.data)
            .map_err(|e| http::malformed_event(&event.data, &e))?;
        match payload {
            StreamPayload::MessageStart { message } => {
                self.apply_usage(message.usage.unwrap_or_default())
            }
            StreamPayload::ContentBlockStart {
                index,
                content_block,
            } => self.on_block_start(index, content_block, out),
            StreamPayload::ContentBlockDelta { index, delta } => {
                self.on_block_delta(index, delta, out)?
            }
            StreamPayload::ContentBlockStop { index } => self.on_block_stop(index),
            StreamPayload::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason {
                    self.stop_reason = Some(stop_reason(&reason));
                }
                self.apply_usage(usage.unwrap_or_default());
            }
            StreamPayload::MessageStop => return Ok(Some(self.completion())),
            StreamPayload::Error { error } => return Err(stream_error(&error)),
            StreamPayload::Ping | StreamPayload::Unknown => {}
        }
        Ok(None)
    }

    fn on_eof(&mut self) -> Result<Completion, ProviderError> {
        // `message_delta` with a stop reason is the last thing that carries
        // content; a body cut after it lost only `message_stop`.
        if self.stop_reason.is_none() {
            return Err(http::ended_early("message_stop"));
        }
        Ok(self.completion())
    }
}

fn stop_reason(reason: &str) -> FinishReason {
    match reason {
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" => FinishReason::Length,
        "stop_sequence" => FinishReason::StopSequence,
        "refusal" => FinishReason::ContentFilter,
        "end_turn" | "pause_turn" => FinishReason::Stop,
        other => {
            tracing::debug!(
                stop_reason = other,
                "unknown stop_reason, treating it as end_turn"
            );
            FinishReason::Stop
        }
    }
}

/// Classifies an `error` event sent inside the stream.
fn stream_error(error: &ApiError) -> ProviderError {
    let kind = match error.kind.as_str() {
        "overloaded_error" | "api_error" => ErrorKind::Overloaded,
        "rate_limit_error" => ErrorKind::RateLimited,
        "authentication_error" | "permission_error" => ErrorKind::Auth,
        "request_too_large" => ErrorKind::ContextOverflow,
        _ if http::is_context_overflow(&error.message) => ErrorKind::ContextOverflow,
        "invalid_request_error" | "not_found_error" => ErrorKind::BadRequest,
        _ => ErrorKind::Overloaded,
    };
    ProviderError::new(
        kind,
        format!(
            "the model server reported an error mid-stream: {} ({})",
            error.message, error.kind
        ),
    )
}

#[cfg(test)]
#[path = "anthropic_tests.rs"]
mod tests;
