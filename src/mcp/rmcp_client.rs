//! The one file that names `rmcp`, the official Rust SDK of the Model
//! Context Protocol: a client session over a child's stdio or a
//! streamable-HTTP endpoint, its tool list and its tool calls, in tandem's
//! own plain types.
//!
//! Invariant: no `rmcp` type leaves this file. Tools and results are read
//! from their JSON form (the protocol's, which is stable), not from the
//! SDK's structs (which change between releases), so an SDK update touches
//! this file only.
//!
//! The SDK's own HTTP client is on reqwest 0.13; tandem is on 0.12, so this
//! file implements the SDK's `StreamableHttpClient` trait over the
//! project's reqwest ([`HttpClient`]): one HTTP stack in the binary.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::StreamExt;
use http::header::{ACCEPT, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ClientJsonRpcMessage, Implementation,
    JsonRpcMessage, ProtocolVersion, ServerJsonRpcMessage,
};
use rmcp::service::{ClientInitializeError, NotificationContext, RunningService};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_LAST_EVENT_ID, HEADER_MCP_PROTOCOL_VERSION, HEADER_SESSION_ID,
    JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    HttpStatusError, SseError, StreamableHttpClient, StreamableHttpClientTransportConfig,
    StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use rmcp_sse_stream::{Sse, SseStream};
use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncWrite};

/// Told when the server says its tool list changed.
pub type ListChanged = Arc<dyn Fn() + Send + Sync>;

/// What tandem answers the server's requests with, and hears from it.
struct Handler {
    on_tools_changed: ListChanged,
}

impl ClientHandler for Handler {
    /// tandem starts every session with `initialize`, so it offers the
    /// newest revision that has that handshake: the SDK's default is its
    /// newest of all (2026-07-28), which replaced `initialize` with
    /// `server/discover`, and a server that knows only the handshake's
    /// revisions (the conformance suite's among them) refuses it.
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("tandem", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        (self.on_tools_changed)();
    }
}

/// An initialized MCP client session.
pub struct Connection {
    service: RunningService<RoleClient, Handler>,
}

/// One tool as the server lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedTool {
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    pub input_schema: Value,
    /// `annotations.readOnlyHint`.
    pub read_only: bool,
    /// `annotations.destructiveHint` said explicitly.
    pub destructive: bool,
}

/// A call that ended without a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallFailure {
    /// The connection closed (the server exited) before the answer came.
    Closed,
    /// The server answered with a JSON-RPC error.
    Error(String),
}

/// Runs MCP's `initialize` handshake over `read`/`write` (a child's stdout
/// and stdin).
pub async fn connect<R, W>(
    read: R,
    write: W,
    on_tools_changed: ListChanged,
) -> Result<Connection, String>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let service = Handler { on_tools_changed }
        .serve((read, write))
        .await
        .map_err(|e| format!("the MCP handshake failed: {}", init_error(e)))?;
    Ok(Connection { service })
}

/// Runs MCP's `initialize` handshake with the streamable-HTTP server at
/// `url`, sending `headers` (name, value) with every request.
pub async fn connect_http(
    url: &str,
    headers: &[(String, String)],
    on_tools_changed: ListChanged,
) -> Result<Connection, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("`{url}` is not an http:// or https:// URL"));
    }
    let config =
        StreamableHttpClientTransportConfig::with_uri(url).custom_headers(header_map(headers)?);
    let transport = StreamableHttpClientTransport::with_client(HttpClient::new()?, config);
    let service = Handler { on_tools_changed }
        .serve(transport)
        .await
        .map_err(|e| format!("the MCP handshake with {url} failed: {}", init_error(e)))?;
    Ok(Connection { service })
}

/// A failed handshake in words: the SDK's transport errors name the
/// transport's Rust type, which says nothing to a user.
fn init_error(error: ClientInitializeError) -> String {
    match error {
        ClientInitializeError::TransportError { error, context } => {
            format!("{} ({context})", with_causes(&*error.error))
        }
        other => other.to_string(),
    }
}

/// An error and its causes (`connection refused` is a cause of reqwest's
/// `error sending request`).
fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    // The SDK's HTTP error does not give its client's error as a source.
    if let Some(StreamableHttpError::<reqwest::Error>::Client(client)) = error.downcast_ref() {
        return with_causes(client);
    }
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let said = inner.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = inner.source();
    }
    text
}

