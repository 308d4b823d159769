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
//!
//! The pieces: this module holds the frame and error types and [`encode`];
//! [`reader`] is the resynchronizing [`FrameReader`], [`header`] parses a
//! header block, [`message`] checks a body is JSON-RPC tower-lsp accepts.

mod header;
mod message;
mod reader;
#[cfg(test)]
mod tests;

use serde_json::{json, Value};

pub use self::reader::FrameReader;

/// Largest body accepted, from `Content-Length`.
pub const MAX_BODY_BYTES: usize = 256 * 1024 * 1024;

/// Largest header block accepted, terminating empty line included.
pub const MAX_HEADER_BYTES: usize = 8 * 1024;

/// JSON-RPC "Parse error".
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC "Invalid Request".
const INVALID_REQUEST: i64 = -32600;

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
