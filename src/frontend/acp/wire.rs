//! ACP's framing and JSON-RPC envelopes: one JSON message per line.
//!
//! Invariant: a line that is not a JSON-RPC message (not UTF-8, not JSON)
//! is answered with a parse error and the next line is read; only the end
//! of input or a failing read ends the connection.

use serde_json::{json, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use crate::core::daemon::DaemonError;
use crate::frontend::updates::daemon_error_parts;

/// ACP frames a message as one line.
pub(super) fn line(body: &[u8]) -> Vec<u8> {
    let mut line = Vec::with_capacity(body.len() + 1);
    line.extend_from_slice(body);
    line.push(b'\n');
    line
}

/// One line of input.
pub(super) enum Incoming {
    Message(Value),
    /// Not a JSON message; the error to answer with.
    Malformed(Value),
    /// Nothing to do (a blank line).
    Blank,
    End,
}

/// Reads the next line as bytes: a line that is not UTF-8 is a parse error
/// like any other, not the end of input.
pub(super) async fn next_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
) -> Incoming {
    buf.clear();
    match reader.read_until(b'\n', buf).await {
        Ok(0) => return Incoming::End,
        Ok(_) => {}
        Err(e) => {
            tracing::warn!("cannot read stdin: {e}");
            return Incoming::End;
        }
    }
    if buf.iter().all(u8::is_ascii_whitespace) {
        return Incoming::Blank;
    }
    match serde_json::from_slice(buf) {
        Ok(message) => Incoming::Message(message),
        Err(e) => Incoming::Malformed(error_response(
            &Value::Null,
            -32700,
            &format!("parse error: {e}"),
        )),
    }
}

pub(crate) fn error_response(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

pub(super) fn daemon_error(id: &Value, error: DaemonError) -> Value {
    let (code, message, data) = daemon_error_parts(error);
    let mut response = error_response(id, code, &message);
    if let Some(data) = data {
        response["error"]["data"] = data;
    }
    response
}

pub(super) fn string_param<'a>(params: &'a Value, field: &str) -> Result<&'a str, String> {
    params
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("invalid params: missing string field `{field}`"))
}
