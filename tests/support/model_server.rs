//! A scripted model server: real HTTP/1.1 on a loopback port, written on
//! tokio TCP so a test controls every byte, every chunk boundary and every
//! dropped connection.
//!
//! ```ignore
//! let server = ModelServer::start().await;
//! server.push(openai::text(["Hel", "lo"]));
//! server.push(Reply::Sse(vec![openai::delta(json!({"content": "Hel"})), SseStep::Drop]));
//! server.push(openai::error(429, "slow down").with_header("Retry-After", "2"));
//! // ... point a provider (or the daemon) at server.base_url() ...
//! let requests = server.wait_for_requests(1).await;
//! assert_eq!(requests[0].body["model"], "scripted-model");
//! ```
//!
//! Both `POST /v1/chat/completions` and `POST /v1/messages` answer from the
//! one FIFO queue of replies; an empty queue answers HTTP 500 "no scripted
//! reply". Every response carries `Connection: close` and the socket is
//! closed after it. Every request is recorded, whatever its path.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::JoinSet;

use tandem::config::{ModelConfig, ProviderKind};

/// The model name [`ModelServer::model_config`] configures.
pub const MODEL_NAME: &str = "scripted-model";

/// How long the `wait_for_*` helpers wait before failing the test; a guard
/// against hangs, never a way of waiting for something.
const WAIT_LIMIT: Duration = Duration::from_secs(20);

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

    fn to_wire(&self) -> Option<String> {
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

#[derive(Default)]
struct State {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<RecordedRequest>>,
    chunk_write_times: Mutex<Vec<Instant>>,
    hangups: Mutex<usize>,
    /// Signalled on every recorded request and every hang-up.
    changed: Notify,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking connection task must not take every later assertion down.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The running server; stops (and drops its connections) when dropped.
pub struct ModelServer {
    addr: SocketAddr,
    state: Arc<State>,
    accept_task: tokio::task::JoinHandle<()>,
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.accept_task.abort();
    }
}

impl ModelServer {
    /// Binds `127.0.0.1:0` and starts serving.
    pub async fn start() -> ModelServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the model server's port");
        let addr = listener.local_addr().expect("model server address");
        let state = Arc::new(State::default());
        let accept_task = tokio::spawn(accept_loop(listener, state.clone()));
        ModelServer {
            addr,
            state,
            accept_task,
        }
    }

    /// `http://127.0.0.1:PORT/v1`, what `[model] base_url` should be.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A model configuration pointing at this server. `api_key_env` names a
    /// variable nobody sets, so no key is sent unless a test sets one.
    pub fn model_config(&self, provider: ProviderKind) -> ModelConfig {
        ModelConfig {
            provider,
            base_url: self.base_url(),
            name: MODEL_NAME.to_string(),
            api_key_env: "TANDEM_TEST_NO_SUCH_KEY".to_string(),
            ..ModelConfig::default()
        }
    }

    /// A session `config` (as `tandem/newSession` takes it) pointing at this
    /// server, with retries a few milliseconds apart so tests of failures
    /// run fast.
    pub fn session_config(&self) -> Value {
        self.session_config_with(json!({}))
    }

    /// [`ModelServer::session_config`] with more `limits` (same keys win).
    pub fn session_config_with(&self, limits: Value) -> Value {
        let mut config = json!({
            "model": {"base_url": self.base_url(), "name": MODEL_NAME, "api_key_env": "TANDEM_TEST_NO_KEY"},
            "limits": {"retry_base_delay_ms": 1, "retry_max_delay_ms": 5},
        });
        if let (Some(all), Value::Object(extra)) = (config["limits"].as_object_mut(), limits) {
            all.extend(extra);
        }
        config
    }

    /// Scripts the next response (FIFO).
    pub fn push(&self, reply: Reply) {
        lock(&self.state.replies).push_back(reply);
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state.requests).clone()
    }

    /// Waits until at least `n` requests have arrived and returns them all.
    pub async fn wait_for_requests(&self, n: usize) -> Vec<RecordedRequest> {
        self.wait_until(
            |state| lock(&state.requests).len() >= n,
            || format!("{n} requests to the model server"),
        )
        .await;
        self.requests()
    }

    /// Waits until clients have gone away from `n` stalled or hung replies:
    /// proof that a consumer that stopped reading also closed the socket.
    pub async fn wait_for_hangups(&self, n: usize) {
        self.wait_until(
            |state| *lock(&state.hangups) >= n,
            || format!("{n} clients to hang up on a stalled reply"),
        )
        .await;
    }

    /// When each SSE event was about to be written to a socket, across all
    /// replies, in order.
    pub fn chunk_write_times(&self) -> Vec<Instant> {
        lock(&self.state.chunk_write_times).clone()
    }

    async fn wait_until(&self, done: impl Fn(&State) -> bool, what: impl Fn() -> String) {
        let wait = async {
            loop {
                let changed = self.state.changed.notified();
                tokio::pin!(changed);
                // Register before checking, so a change in between is not lost.
                changed.as_mut().enable();
                if done(&self.state) {
                    return;
                }
                changed.await;
            }
        };
        within_real_time(WAIT_LIMIT, wait, what).await
    }
}

