//! `apply_patch {input}`: applies a patch in the `*** Begin Patch` format to
//! the files as the user sees them.
//!
//! Every file's new text is computed first, from the buffer cache (unsaved
//! edits included) or the disk, so a patch that does not fit anywhere
//! changes nothing. Then the approval mode and the client decide the route:
//!
//! - **review**, client with `workspace/applyEdit`: one `WorkspaceEdit` for
//!   the whole patch, with a change annotation that asks for confirmation;
//!   the user accepts or rejects it (or parts of it) in the editor.
//! - **review**, client without it (or without the file operations the patch
//!   needs): `tandem/requestPermission`, then the disk.
//! - **auto**: open documents go to the editor as an unconfirmed
//!   `workspace/applyEdit` when it can take them, so the buffer the user is
//!   typing in changes (with undo) instead of the disk under it; closed files
//!   are written to disk. Without `applyEdit` everything goes to disk and
//!   open documents are updated in the cache.
//! - a client that owns the files (ACP's `fs/write_text_file`): the files
//!   the patch reads come from the client (`fs/read_text_file`), and
//!   accepted additions and in-place updates are written through it, so
//!   they land in its buffers; deletions and moves (which `fs/*` cannot
//!   express) go to disk.
//!
//! After the editor accepts an edit, the documents it changed are watched
//! until its `didChange`s arrive (or a short wait runs out), and the result
//! is compared with the patch hunk by hunk, so the model learns exactly what
//! landed. A rejection is a result for the model, not an error.

mod classify;
mod client_fs;
mod disk;
mod editor;
mod outcome;
mod plan;
mod report;
mod settle;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Value};

use self::client_fs::write_files;
use self::editor::through_editor;
use self::outcome::Outcome;
use self::plan::Plan;
use self::report::finish;
use super::edits::FileChange;
use super::language::after_edit;
use super::patch::parse_patch;
use super::{parse_args, ApprovalClass, ExecMode, Tool, ToolContext, ToolError, ToolEvent};
use crate::vocab::approval::ApprovalMode;
use crate::vocab::bridge::{BridgeOutcome, PermissionRequest};
use crate::vocab::tool_call::{ToolKind, WaitingFor};

pub struct ApplyPatch;

const READ_ONLY: &str =
    "The patch was not applied: the session is in read-only mode, where files are not changed.";
const CANNOT_REVIEW: &str = "The patch was not applied: the editor cannot review edits; \
     switch the session to auto mode to let the agent write files.";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    #[serde(alias = "patch")]
    input: String,
}

#[async_trait::async_trait]
impl Tool for ApplyPatch {
    fn name(&self) -> &'static str {
        "apply_patch"
    }

    fn description(&self) -> &'static str {
        "Edits files with a patch. `input` is the whole patch:\n\
         *** Begin Patch\n\
         *** Update File: src/lib.rs\n\
         @@ fn main() {\n\
         \x20   let x = 1;\n\
         -    println!(\"{}\", x);\n\
         +    println!(\"x = {x}\");\n\
         \x20}\n\
         *** Add File: notes/todo.md\n\
         +first line of the new file\n\
         *** Delete File: old.txt\n\
         *** End Patch\n\
         Sections: `*** Add File: PATH` (every line starts with `+`), `*** Delete File: PATH`, \
         `*** Update File: PATH` optionally followed by `*** Move to: NEW_PATH`. In an update, \
         each hunk starts with `@@` (optionally followed by a line such as a function signature \
         that precedes the change) and has lines starting with ` ` (unchanged context), `-` \
         (removed) or `+` (added); give about 3 lines of context above and below each change and \
         put hunks in file order. End a hunk with `*** End of File` when it changes the file's \
         last lines. Paths are relative to the workspace root. The patch applies to the text the \
         user sees, unsaved edits included; all files change or none do. In review mode the user \
         may accept or reject the patch or parts of it: the result says exactly what landed."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "input": {
                    "type": "string",
                    "description": "The entire patch, from `*** Begin Patch` to `*** End Patch`."
                }
            },
            "required": ["input"],
            "additionalProperties": false
        })
    }

    fn mode(&self) -> ExecMode {
        ExecMode::Exclusive
    }

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::Edit
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Edit
    }

    fn title(&self, args: &Value) -> String {
        let patch = args
            .get("input")
            .or_else(|| args.get("patch"))
            .and_then(Value::as_str)
            .and_then(|input| parse_patch(input).ok());
        match patch {
            Some(patch) => format!("Patch: {}", patch.summary()),
            None => "Patch".to_string(),
        }
    }

    async fn run(&self, raw_args: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let args: Args = parse_args(self.name(), &raw_args)?;
        if ctx.mode == ApprovalMode::ReadOnly {
            return Err(ToolError::rejected(READ_ONLY));
        }
        let patch = parse_patch(&args.input).map_err(|e| not_applied(e.to_string()))?;
        let client = plan::client_texts(&patch, ctx).await?;
        let plan = {
            let ctx = ctx.clone();
            tokio::task::spawn_blocking(move || Plan::prepare(&patch, &ctx, &client))
                .await
                .map_err(internal)??
        };
        let plan = Arc::new(plan);
        plan.emit_diffs(ctx);
        let edited = after_edit::edited_files(plan.files.iter().map(|f| &f.change));
        let baseline = after_edit::baseline(edited, ctx).await;
        let result = match ctx.mode {
            ApprovalMode::Review => review(&plan, raw_args, ctx).await,
            _ => auto(&plan, ctx).await,
        };
        with_diagnostics(result, baseline, ctx).await
    }
}

