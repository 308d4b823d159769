//! HTTP plumbing shared by the providers: the client, sending one request,
//! classifying failures, and turning an SSE body into a [`ProviderStream`].
//!
//! Invariant: nothing here knows a wire format. A provider supplies the
//! headers, the body and an [`SseDecoder`]; this module supplies the
//! transport and the error vocabulary, so that both providers report a
//! refused connection, an HTTP 429 or a dropped body in the same words.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

use futures::{Stream, StreamExt};
use reqwest::header::{HeaderMap, CONTENT_TYPE, RETRY_AFTER};
use reqwest::StatusCode;
use serde_json::Value;

use super::{Completion, ErrorKind, ProviderError, ProviderStream, StreamEvent};

/// How long to wait for a TCP (and TLS) connection. There is deliberately
/// no overall timeout: a long answer streams for minutes, and the driver
/// enforces first-token and between-chunk deadlines on the stream.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest piece of a non-JSON error body quoted in a message.
const MAX_QUOTED_BODY: usize = 500;

/// The HTTP client every provider uses.
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true)
        .build()
        .unwrap_or_else(|e| {
            // Only a broken TLS backend gets here; the default client then
            // reports the same problem on the first request.
            tracing::error!("could not build the HTTP client: {e}");
            reqwest::Client::new()
        })
}

/// `base_url` without trailing slashes, so `{base}/chat/completions` never
/// has a double slash.
pub(crate) fn trim_base_url(base_url: &str) -> String {
    base_url.trim().trim_end_matches('/').to_string()
}

/// Reads the API key from the variable named `env_name` at call time; an
/// unset or blank variable means "no key" (local servers need none).
pub(crate) fn api_key(env_name: &str) -> Option<String> {
    if env_name.is_empty() {
        return None;
    }
    std::env::var(env_name)
        .ok()
        .filter(|key| !key.trim().is_empty())
}

/// POSTs `body` (serialized JSON) and returns the response once the server
/// answered with a success status. Connect failures and non-2xx answers
/// become classified errors here, before any of the body is read.
pub(crate) async fn post_json(
    client: &reqwest::Client,
    base_url: &str,
    url: &str,
    headers: HeaderMap,
    body: reqwest::Body,
) -> Result<reqwest::Response, ProviderError> {
    tracing::debug!(
        url,
        bytes = http_body::Body::size_hint(&body).exact(),
        "sending model request"
    );
    let response = client
        .post(url)
        .headers(headers)
        .header(CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| send_error(&e, base_url))?;
    success_or_error(response).await
}

/// The response when its status is a success, else its classified error.
async fn success_or_error(response: reqwest::Response) -> Result<reqwest::Response, ProviderError> {
    if response.status().is_success() {
        Ok(response)
    } else {
        Err(status_error(response).await)
    }
}

/// GETs `url` (`tandem doctor`'s model list), with the same classified
/// errors as [`post_json`]; `timeout` bounds the whole exchange.
pub(crate) async fn get(
    client: &reqwest::Client,
    base_url: &str,
    url: &str,
    headers: HeaderMap,
    timeout: Duration,
) -> Result<reqwest::Response, ProviderError> {
    let response = client
        .get(url)
        .headers(headers)
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| send_error(&e, base_url))?;
    success_or_error(response).await
}

/// Classifies a failure to get any response at all.
fn send_error(error: &reqwest::Error, base_url: &str) -> ProviderError {
    if error.is_builder() {
        return ProviderError::new(
            ErrorKind::Connect,
            format!(
                "the model server address {base_url} is not a valid URL ({}). \
                 Set [model] base_url in config.toml (or TANDEM_BASE_URL) to e.g. http://127.0.0.1:11434/v1.",
                error_chain(error)
            ),
        );
    }
    if error.is_connect() || error.is_timeout() {
        return ProviderError::new(
            ErrorKind::Connect,
            format!(
                "could not connect to the model server at {base_url} ({}). \
                 Start a server there or set [model] base_url in config.toml (or TANDEM_BASE_URL).",
                connect_reason(error)
            ),
        );
    }
    // Connected, but the server hung up before sending a status line.
    ProviderError::new(
        ErrorKind::StreamDropped,
        format!(
            "the model server at {base_url} closed the connection before answering ({})",
            error_chain(error)
        ),
    )
}

/// A short human reason for a connect failure.
fn connect_reason(error: &reqwest::Error) -> String {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => return "connection refused".into(),
                std::io::ErrorKind::TimedOut => {
                    return format!("timed out after {} s", CONNECT_TIMEOUT.as_secs())
                }
                _ => {}
            }
        }
        source = cause.source();
    }
    let chain = error_chain(error);
    if chain.contains("dns error") || chain.contains("failed to lookup address") {
        return format!("host name not found: {chain}");
    }
    if error.is_timeout() {
        return format!("timed out after {} s", CONNECT_TIMEOUT.as_secs());
    }
    chain
}

