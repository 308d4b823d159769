//! The client-fs route: a patch's additions and in-place updates written
//! through a client that owns the files (ACP's `fs/write_text_file`), so
//! they land in its buffers; the rest goes to the disk route.

use std::sync::Arc;

use super::disk::to_disk;
use super::not_applied;
use super::outcome::{FileOutcome, HunkOutcome, Outcome, Route};
use super::plan::Plan;
use crate::tools::edits::FileChange;
use crate::tools::{ToolContext, ToolError};
use crate::vocab::bridge::{BridgeOutcome, ClientFile};

/// Writes the changes of `indices`: through the client when it can take
/// them, else to disk.
pub(super) async fn write_files(
    plan: &Arc<Plan>,
    indices: Vec<usize>,
    ctx: &ToolContext,
) -> Result<Vec<Outcome>, ToolError> {
    if !ctx.bridge.facilities().write_text_file {
        return Ok(vec![to_disk(plan, indices, ctx).await?]);
    }
    let (to_client, to_write): (Vec<usize>, Vec<usize>) = indices
        .into_iter()
        .partition(|&i| !plan.files[i].change.needs_file_operation() || is_add(plan, i));
    let mut outcomes = Vec::new();
    if !to_client.is_empty() {
        outcomes.push(to_client_fs(plan, &to_client, ctx).await?);
    }
    if !to_write.is_empty() {
        outcomes.push(to_disk(plan, to_write, ctx).await?);
    }
    Ok(outcomes)
}

fn is_add(plan: &Plan, i: usize) -> bool {
    matches!(plan.files[i].change, FileChange::Add { .. })
}

/// One `fs/write_text_file` per file, in patch order; a failure names what
/// had already changed.
async fn to_client_fs(
    plan: &Arc<Plan>,
    indices: &[usize],
    ctx: &ToolContext,
) -> Result<Outcome, ToolError> {
    let mut files = Vec::new();
    for &i in indices {
        let planned = &plan.files[i];
        let (path, text, outcome) = match &planned.change {
            FileChange::Add { path, text } => (path, text, FileOutcome::Added),
            FileChange::Update { path, update, .. } => (
                path,
                &update.new_text,
                FileOutcome::Updated {
                    moved: None,
                    hunks: vec![HunkOutcome::Applied; update.hunks.len()],
                },
            ),
            FileChange::Delete { .. } => unreachable!("deletions go to disk"),
        };
        let file = ClientFile {
            session_id: ctx.session_id.clone(),
            path: path.clone(),
        };
        let failure = match ctx
            .bridge
            .write_text_file(file, text.clone(), &ctx.cancel)
            .await
        {
            BridgeOutcome::Answered(()) => {
                files.push((i, outcome));
                continue;
            }
            BridgeOutcome::Cancelled => "the write was cancelled".to_string(),
            BridgeOutcome::Unavailable(why) => why,
        };
        let detail = format!("the editor could not write `{}`: {failure}", planned.shown);
        if files.is_empty() {
            return Err(not_applied(detail));
        }
        let changed: Vec<&str> = files
            .iter()
            .map(|(i, _)| plan.files[*i].shown.as_str())
            .collect();
        return Err(ToolError::new(format!(
            "{detail}\nThe patch was applied only in part: {} changed before the failure. \
             Read the files again before patching them further.",
            changed.join(", ")
        )));
    }
    Ok(Outcome::Applied {
        files,
        route: Route::Client,
    })
}
