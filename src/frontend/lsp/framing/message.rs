//! Checking a complete body: UTF-8, JSON, and a single JSON-RPC 2.0
//! message of the shape tower-lsp's decoder accepts. What fails becomes a
//! [`Frame::Invalid`] carrying the message's id when it could be read.

use serde_json::{Map, Value};

use super::{Frame, FrameError};
use crate::frontend::jsonrpc_body::{self, Body};

/// Turns a complete body into a frame: the message, or why it is refused.
/// The body is parsed once, here; a repeated top-level key is refused like
/// any other body tower-lsp's typed decode would refuse.
pub(super) fn check_message(body: Vec<u8>) -> Frame {
    let text = match std::str::from_utf8(&body) {
        Ok(text) => text,
        Err(err) => {
            return Frame::Invalid(FrameError::NotJson(format!(
                "body is not valid UTF-8: {err}"
            )))
        }
    };
    let object = match jsonrpc_body::parse(text) {
        Ok(Body::Object(object)) => object,
        Ok(Body::Array) => return invalid(Value::Null, "batch requests are not supported".into()),
        Ok(Body::Scalar(kind)) => {
            return invalid(
                Value::Null,
                format!("a JSON-RPC message must be an object, not {kind}"),
            )
        }
        Ok(Body::RepeatedKey { key, id }) => {
            return invalid(id, jsonrpc_body::repeated_key_message(&key))
        }
        Err(err) => return Frame::Invalid(FrameError::NotJson(format!("body is not JSON: {err}"))),
    };
    match check_jsonrpc(&object) {
        Ok(()) => Frame::Message {
            body,
            value: Value::Object(object),
        },
        Err(message) => invalid(jsonrpc_body::readable_id(&object), message),
    }
}

fn invalid(id: Value, message: String) -> Frame {
    Frame::Invalid(FrameError::InvalidRequest { id, message })
}

/// Checks that `message` is a single JSON-RPC 2.0 request, notification or
/// response of the shape the input loop turns into tower-lsp's types.
fn check_jsonrpc(message: &Map<String, Value>) -> Result<(), String> {
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