/// An error and its causes, joined: reqwest's own `Display` says only
/// "error sending request", the useful part is in the sources.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Turns a non-2xx response into an error naming the status and the
/// server's own message.
async fn status_error(response: reqwest::Response) -> ProviderError {
    let status = response.status();
    let retry_after = retry_after(response.headers(), SystemTime::now());
    let body = response.text().await.unwrap_or_default();
    let server_message = server_message(&body);
    let mut message = format!("model server returned HTTP {}", status.as_u16());
    // 529 and other non-standard statuses have no canonical reason.
    if let Some(reason) = status.canonical_reason() {
        message.push(' ');
        message.push_str(reason);
    }
    if !server_message.is_empty() {
        message.push_str(": ");
        message.push_str(&server_message);
    }
    ProviderError {
        kind: classify_status(status, &server_message),
        status: Some(status.as_u16()),
        message,
        retry_after: if status == StatusCode::TOO_MANY_REQUESTS {
            retry_after
        } else {
            None
        },
    }
}

/// The message inside an error body: `error.message` (OpenAI, Anthropic,
/// llama.cpp), `error` as a string (Ollama), `message` or `detail`; else the
/// body itself, shortened.
fn server_message(body: &str) -> String {
    if let Ok(json) = serde_json::from_str::<Value>(body) {
        let candidates = [
            json.pointer("/error/message"),
            json.get("error"),
            json.get("message"),
            json.get("detail"),
        ];
        for candidate in candidates.into_iter().flatten() {
            if let Some(text) = candidate.as_str() {
                return text.to_string();
            }
        }
    }
    let body = body.trim();
    match body.char_indices().nth(MAX_QUOTED_BODY) {
        Some((cut, _)) => format!("{}...", &body[..cut]),
        None => body.to_string(),
    }
}

/// The error kind of an HTTP status, refined by the server's message for
/// the statuses servers also use for an over-long prompt.
pub(crate) fn classify_status(status: StatusCode, server_message: &str) -> ErrorKind {
    match status.as_u16() {
        429 => ErrorKind::RateLimited,
        401 | 403 => ErrorKind::Auth,
        413 => ErrorKind::ContextOverflow,
        _ if is_context_overflow(server_message) => ErrorKind::ContextOverflow,
        408 => ErrorKind::Overloaded,
        400..=499 => ErrorKind::BadRequest,
        // 5xx, Anthropic's 529, and anything else a proxy invents.
        _ => ErrorKind::Overloaded,
    }
}

/// Whether a server's error message says the prompt does not fit the
/// context window. Output truncation (`finish_reason: length`) is not this.
pub(crate) fn is_context_overflow(message: &str) -> bool {
    const MARKERS: &[&str] = &[
        "context_length_exceeded",
        "maximum context length",
        "context window",
        "context length exceeded",
        "too many tokens",
        "prompt is too long",
        "exceed_context_size",
        "exceeds the available context size",
    ];
    let message = message.to_ascii_lowercase();
    MARKERS.iter().any(|marker| message.contains(marker))
}

/// `retry-after-ms` (OpenAI) or `Retry-After` as seconds or an HTTP-date.
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
    {
        return Duration::try_from_secs_f64(ms / 1000.0).ok();
    }
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).ok();
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Decodes one provider's SSE events into [`StreamEvent`]s.
pub(crate) trait SseDecoder: Send + 'static {
    /// Handles one SSE event: pushes the deltas it carries onto `out` and
    /// returns the completion if this event ends the stream.
    fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<StreamEvent>,
    ) -> Result<Option<Completion>, ProviderError>;

    /// The body ended without an explicit end-of-stream event: the
    /// completion if enough was seen to trust it, else the error.
    fn on_eof(&mut self) -> Result<Completion, ProviderError>;
}

/// Wraps a successful response's body into a [`ProviderStream`] that yields
/// each decoded delta as soon as its SSE event arrives and ends with exactly
/// one `Completed` or one error. Dropping the stream closes the connection.
pub(crate) fn sse_stream(response: reqwest::Response, decoder: impl SseDecoder) -> ProviderStream {
    let events = sse_stream::SseByteStream::new(response.bytes_stream());
    let state = DecodeState {
        events: Box::pin(events),
        decoder,
        pending: VecDeque::new(),
        finished: false,
    };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(item) = state.pending.pop_front() {
                return Some((item, state));
            }
            if state.finished {
                return None;
            }
            state.advance().await;
        }
    })
    .boxed()
}

/// One dispatched SSE event: its type (empty when the server sent none)
/// and its data lines joined with `\n`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SseEvent {
    pub event: String,
    pub data: String,
}

type SseEvents =
    std::pin::Pin<Box<dyn Stream<Item = Result<sse_stream::Sse, sse_stream::Error>> + Send>>;

