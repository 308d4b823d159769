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
//!
//! After the editor accepts an edit, the documents it changed are watched
//! until its `didChange`s arrive (or a short wait runs out), and the result
//! is compared with the patch hunk by hunk, so the model learns exactly what
//! landed. A rejection is a result for the model, not an error.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::vocab::event::FileDiff;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::time::Instant;

use super::edits::{
    apply_to_disk, create_empty_file, workspace_edit, Annotation, DiskChanges, EditOptions,
    FileChange,
};
use super::patch::{apply_hunks, parse_patch, AppliedHunk, FileOp, Patch};
use super::{parse_args, ApprovalClass, ExecMode, Tool, ToolContext, ToolError, ToolEvent};
use crate::buffers::TextChange;
use crate::vocab::approval::ApprovalMode;
use crate::vocab::bridge::{ApplyEditRequest, BridgeOutcome, PermissionRequest};

pub struct ApplyPatch;

/// How long an accepted edit may take to show up in the cache or on disk.
const REPORT_WAIT: Duration = Duration::from_secs(2);
/// Once part of an edit has shown up, how long without further changes
/// means the editor is done (some editors send one `didChange` per edit).
const SETTLE: Duration = Duration::from_millis(150);
/// How often the disk is looked at while waiting; the cache wakes us itself.
const POLL: Duration = Duration::from_millis(20);

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

    fn kind(&self) -> &'static str {
        "edit"
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
        let plan = {
            let ctx = ctx.clone();
            tokio::task::spawn_blocking(move || Plan::prepare(&patch, &ctx))
                .await
                .map_err(internal)??
        };
        let plan = Arc::new(plan);
        plan.emit_diffs(ctx);
        match ctx.mode {
            ApprovalMode::Review => review(&plan, raw_args, ctx).await,
            _ => auto(&plan, ctx).await,
        }
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

/// A patch with every file's change computed and every path resolved.
struct Plan {
    summary: String,
    files: Vec<PlannedFile>,
}

struct PlannedFile {
    change: FileChange,
    /// The path as shown to the model (root-relative when possible).
    shown: String,
    /// The same for a move's target.
    shown_to: Option<String>,
}

impl Plan {
    /// Resolves and reads every file and applies every hunk, touching
    /// nothing; any problem is an error naming the file.
    fn prepare(patch: &Patch, ctx: &ToolContext) -> Result<Plan, ToolError> {
        let mut claimed: Vec<(PathBuf, String)> = Vec::new();
        let mut files = Vec::with_capacity(patch.ops.len());
        for op in &patch.ops {
            let written = op.path();
            let path = resolve(ctx, written)?;
            claim(&mut claimed, &path, written)?;
            let shown = ctx.workspace.display_path(&path);
            let planned = match op {
                FileOp::Add { contents, .. } => {
                    if exists(ctx, &path) {
                        return Err(not_applied(format!(
                            "`{written}` already exists; use `*** Update File: {written}` to change it, \
                             or `*** Delete File:` first to replace it"
                        )));
                    }
                    PlannedFile {
                        change: FileChange::Add {
                            path,
                            text: contents.clone(),
                        },
                        shown,
                        shown_to: None,
                    }
                }
                FileOp::Delete { .. } => {
                    let (old_text, open) = read_current(ctx, &path, written, "delete")?;
                    PlannedFile {
                        change: FileChange::Delete {
                            path,
                            old_text,
                            open,
                        },
                        shown,
                        shown_to: None,
                    }
                }
                FileOp::Update { move_to, hunks, .. } => {
                    let (old_text, open) = read_current(ctx, &path, written, "update")?;
                    let update = apply_hunks(written, &old_text, hunks).map_err(not_applied)?;
                    let mut target = None;
                    if let Some(to) = move_to {
                        let to_path = resolve(ctx, to)?;
                        if to_path != path {
                            claim(&mut claimed, &to_path, to)?;
                            if exists(ctx, &to_path) {
                                return Err(not_applied(format!(
                                    "cannot move `{written}` to `{to}`: `{to}` already exists"
                                )));
                            }
                            target = Some(to_path);
                        }
                    }
                    let shown_to = target.as_deref().map(|t| ctx.workspace.display_path(t));
                    PlannedFile {
                        change: FileChange::Update {
                            path,
                            move_to: target,
                            old_text,
                            update,
                            open,
                        },
                        shown,
                        shown_to,
                    }
                }
            };
            files.push(planned);
        }
        Ok(Plan {
            summary: patch.summary(),
            files,
        })
    }

    /// One diff per file, for editors to render; paths are absolute, as
    /// ACP's diff content has them.
    fn emit_diffs(&self, ctx: &ToolContext) {
        let files = self
            .files
            .iter()
            .map(|file| match &file.change {
                FileChange::Add { text, path } => FileDiff {
                    path: path.display().to_string(),
                    old_text: None,
                    new_text: text.clone(),
                },
                FileChange::Delete { old_text, path, .. } => FileDiff {
                    path: path.display().to_string(),
                    old_text: Some(old_text.clone()),
                    new_text: String::new(),
                },
                FileChange::Update {
                    old_text,
                    update,
                    path,
                    move_to,
                    ..
                } => FileDiff {
                    path: move_to.as_ref().unwrap_or(path).display().to_string(),
                    old_text: Some(old_text.clone()),
                    new_text: update.new_text.clone(),
                },
            })
            .collect();
        (ctx.emit)(ToolEvent::Diffs(files));
    }

    fn all(&self) -> Vec<usize> {
        (0..self.files.len()).collect()
    }
}

fn resolve(ctx: &ToolContext, written: &str) -> Result<PathBuf, ToolError> {
    ctx.workspace.resolve(written).map_err(not_applied)
}

