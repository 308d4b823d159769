//! Model providers: real HTTP with SSE streaming (reqwest).
//!
//! A provider turns a [`ModelRequest`] (borrowed from the session's
//! projection, so nothing is copied but the request body) into a stream of
//! [`StreamEvent`]s. Text and reasoning deltas are yielded the moment they are
//! decoded; the stream ends with exactly one [`StreamEvent::Completed`]
//! carrying the accumulated message. A stream that ends without it was
//! dropped, and the consumer must treat it as [`ErrorKind::StreamDropped`].
//!
//! Invariant: providers hold no session state and never retry; retry,
//! timeouts between chunks and recovery belong to the driver.

pub mod anthropic;
mod body;
mod cached;
mod http;
mod images;
pub mod models;
pub mod openai;
mod thinking;

use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use serde::Serialize;
use serde_json::Value;

use crate::config::{ModelConfig, ProviderKind};
use crate::vocab::event::{FinishReason, Thinking, ToolCallRequest, Usage};

pub use self::cached::CachedMessage;
pub use self::images::ImagePart;

/// One message of the model's context, in provider-neutral form.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelMessage {
    System {
        text: String,
    },
    User {
        text: String,
        /// Images after the text (`ModelMessage::user` for none).
        images: Vec<ImagePart>,
    },
    Assistant {
        text: String,
        thinking: Option<Thinking>,
        tool_calls: Vec<ToolCallRequest>,
    },
    Tool {
        call_id: String,
        content: String,
    },
}

impl ModelMessage {
    /// A user message of text alone.
    pub fn user(text: impl Into<String>) -> Self {
        ModelMessage::User {
            text: text.into(),
            images: Vec::new(),
        }
    }

    /// Rough size in bytes of the message's text.
    pub fn len_hint(&self) -> usize {
        match self {
            ModelMessage::System { text } => text.len(),
            ModelMessage::User { text, images } => {
                text.len() + images.len() * ImagePart::ESTIMATED_CHARS
            }
            ModelMessage::Assistant {
                text, tool_calls, ..
            } => text.len() + tool_calls.iter().map(|c| c.arguments.len()).sum::<usize>(),
            ModelMessage::Tool { content, .. } => content.len(),
        }
    }
}

/// A tool offered to the model.
#[derive(Debug, Clone, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: Value,
}

/// Everything a provider needs for one call. Borrowed: building it copies
/// nothing; the body is assembled from each message's cached serialized
/// form (serialized on its first request), the one copy of the history.
#[derive(Debug, Clone, Copy)]
pub struct ModelRequest<'a> {
    pub messages: &'a [CachedMessage],
    pub tools: &'a [ToolSpec],
    /// Output token cap for this call; `None` lets the server decide (the
    /// Anthropic provider substitutes its required default).
    pub max_output_tokens: Option<u32>,
}

/// The accumulated result of one successful provider call.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub text: String,
    pub thinking: Option<Thinking>,
    pub tool_calls: Vec<ToolCallRequest>,
    pub finish_reason: FinishReason,
    pub usage: Usage,
}

/// What a provider stream yields.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// A fragment of answer text, forwarded as soon as decoded.
    TextDelta(String),
    /// A fragment of reasoning (`reasoning_content`, Anthropic `thinking`).
    ThoughtDelta(String),
    /// The model started a tool call (first delta of that call).
    ToolCallStarted {
        index: usize,
        id: String,
        name: String,
    },
    /// The stream finished normally. Always the last item.
    Completed(Completion),
}

/// The classified kind of a provider failure; the driver's recovery policy
/// keys on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// HTTP 429.
    RateLimited,
    /// HTTP 5xx, 529, Anthropic `overloaded_error`.
    Overloaded,
    /// The connection dropped or the stream ended without finishing.
    StreamDropped,
    /// No chunk arrived within the allowed time.
    StreamStalled,
    /// The request does not fit the model's context window.
    ContextOverflow,
    /// HTTP 401/403: key missing, wrong or not allowed.
    Auth,
    /// HTTP 4xx other than the above: the request itself is wrong.
    BadRequest,
    /// The server could not be reached at all.
    Connect,
    /// The server answered something we could not understand.
    Protocol,
}

impl ErrorKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::Overloaded => "overloaded",
            ErrorKind::StreamDropped => "stream_dropped",
            ErrorKind::StreamStalled => "stream_stalled",
            ErrorKind::ContextOverflow => "context_overflow",
            ErrorKind::Auth => "auth",
            ErrorKind::BadRequest => "bad_request",
            ErrorKind::Connect => "connect",
            ErrorKind::Protocol => "protocol",
        }
    }
}

/// A failed provider call, with what the user needs to act on it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ProviderError {
    pub kind: ErrorKind,
    /// HTTP status, when the server answered.
    pub status: Option<u16>,
    /// Human-readable, naming the status and the server's own message, or
    /// the address that could not be reached.
    pub message: String,
    /// The server's `Retry-After`, when it sent one.
    pub retry_after: Option<Duration>,
}

impl ProviderError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ProviderError {
            kind,
            status: None,
            message: message.into(),
            retry_after: None,
        }
    }
}

pub type ProviderStream = BoxStream<'static, Result<StreamEvent, ProviderError>>;

/// A model endpoint.
#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    /// Provider family for the completion anchor (`openai`, `anthropic`).
    fn name(&self) -> &str;
    /// Model name sent in requests.
    fn model(&self) -> &str;
    /// The JSON body [`Provider::stream`] sends for `request`, assembled
    /// from the messages' cached serialized forms (filling the missing ones).
    fn request_body(&self, request: ModelRequest<'_>) -> Vec<u8>;
    /// The same body serialized from scratch, ignoring every cache: the
    /// reference [`Provider::request_body`] must equal byte for byte.
    fn request_body_from_scratch(&self, request: ModelRequest<'_>) -> Vec<u8>;
    /// Sends the request and returns the event stream once the server has
    /// answered with a success status. Errors before the first byte of the
    /// body (connect, non-2xx) are returned here.
    async fn stream(&self, request: ModelRequest<'_>) -> Result<ProviderStream, ProviderError>;
}

/// The provider a model configuration asks for.
pub fn from_config(config: &ModelConfig) -> Arc<dyn Provider> {
    for_model(config, None)
}

/// The provider of a model at a reasoning effort: OpenAI-compatible
/// servers get `reasoning_effort`, Anthropic a `thinking` budget.
pub fn for_model(config: &ModelConfig, effort: Option<&str>) -> Arc<dyn Provider> {
    match config.provider {
        ProviderKind::Openai => Arc::new(openai::OpenAiProvider::new(config).with_effort(effort)),
        ProviderKind::Anthropic => {
            Arc::new(anthropic::AnthropicProvider::new(config).with_effort(effort))
        }
    }
}
