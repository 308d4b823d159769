//! ACP's framing and JSON-RPC envelopes: one JSON message per line.
//!
//! Invariant: a line that is not a JSON-RPC message (not UTF-8, not JSON:
//! a parse error; not an object, or one that repeats a top-level key:
//! invalid request) is answered and the next line is read; only the end
//! of input or a failing read ends the connection.

use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use crate::core::daemon::DaemonError;
use crate::frontend::jsonrpc_body::{self, Body};
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
    let text = match std::str::from_utf8(buf) {
        Ok(text) => text,
        Err(e) => {
            return Incoming::Malformed(error_response(
                &Value::Null,
                -32700,
                &format!("parse error: the line is not valid UTF-8: {e}"),
            ))
        }
    };
    // A repeated top-level key is refused, not read as its last value.
    let invalid = |id: &Value, why: &str| {
        Incoming::Malformed(error_response(
            id,
            -32600,
            &format!("invalid request: {why}"),
        ))
    };
    match jsonrpc_body::parse(text) {
        Ok(Body::Object(message)) => Incoming::Message(Value::Object(message)),
        Ok(Body::RepeatedKey { key, id }) => {
            invalid(&id, &jsonrpc_body::repeated_key_message(&key))
        }
        Ok(Body::Array) => invalid(&Value::Null, "batch requests are not supported"),
        Ok(Body::Scalar(kind)) => invalid(
            &Value::Null,
            &format!("a JSON-RPC message must be an object, not {kind}"),
        ),
        Err(e) => Incoming::Malformed(error_response(
            &Value::Null,
            -32700,
            &format!("parse error: {e}"),
        )),
    }
}

/// A schema value as the JSON it goes on the wire as.
pub(crate) fn to_wire(value: impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or_else(|e| {
        // The schema's types hold strings, maps and numbers only.
        tracing::error!("cannot serialize an ACP message: {e}");
        Value::Null
    })
}

/// JSON-RPC's answer to request `id`: its result.
pub(crate) fn result_response(id: &Value, result: &Value) -> Value {
    #[derive(Serialize)]
    struct Response<'a> {
        jsonrpc: &'static str,
        id: &'a Value,
        result: &'a Value,
    }
    to_wire(Response {
        jsonrpc: "2.0",
        id,
        result,
    })
}

/// JSON-RPC's error answer to request `id`.
pub(crate) fn error_response(id: &Value, code: i64, message: &str) -> Value {
    #[derive(Serialize)]
    struct ErrorResponse<'a> {
        jsonrpc: &'static str,
        id: &'a Value,
        error: ErrorObject<'a>,
    }
    #[derive(Serialize)]
    struct ErrorObject<'a> {
        code: i64,
        message: &'a str,
    }
    to_wire(ErrorResponse {
        jsonrpc: "2.0",
        id,
        error: ErrorObject { code, message },
    })
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
