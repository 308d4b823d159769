//! The server's fault mode: each [`Fault`] is one broken answer that real
//! model servers and networks give, as a scripted [`Reply`] in the OpenAI
//! streaming format. The fault-injection suite
//! (`tests/e2e/reliability/faults.rs`) picks them at seeded random points.

use std::time::Duration;

use serde_json::json;

use super::{openai, Reply, SseStep};

/// One way a model call can go wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// HTTP 429 with `Retry-After: 1` and `retry-after-ms` (which wins).
    RateLimited { retry_after_ms: u64 },
    /// HTTP 5xx (500, 502, 503, 504 or 529).
    ServerError(u16),
    /// Some text, then the connection closes without ending the body.
    ResetMidStream,
    /// The request is read and nothing at all is answered.
    StallBeforeHead,
    /// `200 OK` and the stream's head, then silence.
    StallBeforeFirstChunk,
    /// One chunk of text, then silence.
    StallAfterFirstChunk,
    /// An SSE event whose data is not JSON, after some text.
    MalformedSse,
    /// A complete response whose tool call's arguments are cut off mid-JSON
    /// (the model's mistake, not the network's): the turn goes on with a
    /// tool error the model reads.
    TruncatedToolCall,
}

/// Which of tandem's provider failure kinds (protocol.md, "Provider
/// failures") a fault is, and how many retries its bucket holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    Retried {
        kind: &'static str,
        retries: usize,
    },
    /// Fails the turn at once (`error`).
    Fatal {
        kind: &'static str,
    },
    /// Not a provider failure: the step ends normally.
    NextStep,
}

impl Fault {
    /// How tandem classifies this fault.
    pub fn expected(self) -> Expected {
        match self {
            Fault::RateLimited { .. } => Expected::Retried {
                kind: "rate_limited",
                retries: 4,
            },
            Fault::ServerError(_) => Expected::Retried {
                kind: "overloaded",
                retries: 3,
            },
            Fault::ResetMidStream => Expected::Retried {
                kind: "stream_dropped",
                retries: 3,
            },
            Fault::StallBeforeHead | Fault::StallBeforeFirstChunk | Fault::StallAfterFirstChunk => {
                Expected::Retried {
                    kind: "stream_stalled",
                    retries: 3,
                }
            }
            Fault::MalformedSse => Expected::Fatal { kind: "protocol" },
            Fault::TruncatedToolCall => Expected::NextStep,
        }
    }

    /// Whether the client must time out to get past it.
    pub fn stalls(self) -> bool {
        matches!(
            self,
            Fault::StallBeforeHead | Fault::StallBeforeFirstChunk | Fault::StallAfterFirstChunk
        )
    }

    /// The reply that plays this fault; `partial` is the text streamed
    /// before a fault that breaks a stream.
    pub fn reply(self, partial: &str, call_id: &str) -> Reply {
        let head = || openai::delta(json!({"role": "assistant", "content": ""}));
        let text = |t: &str| openai::delta(json!({"content": t}));
        match self {
            Fault::RateLimited { retry_after_ms } => openai::error(429, "rate limited, slow down")
                .with_header("Retry-After", "1")
                .with_header("retry-after-ms", retry_after_ms.to_string()),
            Fault::ServerError(status) => openai::error(status, "the server is having a bad day"),
            Fault::ResetMidStream => Reply::Sse(vec![head(), text(partial), SseStep::Drop]),
            Fault::StallBeforeHead => Reply::Hang,
            Fault::StallBeforeFirstChunk => Reply::Sse(vec![SseStep::Stall]),
            Fault::StallAfterFirstChunk => Reply::Sse(vec![head(), text(partial), SseStep::Stall]),
            Fault::MalformedSse => Reply::Sse(vec![
                head(),
                text(partial),
                SseStep::data("{\"choices\": [{\"delta\": {\"content\": \"cut"),
                SseStep::Delay(Duration::from_millis(1)),
                openai::finish("stop"),
                openai::done(),
            ]),
            Fault::TruncatedToolCall => {
                let mut steps = vec![
                    openai::delta(json!({"role": "assistant", "content": null})),
                    openai::delta(
                        json!({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                        "function": {"name": "read_file", "arguments": "{\"path\": \"notes"}}]}),
                    ),
                ];
                steps.extend(openai::ending("tool_calls"));
                Reply::Sse(steps)
            }
        }
    }
}