struct DecodeState<D> {
    events: SseEvents,
    decoder: D,
    pending: VecDeque<Result<StreamEvent, ProviderError>>,
    /// Set once `Completed` or an error is queued: nothing follows either.
    finished: bool,
}

impl<D: SseDecoder> DecodeState<D> {
    /// Reads the next SSE event and queues what it produced.
    async fn advance(&mut self) {
        let outcome = match self.events.next().await {
            // A block without data (a lone `event:`, `id:` or `retry:`)
            // dispatches nothing (the SSE rules).
            Some(Ok(sse_stream::Sse { data: None, .. })) => return,
            Some(Ok(sse)) => {
                let event = SseEvent {
                    event: sse.event.unwrap_or_default(),
                    data: sse.data.unwrap_or_default(),
                };
                let mut deltas = Vec::new();
                let outcome = self.decoder.on_event(&event, &mut deltas);
                self.pending.extend(deltas.into_iter().map(Ok));
                match outcome {
                    Ok(None) => return,
                    Ok(Some(completion)) => Ok(completion),
                    Err(e) => Err(e),
                }
            }
            Some(Err(sse_stream::Error::Body(e))) => Err(ProviderError::new(
                ErrorKind::StreamDropped,
                format!(
                    "the model server's stream broke off before the answer finished ({})",
                    error_chain(e.as_ref())
                ),
            )),
            Some(Err(e)) => Err(ProviderError::new(
                ErrorKind::Protocol,
                format!("the model server sent a malformed event stream ({e})"),
            )),
            None => self.decoder.on_eof(),
        };
        self.finished = true;
        self.pending.push_back(outcome.map(StreamEvent::Completed));
    }
}

/// The error for a body that ended before the answer did.
pub(crate) fn ended_early(what_was_missing: &str) -> ProviderError {
    ProviderError::new(
        ErrorKind::StreamDropped,
        format!(
            "the model server's stream ended before {what_was_missing}; the answer is incomplete"
        ),
    )
}

/// The error for an SSE event whose data is not the JSON we expect.
pub(crate) fn malformed_event(data: &str, error: &serde_json::Error) -> ProviderError {
    let mut quoted: String = data.chars().take(200).collect();
    if quoted.len() < data.len() {
        quoted.push_str("...");
    }
    ProviderError::new(
        ErrorKind::Protocol,
        format!("the model server sent an event that is not valid JSON ({error}): {quoted}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;
    use std::time::UNIX_EPOCH;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_770); // Sun, 06 Nov 1994 08:49:30 GMT
        assert_eq!(
            retry_after(&headers(&[("retry-after", "2")]), now),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "Sun, 06 Nov 1994 08:49:37 GMT")]),
                now
            ),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after-ms", "1500"), ("retry-after", "9")]),
                now
            ),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")]), now), None);
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn a_past_http_date_means_retry_now() {
        let now = UNIX_EPOCH + Duration::from_secs(2_000_000_000);
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "Sun, 06 Nov 1994 08:49:37 GMT")]),
                now
            ),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn statuses_classify_with_context_overflow_read_from_the_message() {
        let ok = |code: u16, message: &str| {
            classify_status(StatusCode::from_u16(code).unwrap(), message)
        };
        assert_eq!(
            ok(429, "too many tokens per minute"),
            ErrorKind::RateLimited
        );
        assert_eq!(ok(401, ""), ErrorKind::Auth);
        assert_eq!(ok(403, ""), ErrorKind::Auth);
        assert_eq!(ok(413, ""), ErrorKind::ContextOverflow);
        assert_eq!(ok(408, ""), ErrorKind::Overloaded);
        assert_eq!(ok(500, ""), ErrorKind::Overloaded);
        assert_eq!(ok(529, ""), ErrorKind::Overloaded);
        assert_eq!(ok(404, "model not found"), ErrorKind::BadRequest);
        assert_eq!(ok(422, "bad field"), ErrorKind::BadRequest);
        assert_eq!(
            ok(400, "This model's maximum context length is 4096 tokens"),
            ErrorKind::ContextOverflow
        );
        assert_eq!(
            ok(400, "prompt is too long: 210000 tokens > 200000 maximum"),
            ErrorKind::ContextOverflow
        );
        assert_eq!(
            ok(
                400,
                "the request exceeds the available context size, try increasing it"
            ),
            ErrorKind::ContextOverflow
        );
    }

    #[test]
    fn server_message_prefers_error_message_and_quotes_plain_bodies() {
        assert_eq!(
            server_message(r#"{"error":{"message":"boom","type":"x"}}"#),
            "boom"
        );
        assert_eq!(
            server_message(r#"{"error":"model 'x' not found"}"#),
            "model 'x' not found"
        );
        assert_eq!(server_message(r#"{"detail":"Not Found"}"#), "Not Found");
        assert_eq!(server_message("  Bad Gateway \n"), "Bad Gateway");
        assert_eq!(server_message(&"x".repeat(600)).len(), MAX_QUOTED_BODY + 3);
    }
}
