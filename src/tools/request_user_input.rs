//! `request_user_input {questions: [{id, question, options?}]}`: asks the
//! user through the editor and returns the answers. Offered only when the
//! client said it can answer (`experimental.tandem.requestUserInput`).
//!
//! Invariant: a question still open when the turn is cancelled ends the call
//! as aborted.

use serde::Deserialize;
use serde_json::{json, Value};

use super::{parse_args, ApprovalClass, ExecMode, Tool, ToolContext, ToolError, ToolEvent};
use crate::vocab::bridge::{BridgeOutcome, Question, UserInputRequest};
use crate::vocab::tool_call::{ToolKind, WaitingFor};

pub struct RequestUserInput;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    questions: Vec<Question>,
}

#[async_trait::async_trait]
impl Tool for RequestUserInput {
    fn name(&self) -> &'static str {
        "request_user_input"
    }

    fn description(&self) -> &'static str {
        "Ask the user one or more questions and wait for the answers. Use only when you cannot \
         proceed without a decision or information only the user has."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "questions": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string"},
                            "question": {"type": "string"},
                            "options": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "properties": {"label": {"type": "string"}, "description": {"type": "string"}},
                                    "required": ["label"],
                                    "additionalProperties": false
                                }
                            }
                        },
                        "required": ["id", "question"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["questions"],
            "additionalProperties": false
        })
    }

    fn mode(&self) -> ExecMode {
        ExecMode::Exclusive
    }

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::None
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Think
    }

    fn title(&self, _args: &Value) -> String {
        "Ask the user".to_string()
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let parsed: Args = parse_args(self.name(), &args)?;
        if parsed.questions.is_empty() {
            return Err(ToolError::new(
                "`questions` must have at least one question",
            ));
        }
        (ctx.emit)(ToolEvent::Waiting(WaitingFor::Input));
        let request = UserInputRequest {
            session_id: ctx.session_id.clone(),
            tool_call_id: ctx.call_id.clone(),
            questions: parsed.questions,
        };
        match ctx.bridge.request_user_input(request, &ctx.cancel).await {
            BridgeOutcome::Answered(answers) if answers["outcome"] == "declined" => {
                Err(ToolError::rejected(
                    "The user declined to answer; do not ask again, go on without the answers.",
                ))
            }
            BridgeOutcome::Answered(answers) => Ok(format!("The user answered: {answers}")),
            BridgeOutcome::Cancelled if ctx.cancel.is_cancelled() => {
                // The turn was cancelled, so the driver records this call
                // as aborted, not failed. Its cancel branch is ready by
                // now; yielding once lets it end the call instead of racing
                // it with this error (which a caller that does not race
                // still gets, a moment later).
                tokio::task::yield_now().await;
                Err(ToolError::new(
                    "aborted: the turn was cancelled while the question was open",
                ))
            }
            BridgeOutcome::Cancelled => Err(ToolError::new(
                "the user did not answer (the question was cancelled)",
            )),
            BridgeOutcome::Unavailable(why) => Err(ToolError::new(format!(
                "the question could not be asked: {why}"
            ))),
        }
    }
}
