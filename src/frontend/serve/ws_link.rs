//! The shims' WebSocket to the serve on plain blocking sockets. The
//! handshake is jsonrpsee's client's (soketto, the same request and
//! headers); then the socket leaves the runtime, and one thread sleeps in
//! `read(2)` on it while another writes to it. A streamed chunk costs the
//! reading thread one `read` and its decoding: no reactor and no
//! `epoll_wait` before the read (strace: 2 syscalls a chunk in the shim,
//! the read and the write to stdout, where the runtime made 3).
//!
//! Only what a client needs: the serve's text and binary messages (also
//! fragmented), ping (answered by the caller), pong (skipped) and close are
//! read; the client's frames are masked, as RFC 6455 requires. No extension
//! is negotiated, so a frame with an RSV bit or a mask is an error.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use soketto::handshake::{Client, ServerResponse};
use tokio_util::compat::TokioAsyncReadCompatExt;

use super::stream::Stream;

/// A connected socket in blocking mode.
pub enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Socket {
    /// A second handle on the same connection (one per thread).
    pub fn try_clone(&self) -> io::Result<Socket> {
        Ok(match self {
            Socket::Tcp(s) => Socket::Tcp(s.try_clone()?),
            Socket::Unix(s) => Socket::Unix(s.try_clone()?),
        })
    }

    pub fn shutdown(&self, how: Shutdown) {
        let _ = match self {
            Socket::Tcp(s) => s.shutdown(how),
            Socket::Unix(s) => s.shutdown(how),
        };
    }
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.read(buf),
            Socket::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.write(buf),
            Socket::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A WebSocket after its handshake: the socket, in blocking mode, and
/// what the serve sent after its answer (the start of the first frames).
pub struct Opened {
    pub socket: Socket,
    pub leftover: Vec<u8>,
}

/// The client's handshake on `stream`, `host` as the `Host` header and
/// `headers` added; an error says why the serve refused.
pub async fn handshake(
    stream: Stream,
    host: &str,
    headers: &[(&str, &[u8])],
    timeout: Duration,
) -> Result<Opened, String> {
    let headers: Vec<_> = headers
        .iter()
        .map(|(name, value)| soketto::handshake::client::Header { name, value })
        .collect();
    let mut client = Client::new(stream.compat(), host, "/");
    client.set_headers(&headers);
    match tokio::time::timeout(timeout, client.handshake()).await {
        Err(_) => return Err(format!("the handshake timed out after {timeout:?}")),
        Ok(Err(e)) => return Err(format!("the handshake failed: {e}")),
        Ok(Ok(ServerResponse::Accepted { .. })) => {}
        Ok(Ok(ServerResponse::Rejected { status_code })) => {
            return Err(format!("rejected with status code {status_code}"))
        }
        Ok(Ok(ServerResponse::Redirect { status_code, .. })) => {
            return Err(format!("redirected with status code {status_code}"))
        }
    }
    let leftover = client.take_buffer().to_vec();
    let socket = blocking(client.into_inner().into_inner()).map_err(|e| e.to_string())?;
    Ok(Opened { socket, leftover })
}

/// The stream out of the runtime, as a blocking socket.
pub fn blocking(stream: Stream) -> io::Result<Socket> {
    let socket = match stream {
        Stream::Tcp(s) => Socket::Tcp(s.into_std()?),
        Stream::Unix(s) => Socket::Unix(s.into_std()?),
    };
    match &socket {
        Socket::Tcp(s) => s.set_nonblocking(false)?,
        Socket::Unix(s) => s.set_nonblocking(false)?,
    }
    Ok(socket)
}

/// A message from the serve.
#[derive(Debug, PartialEq, Eq)]
pub enum Message {
    Text(String),
    /// A ping's payload, for the pong.
    Ping(Vec<u8>),
    /// The serve closes the connection.
    Close,
}

const OP_CONTINUATION: u8 = 0x0;
const OP_TEXT: u8 = 0x1;
const OP_BINARY: u8 = 0x2;
const OP_CLOSE: u8 = 0x8;
const OP_PING: u8 = 0x9;
const OP_PONG: u8 = 0xA;

/// What a read asks for at least; the buffer's size while messages fit.
const READ_SIZE: usize = 64 << 10;

/// The serve's frames, decoded from a blocking reader.
pub struct Frames<R> {
    source: R,
    /// Bytes read and not yet decoded: `buf[at..end]`.
    buf: Vec<u8>,
    at: usize,
    end: usize,
    max_message: usize,
    /// A fragmented message begun and not finished.
    partial: Option<Vec<u8>>,
}

fn protocol_error(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("websocket: {what}"))
}

impl<R: Read> Frames<R> {
    /// `leftover`: bytes already read from `source` (after the handshake).
    pub fn new(source: R, leftover: Vec<u8>, max_message: usize) -> Frames<R> {
        let end = leftover.len();
        let mut buf = leftover;
        buf.resize(end.max(READ_SIZE), 0);
        Frames {
            source,
            buf,
            at: 0,
            end,
            max_message,
            partial: None,
        }
    }