/// Refuses a second section for the same file under another spelling.
fn claim(
    claimed: &mut Vec<(PathBuf, String)>,
    path: &Path,
    written: &str,
) -> Result<(), ToolError> {
    if let Some((_, first)) = claimed.iter().find(|(p, _)| p == path) {
        return Err(not_applied(format!(
            "`{written}` and `{first}` are the same file; put all changes to one file in one section"
        )));
    }
    claimed.push((path.to_path_buf(), written.to_string()));
    Ok(())
}

/// Whether anything is at `path`: a file (a dangling symlink counts) or an
/// open, possibly unsaved, buffer.
fn exists(ctx: &ToolContext, path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok() || ctx.buffers.snapshot(path).is_some()
}

/// The text the user sees, and the buffer it came from when open.
fn read_current(
    ctx: &ToolContext,
    path: &Path,
    written: &str,
    verb: &str,
) -> Result<(String, Option<crate::buffers::Snapshot>), ToolError> {
    if let Some(snapshot) = ctx.buffers.snapshot(path) {
        return Ok((snapshot.rope.to_string(), Some(snapshot)));
    }
    if path.is_dir() {
        return Err(not_applied(format!(
            "cannot {verb} `{written}`: it is a directory"
        )));
    }
    match std::fs::read_to_string(path) {
        Ok(text) => Ok((text, None)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(not_applied(format!(
            "cannot {verb} `{written}`: it does not exist{}",
            if verb == "update" {
                " (use `*** Add File:` to create a file)"
            } else {
                ""
            }
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => Err(not_applied(format!(
            "cannot {verb} `{written}`: it is not UTF-8 text, and apply_patch edits text files only"
        ))),
        Err(e) => Err(not_applied(format!("cannot read `{written}`: {e}"))),
    }
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
        (ctx.emit)(ToolEvent::Waiting("permission"));
        let outcome = through_editor(plan, &plan.all(), true, ctx).await?;
        return finish(plan, &[outcome], ApprovalMode::Review);
    }

    if abilities.request_permission {
        (ctx.emit)(ToolEvent::Waiting("permission"));
    }
    let request = PermissionRequest {
        session_id: ctx.session_id.clone(),
        tool_call_id: ctx.call_id.clone(),
        title: format!("Patch: {}", plan.summary),
        kind: "edit".to_string(),
        raw_input: raw_args,
        always_scope: None,
    };
    match ctx.bridge.request_permission(request, &ctx.cancel).await {
        BridgeOutcome::Answered(answer) if answer.choice.allows() => {
            let outcome = to_disk(plan, plan.all(), ctx).await?;
            finish(plan, &[outcome], ApprovalMode::Review)
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
        outcomes.push(to_disk(plan, to_write, ctx).await?);
    }
    finish(plan, &outcomes, ApprovalMode::Auto)
}

/// How one route of a patch ended.
enum Outcome {
    /// The editor or the user declined; nothing changed.
    Declined {
        reason: Option<String>,
        dismissed: bool,
    },
    /// Applied by the editor (as far as it went) or written to disk.
    Applied {
        files: Vec<(usize, FileOutcome)>,
        route: Route,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Disk,
    /// Through the editor; how waiting for its changes ended.
    Editor(Wait),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Every change showed up.
    Complete,
    /// Some changes showed up, then nothing more for a while.
    Settled,
    /// Nothing showed up in time.
    TimedOut,
}

/// What one file looks like after the patch, compared with the patch.
#[derive(Debug, Clone, PartialEq, Eq)]
enum FileOutcome {
    Added,
    /// Created empty: the file operation was accepted, its text was not.
    AddedEmpty,
    AddedDifferently,
    NotAdded,
    Deleted,
    NotDeleted,
    Updated {
        /// For a move: whether the file is now at its new path.
        moved: Option<bool>,
        hunks: Vec<HunkOutcome>,
    },
    /// The file to update is gone.
    Missing,
}

impl FileOutcome {
    fn is_complete(&self) -> bool {
        match self {
            FileOutcome::Added | FileOutcome::Deleted => true,
            FileOutcome::Updated { moved, hunks } => {
                *moved != Some(false) && hunks.iter().all(|h| *h == HunkOutcome::Applied)
            }
            _ => false,
        }
    }

    /// Whether nothing of this file's change landed.
    fn is_untouched(&self) -> bool {
        match self {
            FileOutcome::NotAdded | FileOutcome::NotDeleted => true,
            FileOutcome::Updated { moved, hunks } => {
                *moved != Some(true) && hunks.iter().all(|h| *h == HunkOutcome::NotApplied)
            }
            _ => false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HunkOutcome {
    Applied,
    /// The original text is still there.
    NotApplied,
    /// The text there is neither the original nor the patch's.
    Changed,
}

/// Sends the changes of `indices` to the editor as one `WorkspaceEdit` and,
/// once it is accepted, waits for the result to show and compares it.
async fn through_editor(
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
        annotation: abilities.change_annotations.then(|| Annotation {
            id: format!("tandem-patch-{}", ctx.call_id),
            label: plan.summary.clone(),
            needs_confirmation: review,
            description: Some("Proposed by the tandem agent (apply_patch)".to_string()),
        }),
    };
    let edit = workspace_edit(indices.iter().map(|&i| &plan.files[i].change), &options);
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

/// Cheap signs that a file changed: its buffer's version and length, its
/// size and modification time on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileMark {
    buffer: Option<(i32, usize)>,
    disk: Option<(u64, Option<std::time::SystemTime>)>,
}

/// The marks of every file an edit touches.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint(Vec<FileMark>);

fn fingerprint(plan: &Plan, indices: &[usize], ctx: &ToolContext) -> Fingerprint {
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
async fn wait_for_edit(
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
fn observe(change: &FileChange, ctx: &ToolContext) -> FileOutcome {
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

/// Which hunks of an update show in `result`, the file's text now.
///
/// The original is unchanged gaps around the hunks' old texts. Reading
/// `result` from the front, each hunk must be its new or its old text
/// followed by the next gap; from the back likewise: exact, and linear in
/// the file's size. A user edit elsewhere stops a pass; hunks neither pass
/// placed are placed through a line diff (see [`place_by_line_diff`]).
fn classify_hunks(original: &str, hunks: &[AppliedHunk], result: &str) -> Vec<HunkOutcome> {
    let n = hunks.len();
    let gap = |i: usize| {
        let start = if i == 0 {
            0
        } else {
            hunks[i - 1].old_bytes.end
        };
        let end = if i == n {
            original.len()
        } else {
            hunks[i].old_bytes.start
        };
        &original[start..end.max(start)]
    };
    let old = |i: usize| &original[hunks[i].old_bytes.clone()];
    let new = |i: usize| hunks[i].new_text.as_str();
    let mut outcomes: Vec<Option<HunkOutcome>> = vec![None; n];

    // Front to back. `result[..p]` is explained, hunks `..front` decided.
    let mut p = 0;
    let mut front = 0;
    let mut gap_consumed = false;
    if result.starts_with(gap(0)) {
        p = gap(0).len();
        gap_consumed = true;
        while front < n {
            let rest = &result[p..];
            let after = gap(front + 1);
            let fits = |text: &str| rest.starts_with(text) && rest[text.len()..].starts_with(after);
            let (outcome, whole) = match (fits(new(front)), fits(old(front))) {
                (true, _) => (HunkOutcome::Applied, true),
                (false, true) => (HunkOutcome::NotApplied, true),
                // The gap after it differs: place the hunk alone if only
                // one reading fits, then stop.
                _ => match (rest.starts_with(new(front)), rest.starts_with(old(front))) {
                    (true, false) => (HunkOutcome::Applied, false),
                    (false, true) => (HunkOutcome::NotApplied, false),
                    _ => break,
                },
            };
            outcomes[front] = Some(outcome);
            p += match outcome {
                HunkOutcome::Applied => new(front).len(),
                _ => old(front).len(),
            };
            front += 1;
            gap_consumed = whole;
            if !whole {
                break;
            }
            p += after.len();
        }
    }

    // Back to front, within what the first pass left.
    let region = &result[p..];
    if front < n && region.ends_with(gap(n)) {
        let mut q = region.len() - gap(n).len();
        let mut back = n;
        while back > front {
            let i = back - 1;
            let head = &region[..q];
            let before = if i == front && gap_consumed {
                ""
            } else {
                gap(i)
            };
            let fits = |text: &str| {
                head.ends_with(text) && head[..head.len() - text.len()].ends_with(before)
            };
            let (outcome, whole) = match (fits(new(i)), fits(old(i))) {
                (true, _) => (HunkOutcome::Applied, true),
                (false, true) => (HunkOutcome::NotApplied, true),
                _ => match (head.ends_with(new(i)), head.ends_with(old(i))) {
                    (true, false) => (HunkOutcome::Applied, false),
                    (false, true) => (HunkOutcome::NotApplied, false),
                    _ => break,
                },
            };
            outcomes[i] = Some(outcome);
            q -= match outcome {
                HunkOutcome::Applied => new(i).len(),
                _ => old(i).len(),
            };
            back -= 1;
            if !whole {
                break;
            }
            q -= before.len();
        }
    }
    if outcomes.iter().any(Option::is_none) {
        place_by_line_diff(original, hunks, result, &mut outcomes);
    }
    outcomes
        .into_iter()
        .map(|o| o.unwrap_or(HunkOutcome::Changed))
        .collect()
}

/// Places the undecided hunks by diffing the original and `result` by
/// line. The unchanged lines next to a hunk's old lines say where its
/// region is in `result`: that region (or, with one neighbour kept, the
/// lines right after or before it) is the hunk's new lines or its old ones.
/// When the user edited next to the hunk too, the nearest unchanged lines
/// around it bound a window that holds the new lines or the old ones.
/// Anything else is [`HunkOutcome::Changed`]. Used only when the user edited
/// around the hunks, since a diff costs more than the exact passes.
fn place_by_line_diff(
    original: &str,
    hunks: &[AppliedHunk],
    result: &str,
    outcomes: &mut [Option<HunkOutcome>],
) {
    let diff = similar::TextDiff::configure()
        .timeout(Duration::from_millis(250))
        .diff_lines(original, result);
    let (old, new) = (diff.old_slices(), diff.new_slices());
    // For each original line that is still there, its line in `result`.
    let mut kept: Vec<Option<usize>> = vec![None; old.len()];
    for op in diff.ops() {
        if let similar::DiffOp::Equal {
            old_index,
            new_index,
            len,
        } = *op
        {
            for k in 0..len {
                kept[old_index + k] = Some(new_index + k);
            }
        }
    }
    let content = |line: &str| {
        let line = line.strip_suffix('\n').unwrap_or(line);
        line.strip_suffix('\r').unwrap_or(line).to_string()
    };
    let lines = |from: usize, to: usize| -> Option<Vec<String>> {
        new.get(from..to)
            .map(|lines| lines.iter().map(|l| content(l)).collect())
    };
    // Where a region starting at original line `line` starts in `result`,
    // from the nearest kept line above it, looking no higher than `floor`.
    let start_of = |line: usize, floor: usize| -> Option<usize> {
        let mut j = line;
        while j > floor && kept[j - 1].is_none() {
            j -= 1;
        }
        if j == 0 {
            Some(0)
        } else {
            kept[j - 1].map(|r| r + 1)
        }
    };
    // Where a region ending before original line `line` ends in `result`.
    let end_of = |line: usize, ceiling: usize| -> Option<usize> {
        let mut j = line;
        while j < ceiling && kept[j].is_none() {
            j += 1;
        }
        if j >= old.len() {
            Some(new.len())
        } else {
            kept[j]
        }
    };
    let contains = |hay: &[String], needle: &[String]| {
        needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
    };
    for (hunk, outcome) in hunks.iter().zip(outcomes.iter_mut()) {
        if outcome.is_some() {
            continue;
        }
        let end = hunk.old_lines.end.min(old.len());
        let first = hunk.old_lines.start.min(end);
        let was: Vec<String> = old[first..end].iter().map(|l| content(l)).collect();
        let readings = [
            (hunk.new_lines.as_slice(), HunkOutcome::Applied),
            (was.as_slice(), HunkOutcome::NotApplied),
        ];
        let (start, stop) = (start_of(first, first), end_of(end, end));
        let exact = || {
            let region = lines(start?, stop?)?;
            readings
                .iter()
                .find(|(text, _)| *text == region.as_slice())
                .map(|(_, o)| *o)
        };
        // With one neighbour, an empty reading proves nothing.
        let after_start = || {
            let s = start?;
            readings
                .iter()
                .find(|(text, _)| {
                    !text.is_empty() && lines(s, s + text.len()).as_deref() == Some(*text)
                })
                .map(|(_, o)| *o)
        };
        let before_stop = || {
            let e = stop?;
            readings
                .iter()
                .find(|(text, _)| {
                    !text.is_empty()
                        && e.checked_sub(text.len())
                            .is_some_and(|s| lines(s, e).as_deref() == Some(*text))
                })
                .map(|(_, o)| *o)
        };
        let window = || {
            let region = lines(start_of(first, 0)?, end_of(end, old.len())?)?;
            match (contains(&region, &hunk.new_lines), contains(&region, &was)) {
                (true, false) => Some(HunkOutcome::Applied),
                (false, true) => Some(HunkOutcome::NotApplied),
                _ => None,
            }
        };
        *outcome = exact()
            .or_else(after_start)
            .or_else(before_stop)
            .or_else(window)
            .or(Some(HunkOutcome::Changed));
    }
}

/// Writes the changes of `indices` to disk, then mirrors in-place updates
/// of open documents in the cache (their editor cannot take edits).
async fn to_disk(
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

/// The report as the call's result: a rejection when nothing landed
/// because it was declined, else what happened.
fn finish(plan: &Plan, outcomes: &[Outcome], mode: ApprovalMode) -> Result<String, ToolError> {
    let text = report(plan, outcomes, mode);
    if !outcomes.is_empty()
        && outcomes
            .iter()
            .all(|o| matches!(o, Outcome::Declined { .. }))
    {
        Err(ToolError::rejected(text))
    } else {
        Ok(text)
    }
}

/// The tool's result: what happened, file by file.
fn report(plan: &Plan, outcomes: &[Outcome], mode: ApprovalMode) -> String {
    let mut lines = Vec::new();
    let mut files = Vec::new();
    let mut timed_out = false;
    let mut via_editor = false;
    let mut via_disk = false;
    for outcome in outcomes {
        match outcome {
            Outcome::Declined { reason, dismissed } => {
                let who = if mode == ApprovalMode::Review {
                    "The user rejected the patch"
                } else {
                    "The editor declined the patch"
                };
                let mut text = if *dismissed {
                    "The user dismissed the review of the patch; nothing was changed.".to_string()
                } else {
                    format!("{who}; nothing was changed.")
                };
                if let Some(reason) = reason {
                    let label = if mode == ApprovalMode::Review {
                        "Their comment"
                    } else {
                        "Reason"
                    };
                    text.push_str(&format!("\n{label}: {reason}"));
                }
                return text;
            }
            Outcome::Applied { files: f, route } => {
                files.extend(f.iter());
                match route {
                    Route::Disk => via_disk = true,
                    Route::Editor(wait) => {
                        via_editor = true;
                        timed_out |= *wait == Wait::TimedOut;
                    }
                }
            }
        }
    }
    let complete = files.iter().all(|(_, o)| o.is_complete());
    let untouched = files.iter().all(|(_, o)| o.is_untouched());
    // Only a review that was seen to end can blame the user for a change
    // that did not land.
    let user_decided = mode == ApprovalMode::Review && !timed_out;
    let declined = if user_decided {
        "rejected by the user"
    } else {
        "not applied"
    };
    lines.push(if complete {
        "The patch was applied:".to_string()
    } else if untouched && timed_out {
        format!(
            "The editor said it applied the patch, but no change reached tandem within {}s; \
             as far as tandem can see, nothing was changed:",
            REPORT_WAIT.as_secs()
        )
    } else if untouched && user_decided {
        "The user rejected every change of the patch; nothing was changed:".to_string()
    } else if untouched {
        "The editor applied none of the patch's changes; nothing was changed:".to_string()
    } else if user_decided {
        "The patch was applied only in part (the user accepted some changes and rejected \
         others):"
            .to_string()
    } else {
        "The patch was applied only in part:".to_string()
    });
    for (i, outcome) in &files {
        lines.push(format!(
            "- {}",
            file_line(&plan.files[*i], outcome, declined)
        ));
    }
    if via_editor && via_disk && complete {
        lines.push(
            "(Open documents were changed in the editor, the other files on disk.)".to_string(),
        );
    }
    if !complete && !untouched {
        lines.push("Read the changed files again before patching them further.".to_string());
    }
    lines.join("\n")
}

/// One file's line of the report; `declined` says why a change is missing.
fn file_line(file: &PlannedFile, outcome: &FileOutcome, declined: &str) -> String {
    let shown = &file.shown;
    match outcome {
        FileOutcome::Added => format!("{shown}: created"),
        FileOutcome::AddedEmpty => {
            format!("{shown}: created empty; its contents were {declined}")
        }
        FileOutcome::AddedDifferently => {
            format!("{shown}: created, but its contents differ from the patch")
        }
        FileOutcome::NotAdded => format!("{shown}: not created ({declined})"),
        FileOutcome::Deleted => format!("{shown}: deleted"),
        FileOutcome::NotDeleted => format!("{shown}: not deleted ({declined})"),
        FileOutcome::Missing => {
            format!("{shown}: no longer exists, so none of its hunks could be checked")
        }
        FileOutcome::Updated { moved, hunks } => {
            let to = file.shown_to.as_deref().unwrap_or_default();
            let mut parts = Vec::new();
            let name = match moved {
                Some(true) => {
                    parts.push("moved".to_string());
                    format!("{shown} -> {to}")
                }
                Some(false) => {
                    parts.push(format!("not moved to {to} ({declined})"));
                    shown.clone()
                }
                None => shown.clone(),
            };
            let numbers = |wanted: HunkOutcome| -> Vec<usize> {
                hunks
                    .iter()
                    .enumerate()
                    .filter(|(_, h)| **h == wanted)
                    .map(|(i, _)| i + 1)
                    .collect()
            };
            let phrase = |numbers: &[usize], what: &str| -> Option<String> {
                let list: Vec<String> = numbers.iter().map(usize::to_string).collect();
                match numbers.len() {
                    0 => None,
                    1 => Some(format!("hunk {} {what}", list[0])),
                    _ => Some(format!("hunks {} {what}", list.join(", "))),
                }
            };
            parts.extend(phrase(&numbers(HunkOutcome::Applied), "applied"));
            parts.extend(phrase(&numbers(HunkOutcome::NotApplied), declined));
            parts.extend(phrase(
                &numbers(HunkOutcome::Changed),
                "changed differently (the text there matches neither the original nor the patch)",
            ));
            format!("{name}: {}", parts.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::buffers::BufferCache;
    use crate::vocab::bridge::{
        ApplyEditResponse, ClientAbilities, ClientBridge, PermissionChoice, UserInputRequest,
    };
    use crate::workspace::Workspace;

    fn hunks_of(original: &str, patch: &str) -> Vec<AppliedHunk> {
        let patch = parse_patch(patch).expect("parses");
        let FileOp::Update { hunks, .. } = &patch.ops[0] else {
            panic!("not an update")
        };
        apply_hunks("f", original, hunks).expect("applies").hunks
    }

    const THREE: &str =
        "*** Begin Patch\n*** Update File: f\n@@\n-b\n+B\n@@\n-d\n+D\n@@\n-f\n+F\n*** End Patch";
    const LETTERS: &str = "a\nb\nc\nd\ne\nf\ng\n";

    #[test]
    fn hunks_are_told_apart_when_only_some_were_accepted() {
        use HunkOutcome::*;
        let hunks = hunks_of(LETTERS, THREE);
        let cases = [
            ("a\nB\nc\nD\ne\nF\ng\n", [Applied, Applied, Applied]),
            (LETTERS, [NotApplied, NotApplied, NotApplied]),
            ("a\nB\nc\nd\ne\nF\ng\n", [Applied, NotApplied, Applied]),
            ("a\nb\nc\nD\ne\nf\ng\n", [NotApplied, Applied, NotApplied]),
            (
                "a\nB\nc\nsomething else\ne\nF\ng\n",
                [Applied, Changed, Applied],
            ),
        ];
        for (result, expected) in cases {
            assert_eq!(
                classify_hunks(LETTERS, &hunks, result),
                expected,
                "{result:?}"
            );
        }
    }

    #[test]
    fn a_user_edit_between_hunks_does_not_hide_what_landed() {
        use HunkOutcome::*;
        let hunks = hunks_of(LETTERS, THREE);
        // Typed into the gap between hunks 1 and 2, and at the very top.
        let result = "top\na\nB\nc typed\nD\ne\nf\ng\n";
        assert_eq!(
            classify_hunks(LETTERS, &hunks, result),
            [Applied, Applied, NotApplied]
        );
        let result = "a\nB\nc typed\nD\ne\nf\ng\n";
        assert_eq!(
            classify_hunks(LETTERS, &hunks, result),
            [Applied, Applied, NotApplied]
        );
        // Edits in two gaps stop both exact passes; the line diff places
        // the hunk between them.
        let result = "a\nB\nc typed\nD\ne typed\nF\ng\n";
        assert_eq!(
            classify_hunks(LETTERS, &hunks, result),
            [Applied, Applied, Applied]
        );
    }

    #[test]
    fn pure_insertions_and_deletions_are_placed_too() {
        use HunkOutcome::*;
        let patch = "*** Begin Patch\n*** Update File: f\n@@\n a\n+inserted\n b\n@@\n e\n-f\n g\n*** End Patch";
        let hunks = hunks_of(LETTERS, patch);
        assert_eq!(
            classify_hunks(LETTERS, &hunks, "a\ninserted\nb\nc\nd\ne\ng\n"),
            [Applied, Applied]
        );
        assert_eq!(
            classify_hunks(LETTERS, &hunks, "a\nb\nc\nd\ne\ng\n"),
            [NotApplied, Applied]
        );
        assert_eq!(
            classify_hunks(LETTERS, &hunks, "a\ninserted\nb\nc\nd\ne\nf\ng\n"),
            [Applied, NotApplied]
        );
    }

    type EditHandler = dyn Fn(&Value) -> BridgeOutcome<ApplyEditResponse> + Send + Sync;

    /// An editor whose answers the test scripts; it records every edit.
    struct FakeEditor {
        abilities: ClientAbilities,
        on_edit: Box<EditHandler>,
        permission: Option<PermissionChoice>,
        edits: Mutex<Vec<ApplyEditRequest>>,
        permission_requests: Mutex<usize>,
    }

    impl FakeEditor {
        fn new(
            abilities: ClientAbilities,
            on_edit: impl Fn(&Value) -> BridgeOutcome<ApplyEditResponse> + Send + Sync + 'static,
        ) -> Self {
            FakeEditor {
                abilities,
                on_edit: Box::new(on_edit),
                permission: None,
                edits: Mutex::new(Vec::new()),
                permission_requests: Mutex::new(0),
            }
        }
    }

    #[async_trait::async_trait]
    impl ClientBridge for FakeEditor {
        fn abilities(&self) -> ClientAbilities {
            self.abilities
        }
        async fn request_permission(
            &self,
            _: PermissionRequest,
            _: &CancellationToken,
        ) -> BridgeOutcome<crate::vocab::bridge::PermissionAnswer> {
            *self.permission_requests.lock().expect("lock") += 1;
            match self.permission {
                Some(choice) => BridgeOutcome::Answered(choice.into()),
                None => BridgeOutcome::Unavailable("no".into()),
            }
        }
        async fn request_user_input(
            &self,
            _: UserInputRequest,
            _: &CancellationToken,
        ) -> BridgeOutcome<Value> {
            BridgeOutcome::Unavailable("no".into())
        }
        async fn apply_edit(
            &self,
            request: ApplyEditRequest,
            _: &CancellationToken,
        ) -> BridgeOutcome<ApplyEditResponse> {
            let answer = (self.on_edit)(&request.edit);
            self.edits.lock().expect("lock").push(request);
            answer
        }
    }

    fn applied(yes: bool, reason: Option<&str>) -> BridgeOutcome<ApplyEditResponse> {
        BridgeOutcome::Answered(ApplyEditResponse {
            applied: yes,
            failure_reason: reason.map(str::to_string),
        })
    }

    struct Fixture {
        root: tempfile::TempDir,
        buffers: Arc<BufferCache>,
        events: Arc<Mutex<Vec<ToolEvent>>>,
    }

    impl Fixture {
        fn new() -> Fixture {
            Fixture {
                root: tempfile::tempdir().expect("tempdir"),
                buffers: Arc::new(BufferCache::new()),
                events: Arc::new(Mutex::new(Vec::new())),
            }
        }

        fn path(&self, relative: &str) -> PathBuf {
            self.root.path().join(relative)
        }

        fn write(&self, relative: &str, text: &str) {
            let path = self.path(relative);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        }

        fn read(&self, relative: &str) -> String {
            std::fs::read_to_string(self.path(relative)).expect("read")
        }

        fn context(&self, mode: ApprovalMode, bridge: Arc<dyn ClientBridge>) -> ToolContext {
            let workspace = Arc::new(Workspace::new(vec![self.root.path().to_path_buf()]));
            let mut ctx =
                ToolContext::new(workspace, self.buffers.clone(), CancellationToken::new());
            ctx.mode = mode;
            ctx.bridge = bridge;
            ctx.call_id = "call_1".to_string();
            let events = self.events.clone();
            ctx.emit = Arc::new(move |e| events.lock().expect("lock").push(e));
            ctx
        }

        async fn run(&self, ctx: &ToolContext, patch: &str) -> Result<String, ToolError> {
            ApplyPatch.run(json!({ "input": patch }), ctx).await
        }
    }

    fn auto() -> Arc<dyn ClientBridge> {
        Arc::new(crate::vocab::bridge::NoClient)
    }

    const MULTI: &str = "*** Begin Patch
*** Add File: new/added.txt
+fresh
*** Update File: src/lib.rs
@@
-fn one() {}
+fn one() { 1 }
@@
-fn three() {}
+fn three() { 3 }
*** Update File: old_name.rs
*** Move to: moved/new_name.rs
@@
-moved
+moved and changed
*** Delete File: gone.txt
*** End Patch";

    fn multi_fixture() -> Fixture {
        let fx = Fixture::new();
        fx.write("src/lib.rs", "fn one() {}\nfn two() {}\nfn three() {}\n");
        fx.write("old_name.rs", "moved\n");
        fx.write("gone.txt", "bye\n");
        fx
    }

    #[tokio::test]
    async fn auto_mode_writes_a_multi_file_patch_to_disk_and_says_what_changed() {
        let fx = multi_fixture();
        let ctx = fx.context(ApprovalMode::Auto, auto());
        let out = fx.run(&ctx, MULTI).await.expect("applies");
        assert_eq!(fx.read("new/added.txt"), "fresh\n");
        assert_eq!(
            fx.read("src/lib.rs"),
            "fn one() { 1 }\nfn two() {}\nfn three() { 3 }\n"
        );
        assert_eq!(fx.read("moved/new_name.rs"), "moved and changed\n");
        assert!(!fx.path("old_name.rs").exists());
        assert!(!fx.path("gone.txt").exists());
        assert_eq!(
            out,
            "The patch was applied:\n\
             - new/added.txt: created\n\
             - src/lib.rs: hunks 1, 2 applied\n\
             - old_name.rs -> moved/new_name.rs: moved; hunk 1 applied\n\
             - gone.txt: deleted"
        );
        let diffs: Vec<(String, Option<String>, String)> = fx
            .events
            .lock()
            .expect("lock")
            .iter()
            .filter_map(|e| match e {
                ToolEvent::Diffs(files) => Some(files.clone()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .concat()
            .into_iter()
            .map(|f| (f.path, f.old_text, f.new_text))
            .collect();
        let diff_events = fx
            .events
            .lock()
            .expect("lock")
            .iter()
            .filter(|e| matches!(e, ToolEvent::Diffs(_)))
            .count();
        assert_eq!(diff_events, 1, "one event carries every file");
        let root = fx.root.path().canonicalize().unwrap();
        let abs = |p: &str| root.join(p).display().to_string();
        assert_eq!(
            diffs,
            vec![
                (abs("new/added.txt"), None, "fresh\n".into()),
                (
                    abs("src/lib.rs"),
                    Some("fn one() {}\nfn two() {}\nfn three() {}\n".into()),
                    "fn one() { 1 }\nfn two() {}\nfn three() { 3 }\n".into()
                ),
                (
                    abs("moved/new_name.rs"),
                    Some("moved\n".into()),
                    "moved and changed\n".into()
                ),
                (abs("gone.txt"), Some("bye\n".into()), String::new()),
            ]
        );
    }

    #[tokio::test]
    async fn a_hunk_that_does_not_match_in_the_second_file_leaves_the_first_untouched() {
        let fx = Fixture::new();
        fx.write("a.txt", "alpha\n");
        fx.write("b.txt", "bravo\n");
        let ctx = fx.context(ApprovalMode::Auto, auto());
        let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n*** Add File: c.txt\n+new\n*** Update File: b.txt\n@@\n-charlie\n+CHARLIE\n*** End Patch";
        let error = fx.run(&ctx, patch).await.expect_err("b.txt does not match");
        assert!(
            error.0.starts_with("b.txt: hunk 1 of 1 did not match"),
            "{error}"
        );
        assert!(error.0.contains("nothing was changed"), "{error}");
        assert_eq!(fx.read("a.txt"), "alpha\n");
        assert!(!fx.path("c.txt").exists());
        assert!(
            fx.events.lock().expect("lock").is_empty(),
            "no diff before it fits"
        );
    }

    #[tokio::test]
    async fn adding_an_existing_file_or_updating_a_missing_one_is_refused() {
        let fx = Fixture::new();
        fx.write("here.txt", "x\n");
        let ctx = fx.context(ApprovalMode::Auto, auto());
        let error = fx
            .run(
                &ctx,
                "*** Begin Patch\n*** Add File: here.txt\n+y\n*** End Patch",
            )
            .await
            .expect_err("exists");
        assert!(error.0.contains("`here.txt` already exists"), "{error}");
        for (verb, patch) in [
            (
                "update",
                "*** Begin Patch\n*** Update File: nope.txt\n@@\n-a\n+b\n*** End Patch",
            ),
            (
                "delete",
                "*** Begin Patch\n*** Delete File: nope.txt\n*** End Patch",
            ),
        ] {
            let error = fx.run(&ctx, patch).await.expect_err("missing");
            assert!(
                error
                    .0
                    .contains(&format!("cannot {verb} `nope.txt`: it does not exist")),
                "{error}"
            );
        }
        assert_eq!(fx.read("here.txt"), "x\n");
    }

    #[tokio::test]
    async fn paths_outside_the_workspace_are_refused_before_anything_changes() {
        let fx = Fixture::new();
        fx.write("in.txt", "x\n");
        let ctx = fx.context(ApprovalMode::Auto, auto());
        let patch = "*** Begin Patch\n*** Update File: in.txt\n@@\n-x\n+y\n*** Add File: ../escape.txt\n+z\n*** End Patch";
        let error = fx.run(&ctx, patch).await.expect_err("escape");
        assert!(error.0.contains("outside the workspace"), "{error}");
        assert_eq!(fx.read("in.txt"), "x\n");
    }

    #[tokio::test]
    async fn the_patch_applies_to_the_unsaved_buffer_and_the_cache_follows() {
        let fx = Fixture::new();
        fx.write("doc.rs", "on disk\n");
        fx.buffers
            .open(fx.path("doc.rs"), 4, "typed\nby the user\n");
        let ctx = fx.context(ApprovalMode::Auto, auto());
        fx.run(
            &ctx,
            "*** Begin Patch\n*** Update File: doc.rs\n@@\n typed\n-by the user\n+by the agent\n*** End Patch",
        )
        .await
        .expect("applies to the buffer");
        assert_eq!(fx.read("doc.rs"), "typed\nby the agent\n");
        let snapshot = fx.buffers.snapshot(&fx.path("doc.rs")).expect("open");
        assert_eq!(snapshot.rope.to_string(), "typed\nby the agent\n");
    }

    #[tokio::test]
    async fn read_only_mode_changes_nothing() {
        let fx = Fixture::new();
        fx.write("a.txt", "a\n");
        let ctx = fx.context(ApprovalMode::ReadOnly, auto());
        let out = fx
            .run(
                &ctx,
                "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\n*** End Patch",
            )
            .await
            .expect_err("a rejection");
        assert_eq!(out, ToolError::rejected(READ_ONLY));
        assert_eq!(fx.read("a.txt"), "a\n");
    }

    fn editor_abilities() -> ClientAbilities {
        ClientAbilities {
            apply_edit: true,
            change_annotations: true,
            resource_operations: true,
            ..ClientAbilities::default()
        }
    }

    #[tokio::test]
    async fn review_mode_sends_one_annotated_edit_and_reports_it_applied_once_the_buffer_shows_it()
    {
        let fx = Fixture::new();
        let doc = fx.path("doc.rs");
        fx.write("doc.rs", "old\n");
        fx.buffers.open(doc.clone(), 3, "keep\nold\n");
        let buffers = fx.buffers.clone();
        let path = doc.clone();
        // Like VS Code: the didChange reaches us before the answer.
        let editor = Arc::new(FakeEditor::new(editor_abilities(), move |_| {
            buffers
                .change(
                    &path,
                    4,
                    &[TextChange {
                        range: None,
                        text: "keep\nnew\n".into(),
                    }],
                )
                .expect("change");
            applied(true, None)
        }));
        let ctx = fx.context(ApprovalMode::Review, editor.clone());
        let out = fx
            .run(
                &ctx,
                "*** Begin Patch\n*** Update File: doc.rs\n@@\n keep\n-old\n+new\n*** End Patch",
            )
            .await
            .expect("applies");
        assert_eq!(out, "The patch was applied:\n- doc.rs: hunk 1 applied");
        let edits = editor.edits.lock().expect("lock");
        assert_eq!(edits.len(), 1);
        assert_eq!(edits[0].label, "Update doc.rs (1 hunk)");
        let edit = &edits[0].edit;
        assert_eq!(edit["documentChanges"][0]["textDocument"]["version"], 3);
        assert_eq!(
            edit["changeAnnotations"]["tandem-patch-call_1"]["needsConfirmation"],
            true
        );
        // The disk is the editor's business now.
        assert_eq!(fx.read("doc.rs"), "old\n");
        assert!(fx
            .events
            .lock()
            .expect("lock")
            .contains(&ToolEvent::Waiting("permission")));
    }

    #[tokio::test]
    async fn a_rejection_is_a_result_with_the_users_comment_and_removes_nothing() {
        let fx = Fixture::new();
        fx.write("a.txt", "a\n");
        let mut abilities = editor_abilities();
        abilities.resource_operations = false;
        let editor = Arc::new(FakeEditor::new(abilities, |_| {
            applied(false, Some("not like this"))
        }));
        let ctx = fx.context(ApprovalMode::Review, editor);
        let out = fx
            .run(
                &ctx,
                "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\n*** Add File: n.txt\n+n\n*** End Patch",
            )
            .await
            .expect_err("a rejection");
        assert_eq!(
            out,
            ToolError::rejected(
                "The user rejected the patch; nothing was changed.\nTheir comment: not like this"
            )
        );
        assert_eq!(fx.read("a.txt"), "a\n");
        assert!(
            !fx.path("n.txt").exists(),
            "the empty file made for the editor is gone again"
        );
    }

    #[tokio::test]
    async fn an_accepted_edit_that_never_shows_up_is_reported_as_such() {
        let fx = Fixture::new();
        fx.write("a.txt", "a\n");
        let editor = Arc::new(FakeEditor::new(editor_abilities(), |_| applied(true, None)));
        let ctx = fx.context(ApprovalMode::Review, editor);
        let out = fx
            .run(
                &ctx,
                "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\n*** End Patch",
            )
            .await
            .expect("a result");
        assert!(
            out.starts_with(
                "The editor said it applied the patch, but no change reached tandem within 2s"
            ),
            "{out}"
        );
        assert!(out.contains("a.txt: hunk 1 not applied"), "{out}");
    }

    #[tokio::test]
    async fn cancelling_while_waiting_for_the_editor_is_an_error() {
        let fx = Fixture::new();
        fx.write("a.txt", "a\n");
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        let editor = Arc::new(FakeEditor::new(editor_abilities(), move |_| {
            trigger.cancel();
            applied(true, None)
        }));
        let mut ctx = fx.context(ApprovalMode::Review, editor);
        ctx.cancel = cancel;
        let error = fx
            .run(
                &ctx,
                "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\n*** End Patch",
            )
            .await
            .expect_err("cancelled");
        assert_eq!(error.0, "cancelled");
    }

    #[tokio::test]
    async fn review_without_apply_edit_asks_permission_and_writes_when_allowed() {
        let fx = Fixture::new();
        fx.write("a.txt", "a\n");
        let asks = ClientAbilities {
            request_permission: true,
            ..ClientAbilities::default()
        };
        let mut editor = FakeEditor::new(asks, |_| unreachable!("no applyEdit"));
        editor.permission = Some(PermissionChoice::AllowOnce);
        let editor = Arc::new(editor);
        let ctx = fx.context(ApprovalMode::Review, editor.clone());
        let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\n*** End Patch";
        let out = fx.run(&ctx, patch).await.expect("applies");
        assert_eq!(out, "The patch was applied:\n- a.txt: hunk 1 applied");
        assert_eq!(fx.read("a.txt"), "b\n");
        assert_eq!(*editor.permission_requests.lock().expect("lock"), 1);
    }

    #[tokio::test]
    async fn review_with_nobody_to_ask_is_rejected_and_says_how_to_let_the_agent_write() {
        let fx = Fixture::new();
        fx.write("a.txt", "a\n");
        let ctx = fx.context(ApprovalMode::Review, auto());
        let out = fx
            .run(
                &ctx,
                "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\n*** End Patch",
            )
            .await
            .expect_err("a rejection");
        assert_eq!(out, ToolError::rejected(CANNOT_REVIEW));
        assert_eq!(fx.read("a.txt"), "a\n");
    }

    #[tokio::test]
    async fn auto_mode_sends_open_documents_to_the_editor_and_writes_closed_files() {
        let fx = Fixture::new();
        fx.write("open.rs", "disk\n");
        fx.write("closed.rs", "closed\n");
        fx.buffers.open(fx.path("open.rs"), 1, "buffer\n");
        let buffers = fx.buffers.clone();
        let open = fx.path("open.rs");
        let editor = Arc::new(FakeEditor::new(editor_abilities(), move |_| {
            buffers
                .change(
                    &open,
                    2,
                    &[TextChange {
                        range: None,
                        text: "BUFFER\n".into(),
                    }],
                )
                .expect("change");
            applied(true, None)
        }));
        let ctx = fx.context(ApprovalMode::Auto, editor.clone());
        let patch = "*** Begin Patch\n*** Update File: open.rs\n@@\n-buffer\n+BUFFER\n*** Update File: closed.rs\n@@\n-closed\n+CLOSED\n*** End Patch";
        let out = fx.run(&ctx, patch).await.expect("applies");
        assert!(out.starts_with("The patch was applied:"), "{out}");
        assert_eq!(fx.read("closed.rs"), "CLOSED\n");
        assert_eq!(fx.read("open.rs"), "disk\n", "the editor owns the open one");
        let edits = editor.edits.lock().expect("lock");
        let changes = edits[0].edit["documentChanges"]
            .as_array()
            .expect("changes");
        assert_eq!(changes.len(), 1, "only the open document: {changes:?}");
        assert_eq!(
            edits[0].edit["changeAnnotations"]["tandem-patch-call_1"]["needsConfirmation"],
            false
        );
    }

    #[test]
    fn the_title_summarizes_the_patch() {
        assert_eq!(
            ApplyPatch.title(&json!({"input": MULTI})),
            "Patch: Add new/added.txt, update src/lib.rs (2 hunks), move old_name.rs to moved/new_name.rs (1 hunk), delete gone.txt"
        );
        assert_eq!(ApplyPatch.title(&json!({"input": "garbage"})), "Patch");
    }
}
