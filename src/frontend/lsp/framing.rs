//! LSP base-protocol framing that survives bad input.
//!
//! tower-lsp ends the server on the first undecodable frame, so tandem reads
//! stdin itself: headers, `Content-Length`, body, JSON check. Bad frames are
//! answered here with the right JSON-RPC error; only well-formed messages
//! travel on to tower-lsp.
//!
//! Invariant: after any bad input the reader resynchronizes on the next
//! `Content-Length` header and keeps going; only EOF ends it.

use serde_json::Value;

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
