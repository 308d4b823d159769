//! A JSON-RPC message body, parsed once: the top level must be an object
//! that names each member once.
//!
//! serde_json's `Value` keeps the last of two equal keys without a word, so
//! `{"id":1,"method":"a","method":"b"}` would mean `b` to us and be refused
//! by any typed decoder (a derived struct errors on a duplicate field).
//! Both frontends read bodies through [`parse`] so that such a message is
//! refused with `-32600` up front, the same way everywhere.
//!
//! **Invariant:** a body is parsed once; nested values are plain `Value`s
//! (a repeated key below the top level keeps serde_json's last-wins, as
//! every typed decode of params sees them through a `Value` anyway).

use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// What a syntactically valid JSON body turned out to be.
#[derive(Debug, PartialEq)]
pub(crate) enum Body {
    /// An object with distinct top-level keys.
    Object(Map<String, Value>),
    /// An array (a batch, which tandem does not take).
    Array,
    /// A scalar: `"a number"`, `"a string"`, ... for the error message.
    Scalar(&'static str),
    /// An object that repeats a top-level key: the first key repeated, and
    /// the message's id when it can be read (given once, a number or a
    /// string).
    RepeatedKey { key: String, id: Value },
}

/// Parses `text` as one JSON value; `Err` is a syntax error (`-32700`).
pub(crate) fn parse(text: &str) -> Result<Body, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let body = TopLevel.deserialize(&mut de)?;
    de.end()?;
    Ok(body)
}

/// The `-32600` message for a repeated key.
pub(crate) fn repeated_key_message(key: &str) -> String {
    format!("the member `{key}` appears more than once; a JSON-RPC message names each member once")
}

/// The id to answer an invalid message with: its own if a number or a
/// string, else `null`.
pub(crate) fn readable_id(object: &Map<String, Value>) -> Value {
    match object.get("id") {
        Some(id @ (Value::Number(_) | Value::String(_))) => id.clone(),
        _ => Value::Null,
    }
}

struct TopLevel;

impl<'de> DeserializeSeed<'de> for TopLevel {
    type Value = Body;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Body, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TopLevel {
    type Value = Body;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Body, A::Error> {
        let mut object = Map::new();
        let mut repeated: Option<String> = None;
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                // Read on, so that a syntax error later still says -32700.
                map.next_value::<IgnoredAny>()?;
                if key == "id" {
                    // Two ids: neither can be trusted to answer with.
                    object.insert(key.clone(), Value::Null);
                }
                repeated.get_or_insert(key);
                continue;
            }
            let value: Value = map.next_value()?;
            object.insert(key, value);
        }
        Ok(match repeated {
            Some(key) => Body::RepeatedKey {
                id: readable_id(&object),
                key,
            },
            None => Body::Object(object),
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Body, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Body::Array)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Body, E> {
        Ok(Body::Scalar("a boolean"))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Body, E> {
        Ok(Body::Scalar("a number"))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Body, E> {
        Ok(Body::Scalar("a number"))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Body, E> {
        Ok(Body::Scalar("a number"))
    }

    fn visit_str<E>(self, _: &str) -> Result<Body, E> {
        Ok(Body::Scalar("a string"))
    }

    fn visit_unit<E>(self) -> Result<Body, E> {
        Ok(Body::Scalar("null"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(text: &str) -> Map<String, Value> {
        match parse(text).unwrap() {
            Body::Object(object) => object,
            other => panic!("not an object: {other:?}"),
        }
    }

    #[test]
    fn an_object_with_distinct_keys_is_read_whole() {
        let o = object(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":[1,{"b":null}]}}"#);
        assert_eq!(
            Value::Object(o),
            json!({"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"a": [1, {"b": null}]}})
        );
    }

    #[test]
    fn a_repeated_key_is_named_with_the_id_when_it_is_unambiguous() {
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":7,"method":"a","method":"b"}"#).unwrap(),
            Body::RepeatedKey {
                key: "method".to_string(),
                id: json!(7)
            }
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":7,"method":"a","id":8}"#).unwrap(),
            Body::RepeatedKey {
                key: "id".to_string(),
                id: Value::Null
            }
        );
        // Unknown members count too; nested ones keep serde_json's rule.
        assert!(matches!(
            parse(r#"{"x":1,"x":2}"#).unwrap(),
            Body::RepeatedKey { .. }
        ));
        assert!(matches!(
            parse(r#"{"params":{"a":1,"a":2}}"#).unwrap(),
            Body::Object(_)
        ));
    }

    #[test]
    fn other_values_and_syntax_errors() {
        assert_eq!(parse("[1, {\"a\": 2}]").unwrap(), Body::Array);
        assert_eq!(parse(" 3 ").unwrap(), Body::Scalar("a number"));
        assert_eq!(parse("null").unwrap(), Body::Scalar("null"));
        assert_eq!(parse("\"s\"").unwrap(), Body::Scalar("a string"));
        assert!(parse("{} {}").is_err());
        assert!(parse(r#"{"a":1,"a":}"#).is_err());
        assert!(parse("").is_err());
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(parse(&deep).is_err());
    }
}