/// A failed request in words (see [`init_error`]).
fn service_error(error: ServiceError) -> String {
    match error {
        ServiceError::TransportSend(error) => with_causes(&*error.error),
        other => other.to_string(),
    }
}

/// Headers the transport sets itself, which a server definition may not.
const TRANSPORT_HEADERS: [&str; 5] = [
    "accept",
    "content-type",
    HEADER_SESSION_ID,
    HEADER_LAST_EVENT_ID,
    HEADER_MCP_PROTOCOL_VERSION,
];

/// A definition's headers as the SDK takes them; values are marked
/// sensitive (they may be credentials: never logged).
fn header_map(headers: &[(String, String)]) -> Result<HashMap<HeaderName, HeaderValue>, String> {
    let mut map = HashMap::new();
    for (name, value) in headers {
        let name = HeaderName::try_from(name.as_str())
            .map_err(|_| format!("`{name}` cannot name an HTTP header"))?;
        if TRANSPORT_HEADERS
            .iter()
            .any(|t| name.as_str().eq_ignore_ascii_case(t))
        {
            return Err(format!(
                "the header `{name}` is set by the MCP transport itself; leave it out of `headers`"
            ));
        }
        let mut value = HeaderValue::try_from(value.as_str()).map_err(|_| {
            format!("the value of the header `{name}` has characters a header cannot carry")
        })?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    Ok(map)
}

type HttpError = StreamableHttpError<reqwest::Error>;
type SseEvents = BoxStream<'static, Result<Sse, SseError>>;

/// The SDK's streamable-HTTP client trait over the project's reqwest.
#[derive(Clone)]
struct HttpClient(reqwest::Client);

impl HttpClient {
    fn new() -> Result<HttpClient, String> {
        reqwest::Client::builder()
            // As the SDK's own client: a reused connection whose last body
            // was not read to its end stalls ~40 ms on delayed ACKs.
            .pool_max_idle_per_host(0)
            // A redirect would replay the session id and the definition's
            // headers (credentials) elsewhere, or turn a POST into a GET.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map(HttpClient)
            .map_err(|e| format!("cannot make an HTTP client: {e}"))
    }

    fn request(
        &self,
        method: reqwest::Method,
        uri: &str,
        session_id: Option<&str>,
        auth_token: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> reqwest::RequestBuilder {
        let mut request = self
            .0
            .request(method, uri)
            .headers(headers.into_iter().collect());
        if let Some(session_id) = session_id {
            request = request.header(HEADER_SESSION_ID, session_id);
        }
        if let Some(token) = auth_token {
            request = request.bearer_auth(token);
        }
        request
    }
}

impl StreamableHttpClient for HttpClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_token,
            headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let attached = session_id.is_some();
        let response = self
            .request(
                reqwest::Method::POST,
                &uri,
                session_id.as_deref(),
                auth_token,
                headers,
            )
            .header(
                ACCEPT,
                format!("{JSON_MIME_TYPE}, {EVENT_STREAM_MIME_TYPE}"),
            )
            .json(&message)
            .send()
            .await
            .map_err(StreamableHttpError::Client)?;
        let status = response.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && attached {
            return Err(StreamableHttpError::SessionExpired);
        }
        let new_session = response
            .headers()
            .get(HEADER_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let awaits_no_response = !matches!(message, JsonRpcMessage::Request(_));
        let kind = content_kind(response.headers());
        if !status.is_success() {
            let retry_after = response.headers().get(RETRY_AFTER).cloned();
            let body = read_body(response, limits.max_error_response_size, false).await?;
            // A JSON-RPC error in an HTTP error is the server's answer.
            if let Ok(error @ JsonRpcMessage::Error(_)) =
                serde_json::from_slice::<ServerJsonRpcMessage>(&body)
            {
                return Ok(StreamableHttpPostResponse::Json(error, new_session));
            }
            return Err(status_error(status, retry_after.as_ref(), &body));
        }
        match kind {
            ContentKind::EventStream => Ok(StreamableHttpPostResponse::Sse(
                sse_events(response, limits.max_sse_event_size),
                new_session,
            )),
            ContentKind::Json => {
                let body = read_body(response, limits.max_json_response_size, true).await?;
                match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                    Ok(message) => Ok(StreamableHttpPostResponse::Json(message, new_session)),
                    Err(_) if awaits_no_response => Ok(StreamableHttpPostResponse::Accepted),
                    Err(e) => Err(StreamableHttpError::UnexpectedServerResponse(
                        format!("the server's JSON answer is not JSON-RPC: {e}").into(),
                    )),
                }
            }
            // Some servers answer a notification with an empty 200.
            _ if awaits_no_response => Ok(StreamableHttpPostResponse::Accepted),
            ContentKind::Other(other) => Err(StreamableHttpError::UnexpectedContentType(other)),
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_token: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        let response = self
            .request(
                reqwest::Method::DELETE,
                &uri,
                Some(&session_id),
                auth_token,
                headers,
            )
            .send()
            .await
            .map_err(StreamableHttpError::Client)?;
        let status = response.status();
        if status.is_success() || status == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(());
        }
        Err(status_error(status, None, b""))
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<SseEvents, HttpError> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_token,
            headers,
            StreamableHttpResponseLimits::default().max_sse_event_size,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<SseEvents, HttpError> {
        let mut request = self
            .request(
                reqwest::Method::GET,
                &uri,
                session_id.as_deref(),
                auth_token,
                headers,
            )
            .header(ACCEPT, EVENT_STREAM_MIME_TYPE);
        if let Some(last_event_id) = last_event_id {
            request = request.header(HEADER_LAST_EVENT_ID, last_event_id);
        }
        let response = request.send().await.map_err(StreamableHttpError::Client)?;
        let status = response.status();
        if status == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if !status.is_success() {
            let retry_after = response.headers().get(RETRY_AFTER).cloned();
            let body = read_body(response, 4096, false).await?;
            return Err(status_error(status, retry_after.as_ref(), &body));
        }
        match content_kind(response.headers()) {
            ContentKind::EventStream => Ok(sse_events(response, max_sse_event_size)),
            ContentKind::Json => Err(StreamableHttpError::UnexpectedContentType(Some(
                JSON_MIME_TYPE.to_string(),
            ))),
            ContentKind::Other(other) => Err(StreamableHttpError::UnexpectedContentType(other)),
        }
    }
}

enum ContentKind {
    Json,
    EventStream,
    Other(Option<String>),
}

fn content_kind(headers: &HeaderMap) -> ContentKind {
    let Some(value) = headers.get(CONTENT_TYPE) else {
        return ContentKind::Other(None);
    };
    let text = String::from_utf8_lossy(value.as_bytes()).to_string();
    let essence = text.split(';').next().unwrap_or_default().trim();
    if essence.eq_ignore_ascii_case(JSON_MIME_TYPE) {
        ContentKind::Json
    } else if essence.eq_ignore_ascii_case(EVENT_STREAM_MIME_TYPE) {
        ContentKind::EventStream
    } else {
        ContentKind::Other(Some(text))
    }
}

/// A failed HTTP status as the SDK classifies it: 429 and 5xx keep their
/// `Retry-After`; the rest say the status and the start of the body.
fn status_error(status: StatusCode, retry_after: Option<&HeaderValue>, body: &[u8]) -> HttpError {
    if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
        let retry_after = retry_after
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        return HttpStatusError::new(status.as_u16(), retry_after).into();
    }
    let text = String::from_utf8_lossy(&body[..body.len().min(512)]);
    StreamableHttpError::UnexpectedServerResponse(format!("HTTP {status}: {text}").into())
}

