//! `request_user_input` as ACP's `elicitation/create` in form mode: one
//! string property per question (its `id`), the options' labels as its
//! `enum` (their descriptions in the property's `description`), every
//! question required; built from the schema crate's elicitation types.
//!
//! The answer reaches the model as `{id: answer}`; a decline as
//! `{"outcome": "declined"}`; a cancel as [`BridgeOutcome::Cancelled`].

use agent_client_protocol_schema::v1 as acp;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::wire::to_wire;
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
        BridgeOutcome::Answered(result) => outcome(&result),
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

/// The client's `elicitation/create` result as the tool's outcome.
pub(crate) fn outcome(result: &Value) -> BridgeOutcome<Value> {
    match result["action"].as_str() {
        Some("accept") => BridgeOutcome::Answered(
            result
                .get("content")
                .cloned()
                .filter(|c| !c.is_null())
                .unwrap_or_else(|| Value::Object(Map::new())),
        ),
        Some("decline") => BridgeOutcome::Answered(Value::Object(Map::from_iter([(
            "outcome".to_string(),
            Value::from("declined"),
        )]))),
        Some("cancel") => BridgeOutcome::Cancelled,
        _ => BridgeOutcome::Unavailable(format!(
            "the client answered elicitation/create with an unknown action: {result}"
        )),
    }
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
}
