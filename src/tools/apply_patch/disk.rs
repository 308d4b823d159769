//! The disk route: writes a patch's changes to disk and mirrors in-place
//! updates of open documents in the buffer cache.

use std::sync::Arc;

use super::outcome::{FileOutcome, HunkOutcome, Outcome, Route};
use super::plan::Plan;
use super::{internal, not_applied};
use crate::buffers::TextChange;
use crate::tools::edits::{apply_to_disk, DiskChanges, FileChange};
use crate::tools::{ToolContext, ToolError};

/// Writes the changes of `indices` to disk, then mirrors in-place updates
/// of open documents in the cache (their editor cannot take edits).
pub(super) async fn to_disk(
    plan: &Arc<Plan>,
    indices: Vec<usize>,
    ctx: &ToolContext,
) -> Result<Outcome, ToolError> {
    let plan = plan.clone();
    let ctx = ctx.clone();
    tokio::task::spawn_blocking(move || {
        let disk = DiskChanges::of(indices.iter().map(|&i| &plan.files[i].change));
        if let Err(e) = apply_to_disk(&disk) {
            let shown = ctx.workspace.display_path(&e.path);
            let detail = format!("cannot write `{shown}`: {}", e.source);
            if e.changed.is_empty() {
                return Err(not_applied(detail));
            }
            let changed: Vec<String> = e
                .changed
                .iter()
                .map(|p| ctx.workspace.display_path(p))
                .collect();
            return Err(ToolError::new(format!(
                "{detail}\nThe patch was applied only in part: {} changed before the failure. \
                 Read the files again before patching them further.",
                changed.join(", ")
            )));
        }
        for &i in &indices {
            if let FileChange::Update {
                path,
                move_to: None,
                update,
                open: Some(snapshot),
                ..
            } = &plan.files[i].change
            {
                let replace = TextChange {
                    range: None,
                    text: update.new_text.clone(),
                };
                if let Err(e) = ctx.buffers.change(path, snapshot.version, &[replace]) {
                    tracing::warn!("apply_patch: cache not updated: {e}");
                }
            }
        }
        let files = indices
            .iter()
            .map(|&i| {
                let outcome = match &plan.files[i].change {
                    FileChange::Add { .. } => FileOutcome::Added,
                    FileChange::Delete { .. } => FileOutcome::Deleted,
                    FileChange::Update {
                        move_to, update, ..
                    } => FileOutcome::Updated {
                        moved: move_to.as_ref().map(|_| true),
                        hunks: vec![HunkOutcome::Applied; update.hunks.len()],
                    },
                };
                (i, outcome)
            })
            .collect();
        Ok(Outcome::Applied {
            files,
            route: Route::Disk,
        })
    })
    .await
    .map_err(internal)?
}
