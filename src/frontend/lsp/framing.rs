//! LSP base-protocol framing that survives bad input.
//!
//! tower-lsp ends the server on the first undecodable frame, so tandem reads
//! stdin itself: headers, `Content-Length`, body, JSON check. Bad frames are
//! answered here with the right JSON-RPC error; only well-formed messages
//! travel on to tower-lsp.
//!
//! Invariant: after any bad input the reader resynchronizes on the next
//! `Content-Length` header and keeps going; only EOF ends it.
//!
//! Invariant: a [`Frame::Message`] always has the shape tower-lsp's decoder
//! accepts (`jsonrpc: "2.0"`, string `method`, integer/string/null `id`, ...),
//! because anything that decoder refuses would end the server just the same.

use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Largest body accepted, from `Content-Length`.
pub const MAX_BODY_BYTES: usize = 256 * 1024 * 1024;

/// Largest header block accepted, terminating empty line included.
pub const MAX_HEADER_BYTES: usize = 8 * 1024;

/// JSON-RPC "Parse error".
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC "Invalid Request".
const INVALID_REQUEST: i64 = -32600;

/// What resynchronization looks for; compared case-insensitively.
const CONTENT_LENGTH_TOKEN: &[u8] = b"content-length:";

/// How much is asked of the underlying reader at once.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// What the reader produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// A well-formed JSON-RPC message: its exact body bytes and parsed value.
    Message { body: Vec<u8>, value: Value },
    /// Bad input, with the error response to send back.
    Invalid(FrameError),
}

/// Why a frame was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FrameError {
    /// Headers could not be parsed or `Content-Length` was missing or bad (-32700).
    #[error("{0}")]
    BadHeader(String),
    /// The body is not JSON (-32700).
    #[error("{0}")]
    NotJson(String),
    /// The body is JSON but not a JSON-RPC 2.0 message (-32600); `id` is the
    /// request's id when one could be read.
    #[error("{message}")]
    InvalidRequest { id: Value, message: String },
}

impl FrameError {
    /// The JSON-RPC error code for this refusal: -32700 (parse error) when no
    /// JSON message could be read, -32600 (invalid request) otherwise.
    pub fn code(&self) -> i64 {
        match self {
            FrameError::BadHeader(_) | FrameError::NotJson(_) => PARSE_ERROR,
            FrameError::InvalidRequest { .. } => INVALID_REQUEST,
        }
    }

    /// The id the error response must carry: the offending message's id when
    /// it was a number or a string, `null` otherwise.
    pub fn id(&self) -> Value {
        match self {
            FrameError::InvalidRequest { id, .. } => id.clone(),
            FrameError::BadHeader(_) | FrameError::NotJson(_) => Value::Null,
        }
    }

    /// The complete JSON-RPC error response to send back to the client.
    pub fn to_response(&self) -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": self.id(),
            "error": { "code": self.code(), "message": self.to_string() },
        })
    }
}

/// Frames `body` for the LSP base protocol: `Content-Length: N\r\n\r\n` + body.
pub fn encode(body: &[u8]) -> Vec<u8> {
    let header = format!("Content-Length: {}\r\n\r\n", body.len());
    let mut framed = Vec::with_capacity(header.len() + body.len());
    framed.extend_from_slice(header.as_bytes());
    framed.extend_from_slice(body);
    framed
}

/// Reads LSP frames from a byte stream and never gives up on bad input.
///
/// Every malformed header, non-JSON body or non-JSON-RPC message comes out as
/// one [`Frame::Invalid`]; the reader then carries on with the next frame.
/// Work per read is proportional to the bytes read, so multi-megabyte bodies
/// and byte-at-a-time delivery are both linear.
pub struct FrameReader<R> {
    reader: R,
    /// Received bytes; everything before `start` is already consumed.
    buf: Vec<u8>,
    start: usize,
    state: ReadState,
    /// Landing area for reads, so a cancelled read never leaves `buf` half-written.
    scratch: Box<[u8]>,
    /// The reader reported EOF or failed; nothing more will arrive.
    finished: bool,
}

