//! Waiting for an accepted edit to settle: the documents it touches are
//! watched until every change shows up, the changes stop, or a short wait runs
//! out; then each file is compared with the patch.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::cancelled;
use super::classify::classify_hunks;
use super::outcome::{FileOutcome, HunkOutcome, Wait};
use super::plan::{exists, Plan};
use crate::tools::edits::FileChange;
use crate::tools::{ToolContext, ToolError};

/// How long an accepted edit may take to show up in the cache or on disk.
pub(super) const REPORT_WAIT: Duration = Duration::from_secs(2);
/// Once part of an edit has shown up, how long without further changes
/// means the editor is done (some editors send one `didChange` per edit).
const SETTLE: Duration = Duration::from_millis(150);
/// How often the disk is looked at while waiting; the cache wakes us itself.
const POLL: Duration = Duration::from_millis(20);

/// Cheap signs that a file changed: its buffer's version and length, its
/// size and modification time on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileMark {
    buffer: Option<(i32, usize)>,
    disk: Option<(u64, Option<std::time::SystemTime>)>,
}

/// The marks of every file an edit touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Fingerprint(Vec<FileMark>);

pub(super) fn fingerprint(plan: &Plan, indices: &[usize], ctx: &ToolContext) -> Fingerprint {
    let mut marks = Vec::new();
    for &i in indices {
        let change = &plan.files[i].change;
        let move_to = match change {
            FileChange::Update { move_to, .. } => move_to.as_deref(),
            _ => None,
        };
        for path in std::iter::once(change.path()).chain(move_to) {
            let buffer = ctx
                .buffers
                .snapshot(path)
                .map(|s| (s.version, s.rope.len_bytes()));
            let disk = std::fs::metadata(path)
                .ok()
                .map(|m| (m.len(), m.modified().ok()));
            marks.push(FileMark { buffer, disk });
        }
    }
    Fingerprint(marks)
}

/// Waits until every change of an accepted edit shows up, or part of it
/// did and then nothing more for [`SETTLE`], or [`REPORT_WAIT`] passes.
pub(super) async fn wait_for_edit(
    plan: &Plan,
    indices: &[usize],
    baseline: &Fingerprint,
    changes: &mut watch::Receiver<u64>,
    ctx: &ToolContext,
) -> Result<Wait, ToolError> {
    let start = Instant::now();
    let deadline = start + REPORT_WAIT;
    let mut seen = baseline.clone();
    let mut last_change = start;
    let mut first = true;
    loop {
        let now_seen = fingerprint(plan, indices, ctx);
        let fresh = first || now_seen != seen;
        if now_seen != seen {
            seen = now_seen;
            last_change = Instant::now();
        }
        if fresh {
            let complete = indices
                .iter()
                .all(|&i| observe(&plan.files[i].change, ctx).is_complete());
            if complete {
                return Ok(Wait::Complete);
            }
        }
        first = false;
        let arrived = seen != *baseline;
        let now = Instant::now();
        if arrived && now >= last_change + SETTLE {
            return Ok(Wait::Settled);
        }
        if now >= deadline {
            return Ok(if arrived {
                Wait::Settled
            } else {
                Wait::TimedOut
            });
        }
        let mut wake = (now + POLL).min(deadline);
        if arrived {
            wake = wake.min(last_change + SETTLE);
        }
        tokio::select! {
            _ = ctx.cancel.cancelled() => return Err(cancelled()),
            changed = changes.changed() => {
                if changed.is_err() {
                    tokio::time::sleep_until(wake).await;
                }
            }
            _ = tokio::time::sleep_until(wake) => {}
        }
    }
}

/// Compares a file as it is now (buffer if open, else disk) with the patch.
pub(super) fn observe(change: &FileChange, ctx: &ToolContext) -> FileOutcome {
    match change {
        FileChange::Add { path, text } => match ctx.buffers.read_text(path) {
            Ok(now) if now == *text => FileOutcome::Added,
            Ok(now) if now.is_empty() => FileOutcome::AddedEmpty,
            Ok(_) => FileOutcome::AddedDifferently,
            Err(_) => FileOutcome::NotAdded,
        },
        FileChange::Delete { path, .. } => {
            if std::fs::symlink_metadata(path).is_ok() {
                FileOutcome::NotDeleted
            } else {
                FileOutcome::Deleted
            }
        }
        FileChange::Update {
            path,
            move_to,
            old_text,
            update,
            ..
        } => {
            let (at, moved) = match move_to {
                None => (path.as_path(), None),
                Some(to) if exists(ctx, to) => (to.as_path(), Some(!path.exists())),
                Some(_) => (path.as_path(), Some(false)),
            };
            match ctx.buffers.read_text(at) {
                Ok(now) if now == update.new_text => FileOutcome::Updated {
                    moved,
                    hunks: vec![HunkOutcome::Applied; update.hunks.len()],
                },
                Ok(now) => FileOutcome::Updated {
                    moved,
                    hunks: classify_hunks(old_text, &update.hunks, &now),
                },
                Err(_) => FileOutcome::Missing,
            }
        }
    }
}