/// The body, at most `limit` bytes: past it, an error when `whole`
/// (a message that would be cut), else the first `limit` bytes.
async fn read_body(
    mut response: reqwest::Response,
    limit: usize,
    whole: bool,
) -> Result<Vec<u8>, HttpError> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(StreamableHttpError::Client)?
    {
        if body.len() + chunk.len() > limit {
            if whole {
                return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: limit });
            }
            body.extend_from_slice(&chunk[..limit - body.len()]);
            break;
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The response's SSE events; an event over `max_event` bytes ends the
/// stream with an error instead of growing without bound.
fn sse_events(response: reqwest::Response, max_event: usize) -> SseEvents {
    let mut in_event = 0usize;
    let mut last = 0u8;
    let bytes = response.bytes_stream().map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        for &byte in chunk.iter().filter(|b| **b != b'\r') {
            in_event = if byte == b'\n' && last == b'\n' {
                0
            } else {
                in_event + 1
            };
            last = byte;
        }
        if in_event > max_event {
            return Err(std::io::Error::other(format!(
                "an SSE event over {max_event} bytes"
            )));
        }
        Ok(chunk)
    });
    SseStream::from_bytes_stream(bytes).boxed()
}

impl Connection {
    /// The server's name and version, as it gave them.
    pub fn server_info(&self) -> Option<String> {
        let info = self.service.peer_info()?;
        let value = serde_json::to_value(&*info).ok()?;
        let server = value.get("serverInfo")?;
        Some(format!(
            "{} {}",
            server.get("name")?.as_str()?,
            server.get("version").and_then(Value::as_str).unwrap_or("")
        ))
    }