/// The report, followed by what the editor's diagnostics say of the
/// changed lines (see [`after_edit`]) when the patch landed.
async fn with_diagnostics(
    result: Result<String, ToolError>,
    baseline: Option<after_edit::Baseline>,
    ctx: &ToolContext,
) -> Result<String, ToolError> {
    let (Ok(report), Some(baseline)) = (&result, baseline) else {
        return result;
    };
    match after_edit::check(baseline, ctx).await {
        Some(verdict) => Ok(format!("{report}\n{verdict}")),
        None => result,
    }
}

/// An error for a patch that changed nothing.
fn not_applied(detail: impl std::fmt::Display) -> ToolError {
    ToolError::new(format!(
        "{detail}\nThe patch was not applied; nothing was changed (a patch applies whole or not at all)."
    ))
}

fn internal(e: impl std::fmt::Display) -> ToolError {
    ToolError::new(format!("apply_patch failed internally: {e}"))
}

fn cancelled() -> ToolError {
    ToolError::new("cancelled")
}

async fn review(plan: &Arc<Plan>, raw_args: Value, ctx: &ToolContext) -> Result<String, ToolError> {
    let abilities = ctx.bridge.abilities();
    let expressible = abilities.resource_operations
        || !plan.files.iter().any(|f| {
            matches!(
                f.change,
                FileChange::Delete { .. }
                    | FileChange::Update {
                        move_to: Some(_),
                        ..
                    }
            )
        });
    if abilities.apply_edit && expressible {
        // The editor shows the edit for review; the turn waits on the user.
        (ctx.emit)(ToolEvent::Waiting(WaitingFor::Permission));
        let outcome = through_editor(plan, &plan.all(), true, ctx).await?;
        return finish(plan, &[outcome], ApprovalMode::Review);
    }

    if abilities.request_permission {
        (ctx.emit)(ToolEvent::Waiting(WaitingFor::Permission));
    }
    let request = PermissionRequest {
        session_id: ctx.session_id.clone(),
        tool_call_id: ctx.call_id.clone(),
        title: format!("Patch: {}", plan.summary),
        kind: ToolKind::Edit,
        raw_input: raw_args,
        always_scope: None,
        text: None,
        diffs: plan.diffs(),
    };
    match ctx.bridge.request_permission(request, &ctx.cancel).await {
        BridgeOutcome::Answered(answer) if answer.choice.allows() => {
            let outcomes = write_files(plan, plan.all(), ctx).await?;
            finish(plan, &outcomes, ApprovalMode::Review)
        }
        BridgeOutcome::Answered(answer) => {
            Err(ToolError::rejected(match answer.reason {
                Some(reason) => {
                    format!("The user rejected the patch; nothing was changed.\nTheir comment: {reason}")
                }
                None => "The user rejected the patch; nothing was changed.".to_string(),
            }))
        }
        BridgeOutcome::Cancelled if ctx.cancel.is_cancelled() => Err(cancelled()),
        BridgeOutcome::Cancelled => Err(ToolError::rejected(
            "The user dismissed the review of the patch; nothing was changed.",
        )),
        BridgeOutcome::Unavailable(_) => Err(ToolError::rejected(CANNOT_REVIEW)),
    }
}

async fn auto(plan: &Arc<Plan>, ctx: &ToolContext) -> Result<String, ToolError> {
    let abilities = ctx.bridge.abilities();
    let (to_editor, to_write): (Vec<usize>, Vec<usize>) = plan.all().into_iter().partition(|&i| {
        let change = &plan.files[i].change;
        abilities.apply_edit
            && change.is_open()
            && (abilities.resource_operations || !change.needs_file_operation())
    });
    let mut outcomes = Vec::new();
    if !to_editor.is_empty() {
        // First, so that if the editor declines (the user typed meanwhile,
        // say) nothing has been written yet.
        let outcome = through_editor(plan, &to_editor, false, ctx).await?;
        if matches!(outcome, Outcome::Declined { .. }) {
            return finish(plan, &[outcome], ApprovalMode::Auto);
        }
        outcomes.push(outcome);
    }
    if !to_write.is_empty() {
        outcomes.extend(write_files(plan, to_write, ctx).await?);
    }
    finish(plan, &outcomes, ApprovalMode::Auto)
}
