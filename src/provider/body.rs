//! A request body as a list of parts — the frame's literal bytes and each
//! message's cached serialized form, shared, not copied — sent to the
//! socket as it is copied out, in blocks, instead of assembled whole first.
//!
//! The step path pays for the bytes that reach the server first, not for
//! the whole history: the first block goes out while the rest is still
//! being copied, the server reads while we copy, and no buffer the size of
//! the request is allocated per step (BENCHMARKS.md §2). The body keeps
//! `Content-Length` framing: its length is known before the first byte.
//!
//! Invariant: the bytes sent are exactly [`BodyParts::to_vec`], which is
//! what [`super::Provider::request_body`] returns and tests compare with a
//! body serialized from scratch.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};

/// How much is copied into one block handed to the HTTP client. hyper
/// buffers blocks until about 400 KB wait, then writes them with one
/// `writev`; 64 KB blocks start that write after a quarter of a
/// millisecond of copying at most, whatever the history's length.
const BLOCK: usize = 64 * 1024;

/// One piece of a body.
#[derive(Debug, Clone)]
enum Part {
    /// Separators and the like.
    Static(&'static [u8]),
    /// The frame's head or tail (model, tools, options).
    Owned(Box<[u8]>),
    /// A message's cached serialized form.
    Shared(Arc<[u8]>),
}

impl Part {
    fn bytes(&self) -> &[u8] {
        match self {
            Part::Static(bytes) => bytes,
            Part::Owned(bytes) => bytes,
            Part::Shared(bytes) => bytes,
        }
    }
}

/// A request body, in order, as parts.
#[derive(Debug, Clone, Default)]
pub(super) struct BodyParts {
    parts: Vec<Part>,
    len: usize,
}

impl BodyParts {
    pub(super) fn with_capacity(parts: usize) -> Self {
        BodyParts {
            parts: Vec::with_capacity(parts),
            len: 0,
        }
    }

    /// Bytes of the frame, copied.
    pub(super) fn owned(&mut self, bytes: &[u8]) {
        self.push(Part::Owned(bytes.into()));
    }

    pub(super) fn literal(&mut self, bytes: &'static [u8]) {
        self.push(Part::Static(bytes));
    }

    /// A message's serialized form, shared with its cache.
    pub(super) fn shared(&mut self, bytes: &Arc<[u8]>) {
        self.push(Part::Shared(Arc::clone(bytes)));
    }

    fn push(&mut self, part: Part) {
        self.len += part.bytes().len();
        self.parts.push(part);
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The whole body in one buffer.
    pub(super) fn to_vec(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(self.len);
        for part in &self.parts {
            body.extend_from_slice(part.bytes());
        }
        body
    }

    /// The body for the HTTP client: copied out in blocks as the client
    /// asks for them, with its exact length (so `Content-Length` framing).
    pub(super) fn into_body(self) -> reqwest::Body {
        reqwest::Body::wrap(Streamed::new(self, BLOCK))
    }
}

/// [`BodyParts`] as an [`http_body::Body`].
struct Streamed {
    parts: std::vec::IntoIter<Part>,
    /// The part being copied, and how much of it is out.
    current: Option<(Part, usize)>,
    remaining: usize,
    block: usize,
}

impl Streamed {
    fn new(body: BodyParts, block: usize) -> Self {
        Streamed {
            parts: body.parts.into_iter(),
            current: None,
            remaining: body.len,
            block,
        }
    }

    /// The next block: up to `self.block` bytes, across parts.
    fn next_block(&mut self) -> Option<Bytes> {
        if self.remaining == 0 {
            return None;
        }
        let want = self.block.min(self.remaining);
        let mut block = Vec::with_capacity(want);
        while block.len() < want {
            let (part, done) = match self.current.take() {
                Some(current) => current,
                None => match self.parts.next() {
                    Some(part) => (part, 0),
                    None => break,
                },
            };
            let rest = &part.bytes()[done..];
            let n = rest.len().min(want - block.len());
            block.extend_from_slice(&rest[..n]);
            if done + n < part.bytes().len() {
                self.current = Some((part, done + n));
            }
        }
        self.remaining -= block.len();
        Some(Bytes::from(block))
    }
}

impl http_body::Body for Streamed {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Poll::Ready(self.get_mut().next_block().map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> BodyParts {
        let mut body = BodyParts::default();
        body.owned(b"{\"messages\":[");
        for i in 0..50 {
            if i > 0 {
                body.literal(b",");
            }
            let piece: Arc<[u8]> = format!("{{\"n\":{i},\"pad\":\"{}\"}}", "x".repeat(i * 7))
                .into_bytes()
                .into();
            body.shared(&piece);
        }
        body.owned(b"]}");
        body
    }

    #[test]
    fn blocks_carry_exactly_the_bytes_of_the_whole_body() {
        let whole = sample().to_vec();
        assert_eq!(sample().len(), whole.len());
        // Block sizes that split parts anywhere, one byte, and more than all.
        for block in [1, 7, 64, 333, whole.len() - 1, whole.len(), whole.len() * 2] {
            let mut streamed = Streamed::new(sample(), block);
            let mut sent = Vec::new();
            let mut blocks = 0;
            while let Some(bytes) = streamed.next_block() {
                assert!(bytes.len() <= block && !bytes.is_empty());
                assert_eq!(
                    http_body::Body::size_hint(&streamed).exact(),
                    Some((whole.len() - sent.len() - bytes.len()) as u64)
                );
                sent.extend_from_slice(&bytes);
                blocks += 1;
            }
            assert_eq!(sent, whole, "block size {block}");
            assert_eq!(blocks, whole.len().div_ceil(block), "block size {block}");
            assert!(http_body::Body::is_end_stream(&streamed));
        }
    }

    #[test]
    fn an_empty_body_ends_at_once() {
        let mut streamed = Streamed::new(BodyParts::default(), BLOCK);
        assert!(http_body::Body::is_end_stream(&streamed));
        assert!(streamed.next_block().is_none());
    }
}