/// Runs `future`, failing the test if it takes longer than `limit` of wall
/// clock time. Unlike `tokio::time::timeout` this holds under paused tokio
/// time, which would otherwise jump straight past the limit while the
/// runtime waits for socket I/O.
pub async fn within_real_time<F: std::future::Future>(
    limit: Duration,
    future: F,
    what: impl Fn() -> String,
) -> F::Output {
    let (expired_tx, expired) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        let _ = expired_tx.send(());
    });
    tokio::select! {
        output = future => output,
        _ = expired => panic!("gave up after {limit:?} waiting for {}", what()),
    }
}

/// A base URL on which nothing listens: a port bound and released again.
pub fn unused_base_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a probe port");
    let addr = listener.local_addr().expect("probe address");
    drop(listener);
    format!("http://{addr}/v1")
}

async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    // Owning the connections here means aborting this task ends them too.
    let mut connections = JoinSet::new();
    loop {
        let Ok((socket, _)) = listener.accept().await else {
            continue;
        };
        while connections.try_join_next().is_some() {}
        connections.spawn(serve_connection(socket, state.clone()));
    }
}

async fn serve_connection(mut socket: TcpStream, state: Arc<State>) {
    let _ = socket.set_nodelay(true);
    let Some(request) = read_request(&mut socket).await else {
        return;
    };
    let path = request.path.clone();
    let method = request.method.clone();
    lock(&state.requests).push(request);
    state.changed.notify_waiters();

    let reply = match (method.as_str(), path.as_str()) {
        ("POST", "/v1/chat/completions" | "/v1/messages") => lock(&state.replies)
            .pop_front()
            .unwrap_or_else(|| error_reply(500, "no scripted reply")),
        _ => error_reply(404, &format!("no route for {method} {path}")),
    };
    match reply {
        Reply::Status {
            status,
            headers,
            body,
        } => {
            let _ = write_status(&mut socket, status, &headers, &body).await;
        }
        Reply::Sse(steps) => play_sse(&mut socket, &steps, &state).await,
        Reply::Hang => wait_for_hangup(&mut socket, &state).await,
    }
}

fn error_reply(status: u16, message: &str) -> Reply {
    Reply::status(
        status,
        json!({"error": {"message": message, "type": "scripted_server_error"}}).to_string(),
    )
}

