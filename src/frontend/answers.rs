//! Reading the editor's answers to the daemon's requests (permission,
//! questions, edits, ACP's fs and terminal) as typed messages: an answer
//! is read into its response type, as lenient as its protocol is
//! (optional fields, `_meta`, unknown fields ignored) and no more. A
//! malformed answer is logged and becomes the specific error the tool
//! that asked reports ("the editor's answer to fs/read_text_file was
//! malformed: missing field `content`"); the turn goes on. A JSON-RPC
//! error answer, a cancel and a missing capability pass through as they
//! were.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::protocol::{PermissionOutcome, RequestPermissionResult};
use crate::vocab::bridge::{BridgeOutcome, PermissionAnswer, PermissionChoice};

/// The editor's answer to `method` read as `T`, then `take`n.
pub(crate) fn typed_answer<T: DeserializeOwned, U>(
    method: &str,
    outcome: BridgeOutcome<Value>,
    take: impl FnOnce(T) -> U,
) -> BridgeOutcome<U> {
    match outcome {
        BridgeOutcome::Answered(result) => match T::deserialize(&result) {
            Ok(answer) => BridgeOutcome::Answered(take(answer)),
            Err(e) => {
                let why = malformed(method, &e);
                tracing::warn!("{why}: {result}");
                BridgeOutcome::Unavailable(why)
            }
        },
        BridgeOutcome::Cancelled => BridgeOutcome::Cancelled,
        BridgeOutcome::Unavailable(why) => BridgeOutcome::Unavailable(why),
    }
}

/// What the model reads about a malformed answer to `method`. serde names
/// the Rust struct it expected (the schema crates' are internal: `Wire`);
/// the editor sent JSON, where that is an object.
pub(crate) fn malformed(method: &str, why: impl std::fmt::Display) -> String {
    let mut why = why.to_string();
    if let Some(at) = why.find(", expected struct ") {
        why.truncate(at);
        why.push_str(", expected an object");
    }
    format!("the editor's answer to {method} was malformed: {why}")
}

/// The answer to a permission request: ACP's `session/request_permission`
/// and `tandem/requestPermission` share one shape
/// ([`RequestPermissionResult`], with tandem's `reason`, the user's comment
/// on a rejection). An `optionId` that is none of the options offered is
/// malformed too.
pub(crate) fn permission_answer(
    method: &str,
    outcome: BridgeOutcome<Value>,
) -> BridgeOutcome<PermissionAnswer> {
    let answer = match typed_answer(method, outcome, |a: RequestPermissionResult| a.outcome) {
        BridgeOutcome::Answered(answer) => answer,
        BridgeOutcome::Cancelled => return BridgeOutcome::Cancelled,
        BridgeOutcome::Unavailable(why) => return BridgeOutcome::Unavailable(why),
    };
    let (option_id, reason) = match answer {
        PermissionOutcome::Selected { option_id, reason } => (option_id, reason),
        // The turn was cancelled before the user chose.
        PermissionOutcome::Cancelled => return BridgeOutcome::Cancelled,
    };
    match PermissionChoice::from_option_id(&option_id) {
        Some(choice) => BridgeOutcome::Answered(PermissionAnswer {
            choice,
            reason: reason
                .as_deref()
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .map(str::to_string),
        }),
        None => {
            let why = malformed(
                method,
                format!("`{option_id}` is none of the options offered"),
            );
            tracing::warn!("{why}");
            BridgeOutcome::Unavailable(why)
        }
    }
}

#[cfg(test)]
mod tests {
    use agent_client_protocol_schema::v1 as acp;
    use serde_json::json;

    use super::*;

    fn read(result: Value) -> BridgeOutcome<String> {
        typed_answer(
            "fs/read_text_file",
            BridgeOutcome::Answered(result),
            |read: acp::ReadTextFileResponse| read.content,
        )
    }

    fn unavailable<T: std::fmt::Debug>(outcome: BridgeOutcome<T>) -> String {
        match outcome {
            BridgeOutcome::Unavailable(why) => why,
            other => panic!("not unavailable: {other:?}"),
        }
    }

    #[test]
    fn a_malformed_answer_names_the_method_and_what_is_wrong() {
        assert_eq!(
            unavailable(read(json!({}))),
            "the editor's answer to fs/read_text_file was malformed: missing field `content`"
        );
        assert_eq!(
            unavailable(read(json!("text"))),
            "the editor's answer to fs/read_text_file was malformed: \
             invalid type: string \"text\", expected an object"
        );
        assert_eq!(
            unavailable(read(json!({"content": 5}))),
            "the editor's answer to fs/read_text_file was malformed: \
             invalid type: integer `5`, expected a string"
        );
        // As lenient as ACP: unknown fields and a bad `_meta` are ignored.
        assert_eq!(
            read(json!({"content": "x", "extra": 1, "_meta": 5})),
            BridgeOutcome::Answered("x".to_string())
        );
    }

    #[test]
    fn an_error_answer_or_a_cancel_passes_through() {
        let typed = |outcome| {
            typed_answer(
                "fs/read_text_file",
                outcome,
                |r: acp::ReadTextFileResponse| r.content,
            )
        };
        assert_eq!(
            typed(BridgeOutcome::Unavailable("the editor failed: no".into())),
            BridgeOutcome::Unavailable("the editor failed: no".into())
        );
        assert_eq!(typed(BridgeOutcome::Cancelled), BridgeOutcome::Cancelled);
    }

    #[test]
    fn a_permission_answer_is_acps_with_tandems_reason() {
        let answer = |result| {
            permission_answer(
                "session/request_permission",
                BridgeOutcome::Answered(result),
            )
        };
        assert_eq!(
            answer(
                json!({"outcome": {"outcome": "selected", "optionId": "reject_once",
                                      "reason": " use make "}})
            ),
            BridgeOutcome::Answered(PermissionAnswer {
                choice: PermissionChoice::RejectOnce,
                reason: Some("use make".into()),
            })
        );
        assert_eq!(
            answer(json!({"outcome": {"outcome": "cancelled"}})),
            BridgeOutcome::Cancelled
        );
        assert_eq!(
            unavailable(answer(json!({"outcome": {"outcome": "selected"}}))),
            "the editor's answer to session/request_permission was malformed: \
             missing field `optionId`"
        );
        assert_eq!(
            unavailable(answer(
                json!({"outcome": {"outcome": "selected", "optionId": "yes"}})
            )),
            "the editor's answer to session/request_permission was malformed: \
             `yes` is none of the options offered"
        );
    }
}
