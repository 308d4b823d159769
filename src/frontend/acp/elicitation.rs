//! `request_user_input` as ACP's `elicitation/create` in form mode: one
//! string property per question (its `id`), the options' labels as its
//! `enum` (their descriptions in the property's `description`), every
//! question required.
//!
//! The answer reaches the model as `{id: answer}`; a decline as
//! `{"outcome": "declined"}`; a cancel as [`BridgeOutcome::Cancelled`].

use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use crate::frontend::lsp::outgoing::Outgoing;
use crate::vocab::bridge::{BridgeOutcome, UserInputRequest};

/// The `requestedSchema` for the model's questions.
pub(super) fn form_schema(questions: &Value) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for question in questions.as_array().into_iter().flatten() {
        let Some(id) = question["id"].as_str() else {
            continue;
        };
        let mut property = json!({
            "type": "string",
            "title": question["question"].as_str().unwrap_or(id),
        });
        let options = question["options"].as_array().cloned().unwrap_or_default();
        let labels: Vec<&str> = options.iter().filter_map(|o| o["label"].as_str()).collect();
        if !labels.is_empty() {
            property["enum"] = json!(labels);
            let described: Vec<String> = options
                .iter()
                .filter_map(|o| {
                    Some(format!(
                        "{}: {}",
                        o["label"].as_str()?,
                        o["description"].as_str()?
                    ))
                })
                .collect();
            if !described.is_empty() {
                property["description"] = json!(described.join("; "));
            }
        }
        properties.insert(id.to_string(), property);
        required.push(json!(id));
    }
    json!({"type": "object", "properties": properties, "required": required})
}

/// Asks the client and turns its action into an outcome.
pub(super) async fn ask(
    outgoing: &Outgoing,
    request: UserInputRequest,
    cancel: &CancellationToken,
) -> BridgeOutcome<Value> {
    let questions = crate::frontend::updates::wire_questions(&request.questions);
    let params = create_params(
        &request.session_id,
        &request.tool_call_id,
        &serde_json::to_value(questions).unwrap_or_default(),
    );
    match outgoing.request("elicitation/create", params, cancel).await {
        BridgeOutcome::Answered(result) => outcome(&result),
        other => other,
    }
}

/// The `elicitation/create` params for the model's questions.
pub(crate) fn create_params(session_id: &str, tool_call_id: &str, questions: &Value) -> Value {
    let count = questions.as_array().map_or(0, Vec::len);
    json!({
        "mode": "form",
        "sessionId": session_id,
        "toolCallId": tool_call_id,
        "message": if count == 1 { "The agent has a question".to_string() }
                   else { format!("The agent has {count} questions") },
        "requestedSchema": form_schema(questions),
    })
}

/// The client's `elicitation/create` result as the tool's outcome.
pub(crate) fn outcome(result: &Value) -> BridgeOutcome<Value> {
    match result["action"].as_str() {
        Some("accept") => BridgeOutcome::Answered(
            result
                .get("content")
                .cloned()
                .filter(|c| !c.is_null())
                .unwrap_or_else(|| json!({})),
        ),
        Some("decline") => BridgeOutcome::Answered(json!({"outcome": "declined"})),
        Some("cancel") => BridgeOutcome::Cancelled,
        _ => BridgeOutcome::Unavailable(format!(
            "the client answered elicitation/create with an unknown action: {result}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_become_one_required_property_each() {
        let schema = form_schema(&json!([
            {"id": "db", "question": "Which database?", "options": [{"label": "sqlite"}, {"label": "postgres", "description": "server"}]},
            {"id": "name", "question": "Name?"},
        ]));
        assert_eq!(
            schema,
            json!({"type": "object", "required": ["db", "name"], "properties": {
                "db": {"type": "string", "title": "Which database?",
                       "enum": ["sqlite", "postgres"], "description": "postgres: server"},
                "name": {"type": "string", "title": "Name?"},
            }})
        );
    }
}