/// Where the reader is within the stream; offsets are relative to `start`.
#[derive(Debug)]
enum ReadState {
    /// Collecting a header block that begins at `start`.
    Header(HeaderScan),
    /// Header done; waiting for `len` body bytes at `start`.
    Body { len: usize },
    /// After bad input: discarding bytes up to the next `Content-Length:`.
    Resync { discarded: usize },
}

/// Progress through a header block, kept between reads so that no byte is
/// scanned twice.
#[derive(Debug, Default)]
struct HeaderScan {
    /// Start of the first line not yet complete; all lines before it were
    /// valid, non-empty header lines.
    line_start: usize,
    /// Bytes from `line_start` up to here hold no `\n`.
    searched: usize,
    content_length: Option<usize>,
}

/// The outcome of looking at the buffered part of a header block.
enum HeaderProgress {
    NeedMore,
    Complete {
        header_len: usize,
        content_length: usize,
    },
    /// `resume` is where resynchronization starts searching; it is past the
    /// block's first byte so that the same bad header is never reported twice.
    Bad {
        message: String,
        resume: usize,
    },
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// A reader positioned at the start of a frame.
    pub fn new(reader: R) -> Self {
        FrameReader {
            reader,
            buf: Vec::new(),
            start: 0,
            state: ReadState::Header(HeaderScan::default()),
            scratch: vec![0; READ_CHUNK_BYTES].into_boxed_slice(),
            finished: false,
        }
    }

    /// The next frame, good or bad; `None` only once the stream has ended (EOF
    /// or a read error), after which it stays `None`. A frame cut short by EOF
    /// is logged and dropped.
    ///
    /// Cancel-safe: dropping the future loses no input, so this can sit in a
    /// `tokio::select!` loop.
    pub async fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(frame) = self.parse_buffered() {
                return Some(frame);
            }
            if self.finished {
                self.report_truncated_frame();
                return None;
            }
            self.fill().await;
        }
    }

    /// Reads once from the underlying stream into `buf`.
    async fn fill(&mut self) {
        // Consumed bytes are dropped only here, right before more arrive: a
        // burst of small frames costs one move, and a large body is not moved
        // again once its header is gone.
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        match self.reader.read(&mut self.scratch).await {
            Ok(0) => self.finished = true,
            Ok(n) => self.buf.extend_from_slice(&self.scratch[..n]),
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => {
                tracing::warn!("reading LSP input failed, treating it as EOF: {err}");
                self.finished = true;
            }
        }
    }

    /// Warns once if the stream ended inside a frame.
    fn report_truncated_frame(&mut self) {
        let pending = self.buf.len() - self.start;
        match self.state {
            ReadState::Body { len } => tracing::warn!(
                "LSP input ended in the middle of a frame: got {pending} of {len} body bytes"
            ),
            ReadState::Header(_) if pending > 0 => tracing::warn!(
                "LSP input ended in the middle of a frame: {pending} bytes of incomplete header"
            ),
            // Leftovers of resynchronization were reported when the bad input was.
            ReadState::Header(_) | ReadState::Resync { .. } => {}
        }
        // Forget the leftovers so a repeated call does not warn again.
        self.start = self.buf.len();
        self.state = ReadState::Header(HeaderScan::default());
    }

    /// Produces the next frame from buffered bytes alone, if they hold one.
    fn parse_buffered(&mut self) -> Option<Frame> {
        loop {
            let pending = &self.buf[self.start..];
            match &mut self.state {
                ReadState::Resync { discarded } => match find_content_length(pending) {
                    Some(at) => {
                        tracing::debug!(
                            "resynchronized on a Content-Length header after skipping {} bytes",
                            *discarded + at
                        );
                        self.start += at;
                        self.state = ReadState::Header(HeaderScan::default());
                    }
                    None => {
                        // Keep a tail that may be the beginning of a split token.
                        let keep = pending.len().min(CONTENT_LENGTH_TOKEN.len() - 1);
                        let skipped = pending.len() - keep;
                        *discarded += skipped;
                        self.start += skipped;
                        return None;
                    }
                },
                ReadState::Header(scan) => match scan_header(pending, scan) {
                    HeaderProgress::NeedMore => return None,
                    HeaderProgress::Complete {
                        header_len,
                        content_length,
                    } => {
                        self.start += header_len;
                        self.state = ReadState::Body {
                            len: content_length,
                        };
                    }
                    HeaderProgress::Bad { message, resume } => {
                        self.start += resume;
                        self.state = ReadState::Resync { discarded: resume };
                        return Some(Frame::Invalid(FrameError::BadHeader(message)));
                    }
                },
                ReadState::Body { len } => {
                    let len = *len;
                    if pending.len() < len {
                        return None;
                    }
                    let body = self.take_body(len);
                    self.state = ReadState::Header(HeaderScan::default());
                    return Some(check_message(body));
                }
            }
        }
    }

    /// Removes the `len` bytes at `start` from the buffer.
    fn take_body(&mut self, len: usize) -> Vec<u8> {
        if self.start == 0 {
            // The body leads the buffer (the usual case for a large body read
            // in many chunks): hand the allocation over and copy only the tail.
            let rest = self.buf.split_off(len);
            std::mem::replace(&mut self.buf, rest)
        } else {
            let body = self.buf[self.start..self.start + len].to_vec();
            self.start += len;
            body
        }
    }
}

