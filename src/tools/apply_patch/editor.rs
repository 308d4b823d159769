//! The editor round-trip: one `WorkspaceEdit` for the changes that go to the
//! editor, then what landed. Files created for the edit are removed again if
//! it is declined.

use std::path::PathBuf;
use std::sync::Arc;

use super::outcome::{Outcome, Route};
use super::plan::Plan;
use super::settle::{fingerprint, observe, wait_for_edit};
use super::{cancelled, not_applied};
use crate::tools::edits::{create_empty_file, edit_proposal, EditOptions, FileChange};
use crate::tools::{ToolContext, ToolError};
use crate::vocab::bridge::{ApplyEditRequest, BridgeOutcome};
use crate::vocab::edit::EditAnnotation;

/// Sends the changes of `indices` to the editor as one `WorkspaceEdit` and,
/// once it is accepted, waits for the result to show and compares it.
pub(super) async fn through_editor(
    plan: &Arc<Plan>,
    indices: &[usize],
    review: bool,
    ctx: &ToolContext,
) -> Result<Outcome, ToolError> {
    let abilities = ctx.bridge.abilities();
    let mut created = Vec::new();
    if !abilities.resource_operations {
        // The edit can only fill a file that exists: create it empty now,
        // and remove it again if the edit is declined.
        for &i in indices {
            if let FileChange::Add { path, .. } = &plan.files[i].change {
                if let Err(e) = create_empty_file(path) {
                    remove_created(&created);
                    return Err(not_applied(format!(
                        "cannot create `{}`: {e}",
                        plan.files[i].shown
                    )));
                }
                created.push(path.clone());
            }
        }
    }
    let options = EditOptions {
        encoding: ctx.buffers.encoding(),
        resource_operations: abilities.resource_operations,
        annotation: abilities.change_annotations.then(|| EditAnnotation {
            id: format!("tandem-patch-{}", ctx.call_id),
            label: plan.summary.clone(),
            needs_confirmation: review,
            description: Some("Proposed by the tandem agent (apply_patch)".to_string()),
        }),
    };
    let edit = edit_proposal(indices.iter().map(|&i| &plan.files[i].change), &options);
    // Watch from before the request: an editor may send its didChanges
    // before it answers.
    let mut changes = ctx.buffers.subscribe();
    let baseline = fingerprint(plan, indices, ctx);
    let request = ApplyEditRequest {
        edit,
        label: plan.summary.clone(),
    };
    match ctx.bridge.apply_edit(request, &ctx.cancel).await {
        BridgeOutcome::Answered(answer) if answer.applied => {}
        BridgeOutcome::Answered(answer) => {
            remove_created(&created);
            return Ok(Outcome::Declined {
                reason: answer.failure_reason.filter(|r| !r.trim().is_empty()),
                dismissed: false,
            });
        }
        BridgeOutcome::Cancelled if ctx.cancel.is_cancelled() => {
            remove_created(&created);
            return Err(cancelled());
        }
        BridgeOutcome::Cancelled => {
            remove_created(&created);
            return Ok(Outcome::Declined {
                reason: None,
                dismissed: true,
            });
        }
        BridgeOutcome::Unavailable(why) => {
            remove_created(&created);
            return Err(not_applied(format!("the editor could not apply it: {why}")));
        }
    }
    let wait = wait_for_edit(plan, indices, &baseline, &mut changes, ctx).await?;
    let files = indices
        .iter()
        .map(|&i| (i, observe(&plan.files[i].change, ctx)))
        .collect();
    Ok(Outcome::Applied {
        files,
        route: Route::Editor(wait),
    })
}

/// Removes files created for an edit that did not happen, if still empty.
fn remove_created(created: &[PathBuf]) {
    for path in created {
        if std::fs::metadata(path).is_ok_and(|m| m.len() == 0) {
            let _ = std::fs::remove_file(path);
        }
    }
}
