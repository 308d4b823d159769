//! The HTTP/1.1 side: accepting connections, reading a request, and
//! playing the next scripted reply byte by byte. Every response closes
//! its connection; an empty queue answers 500, an unknown route 404.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use super::{lock, RecordedRequest, Reply, SseStep, State};

pub(super) async fn accept_loop(listener: TcpListener, state: Arc<State>) {
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
    let keep_body = !state
        .discard_bodies
        .load(std::sync::atomic::Ordering::Relaxed);
    let Some(request) = read_request(&mut socket, keep_body).await else {
        return;
    };
    // The reply is chosen before the request is recorded, so the request
    // moves into the record: cloning a multi-megabyte body (its JSON tree
    // too) here held this runtime up before it read the next request,
    // which step_overhead's "send until first byte" counted.
    let reply = match (request.method.as_str(), request.path.as_str()) {
        ("POST", "/v1/chat/completions" | "/v1/messages") => {
            let scripted = lock(&state.replies).pop_front();
            let responder = || lock(&state.responder).clone();
            scripted
                .or_else(|| responder().map(|respond| respond(&request)))
                .unwrap_or_else(|| error_reply(500, "no scripted reply"))
        }
        // `tandem doctor`'s model list (OpenAI's and Anthropic's shape).
        ("GET", "/v1/models") => {
            let ids = lock(&state.models)
                .clone()
                .unwrap_or_else(|| vec![super::MODEL_NAME.to_string()]);
            let data: Vec<_> = ids
                .iter()
                .map(|id| json!({"id": id, "object": "model"}))
                .collect();
            Reply::status(200, json!({"object": "list", "data": data}).to_string())
        }
        (method, path) => error_reply(404, &format!("no route for {method} {path}")),
    };
    lock(&state.requests).push(request);
    state.changed.notify_waiters();
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

/// Reads the request head and a `Content-Length` body (kept and parsed
/// when `keep_body`, else read and dropped).
async fn read_request(socket: &mut TcpStream, keep_body: bool) -> Option<RecordedRequest> {
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
    let mut read = body.len();
    while read < length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        read += n;
        if keep_body {
            body.extend_from_slice(&chunk[..n]);
        }
    }
    let received_at = Instant::now();
    let raw_body = if keep_body {
        String::from_utf8_lossy(&body).into_owned()
    } else {
        String::new()
    };
    Some(RecordedRequest {
        method,
        path,
        headers,
        body: serde_json::from_str(&raw_body).unwrap_or(Value::Null),
        raw_body,
        received_at,
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
            SseStep::AwaitRequests(n) => await_requests(state, *n).await,
            // Returning drops the socket: no terminating chunk is sent.
            SseStep::Drop => return,
        }
    }
    let _ = socket.write_all(b"0\r\n\r\n").await;
    let _ = socket.flush().await;
    let _ = socket.shutdown().await;
}

/// Waits until `n` requests are recorded, or the wait limit passes (the
/// test then fails on what it asserts, not here).
async fn await_requests(state: &State, n: usize) {
    let wait = async {
        loop {
            let changed = state.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if lock(&state.requests).len() >= n {
                return;
            }
            changed.await;
        }
    };
    let _ = tokio::time::timeout(super::WAIT_LIMIT, wait).await;
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
