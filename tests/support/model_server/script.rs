//! What a test scripts and what the server recorded: the replies (`Reply`,
//! SSE steps) it plays in FIFO order, and each request as it arrived.

use std::time::{Duration, Instant};

use serde_json::Value;

/// One scripted response.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `200 OK`, `text/event-stream`, chunked: each step is played in order,
    /// one HTTP chunk per SSE event, written as soon as it is reached.
    Sse(Vec<SseStep>),
    /// A complete response with a body (errors: 500, 429, 401, ...).
    Status {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// Read the request, then answer nothing until the client goes away.
    Hang,
}

/// One step of an SSE reply.
#[derive(Debug, Clone)]
pub enum SseStep {
    /// One SSE event (`event:` line when given, then `data:` lines).
    Event { event: Option<String>, data: String },
    /// Wait before the next step.
    Delay(Duration),
    /// Wait until this long after the response head was written: steps
    /// at `i * period` stream at a steady rate, however long each write
    /// took (benchmarks).
    Until(Duration),
    /// Stop writing but keep the connection open until the client leaves.
    Stall,
    /// Wait until the server has recorded this many requests (at most the
    /// helpers' wait limit): replies that hold until several turns are in
    /// flight at once.
    AwaitRequests(usize),
    /// Close the socket without the terminating chunk: for the client, a
    /// body that broke off mid-way.
    Drop,
}

impl SseStep {
    /// A `data:` event without an event name.
    pub fn data(data: impl Into<String>) -> Self {
        SseStep::Event {
            event: None,
            data: data.into(),
        }
    }

    /// A named event (`event: NAME`).
    pub fn event(name: impl Into<String>, data: impl Into<String>) -> Self {
        SseStep::Event {
            event: Some(name.into()),
            data: data.into(),
        }
    }

    pub(super) fn to_wire(&self) -> Option<String> {
        let SseStep::Event { event, data } = self else {
            return None;
        };
        let mut wire = String::new();
        if let Some(event) = event {
            wire.push_str(&format!("event: {event}\n"));
        }
        for line in data.split('\n') {
            wire.push_str(&format!("data: {line}\n"));
        }
        wire.push('\n');
        Some(wire)
    }
}

impl Reply {
    /// A response with `status` and `body` (JSON content type when the body
    /// parses as JSON, else plain text).
    pub fn status(status: u16, body: impl Into<String>) -> Self {
        Reply::Status {
            status,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// Adds a response header to a [`Reply::Status`] (e.g. `Retry-After`).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let Reply::Status { headers, .. } = &mut self {
            headers.push((name.into(), value.into()));
        }
        self
    }
}

/// A request as the server received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// Names lowercased, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON, `Value::Null` when it is not JSON.
    pub body: Value,
    pub raw_body: String,
    /// When the whole request had been read: lets a test check how long a
    /// client waited before retrying.
    pub received_at: Instant,
    /// When the request's first bytes were read: for benchmarks, the moment
    /// the client's request reached the server.
    pub arrived: Instant,
}

impl RecordedRequest {
    /// The tool messages of an OpenAI-format request, in order, as
    /// `(tool_call_id, content)`.
    pub fn tool_messages(&self) -> Vec<(String, String)> {
        self.body["messages"]
            .as_array()
            .map(|messages| {
                messages
                    .iter()
                    .filter(|m| m["role"] == "tool")
                    .map(|m| {
                        (
                            m["tool_call_id"].as_str().unwrap_or_default().to_string(),
                            m["content"].as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}
