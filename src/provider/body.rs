//! A request body as a list of parts — the frame's own bytes and each
//! message's cached serialized form, borrowed — sent to the socket while it
//! is copied out, in blocks, instead of assembled whole first.
//!
//! The request is posted at once with a body fed through a channel; the
//! provider's task copies the parts into 64 KB blocks and hands each over as
//! the connection takes them. The first block leaves after 64 KB of copying
//! whatever the history's length, the server reads while the rest is
//! copied, and no buffer the size of the request exists per step
//! (BENCHMARKS.md §2). The body keeps `Content-Length` framing: its length
//! is known before the first byte. Nothing about a message is touched but
//! its bytes (no reference count per message: thousands of those cost more
//! than the copy).
//!
//! Invariant: the bytes sent are exactly [`BodyParts::to_vec`], which is
//! what [`super::Provider::request_body`] returns and tests compare with a
//! body serialized from scratch.

use std::borrow::Cow;
use std::future::Future;
use std::pin::{pin, Pin};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::future::{select, Either};
use http_body::{Frame, SizeHint};
use tokio::sync::mpsc;

/// How much is copied into one block handed to the HTTP client.
const BLOCK: usize = 64 * 1024;

/// How many copied blocks may wait for the connection.
const WAITING_BLOCKS: usize = 2;

/// A request body, in order, as parts.
#[derive(Debug, Clone, Default)]
pub(super) struct BodyParts<'a> {
    parts: Vec<Cow<'a, [u8]>>,
    len: usize,
}

impl<'a> BodyParts<'a> {
    pub(super) fn with_capacity(parts: usize) -> Self {
        BodyParts {
            parts: Vec::with_capacity(parts),
            len: 0,
        }
    }

    /// Bytes of the frame, copied.
    pub(super) fn owned(&mut self, bytes: &[u8]) {
        self.push(Cow::Owned(bytes.to_vec()));
    }

    /// Bytes that outlive the request: separators, a message's cached form.
    pub(super) fn borrowed(&mut self, bytes: &'a [u8]) {
        self.push(Cow::Borrowed(bytes));
    }

    fn push(&mut self, part: Cow<'a, [u8]>) {
        self.len += part.len();
        self.parts.push(part);
    }

    /// The whole body in one buffer.
    pub(super) fn to_vec(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(self.len);
        for part in &self.parts {
            body.extend_from_slice(part);
        }
        body
    }

    /// Runs `post` with this body as the request's, copying the parts out
    /// block by block as the connection takes them. Returns what `post`
    /// returns; once it has returned (the server answered, or the request
    /// failed) nothing more is copied.
    pub(super) async fn send<F: Future>(self, post: impl FnOnce(reqwest::Body) -> F) -> F::Output {
        let (blocks, rx) = mpsc::channel(WAITING_BLOCKS);
        let body = reqwest::Body::wrap(Fed {
            rx,
            remaining: self.len,
        });
        let fill = async move {
            let mut cut = Cutter::new(&self.parts, BLOCK);
            while let Some(block) = cut.next_block() {
                if blocks.send(block).await.is_err() {
                    // The connection dropped the body: it failed, or the
                    // server answered before reading it all.
                    break;
                }
            }
        };
        match select(pin!(post(body)), pin!(fill)).await {
            Either::Left((out, _)) => out,
            Either::Right(((), post)) => post.await,
        }
    }
}

/// Cuts parts into blocks of at most `block` bytes, across parts.
struct Cutter<'p, 'a> {
    parts: &'p [Cow<'a, [u8]>],
    /// The part being copied, and how much of it is out.
    at: (usize, usize),
    block: usize,
}

impl<'p, 'a> Cutter<'p, 'a> {
    fn new(parts: &'p [Cow<'a, [u8]>], block: usize) -> Self {
        Cutter {
            parts,
            at: (0, 0),
            block,
        }
    }

    fn next_block(&mut self) -> Option<Bytes> {
        let mut block = Vec::new();
        while let Some(part) = self.parts.get(self.at.0) {
            if block.capacity() == 0 {
                block.reserve_exact(self.block);
            }
            let rest = &part[self.at.1..];
            let n = rest.len().min(self.block - block.len());
            block.extend_from_slice(&rest[..n]);
            self.at = if n == rest.len() {
                (self.at.0 + 1, 0)
            } else {
                (self.at.0, self.at.1 + n)
            };
            if block.len() == self.block {
                break;
            }
        }
        (!block.is_empty()).then(|| Bytes::from(block))
    }
}

/// A body whose blocks arrive through a channel, of a length known ahead.
struct Fed {
    rx: mpsc::Receiver<Bytes>,
    remaining: usize,
}

/// The body's blocks stopped before its length was reached.
#[derive(Debug, thiserror::Error)]
#[error("the request body ended {0} bytes short")]
struct CutShort(usize);

impl http_body::Body for Fed {
    type Data = Bytes;
    type Error = CutShort;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, CutShort>>> {
        let this = self.get_mut();
        if this.remaining == 0 {
            return Poll::Ready(None);
        }
        match this.rx.poll_recv(cx) {
            Poll::Ready(Some(block)) => {
                this.remaining = this.remaining.saturating_sub(block.len());
                Poll::Ready(Some(Ok(Frame::data(block))))
            }
            Poll::Ready(None) => Poll::Ready(Some(Err(CutShort(this.remaining)))),
            Poll::Pending => Poll::Pending,
        }
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

    fn sample(pieces: &[Vec<u8>]) -> BodyParts<'_> {
        let mut body = BodyParts::default();
        body.owned(b"{\"messages\":[");
        for (i, piece) in pieces.iter().enumerate() {
            if i > 0 {
                body.borrowed(b",");
            }
            body.borrowed(piece);
        }
        body.owned(b"]}");
        body
    }

    fn pieces() -> Vec<Vec<u8>> {
        (0..50)
            .map(|i| format!("{{\"n\":{i},\"pad\":\"{}\"}}", "x".repeat(i * 7)).into_bytes())
            .collect()
    }

    #[test]
    fn blocks_carry_exactly_the_bytes_of_the_whole_body() {
        let pieces = pieces();
        let body = sample(&pieces);
        let whole = body.to_vec();
        assert_eq!(body.len, whole.len());
        // Block sizes that split parts anywhere, one byte, and more than all.
        for block in [1, 7, 64, 333, whole.len() - 1, whole.len(), whole.len() * 2] {
            let mut cut = Cutter::new(&body.parts, block);
            let mut sent = Vec::new();
            let mut blocks = 0;
            while let Some(bytes) = cut.next_block() {
                assert!(bytes.len() <= block && !bytes.is_empty());
                sent.extend_from_slice(&bytes);
                blocks += 1;
            }
            assert_eq!(sent, whole, "block size {block}");
            assert_eq!(blocks, whole.len().div_ceil(block), "block size {block}");
        }
    }

    #[tokio::test]
    async fn the_fed_body_counts_down_its_length_and_errs_when_cut_short() {
        use http_body::Body;
        let (tx, rx) = mpsc::channel(4);
        let mut body = Fed { rx, remaining: 10 };
        async fn next(body: &mut Fed) -> Option<Result<Frame<Bytes>, CutShort>> {
            std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await
        }
        tx.send(Bytes::from_static(b"012345")).await.unwrap();
        let frame = next(&mut body).await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), &b"012345"[..]);
        drop(tx);
        let error = next(&mut body).await.unwrap().unwrap_err();
        assert_eq!(error.to_string(), "the request body ended 4 bytes short");
        assert_eq!(body.size_hint().exact(), Some(4));
        assert!(!body.is_end_stream());
    }
}
