//! `update_plan {explanation?, plan: [{step, status}]}`: the agent's plan,
//! pushed to the editor as a `plan` update.
//!
//! Invariant: a plan is validated whole (non-empty, at most one step
//! `in_progress`) before it is emitted; a bad plan emits nothing.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::vocab::plan::{PlanStatus, PlanStep};
use crate::vocab::tool_call::ToolKind;

use super::{parse_args, ApprovalClass, ExecMode, Tool, ToolContext, ToolError, ToolEvent};

pub struct UpdatePlan;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    #[serde(default)]
    explanation: Option<String>,
    plan: Vec<PlanStep>,
}

#[async_trait::async_trait]
impl Tool for UpdatePlan {
    fn name(&self) -> &'static str {
        "update_plan"
    }

    fn description(&self) -> &'static str {
        "Show the user your plan for the task as a list of steps with their status; call it \
         again as steps progress. At most one step may be in_progress."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "explanation": {"type": "string", "description": "Why the plan is what it is, or what changed."},
                "plan": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "step": {"type": "string"},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
                        },
                        "required": ["step", "status"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["plan"],
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
        "Update plan".to_string()
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let args: Args = parse_args(self.name(), &args)?;
        if args.plan.is_empty() {
            return Err(ToolError::new("`plan` must have at least one step"));
        }
        if let Some(empty) = args.plan.iter().position(|s| s.step.trim().is_empty()) {
            return Err(ToolError::new(format!(
                "step {} of the plan is empty",
                empty + 1
            )));
        }
        let in_progress = args
            .plan
            .iter()
            .filter(|s| s.status == PlanStatus::InProgress)
            .count();
        if in_progress > 1 {
            return Err(ToolError::new(format!(
                "{in_progress} steps are in_progress; at most one step may be in_progress at a time"
            )));
        }
        let steps = args.plan.len();
        (ctx.emit)(ToolEvent::Plan {
            explanation: args.explanation,
            steps: args.plan,
        });
        Ok(format!("Plan updated ({steps} steps)."))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;
    use std::sync::Arc;

    fn context(events: Arc<Mutex<Vec<ToolEvent>>>) -> ToolContext {
        let mut ctx = ToolContext::new(
            Arc::new(crate::workspace::Workspace::default()),
            Arc::new(crate::buffers::BufferCache::new()),
            tokio_util::sync::CancellationToken::new(),
        );
        ctx.emit = Arc::new(move |e| events.lock().push(e));
        ctx
    }

    #[tokio::test]
    async fn a_valid_plan_is_emitted_as_an_event() {
        let events = Arc::new(Mutex::new(Vec::new()));
        let out = UpdatePlan
            .run(
                json!({"explanation": "why", "plan": [{"step": "a", "status": "completed"}, {"step": "b", "status": "in_progress"}]}),
                &context(events.clone()),
            )
            .await
            .unwrap();
        assert_eq!(out, "Plan updated (2 steps).");
        let events = events.lock();
        assert!(
            matches!(&events[0], ToolEvent::Plan { steps, explanation: Some(e) } if steps.len() == 2 && e == "why")
        );
    }

    #[tokio::test]
    async fn two_steps_in_progress_is_an_error_and_nothing_is_emitted() {
        let events = Arc::new(Mutex::new(Vec::new()));
        let err = UpdatePlan
            .run(
                json!({"plan": [{"step": "a", "status": "in_progress"}, {"step": "b", "status": "in_progress"}]}),
                &context(events.clone()),
            )
            .await
            .unwrap_err();
        assert!(err.0.contains("at most one step"), "{err}");
        assert!(events.lock().is_empty());
    }

    #[tokio::test]
    async fn a_bad_status_is_an_error_naming_it() {
        let events = Arc::new(Mutex::new(Vec::new()));
        let err = UpdatePlan
            .run(
                json!({"plan": [{"step": "a", "status": "done"}]}),
                &context(events),
            )
            .await
            .unwrap_err();
        assert!(err.0.contains("done"), "{err}");
    }
}