/// Continues scanning the header block at the start of `pending`.
fn scan_header(pending: &[u8], scan: &mut HeaderScan) -> HeaderProgress {
    // Bytes past the limit can never belong to an acceptable header block.
    let window = &pending[..pending.len().min(MAX_HEADER_BYTES)];
    while let Some(newline) = window[scan.searched..].iter().position(|&b| b == b'\n') {
        let line_end = scan.searched + newline;
        let line = &window[scan.line_start..line_end];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let next_line = line_end + 1;
        if line.is_empty() {
            return match scan.content_length {
                Some(content_length) => HeaderProgress::Complete {
                    header_len: next_line,
                    content_length,
                },
                None => HeaderProgress::Bad {
                    message: if scan.line_start == 0 {
                        "missing Content-Length header (empty header block)".to_string()
                    } else {
                        "missing Content-Length header".to_string()
                    },
                    resume: 1,
                },
            };
        }
        // Lines are judged as soon as they are complete, so garbage such as a
        // stray `hello\n` is reported at once instead of when a blank line or
        // the size limit eventually shows up.
        if let Err(message) = parse_header_line(line, &mut scan.content_length) {
            return HeaderProgress::Bad {
                message,
                resume: scan.line_start + 1,
            };
        }
        scan.line_start = next_line;
        scan.searched = next_line;
    }
    scan.searched = window.len();
    if window.len() == MAX_HEADER_BYTES {
        return HeaderProgress::Bad {
            message: format!(
                "header block exceeds {MAX_HEADER_BYTES} bytes without ending in an empty line"
            ),
            resume: 1,
        };
    }
    HeaderProgress::NeedMore
}

/// Checks one header line (without its line ending) and records `Content-Length`.
fn parse_header_line(line: &[u8], content_length: &mut Option<usize>) -> Result<(), String> {
    let malformed = || {
        format!(
            "malformed header line `{}`: expected `Name: value`",
            excerpt(line)
        )
    };
    let colon = line.iter().position(|&b| b == b':').ok_or_else(malformed)?;
    let name = &line[..colon];
    if name.is_empty() || !name.iter().all(|&b| is_header_name_byte(b)) {
        return Err(malformed());
    }
    if !name.eq_ignore_ascii_case(b"content-length") {
        // Content-Type only ever announces utf-8 in practice; others are extensions.
        return Ok(());
    }
    let value = line[colon + 1..].trim_ascii();
    let length = parse_content_length(value)?;
    match *content_length {
        Some(earlier) if earlier != length => Err(format!(
            "conflicting Content-Length headers: {earlier} and {length}"
        )),
        _ => {
            *content_length = Some(length);
            Ok(())
        }
    }
}

