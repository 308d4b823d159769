//! `request_user_input` as ACP's `elicitation/create` in form mode: one
//! string property per question (its `id`), the options' labels as its
//! `enum` (their descriptions in the property's `description`), every
//! question required; built from the schema crate's elicitation types.
//!
//! The answer reaches the model as `{id: answer}`; a decline as
//! `{"outcome": "declined"}`; a cancel as [`BridgeOutcome::Cancelled`].

use agent_client_protocol_schema::v1 as acp;
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::wire::to_wire;
use crate::frontend::answers::{malformed, typed_answer};
use crate::frontend::lsp::outgoing::Outgoing;
use crate::protocol::WireQuestion;
use crate::vocab::bridge::{BridgeOutcome, UserInputRequest};

/// The `requestedSchema` for the model's questions.
pub(super) fn form_schema(questions: &[WireQuestion]) -> acp::ElicitationSchema {
    let mut schema = acp::ElicitationSchema::new();
    for question in questions {
        let mut property = acp::StringPropertySchema::new().title(question.question.as_str());
        let options = question.options.as_deref().unwrap_or_default();
        if !options.is_empty() {
            property =
                property.enum_values(options.iter().map(|o| o.label.clone()).collect::<Vec<_>>());
            let described: Vec<String> = options
                .iter()
                .filter_map(|o| Some(format!("{}: {}", o.label, o.description.as_deref()?)))
                .collect();
            if !described.is_empty() {
                property = property.description(described.join("; "));
            }
        }
        schema = schema.property(question.id.as_str(), property, true);
    }
    schema
}

/// Asks the client and turns its action into an outcome.
pub(super) async fn ask(
    outgoing: &Outgoing,
    request: UserInputRequest,
    cancel: &CancellationToken,
) -> BridgeOutcome<Value> {
    let questions = crate::frontend::updates::wire_questions(&request.questions);
    let params = create_request(&request.session_id, &request.tool_call_id, &questions);
    match outgoing.request("elicitation/create", params, cancel).await {
        BridgeOutcome::Answered(result) => outcome(result),
        other => other,
    }
}

/// The `elicitation/create` params for the model's questions.
fn create_request(session_id: &str, tool_call_id: &str, questions: &[WireQuestion]) -> Value {
    let count = questions.len();
    let message = if count == 1 {
        "The agent has a question".to_string()
    } else {
        format!("The agent has {count} questions")
    };
    let scope = acp::ElicitationSessionScope::new(session_id.to_string())
        .tool_call_id(acp::ToolCallId::new(tool_call_id));
    let request = acp::CreateElicitationRequest::new(
        acp::ElicitationMode::Form(acp::ElicitationFormMode::new(scope, form_schema(questions))),
        message,
    );
    let mut params = to_wire(request);
    // The schema's properties are a sorted map: put them back in the
    // model's order, which clients show them in. `required` lists them all
    // (empty, not absent, for no questions).
    if let Some(schema) = params["requestedSchema"].as_object_mut() {
        if let Some(Value::Object(mut sorted)) = schema.remove("properties") {
            let ordered: Map<String, Value> = questions
                .iter()
                .filter_map(|q| Some((q.id.clone(), sorted.remove(&q.id)?)))
                .collect();
            schema.insert("properties".to_string(), Value::Object(ordered));
        }
        schema
            .entry("required")
            .or_insert_with(|| Value::Array(Vec::new()));
    }
    params
}

/// The client's `elicitation/create` result as the tool's outcome: read as
/// ACP's `CreateElicitationResponse` (a malformed one is the tool's error);
/// the accepted answers reach the model in the client's order.
pub(crate) fn outcome(result: Value) -> BridgeOutcome<Value> {
    const METHOD: &str = "elicitation/create";
    if let Some(why) = untagged_error(&result) {
        let why = malformed(METHOD, why);
        tracing::warn!("{why}: {result}");
        return BridgeOutcome::Unavailable(why);
    }
    let content = result.get("content").cloned();
    let action = match typed_answer(
        METHOD,
        BridgeOutcome::Answered(result),
        |answer: acp::CreateElicitationResponse| answer.action,
    ) {
        BridgeOutcome::Answered(action) => action,
        BridgeOutcome::Cancelled => return BridgeOutcome::Cancelled,
        BridgeOutcome::Unavailable(why) => return BridgeOutcome::Unavailable(why),
    };
    match action {
        acp::ElicitationAction::Accept(_) => BridgeOutcome::Answered(
            content
                .filter(|c| !c.is_null())
                .unwrap_or_else(|| Value::Object(Map::new())),
        ),
        acp::ElicitationAction::Decline => BridgeOutcome::Answered(Value::Object(Map::from_iter(
            [("outcome".to_string(), Value::from("declined"))],
        ))),
        acp::ElicitationAction::Cancel => BridgeOutcome::Cancelled,
        // A custom or future action: not one to act on as if known.
        other => BridgeOutcome::Unavailable(format!(
            "the editor answered {METHOD} with an action tandem does not know: {}",
            to_wire(other)
        )),
    }
}