/// Reads the request head and a `Content-Length` body.
async fn read_request(socket: &mut TcpStream) -> Option<RecordedRequest> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let mut arrived = None;
    let head_end = loop {
        if let Some(pos) = find(&buffer, b"\r\n\r\n") {
            break pos;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        arrived.get_or_insert_with(Instant::now);
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_string();
    let path = request_line.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    let mut body = buffer.split_off(head_end + 4);
    while body.len() < length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let raw_body = String::from_utf8_lossy(&body).into_owned();
    Some(RecordedRequest {
        method,
        path,
        headers,
        body: serde_json::from_str(&raw_body).unwrap_or(Value::Null),
        raw_body,
        received_at: Instant::now(),
        arrived: arrived.unwrap_or_else(Instant::now),
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

async fn write_status(
    socket: &mut TcpStream,
    status: u16,
    headers: &[(String, String)],
    body: &str,
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason_phrase(status));
    if !headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
    {
        let kind = if serde_json::from_str::<Value>(body).is_ok() {
            "application/json"
        } else {
            "text/plain; charset=utf-8"
        };
        head.push_str(&format!("Content-Type: {kind}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    socket.write_all(head.as_bytes()).await?;
    socket.write_all(body.as_bytes()).await?;
    socket.flush().await?;
    socket.shutdown().await
}

async fn play_sse(socket: &mut TcpStream, steps: &[SseStep], state: &State) {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
                Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    if socket.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    let started = tokio::time::Instant::now();
    for step in steps {
        match step {
            SseStep::Event { .. } => {
                let payload = step.to_wire().unwrap_or_default();
                let chunk = format!("{:x}\r\n{payload}\r\n", payload.len());
                // Stamped before the write: a thread preempted after it
                // would otherwise stamp the chunk after its reader saw it.
                lock(&state.chunk_write_times).push(Instant::now());
                if socket.write_all(chunk.as_bytes()).await.is_err()
                    || socket.flush().await.is_err()
                {
                    return;
                }
            }
            SseStep::Delay(duration) => tokio::time::sleep(*duration).await,
            SseStep::Until(offset) => tokio::time::sleep_until(started + *offset).await,
            SseStep::Stall => return wait_for_hangup(socket, state).await,
            // Returning drops the socket: no terminating chunk is sent.
            SseStep::Drop => return,
        }
    }
    let _ = socket.write_all(b"0\r\n\r\n").await;
    let _ = socket.flush().await;
    let _ = socket.shutdown().await;
}

/// Keeps the connection open until the client closes it, then counts it.
async fn wait_for_hangup(socket: &mut TcpStream, state: &State) {
    let mut sink = [0u8; 1024];
    while matches!(socket.read(&mut sink).await, Ok(n) if n > 0) {}
    *lock(&state.hangups) += 1;
    state.changed.notify_waiters();
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// `text` cut near its middle, on a character boundary.
fn split_in_two(text: &str) -> (&str, &str) {
    let mid = (1..=text.len() / 2)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    text.split_at(mid)
}

/// Scripts in the OpenAI chat-completions streaming format.
pub mod openai {
    use super::{Reply, SseStep};
    use serde_json::{json, Value};

    /// Usage every finished script reports: 10 prompt tokens of which 4
    /// cached, and 5 completion tokens.
    pub const PROMPT_TOKENS: u64 = 10;
    pub const CACHED_TOKENS: u64 = 4;
    pub const COMPLETION_TOKENS: u64 = 5;

    /// A `chat.completion.chunk` event whose only choice has `delta`.
    pub fn delta(delta: Value) -> SseStep {
        chunk(json!([{"index": 0, "delta": delta, "finish_reason": null}]))
    }

    /// The chunk carrying `finish_reason` (`stop`, `tool_calls`, `length`, ...).
    pub fn finish(reason: &str) -> SseStep {
        chunk(json!([{"index": 0, "delta": {}, "finish_reason": reason}]))
    }

    /// The usage chunk sent with `stream_options.include_usage`: `choices: []`.
    pub fn usage(prompt: u64, completion: u64, cached: u64) -> SseStep {
        SseStep::data(
            json!({
                "id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0,
                "model": super::MODEL_NAME, "choices": [],
                "usage": {
                    "prompt_tokens": prompt, "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                    "prompt_tokens_details": {"cached_tokens": cached}
                }
            })
            .to_string(),
        )
    }

    /// `data: [DONE]`.
    pub fn done() -> SseStep {
        SseStep::data("[DONE]")
    }

    /// An `{"error": {...}}` object inside the stream.
    pub fn stream_error(kind: &str, message: &str) -> SseStep {
        SseStep::data(json!({"error": {"message": message, "type": kind}}).to_string())
    }

    /// An HTTP error with an OpenAI-shaped body.
    pub fn error(status: u16, message: &str) -> Reply {
        Reply::status(
            status,
            json!({"error": {"message": message, "type": "invalid_request_error", "code": null}})
                .to_string(),
        )
    }

    /// `finish_reason`, usage, `[DONE]`: how every script ends.
    pub fn ending(reason: &str) -> Vec<SseStep> {
        vec![
            finish(reason),
            usage(PROMPT_TOKENS, COMPLETION_TOKENS, CACHED_TOKENS),
            done(),
        ]
    }

    /// Text streamed in the given pieces, then `stop`.
    pub fn text<const N: usize>(pieces: [&str; N]) -> Reply {
        let mut steps = vec![delta(json!({"role": "assistant", "content": ""}))];
        steps.extend(pieces.iter().map(|piece| delta(json!({"content": piece}))));
        steps.extend(ending("stop"));
        Reply::Sse(steps)
    }

    /// `reasoning_content` pieces, then text pieces, then `stop`.
    pub fn reasoning_then_text(reasoning: &[&str], text: &[&str]) -> Reply {
        let mut steps = vec![delta(json!({"role": "assistant", "content": null}))];
        steps.extend(
            reasoning
                .iter()
                .map(|piece| delta(json!({"reasoning_content": piece}))),
        );
        steps.extend(text.iter().map(|piece| delta(json!({"content": piece}))));
        steps.extend(ending("stop"));
        Reply::Sse(steps)
    }

    /// Parallel tool calls `(id, name, arguments_json)`, then `tool_calls`.
    /// Each call opens with a delta carrying index, id and name; its
    /// arguments follow in two fragments that carry only the index, and the
    /// fragments of different calls interleave, as some servers send them.
    pub fn tool_calls(calls: &[(&str, &str, &str)]) -> Reply {
        let mut steps = vec![delta(json!({"role": "assistant", "content": null}))];
        let halves: Vec<(&str, &str)> = calls
            .iter()
            .map(|(_, _, args)| super::split_in_two(args))
            .collect();
        let call_delta = |body: Value| delta(json!({"tool_calls": [body]}));
        for (index, (id, name, _)) in calls.iter().enumerate() {
            steps.push(call_delta(
                json!({"index": index, "id": id, "type": "function",
                       "function": {"name": name, "arguments": ""}}),
            ));
            steps.push(call_delta(
                json!({"index": index, "function": {"arguments": halves[index].0}}),
            ));
        }
        for (index, (_, second)) in halves.iter().enumerate() {
            steps.push(call_delta(
                json!({"index": index, "function": {"arguments": second}}),
            ));
        }
        steps.extend(ending("tool_calls"));
        Reply::Sse(steps)
    }

    fn chunk(choices: Value) -> SseStep {
        SseStep::data(
            json!({
                "id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0,
                "model": super::MODEL_NAME, "choices": choices
            })
            .to_string(),
        )
    }
}

/// Scripts in the Anthropic Messages streaming format: named events
/// (`event: message_start` ...) whose data repeats the type.
pub mod anthropic {
    use super::{Reply, SseStep};
    use serde_json::{json, Value};

    /// Usage every finished script reports: `message_start` gives 20 input
    /// tokens, 6 read from the cache and 2 written to it; `message_delta`
    /// gives 7 output tokens.
    pub const INPUT_TOKENS: u64 = 20;
    pub const CACHE_READ_TOKENS: u64 = 6;
    pub const CACHE_CREATION_TOKENS: u64 = 2;
    pub const OUTPUT_TOKENS: u64 = 7;

    /// One content block of a scripted message.
    #[derive(Debug, Clone, Copy)]
    pub enum Block<'a> {
        /// `thinking_delta`s with these pieces, then the signature in two
        /// `signature_delta`s.
        Thinking {
            pieces: &'a [&'a str],
            signature: &'a str,
        },
        /// `text_delta`s with these pieces.
        Text(&'a [&'a str]),
        /// A `tool_use` block whose input JSON arrives in two
        /// `input_json_delta`s.
        ToolUse {
            id: &'a str,
            name: &'a str,
            input_json: &'a str,
        },
    }

    /// An event named after its data's `type`.
    pub fn event(data: Value) -> SseStep {
        let name = data["type"].as_str().unwrap_or("message").to_string();
        SseStep::event(name, data.to_string())
    }

    pub fn message_start() -> SseStep {
        event(json!({"type": "message_start", "message": {
            "id": "msg_scripted", "type": "message", "role": "assistant",
            "model": super::MODEL_NAME, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {
                "input_tokens": INPUT_TOKENS, "output_tokens": 1,
                "cache_read_input_tokens": CACHE_READ_TOKENS,
                "cache_creation_input_tokens": CACHE_CREATION_TOKENS
            }
        }}))
    }

    pub fn ping() -> SseStep {
        event(json!({"type": "ping"}))
    }

    /// `message_delta` with `stop_reason` (`end_turn`, `tool_use`,
    /// `max_tokens`, `stop_sequence`, `refusal`) and the output usage.
    pub fn message_delta(stop_reason: &str) -> SseStep {
        event(json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": OUTPUT_TOKENS}}))
    }

    pub fn message_stop() -> SseStep {
        event(json!({"type": "message_stop"}))
    }

    /// The steps of content block `index`: start, deltas, stop.
    pub fn block(index: usize, block: &Block<'_>) -> Vec<SseStep> {
        let delta = |delta: Value| {
            event(json!({"type": "content_block_delta", "index": index, "delta": delta}))
        };
        let (start, deltas): (Value, Vec<SseStep>) = match *block {
            Block::Thinking { pieces, signature } => {
                let (a, b) = super::split_in_two(signature);
                let mut deltas: Vec<SseStep> = pieces
                    .iter()
                    .map(|p| delta(json!({"type": "thinking_delta", "thinking": p})))
                    .collect();
                deltas.push(delta(json!({"type": "signature_delta", "signature": a})));
                deltas.push(delta(json!({"type": "signature_delta", "signature": b})));
                (
                    json!({"type": "thinking", "thinking": "", "signature": ""}),
                    deltas,
                )
            }
            Block::Text(pieces) => (
                json!({"type": "text", "text": ""}),
                pieces
                    .iter()
                    .map(|p| delta(json!({"type": "text_delta", "text": p})))
                    .collect(),
            ),
            Block::ToolUse {
                id,
                name,
                input_json,
            } => {
                let (a, b) = super::split_in_two(input_json);
                (
                    json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                    [a, b]
                        .iter()
                        .map(|p| delta(json!({"type": "input_json_delta", "partial_json": p})))
                        .collect(),
                )
            }
        };
        let mut steps = vec![event(
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        )];
        steps.extend(deltas);
        steps.push(event(json!({"type": "content_block_stop", "index": index})));
        steps
    }

    /// A whole message: `message_start`, a `ping`, the blocks,
    /// `message_delta` with `stop_reason`, `message_stop`.
    pub fn message(blocks: &[Block<'_>], stop_reason: &str) -> Reply {
        let mut steps = vec![message_start(), ping()];
        for (index, b) in blocks.iter().enumerate() {
            steps.extend(block(index, b));
        }
        steps.push(message_delta(stop_reason));
        steps.push(message_stop());
        Reply::Sse(steps)
    }

    /// Text streamed in the given pieces, then `end_turn`.
    pub fn text<const N: usize>(pieces: [&str; N]) -> Reply {
        message(&[Block::Text(&pieces)], "end_turn")
    }

    /// A signed thinking block, then `tool_use` blocks `(id, name,
    /// input_json)`, then `tool_use`.
    pub fn thinking_and_tool_calls(
        thinking: &str,
        signature: &str,
        calls: &[(&str, &str, &str)],
    ) -> Reply {
        let pieces = [thinking];
        let mut blocks = vec![Block::Thinking {
            pieces: &pieces,
            signature,
        }];
        blocks.extend(calls.iter().map(|&(id, name, input_json)| Block::ToolUse {
            id,
            name,
            input_json,
        }));
        message(&blocks, "tool_use")
    }

    /// An `error` event inside the stream (`overloaded_error`, ...).
    pub fn error_event(kind: &str, message: &str) -> SseStep {
        event(json!({"type": "error", "error": {"type": kind, "message": message}}))
    }

    /// An HTTP error with an Anthropic-shaped body.
    pub fn error(status: u16, kind: &str, message: &str) -> Reply {
        Reply::status(
            status,
            json!({"type": "error", "error": {"type": kind, "message": message}}).to_string(),
        )
    }
}
