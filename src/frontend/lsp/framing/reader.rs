//! [`FrameReader`]: reads LSP frames from a byte stream and never gives up
//! on bad input. It resynchronizes on the next `Content-Length` after any
//! bad frame, does work linear in the bytes read, and is cancel-safe.

use tokio::io::{AsyncRead, AsyncReadExt};

use super::header::{scan_header, HeaderProgress, HeaderScan};
use super::message::check_message;
use super::{Frame, FrameError};

/// What resynchronization looks for; compared case-insensitively.
const CONTENT_LENGTH_TOKEN: &[u8] = b"content-length:";

/// How much is asked of the underlying reader at once.
const READ_CHUNK_BYTES: usize = 64 * 1024;

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