/// What serde would only call "no variant matched" in an answer: `action`
/// missing or not a string, an answer in `content` of no type ACP allows.
fn untagged_error(result: &Value) -> Option<String> {
    match result.get("action") {
        None => return Some("missing field `action`".to_string()),
        Some(Value::String(_)) => {}
        Some(action) => {
            return Some(format!(
                "invalid type: `action` is {action}, expected a string"
            ))
        }
    }
    if result["action"] != "accept" {
        return None;
    }
    let content = result.get("content").and_then(Value::as_object);
    let bad_answer = content.into_iter().flatten().find_map(|(id, answer)| {
        acp::ElicitationContentValue::deserialize(answer)
            .is_err()
            .then(|| {
                format!(
                    "`content.{id}` is {answer}: not a string, number, boolean or array of strings"
                )
            })
    });
    bad_answer.or_else(|| {
        acp::ElicitationAcceptAction::deserialize(result)
            .err()
            .map(|e| e.to_string())
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn questions_become_one_required_property_each_in_the_models_order() {
        let questions: Vec<WireQuestion> = serde_json::from_value(json!([
            {"id": "name", "question": "Name?"},
            {"id": "db", "question": "Which database?", "options": [{"label": "sqlite"}, {"label": "postgres", "description": "server"}]},
        ]))
        .unwrap();
        let params = create_request("s1", "c1", &questions);
        assert_eq!(
            params,
            json!({"mode": "form", "sessionId": "s1", "toolCallId": "c1",
                   "message": "The agent has 2 questions",
                   "requestedSchema": {"type": "object", "required": ["name", "db"], "properties": {
                "name": {"type": "string", "title": "Name?"},
                "db": {"type": "string", "title": "Which database?",
                       "enum": ["sqlite", "postgres"], "description": "postgres: server"},
            }}})
        );
        let keys: Vec<&String> = params["requestedSchema"]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(keys, ["name", "db"]);
    }

    #[test]
    fn an_answer_is_acps_and_a_malformed_one_says_what_is_wrong() {
        assert_eq!(
            outcome(json!({"action": "accept", "content": {"b": "2", "a": 1}})),
            BridgeOutcome::Answered(json!({"b": "2", "a": 1}))
        );
        assert_eq!(
            outcome(json!({"action": "decline"})),
            BridgeOutcome::Answered(json!({"outcome": "declined"}))
        );
        assert_eq!(
            outcome(json!({"action": "cancel"})),
            BridgeOutcome::Cancelled
        );
        let malformed = "the editor's answer to elicitation/create was malformed: ";
        for (result, why) in [
            (json!({}), "missing field `action`"),
            (
                json!({"action": "accept", "content": {"db": {"x": 1}}}),
                r#"`content.db` is {"x":1}: not a string, number, boolean or array of strings"#,
            ),
            (
                json!({"action": "accept", "content": "postgres"}),
                r#"invalid type: string "postgres", expected a map"#,
            ),
            (
                json!({"action": 5}),
                "invalid type: `action` is 5, expected a string",
            ),
        ] {
            assert_eq!(
                outcome(result),
                BridgeOutcome::Unavailable(format!("{malformed}{why}"))
            );
        }
        assert_eq!(
            outcome(json!({"action": "_custom", "x": 1})),
            BridgeOutcome::Unavailable(
                r#"the editor answered elicitation/create with an action tandem does not know: {"action":"_custom","x":1}"#
                    .to_string()
            )
        );
    }
}