    /// Every tool, all pages.
    pub async fn list_tools(&self) -> Result<Vec<ListedTool>, String> {
        let tools = self
            .service
            .list_all_tools()
            .await
            .map_err(|e| format!("tools/list failed: {}", service_error(e)))?;
        Ok(tools
            .iter()
            .filter_map(|tool| serde_json::to_value(tool).ok())
            .filter_map(|tool| listed_tool(&tool))
            .collect())
    }

    /// Calls a tool and returns its result as the protocol's JSON
    /// (`{content, structuredContent?, isError?}`). Dropping the future
    /// before it ends sends `notifications/cancelled` for the request.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<Value, CallFailure> {
        let params = CallToolRequestParams::new(name.to_string()).with_arguments(arguments);
        match self.service.call_tool(params).await {
            Ok(result) => serde_json::to_value(&result)
                .map_err(|e| CallFailure::Error(format!("unreadable result: {e}"))),
            Err(ServiceError::TransportClosed) => Err(CallFailure::Closed),
            Err(ServiceError::McpError(e)) => Err(CallFailure::Error(e.message.to_string())),
            Err(e) => Err(CallFailure::Error(service_error(e))),
        }
    }

    /// Whether the connection is gone (the server exited or hung up).
    pub fn is_closed(&self) -> bool {
        self.service.is_closed() || self.service.is_transport_closed()
    }

    /// Ends the session, waiting at most `grace` for the SDK's task.
    pub async fn close(mut self, grace: Duration) {
        let _ = self.service.close_with_timeout(grace).await;
    }
}

/// A tool from its `tools/list` JSON; `None` without a name.
fn listed_tool(tool: &Value) -> Option<ListedTool> {
    let annotations = tool.get("annotations");
    let hint = |key: &str| {
        annotations
            .and_then(|a| a.get(key))
            .and_then(Value::as_bool)
    };
    Some(ListedTool {
        name: tool.get("name")?.as_str()?.to_string(),
        title: tool
            .get("title")
            .or_else(|| annotations.and_then(|a| a.get("title")))
            .and_then(Value::as_str)
            .map(str::to_string),
        description: tool
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        input_schema: tool
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": "object"})),
        read_only: hint("readOnlyHint") == Some(true),
        destructive: hint("destructiveHint") == Some(true),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn headers_the_transport_sets_cannot_be_given() {
        let pair = |n: &str, v: &str| vec![(n.to_string(), v.to_string())];
        let map = header_map(&pair("Authorization", "Bearer x")).unwrap();
        assert!(map[&HeaderName::from_static("authorization")].is_sensitive());
        let err = header_map(&pair("mcp-session-id", "s")).unwrap_err();
        assert!(err.contains("set by the MCP transport"), "{err}");
        let err = header_map(&pair("X-Bad", "a\nb")).unwrap_err();
        assert!(err.contains("`x-bad`"), "{err}");
        let err = header_map(&pair("bad name", "v")).unwrap_err();
        assert!(err.contains("cannot name an HTTP header"), "{err}");
    }

    #[test]
    fn a_listed_tool_reads_its_annotations() {
        let tool = listed_tool(&json!({
            "name": "echo", "description": "Echoes", "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true, "title": "Echo"}
        }))
        .unwrap();
        assert_eq!(tool.name, "echo");
        assert_eq!(tool.title.as_deref(), Some("Echo"));
        assert!(tool.read_only);
        assert!(!tool.destructive);
        assert!(listed_tool(&json!({"description": "no name"})).is_none());
    }
}