/// Parses a `Content-Length` value: plain decimal digits, at most [`MAX_BODY_BYTES`].
fn parse_content_length(value: &[u8]) -> Result<usize, String> {
    if value.is_empty() {
        return Err("bad Content-Length header: the value is empty".to_string());
    }
    // Checked by hand because `usize::from_str` also accepts a leading `+`.
    if !value.iter().all(u8::is_ascii_digit) {
        return Err(format!(
            "bad Content-Length header: `{}` is not a number",
            excerpt(value)
        ));
    }
    let too_large = || {
        format!(
            "bad Content-Length header: {} bytes is over the {MAX_BODY_BYTES}-byte (256 MiB) limit",
            excerpt(value)
        )
    };
    // All digits, so a parse failure can only be overflow.
    let length: usize = std::str::from_utf8(value)
        .ok()
        .and_then(|digits| digits.parse().ok())
        .ok_or_else(too_large)?;
    if length > MAX_BODY_BYTES {
        return Err(too_large());
    }
    Ok(length)
}

/// RFC 9110 `tchar`: what a header field name may consist of.
fn is_header_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Where the next `Content-Length:` starts in `bytes`, ignoring case.
///
/// It is searched for anywhere, not only at line starts: LSP frames follow
/// one another with no separator, so after a header whose body length is
/// unknown the next header sits right after that body's last byte.
fn find_content_length(bytes: &[u8]) -> Option<usize> {
    bytes
        .windows(CONTENT_LENGTH_TOKEN.len())
        .position(|window| window.eq_ignore_ascii_case(CONTENT_LENGTH_TOKEN))
}

/// Input bytes made fit for an error message: lossy UTF-8, escaped, and cut short.
fn excerpt(bytes: &[u8]) -> String {
    const MAX_CHARS: usize = 60;
    let text = String::from_utf8_lossy(bytes);
    let mut shown: String = text.chars().take(MAX_CHARS).collect();
    if text.chars().nth(MAX_CHARS).is_some() {
        shown.push('…');
    }
    shown.escape_debug().to_string()
}

/// Turns a complete body into a frame: the message, or why it is refused.
fn check_message(body: Vec<u8>) -> Frame {
    let text = match std::str::from_utf8(&body) {
        Ok(text) => text,
        Err(err) => {
            return Frame::Invalid(FrameError::NotJson(format!(
                "body is not valid UTF-8: {err}"
            )))
        }
    };
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(err) => return Frame::Invalid(FrameError::NotJson(format!("body is not JSON: {err}"))),
    };
    match check_jsonrpc(&value) {
        Ok(()) => Frame::Message { body, value },
        Err(message) => Frame::Invalid(FrameError::InvalidRequest {
            id: readable_id(&value),
            message,
        }),
    }
}

/// The id to answer an invalid message with: its own if a number or a string.
fn readable_id(value: &Value) -> Value {
    match value.get("id") {
        Some(id @ (Value::Number(_) | Value::String(_))) => id.clone(),
        _ => Value::Null,
    }
}

/// Checks that `value` is a single JSON-RPC 2.0 request, notification or
/// response that tower-lsp's decoder will accept.
fn check_jsonrpc(value: &Value) -> Result<(), String> {
    let message = match value {
        Value::Object(message) => message,
        Value::Array(_) => return Err("batch requests are not supported".to_string()),
        other => {
            return Err(format!(
                "a JSON-RPC message must be an object, not {}",
                json_kind(other)
            ))
        }
    };
    match message.get("jsonrpc") {
        Some(Value::String(version)) if version == "2.0" => {}
        None => return Err("missing `\"jsonrpc\": \"2.0\"`".to_string()),
        Some(other) => return Err(format!("`jsonrpc` must be \"2.0\", not {other}")),
    }
    if let Some(id) = message.get("id") {
        check_id(id)?;
    }
    let has_result = message.contains_key("result");
    let error = message.get("error");
    match message.get("method") {
        Some(Value::String(_)) => {
            if has_result || error.is_some() {
                return Err(
                    "a message cannot have both a `method` and a `result` or `error`".to_string(),
                );
            }
            match message.get("params") {
                // `"params": null` is not JSON-RPC 2.0, but editors send it
                // for `shutdown` and `exit`; the LSP frontend drops it.
                None | Some(Value::Null | Value::Object(_) | Value::Array(_)) => Ok(()),
                Some(other) => Err(format!(
                    "`params` must be an object or an array, not {}",
                    json_kind(other)
                )),
            }
        }
        Some(other) => Err(format!(
            "`method` must be a string, not {}",
            json_kind(other)
        )),
        None => {
            match (has_result, error) {
                (false, None) => {
                    return Err("message has neither a `method` (request or notification) \
                         nor a `result` or `error` (response)"
                        .to_string())
                }
                (true, Some(_)) => {
                    return Err(
                        "a response must have exactly one of `result` and `error`, not both"
                            .to_string(),
                    )
                }
                (true, None) => {}
                (false, Some(error)) => check_error_object(error)?,
            }
            if message.contains_key("id") {
                Ok(())
            } else {
                Err("a response must have an `id`".to_string())
            }
        }
    }
}

