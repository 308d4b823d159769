//! The serve's editor connections: an HTTP/1.1 `GET /lsp` or `GET /acp`
//! with the bearer token and `Upgrade: tandem`, answered `101 Switching
//! Protocols`, after which the connection's bytes are the editor's own
//! stdio protocol (LSP's `Content-Length` frames, ACP's lines), read and
//! written by the same frontend as `tandem lsp` and `tandem acp`. The
//! shims (`tandem lsp --attach`, `tandem acp --attach`) only carry bytes.
//!
//! Every other request (the WebSocket of the control methods,
//! `serve/status` and `serve/stop`) goes on to jsonrpsee with the bytes
//! read so far put back in front of the stream.
//!
//! Invariant: a tunnel is opened only after the same checks as any
//! connection (the token compared in constant time, no `Origin` off the
//! allowlist, the connection limit), and its connection's end ends only
//! its own part: its turns run on for the others.

use std::future::Future;
use std::io::Cursor;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

use super::auth::{Policy, Refusal};
use super::stream::Stream;
use crate::core::daemon::Daemon;
use crate::frontend::client_pipe::ClientOut;
use crate::frontend::followers::Followers;
use crate::frontend::lsp::Ending;
use crate::frontend::stdout::task_writer_with;

/// The `Upgrade` token of a tunnel.
pub const UPGRADE: &str = "tandem";

/// The longest request head read before giving the bytes to jsonrpsee.
const MAX_HEAD: usize = 16 << 10;

/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// The editor protocol a tunnel carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Lsp,
    Acp,
}

impl Protocol {
    pub fn path(self) -> &'static str {
        match self {
            Protocol::Lsp => "/lsp",
            Protocol::Acp => "/acp",
        }
    }
}

/// What the serve's tunnels share.
pub struct Tunnels {
    pub daemon: Arc<Daemon>,
    pub followers: Arc<Followers>,
    pub policy: Policy,
    pub max_connections: usize,
    /// The serve's TCP port (named in an LSP editor's `initialize` answer).
    pub port: u16,
    /// Tunnels open now.
    open: AtomicUsize,
}

impl Tunnels {
    pub fn new(
        daemon: Arc<Daemon>,
        followers: Arc<Followers>,
        policy: Policy,
        max_connections: usize,
        port: u16,
    ) -> Arc<Tunnels> {
        Arc::new(Tunnels {
            daemon,
            followers,
            policy,
            max_connections,
            port,
            open: AtomicUsize::new(0),
        })
    }

    pub fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }
}

/// Serves `stream` as a tunnel if its request asks for one; otherwise
/// gives it back, with what was read put back in front, for jsonrpsee.
pub async fn route(mut stream: Stream, tunnels: &Arc<Tunnels>, others: usize) -> Option<Rewound> {
    let mut head = Vec::with_capacity(1024);
    let read = tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut stream, &mut head)).await;
    let Ok(Ok(Some(end))) = read else {
        // Not a request we can read (or too slow): jsonrpsee answers it.
        return Some(Rewound::new(head, stream));
    };
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut request = httparse::Request::new(&mut headers);
    let protocol = match request.parse(&head[..end]) {
        Ok(httparse::Status::Complete(_)) => match request.path {
            Some("/lsp") => Some(Protocol::Lsp),
            Some("/acp") => Some(Protocol::Acp),
            _ => None,
        },
        _ => return Some(Rewound::new(head, stream)),
    };
    let mut map = http::HeaderMap::new();
    for header in request.headers.iter() {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(header.name.as_bytes()),
            http::HeaderValue::from_bytes(header.value),
        ) {
            map.append(name, value);
        }
    }
    let transport = stream.transport().name();
    let Some(protocol) = protocol else {
        // jsonrpsee's own limit counts only its connections: the tunnels
        // count against the same `max_connections`.
        if tunnels.policy.check(&map).is_ok() && tunnels.open() + others >= tunnels.max_connections
        {
            tracing::warn!(transport, "refused a connection: too many");
            let _ = stream.write_all(&too_many()).await;
            return None;
        }
        return Some(Rewound::new(head, stream));
    };
    if let Err(refusal) = tunnels.policy.check(&map) {
        tracing::warn!(?refusal, transport, "refused a connection");
        let _ = stream.write_all(&refusal_response(refusal)).await;
        return None;
    }
    let upgrade = map
        .get(http::header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case(UPGRADE));
    if !upgrade {
        let _ = stream
            .write_all(&plain_response(
                426,
                "Upgrade Required",
                "send `Upgrade: tandem` (see protocol.md, Serve mode)\n",
            ))
            .await;
        return None;
    }
    if tunnels.open() + others >= tunnels.max_connections {
        tracing::warn!(transport, "refused a connection: too many");
        let _ = stream.write_all(&too_many()).await;
        return None;
    }
    let switching = format!(
        "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: {UPGRADE}\r\n\r\n"
    );
    if stream.write_all(switching.as_bytes()).await.is_err() {
        return None;
    }
    let leftover = head.split_off(end);
    let pass = map
        .get(super::stdio_pass::HEADER)
        .is_some_and(|v| v.as_bytes() == super::stdio_pass::PASS.as_bytes());
    tunnels.open.fetch_add(1, Ordering::SeqCst);
    tracing::info!(
        transport,
        path = protocol.path(),
        pass,
        "a client connected"
    );
    match (pass, stream) {
        (true, Stream::Unix(unix)) => run_passed(tunnels, protocol, unix).await,
        (_, stream) => run(tunnels, protocol, leftover, stream).await,
    }
    tunnels.open.fetch_sub(1, Ordering::SeqCst);
    tracing::info!(transport, path = protocol.path(), "a client disconnected");
    None
}

