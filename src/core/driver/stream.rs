//! One streamed provider attempt under the adaptive timeouts (first token,
//! then between chunks). Text and reasoning deltas are logged as they
//! arrive; a stall, a drop or an unfinished stream is a failure, never a
//! short answer.

use futures::StreamExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::turn::Turn;
use crate::config::LimitsConfig;
use crate::core::output_budget::OutputBudget;
use crate::provider::{Completion, ErrorKind, ModelRequest, Provider, ProviderError, StreamEvent};
use crate::vocab::event::Event;

/// Why one provider attempt did not produce a completion.
pub(super) enum AttemptFailure {
    Cancelled,
    Provider {
        error: ProviderError,
        streamed: bool,
    },
}

impl Turn<'_> {
    /// One streamed provider attempt with the adaptive timeouts; chunks are
    /// logged (and so streamed to the client) as they arrive.
    pub(super) async fn attempt(
        &mut self,
        step: u32,
        attempt: u32,
    ) -> Result<Completion, AttemptFailure> {
        let request = ModelRequest {
            messages: self.projection.messages(),
            tools: &self.tool_specs,
            max_output_tokens: match self.model.config.max_output_tokens {
                0 => None,
                n => Some(n),
            },
        };
        let input_tokens = self.projection.estimated_tokens();
        // On record before it leaves: a request cut short by a cancel, an
        // error or a crash still shows in the log (and in `tandem replay`).
        self.session.log.append(Event::ModelRequest {
            turn_id: self.turn_id.clone(),
            step,
            attempt,
            purpose: "step".to_string(),
            provider: self.provider.name().to_string(),
            model: self.provider.model().to_string(),
            messages: request.messages.len(),
            tools: request.tools.len(),
            estimated_input_tokens: input_tokens,
        });
        let (log, turn_id, last_progress) =
            (&self.session.log, &self.turn_id, &mut self.last_progress);
        let on_delta = |delta: StreamEvent| match delta {
            StreamEvent::TextDelta(text) => {
                // Progress is new output for the user: text, not
                // keep-alives, retries or empty deltas.
                if !text.trim().is_empty() {
                    *last_progress = Instant::now();
                }
                log.append(Event::AssistantChunk {
                    turn_id: turn_id.clone(),
                    step,
                    attempt,
                    text,
                });
            }
            StreamEvent::ThoughtDelta(text) => {
                log.append(Event::ThoughtChunk {
                    turn_id: turn_id.clone(),
                    step,
                    attempt,
                    text,
                });
            }
            _ => {}
        };
        let output = self.session.log.output_budget();
        stream_completion(
            self.provider.as_ref(),
            request,
            self.limits,
            input_tokens,
            &self.cancel,
            output.as_deref(),
            on_delta,
        )
        .await
    }
}

/// Streams one provider call under the adaptive timeouts: the first chunk
/// (the response headers included) within the first-token budget for
/// `input_tokens`, then at most `chunk_timeout` between chunks. `on_delta`
/// sees each text and reasoning delta as it is decoded. A stall, a drop or a
/// stream that ends without completing is a failure, never a short answer.
///
/// With an `output` budget, the stream is not read while the client has
/// more than the budget's cap waiting: the model server's writes back up
/// instead of the daemon's memory, and the time paused does not count as
/// a stall.
pub(super) async fn stream_completion(
    provider: &dyn Provider,
    request: ModelRequest<'_>,
    limits: &LimitsConfig,
    input_tokens: u64,
    cancel: &CancellationToken,
    output: Option<&OutputBudget>,
    mut on_delta: impl FnMut(StreamEvent),
) -> Result<Completion, AttemptFailure> {
    let first_token = limits.first_token_timeout(input_tokens);
    let mut first_deadline = Instant::now() + first_token;
    let stalled_first = || AttemptFailure::Provider {
        error: ProviderError::new(
            ErrorKind::StreamStalled,
            format!("the model sent nothing within {first_token:.0?} (first token timeout)"),
        ),
        streamed: false,
    };
    let mut stream = tokio::select! {
        result = tokio::time::timeout_at(first_deadline, provider.stream(request)) => match result {
            Err(_) => return Err(stalled_first()),
            Ok(Err(error)) => return Err(AttemptFailure::Provider { error, streamed: false }),
            Ok(Ok(stream)) => stream,
        },
        _ = cancel.cancelled() => return Err(AttemptFailure::Cancelled),
    };
    let mut streamed = false;
    let mut got_first = false;
    let chunk_timeout = limits.chunk_timeout();
    loop {
        if let Some(output) = output.filter(|output| !output.has_room()) {
            let paused_at = Instant::now();
            tokio::select! {
                _ = output.room() => {}
                _ = cancel.cancelled() => return Err(AttemptFailure::Cancelled),
            }
            // Waiting for the client is not the model being slow.
            first_deadline += paused_at.elapsed();
        }
        let deadline = if got_first {
            Instant::now() + chunk_timeout
        } else {
            first_deadline
        };
        let next = tokio::select! {
            next = tokio::time::timeout_at(deadline, stream.next()) => next,
            _ = cancel.cancelled() => return Err(AttemptFailure::Cancelled),
        };
        let event = match next {
            Err(_) if got_first => {
                return Err(AttemptFailure::Provider {
                    error: ProviderError::new(
                        ErrorKind::StreamStalled,
                        format!("the model stream stalled: no data for {chunk_timeout:.0?}"),
                    ),
                    streamed,
                })
            }
            Err(_) => return Err(stalled_first()),
            Ok(None) => {
                return Err(AttemptFailure::Provider {
                    error: ProviderError::new(
                        ErrorKind::StreamDropped,
                        "the model stream ended before the answer was complete",
                    ),
                    streamed,
                })
            }
            Ok(Some(Err(error))) => return Err(AttemptFailure::Provider { error, streamed }),
            Ok(Some(Ok(event))) => event,
        };
        got_first = true;
        match event {
            StreamEvent::Completed(completion) => return Ok(completion),
            StreamEvent::TextDelta(_) | StreamEvent::ThoughtDelta(_) => {
                streamed = true;
                on_delta(event);
            }
            StreamEvent::ToolCallStarted { .. } => {}
        }
    }
}