    /// The next message; pongs are skipped. An error when the connection
    /// ends or breaks the protocol.
    pub fn next_message(&mut self) -> io::Result<Message> {
        loop {
            let (fin, opcode, payload) = self.frame()?;
            let whole = match opcode {
                OP_TEXT | OP_BINARY if self.partial.is_some() => {
                    return Err(protocol_error("a message began inside another"))
                }
                OP_TEXT | OP_BINARY if fin => payload,
                OP_TEXT | OP_BINARY => {
                    self.partial = Some(payload);
                    continue;
                }
                OP_CONTINUATION => {
                    let Some(mut data) = self.partial.take() else {
                        return Err(protocol_error("a continuation with no message"));
                    };
                    if data.len() + payload.len() > self.max_message {
                        return Err(protocol_error("message too large"));
                    }
                    data.extend_from_slice(&payload);
                    if !fin {
                        self.partial = Some(data);
                        continue;
                    }
                    data
                }
                OP_CLOSE => return Ok(Message::Close),
                OP_PING => return Ok(Message::Ping(payload)),
                OP_PONG => continue,
                _ => return Err(protocol_error("unknown opcode")),
            };
            // A binary message is read as text, as jsonrpsee's client did.
            return Ok(Message::Text(match String::from_utf8(whole) {
                Ok(text) => text,
                Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
            }));
        }
    }

    /// One frame: FIN, opcode, payload.
    fn frame(&mut self) -> io::Result<(bool, u8, Vec<u8>)> {
        let (fin, opcode, head, len) = loop {
            if let Some(header) = header(&self.buf[self.at..self.end])? {
                break header;
            }
            self.fill(14)?;
        };
        if len > self.max_message as u64 {
            return Err(protocol_error("message too large"));
        }
        let len = len as usize;
        while self.end - self.at < head + len {
            self.fill(head + len)?;
        }
        let start = self.at + head;
        let payload = self.buf[start..start + len].to_vec();
        self.at = start + len;
        if self.at == self.end {
            self.at = 0;
            self.end = 0;
            if self.buf.len() > READ_SIZE {
                // Let a large message's buffer go.
                self.buf = vec![0; READ_SIZE];
            }
        }
        Ok((fin, opcode, payload))
    }

    /// Reads once, with room for `need` bytes from `at`.
    fn fill(&mut self, need: usize) -> io::Result<()> {
        if self.buf.len() - self.at < need.max(READ_SIZE / 2) {
            self.buf.copy_within(self.at..self.end, 0);
            self.end -= self.at;
            self.at = 0;
            if self.buf.len() < need {
                self.buf.resize(need, 0);
            }
        }
        loop {
            match self.source.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the serve closed the connection",
                    ))
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// A frame's header at the start of `bytes`, if it is all there: FIN,
/// opcode, the header's length, the payload's.
fn header(bytes: &[u8]) -> io::Result<Option<(bool, u8, usize, u64)>> {
    let [first, second, ..] = *bytes else {
        return Ok(None);
    };
    if first & 0x70 != 0 {
        return Err(protocol_error("RSV bits with no extension"));
    }
    if second & 0x80 != 0 {
        return Err(protocol_error("a masked frame from the server"));
    }
    let (fin, opcode) = (first & 0x80 != 0, first & 0x0f);
    let (head, len) = match second & 0x7f {
        126 if bytes.len() < 4 => return Ok(None),
        126 => (4, u64::from(u16::from_be_bytes([bytes[2], bytes[3]]))),
        127 if bytes.len() < 10 => return Ok(None),
        127 => {
            let mut len = [0; 8];
            len.copy_from_slice(&bytes[2..10]);
            (10, u64::from_be_bytes(len))
        }
        n => (2, u64::from(n)),
    };
    if opcode >= OP_CLOSE && (!fin || len > 125) {
        return Err(protocol_error("a fragmented or long control frame"));
    }
    Ok(Some((fin, opcode, head, len)))
}

/// The client's frames, written to a blocking writer, each in one `write`.
pub struct Sender<W> {
    sink: W,
    max_message: usize,
}

impl<W: Write> Sender<W> {
    pub fn new(sink: W, max_message: usize) -> Sender<W> {
        Sender { sink, max_message }
    }

    pub fn text(&mut self, text: &str) -> io::Result<()> {
        if text.len() > self.max_message {
            return Err(protocol_error("message too large"));
        }
        self.sink.write_all(&frame(OP_TEXT, text.as_bytes()))
    }

    pub fn pong(&mut self, payload: &[u8]) -> io::Result<()> {
        self.sink.write_all(&frame(OP_PONG, payload))
    }

    /// A close frame (code 1000, normal closure).
    pub fn close(&mut self) -> io::Result<()> {
        self.sink
            .write_all(&frame(OP_CLOSE, &1000u16.to_be_bytes()))
    }

    pub fn get_ref(&self) -> &W {
        &self.sink
    }
}

/// One final, masked frame.
fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 14);
    out.push(0x80 | opcode);
    match payload.len() {
        n if n < 126 => out.push(0x80 | n as u8),
        n if n <= usize::from(u16::MAX) => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    let mask = fastrand::u32(..).to_ne_bytes();
    out.extend_from_slice(&mask);
    out.extend(
        payload
            .iter()
            .zip(mask.iter().cycle())
            .map(|(byte, key)| byte ^ key),
    );
    out
}

#[cfg(test)]
#[path = "ws_link_tests.rs"]
mod tests;