/// Reads until the end of the request head; its length, or `None` when
/// the bytes are not one (too long, or the stream ended first).
pub(super) async fn read_head(
    stream: &mut Stream,
    head: &mut Vec<u8>,
) -> std::io::Result<Option<usize>> {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(at) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok(Some(at + 4));
        }
        if head.len() >= MAX_HEAD {
            return Ok(None);
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        head.extend_from_slice(&chunk[..n]);
    }
}

/// One editor's connection, run by its protocol's frontend until it ends.
async fn run(tunnels: &Arc<Tunnels>, protocol: Protocol, leftover: Vec<u8>, stream: Stream) {
    // The socket's unread bytes are watched through a handle of its own;
    // frames are written by a task on the serve's thread (no writer thread
    // to wake per chunk).
    let watch = match ClientOut::socket(stream.as_fd()) {
        Ok(watch) => watch,
        Err(e) => {
            tracing::error!("cannot share the connection's socket: {e}");
            return;
        }
    };
    let (read, write) = tokio::io::split(stream);
    let input = Cursor::new(leftover).chain(read);
    serve_editor(tunnels, protocol, input, write, watch, Default::default()).await;
}

/// Runs `protocol`'s frontend for one editor as a client of the serve's
/// daemon: it reads `input`, its frames are written to `output` by a task
/// on the serve's thread (`watch` sees what the editor has not read yet;
/// `gone` ends the writer when the editor goes away without closing).
async fn serve_editor<R, W>(
    tunnels: &Arc<Tunnels>,
    protocol: Protocol,
    input: R,
    output: W,
    watch: ClientOut,
    gone: tokio_util::sync::CancellationToken,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let daemon = tunnels.daemon.clone();
    let followers = &tunnels.followers;
    let ending = Ending::Connection { port: tunnels.port };
    match protocol {
        Protocol::Lsp => {
            let queue = task_writer_with(
                output,
                watch,
                crate::frontend::lsp::framing::encode,
                crate::frontend::updates::update_notification,
                gone,
            );
            let connection = crate::frontend::lsp::Connection::new(queue);
            let own = connection.bridge();
            let client = daemon.connect(followers.link(own.clone()));
            followers.register(client.id(), connection.sink(), own);
            let id = client.id();
            connection.run(daemon, client, input, ending).await;
            followers.unregister(id);
        }
        Protocol::Acp => {
            let (frame, chunk) = crate::frontend::acp::Connection::framing();
            let queue = task_writer_with(output, watch, frame, chunk, gone);
            let connection = crate::frontend::acp::Connection::new(queue);
            let own = connection.bridge();
            let client = daemon.connect(followers.link(own.clone()));
            followers.register(client.id(), connection.sink(), own);
            let id = client.id();
            connection.run(daemon, client, input, ending).await;
            followers.unregister(id);
        }
    }
}