/// Ids tower-lsp can represent: strings, integers that fit `i64`, and `null`.
fn check_id(id: &Value) -> Result<(), String> {
    match id {
        Value::String(_) | Value::Null => Ok(()),
        Value::Number(number) if number.is_i64() => Ok(()),
        Value::Number(number) => Err(format!(
            "`id` must be a string or an integer that fits in 64 bits, not {number}"
        )),
        other => Err(format!(
            "`id` must be a string, an integer or null, not {}",
            json_kind(other)
        )),
    }
}

/// The `error` member of a response needs an integer `code` and a string `message`.
fn check_error_object(error: &Value) -> Result<(), String> {
    let well_formed = error.get("code").is_some_and(Value::is_i64)
        && error.get("message").is_some_and(Value::is_string);
    if well_formed {
        Ok(())
    } else {
        Err("`error` must be an object with an integer `code` and a string `message`".to_string())
    }
}

/// How a JSON value's type reads in an error message.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use std::collections::VecDeque;
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use tokio::io::{AsyncWriteExt, ReadBuf};

    /// Hands out the input in fixed-size pieces, one piece per read.
    struct ChunkedReader {
        chunks: VecDeque<Vec<u8>>,
    }

    impl ChunkedReader {
        fn new(input: &[u8], chunk_size: usize) -> Self {
            ChunkedReader {
                chunks: input.chunks(chunk_size).map(<[u8]>::to_vec).collect(),
            }
        }
    }

    impl AsyncRead for ChunkedReader {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            if let Some(mut chunk) = self.chunks.pop_front() {
                let n = chunk.len().min(buf.remaining());
                buf.put_slice(&chunk[..n]);
                if n < chunk.len() {
                    self.chunks.push_front(chunk.split_off(n));
                }
            }
            Poll::Ready(Ok(()))
        }
    }

    async fn collect<R: AsyncRead + Unpin>(reader: R) -> Vec<Frame> {
        let mut reader = FrameReader::new(reader);
        let mut frames = Vec::new();
        while let Some(frame) = reader.next().await {
            frames.push(frame);
        }
        frames
    }

    /// All frames in `input`, checked to be the same whether the input
    /// arrives at once, byte by byte, or in 7-byte pieces.
    async fn frames_of(input: &[u8]) -> Vec<Frame> {
        let at_once = collect(input).await;
        assert_eq!(collect(ChunkedReader::new(input, 1)).await, at_once);
        assert_eq!(collect(ChunkedReader::new(input, 7)).await, at_once);
        at_once
    }

    fn message(body: &str) -> Frame {
        let value = serde_json::from_str(body).expect("test body is JSON");
        Frame::Message {
            body: body.as_bytes().to_vec(),
            value,
        }
    }

    fn bad_header(frame: &Frame) -> &str {
        match frame {
            Frame::Invalid(FrameError::BadHeader(message)) => message,
            other => panic!("expected BadHeader, got {other:?}"),
        }
    }

    fn invalid_request(frame: &Frame) -> (&Value, &str) {
        match frame {
            Frame::Invalid(FrameError::InvalidRequest { id, message }) => (id, message),
            other => panic!("expected InvalidRequest, got {other:?}"),
        }
    }

    const PING: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#;

    #[tokio::test]
    async fn well_formed_request_yields_its_exact_body_and_value() {
        let (mut client, server) = tokio::io::duplex(64);
        let writer = tokio::spawn(async move {
            client.write_all(&encode(PING.as_bytes())).await?;
            client.shutdown().await
        });
        assert_eq!(collect(server).await, vec![message(PING)]);
        writer.await.expect("writer task").expect("write");
    }

    #[tokio::test]
    async fn two_frames_in_one_read_are_both_yielded() {
        let mut input = encode(PING.as_bytes());
        input.extend(encode(INITIALIZED.as_bytes()));
        assert_eq!(
            collect(&input[..]).await,
            vec![message(PING), message(INITIALIZED)]
        );
    }

    #[tokio::test]
    async fn frame_split_across_reads_is_reassembled() {
        let input = encode(PING.as_bytes());
        for chunk_size in [1, 2, 3, 10, 20] {
            let frames = collect(ChunkedReader::new(&input, chunk_size)).await;
            assert_eq!(frames, vec![message(PING)], "chunk size {chunk_size}");
        }
    }

    #[tokio::test]
    async fn lf_only_header_lines_are_accepted() {
        let input = format!("Content-Length: {}\n\n{PING}", PING.len());
        assert_eq!(frames_of(input.as_bytes()).await, vec![message(PING)]);
    }

    #[tokio::test]
    async fn header_names_are_case_insensitive() {
        let input = format!("content-LENGTH: {}\r\n\r\n{PING}", PING.len());
        assert_eq!(frames_of(input.as_bytes()).await, vec![message(PING)]);
    }

    #[tokio::test]
    async fn content_type_and_unknown_headers_are_ignored() {
        let input = format!(
            "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\
             Content-Length: {}\r\nX-Trace: 42\r\n\r\n{PING}",
            PING.len()
        );
        assert_eq!(frames_of(input.as_bytes()).await, vec![message(PING)]);
    }

    #[tokio::test]
    async fn bad_content_length_is_reported_and_next_frame_still_parses() {
        let mut input = b"Content-Length: abc\r\n\r\n".to_vec();
        input.extend(encode(PING.as_bytes()));
        let frames = frames_of(&input).await;
        assert_eq!(frames.len(), 2, "{frames:?}");
        assert_eq!(
            bad_header(&frames[0]),
            "bad Content-Length header: `abc` is not a number"
        );
        assert_eq!(frames[1], message(PING));
    }

    #[tokio::test]
    async fn body_after_bad_content_length_is_skipped_up_to_the_next_header() {
        // Frames follow each other without a separator, so the next header is
        // not at the start of a line.
        let mut input = format!("Content-Length: 12x\r\n\r\n{PING}").into_bytes();
        input.extend(encode(INITIALIZED.as_bytes()));
        let frames = frames_of(&input).await;
        assert_eq!(frames.len(), 2, "{frames:?}");
        bad_header(&frames[0]);
        assert_eq!(frames[1], message(INITIALIZED));
    }

    #[tokio::test]
    async fn content_length_over_the_limit_is_refused_without_waiting_for_the_body() {
        let mut reader = FrameReader::new(&b"Content-Length: 268435457\r\n\r\n{"[..]);
        let frame = reader.next().await.expect("a frame");
        assert!(
            bad_header(&frame).contains("over the 268435456-byte (256 MiB) limit"),
            "{frame:?}"
        );
        assert_eq!(reader.next().await, None);

        let overflowing = b"Content-Length: 99999999999999999999999\r\n\r\n";
        let frames = frames_of(overflowing).await;
        assert_eq!(frames.len(), 1);
        assert!(bad_header(&frames[0]).contains("limit"));
    }

    #[tokio::test]
    async fn missing_content_length_is_reported_and_next_frame_still_parses() {
        let mut input = b"Content-Type: application/json\r\n\r\n".to_vec();
        input.extend(encode(PING.as_bytes()));
        let frames = frames_of(&input).await;
        assert_eq!(frames.len(), 2, "{frames:?}");
        assert_eq!(bad_header(&frames[0]), "missing Content-Length header");
        assert_eq!(frames[1], message(PING));
    }

    #[tokio::test]
    async fn raw_garbage_lines_are_reported_once_and_next_frame_still_parses() {
        let mut input = b"hello\nworld\n".to_vec();
        input.extend(encode(PING.as_bytes()));
        let frames = frames_of(&input).await;
        assert_eq!(frames.len(), 2, "{frames:?}");
        assert_eq!(
            bad_header(&frames[0]),
            "malformed header line `hello`: expected `Name: value`"
        );
        assert_eq!(frames[1], message(PING));
    }

    #[tokio::test]
    async fn garbage_line_is_reported_before_anything_else_arrives() {
        let (mut client, server) = tokio::io::duplex(64);
        let mut reader = FrameReader::new(server);
        client.write_all(b"hello\n").await.expect("write");
        // The writer stays open: the report must not wait for more input.
        let frame = reader.next().await.expect("a frame");
        bad_header(&frame);
        client
            .write_all(&encode(PING.as_bytes()))
            .await
            .expect("write");
        assert_eq!(reader.next().await, Some(message(PING)));
    }

    #[tokio::test]
    async fn garbage_glued_to_a_header_is_skipped() {
        let mut input = b"hello".to_vec();
        input.extend(encode(PING.as_bytes()));
        let frames = frames_of(&input).await;
        assert_eq!(frames.len(), 2, "{frames:?}");
        bad_header(&frames[0]);
        assert_eq!(frames[1], message(PING));
    }

    #[tokio::test]
    async fn oversized_header_block_is_reported_and_next_frame_still_parses() {
        let mut input = vec![b'x'; MAX_HEADER_BYTES + 100];
        input.extend(encode(PING.as_bytes()));
        let frames = frames_of(&input).await;
        assert_eq!(frames.len(), 2, "{frames:?}");
        assert!(bad_header(&frames[0]).contains("exceeds 8192 bytes"));
        assert_eq!(frames[1], message(PING));
    }

    #[tokio::test]
    async fn body_that_is_not_json_is_reported_and_next_frame_still_parses() {
        let mut input = encode(b"{not json");
        input.extend(encode(PING.as_bytes()));
        let frames = frames_of(&input).await;
        assert_eq!(frames.len(), 2, "{frames:?}");
        match &frames[0] {
            Frame::Invalid(err @ FrameError::NotJson(message)) => {
                assert!(message.starts_with("body is not JSON"), "{message}");
                assert_eq!(err.code(), -32700);
            }
            other => panic!("expected NotJson, got {other:?}"),
        }
        assert_eq!(frames[1], message(PING));
    }

    #[tokio::test]
    async fn body_that_is_not_utf8_is_reported_as_not_json() {
        let frames = frames_of(&encode(b"{\"jsonrpc\":\"2.0\xff\"}")).await;
        match &frames[..] {
            [Frame::Invalid(FrameError::NotJson(message))] => {
                assert!(message.starts_with("body is not valid UTF-8"), "{message}")
            }
            other => panic!("expected one NotJson, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn json_array_is_refused_as_an_unsupported_batch() {
        let frames = frames_of(&encode(format!("[{PING}]").as_bytes())).await;
        assert_eq!(frames.len(), 1);
        assert_eq!(
            invalid_request(&frames[0]),
            (&Value::Null, "batch requests are not supported")
        );
    }

    #[tokio::test]
    async fn json_object_without_jsonrpc_version_is_an_invalid_request() {
        let frames = frames_of(&encode(br#"{"id":3,"method":"ping"}"#)).await;
        assert_eq!(frames.len(), 1);
        let (id, message) = invalid_request(&frames[0]);
        assert_eq!(id, &json!(3));
        assert!(message.contains("jsonrpc"), "{message}");
    }

    #[tokio::test]
    async fn responses_with_result_or_error_are_accepted() {
        let ok = r#"{"jsonrpc":"2.0","id":"s1","result":null}"#;
        let err = r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"nope"}}"#;
        let mut input = encode(ok.as_bytes());
        input.extend(encode(err.as_bytes()));
        assert_eq!(frames_of(&input).await, vec![message(ok), message(err)]);
    }

    #[tokio::test]
    async fn response_needs_exactly_one_of_result_and_error_and_an_id() {
        for body in [
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","result":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":"boom"}"#,
        ] {
            let frames = frames_of(&encode(body.as_bytes())).await;
            assert_eq!(frames.len(), 1, "{body}");
            invalid_request(&frames[0]);
        }
    }

    #[tokio::test]
    async fn invalid_request_keeps_its_id() {
        let cases = [
            (r#"{"jsonrpc":"2.0","id":7,"method":5}"#, json!(7)),
            (
                r#"{"jsonrpc":"2.0","id":"a","method":"m","params":3}"#,
                json!("a"),
            ),
            (r#"{"jsonrpc":"1.0","id":1.5,"method":"m"}"#, json!(1.5)),
            (
                r#"{"jsonrpc":"2.0","id":{"x":1},"method":"m"}"#,
                Value::Null,
            ),
        ];
        for (body, expected_id) in cases {
            let frames = frames_of(&encode(body.as_bytes())).await;
            assert_eq!(frames.len(), 1, "{body}");
            let Frame::Invalid(err) = &frames[0] else {
                panic!("expected Invalid for {body}, got {:?}", frames[0]);
            };
            assert_eq!(err.id(), expected_id, "{body}");
            assert_eq!(err.code(), -32600, "{body}");
        }
    }

    #[tokio::test]
    async fn ids_tower_lsp_cannot_represent_are_refused() {
        for body in [
            r#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":true,"method":"m"}"#,
        ] {
            let frames = frames_of(&encode(body.as_bytes())).await;
            let (_, message) = invalid_request(&frames[0]);
            assert!(message.starts_with("`id` must be"), "{body}: {message}");
        }
    }

    #[tokio::test]
    async fn eof_mid_body_returns_none() {
        let input = format!("Content-Length: 100\r\n\r\n{PING}");
        let mut reader = FrameReader::new(input.as_bytes());
        assert_eq!(reader.next().await, None);
        assert_eq!(reader.next().await, None);
    }

    #[tokio::test]
    async fn eof_mid_header_or_on_empty_input_returns_none() {
        assert_eq!(frames_of(b"Content-Length: 1").await, vec![]);
        assert_eq!(frames_of(b"").await, vec![]);
    }

    #[tokio::test]
    async fn ten_megabyte_body_parses() {
        let text = "x".repeat(10 * 1024 * 1024);
        let body = json!({
            "jsonrpc": "2.0",
            "method": "textDocument/didOpen",
            "params": { "textDocument": { "uri": "file:///big.txt", "text": text } },
        })
        .to_string();
        let input = encode(body.as_bytes());
        for reader in [
            ChunkedReader::new(&input, input.len()),
            ChunkedReader::new(&input, 4096),
        ] {
            let frames = collect(reader).await;
            assert_eq!(frames.len(), 1);
            let Frame::Message { body: got, .. } = &frames[0] else {
                panic!("expected a message");
            };
            assert!(got == body.as_bytes(), "body bytes differ");
        }
    }

    #[tokio::test]
    async fn encode_round_trips_through_the_reader() {
        let framed = encode(INITIALIZED.as_bytes());
        assert!(
            framed.starts_with(format!("Content-Length: {}\r\n\r\n", INITIALIZED.len()).as_bytes())
        );
        assert_eq!(frames_of(&framed).await, vec![message(INITIALIZED)]);
    }

    #[tokio::test]
    async fn next_is_cancel_safe() {
        let input = encode(PING.as_bytes());
        let (mut client, server) = tokio::io::duplex(64);
        let mut reader = FrameReader::new(server);
        client.write_all(&input[..10]).await.expect("write");
        // Polled once, then dropped while waiting for the rest of the frame.
        assert_eq!(reader.next().now_or_never(), None);
        client.write_all(&input[10..]).await.expect("write");
        assert_eq!(reader.next().await, Some(message(PING)));
    }

    #[test]
    fn error_responses_carry_the_jsonrpc_code_and_id() {
        let bad = FrameError::BadHeader("missing Content-Length header".into());
        assert_eq!(
            bad.to_response(),
            json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"missing Content-Length header"}})
        );
        let invalid = FrameError::InvalidRequest {
            id: json!(4),
            message: "`method` must be a string, not a number".into(),
        };
        assert_eq!(
            invalid.to_response(),
            json!({"jsonrpc":"2.0","id":4,"error":{"code":-32600,"message":"`method` must be a string, not a number"}})
        );
    }
}