/// One editor's connection whose shim handed over its stdio: the
/// frontend reads and writes the editor's pipes as over stdio; the socket
/// only says, by closing, that the connection is over.
async fn run_passed(tunnels: &Arc<Tunnels>, protocol: Protocol, unix: tokio::net::UnixStream) {
    let (input, output) = match super::stdio_pass::receive(&unix).await {
        Ok(fds) => fds,
        Err(e) => {
            tracing::warn!("a shim's stdio did not arrive: {e}");
            return;
        }
    };
    let input = match crate::frontend::stdin::fd_reader(input.as_fd()) {
        Ok(Some(reader)) => reader,
        Ok(None) => {
            tracing::warn!("a shim's stdin is neither a pipe nor a socket");
            return;
        }
        Err(e) => {
            tracing::warn!("cannot read a shim's stdin: {e}");
            return;
        }
    };
    let watch = match ClientOut::socket(output.as_fd()) {
        Ok(watch) => watch,
        Err(e) => {
            tracing::warn!("cannot watch a shim's stdout: {e}");
            return;
        }
    };
    let output = match async_output(output) {
        Ok(output) => output,
        Err(e) => {
            tracing::warn!("cannot write a shim's stdout: {e}");
            return;
        }
    };
    // A shim that dies (killed with its window) ends the connection as the
    // end of the editor's input would: the editor may keep its pipes.
    let gone = tokio_util::sync::CancellationToken::new();
    let (mut shim, keep) = unix.into_split();
    let watcher = tokio::spawn({
        let gone = gone.clone();
        async move {
            let mut byte = [0u8; 64];
            while matches!(shim.read(&mut byte).await, Ok(n) if n > 0) {}
            gone.cancel();
        }
    });
    let input = UntilGone {
        input,
        gone: Box::pin(gone.clone().cancelled_owned()),
    };
    serve_editor(tunnels, protocol, input, output, watch, gone).await;
    // Closing the socket ends the shim.
    watcher.abort();
    drop(keep);
}

/// An editor's stdout handed over by a shim: a pipe, or a socket (what
/// libuv gives a child), written through the reactor.
fn async_output(fd: std::os::fd::OwnedFd) -> std::io::Result<Box<dyn AsyncWrite + Unpin + Send>> {
    use std::os::unix::fs::FileTypeExt;
    let file = std::fs::File::from(fd);
    if file.metadata()?.file_type().is_socket() {
        let socket = std::os::unix::net::UnixStream::from(std::os::fd::OwnedFd::from(file));
        socket.set_nonblocking(true)?;
        Ok(Box::new(tokio::net::UnixStream::from_std(socket)?))
    } else {
        Ok(Box::new(tokio::net::unix::pipe::Sender::from_file(file)?))
    }
}

/// An input that ends when `gone` fires.
struct UntilGone<R> {
    input: R,
    gone: Pin<Box<tokio_util::sync::WaitForCancellationFutureOwned>>,
}

impl<R: AsyncRead + Unpin> AsyncRead for UntilGone<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.gone.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.input).poll_read(cx, buf)
    }
}

fn plain_response(code: u16, reason: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn too_many() -> Vec<u8> {
    plain_response(429, "Too Many Requests", "too many connections\n")
}

fn refusal_response(refusal: Refusal) -> Vec<u8> {
    let (code, reason, body) = match refusal {
        Refusal::Unauthorized => (
            401,
            "Unauthorized",
            "missing or wrong bearer token (see $TANDEM_HOME/serve.json)\n",
        ),
        Refusal::ForbiddenOrigin => (
            403,
            "Forbidden",
            "requests with this Origin are not allowed\n",
        ),
    };
    let mut response = plain_response(code, reason, body);
    if refusal == Refusal::Unauthorized {
        let at = response
            .windows(2)
            .position(|w| w == b"\r\n")
            .map_or(0, |p| p + 2);
        response.splice(at..at, b"WWW-Authenticate: Bearer\r\n".iter().copied());
    }
    response
}

/// A connection with the bytes already read from it put back in front.
pub struct Rewound {
    read: Cursor<Vec<u8>>,
    stream: Stream,
    /// Dropped with the connection (hyper hands the stream on to the
    /// WebSocket's task after the upgrade, and drops it when that ends).
    guard: Option<Box<dyn Send + Sync>>,
}

impl Rewound {
    fn new(read: Vec<u8>, stream: Stream) -> Rewound {
        Rewound {
            read: Cursor::new(read),
            stream,
            guard: None,
        }
    }

    /// Keeps `guard` until the connection is gone.
    pub fn holding(mut self, guard: impl Send + Sync + 'static) -> Rewound {
        self.guard = Some(Box::new(guard));
        self
    }
}

impl AsyncRead for Rewound {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let position = this.read.position() as usize;
        let rest = &this.read.get_ref()[position..];
        if !rest.is_empty() {
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            this.read.set_position((position + n) as u64);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Rewound {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
