//! Planning a patch: every file resolved, read and patched in memory before
//! anything changes, so a patch that does not fit anywhere changes nothing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::not_applied;
use crate::tools::edits::FileChange;
use crate::tools::patch::{apply_hunks, FileOp, Patch};
use crate::tools::{ToolContext, ToolError, ToolEvent};
use crate::vocab::bridge::{BridgeOutcome, ClientFile};
use crate::vocab::event::{FileDiff, ToolLocation};

/// A patch with every file's change computed and every path resolved.
pub(super) struct Plan {
    pub(super) summary: String,
    pub(super) files: Vec<PlannedFile>,
}

pub(super) struct PlannedFile {
    pub(super) change: FileChange,
    /// The path as shown to the model (root-relative when possible).
    pub(super) shown: String,
    /// The same for a move's target.
    pub(super) shown_to: Option<String>,
}

impl Plan {
    /// Resolves and reads every file and applies every hunk, touching
    /// nothing; any problem is an error naming the file. `client` holds the
    /// texts a client that owns the files gave (see [`client_texts`]); the
    /// others come from the buffer cache or the disk.
    pub(super) fn prepare(
        patch: &Patch,
        ctx: &ToolContext,
        client: &HashMap<PathBuf, String>,
    ) -> Result<Plan, ToolError> {
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
                    let (old_text, open) = read_current(ctx, client, &path, written, "delete")?;
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
                    let (old_text, open) = read_current(ctx, client, &path, written, "update")?;
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
    /// Then each file's location, at its first changed line (none for a
    /// deleted file), for editors that follow the agent.
    pub(super) fn emit_diffs(&self, ctx: &ToolContext) {
        let diffs = self.diffs();
        let locations = diffs.iter().map(first_change).collect();
        (ctx.emit)(ToolEvent::Diffs(diffs));
        (ctx.emit)(ToolEvent::Locations(locations));
    }

    /// The diffs [`Plan::emit_diffs`] sends (a permission request carries
    /// them too).
    pub(super) fn diffs(&self) -> Vec<FileDiff> {
        self.files
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
            .collect()
    }

    pub(super) fn all(&self) -> Vec<usize> {
        (0..self.files.len()).collect()
    }
}

/// With a client that owns the files (ACP's `fs/read_text_file`), the text
/// it has of every file the patch updates or deletes, so the patch applies
/// to what the user sees. A file it cannot read is left to the disk (the
/// client's error is usually "not found"; the plan then says so).
pub(super) async fn client_texts(
    patch: &Patch,
    ctx: &ToolContext,
) -> Result<HashMap<PathBuf, String>, ToolError> {
    let mut texts = HashMap::new();
    if !ctx.bridge.facilities().read_text_file {
        return Ok(texts);
    }
    for op in &patch.ops {
        if matches!(op, FileOp::Add { .. }) {
            continue;
        }
        let path = resolve(ctx, op.path())?;
        if path.is_dir() {
            continue;
        }
        let file = ClientFile {
            session_id: ctx.session_id.clone(),
            path: path.clone(),
        };
        match ctx.bridge.read_text_file(file, &ctx.cancel).await {
            BridgeOutcome::Answered(text) => {
                texts.insert(path, text);
            }
            BridgeOutcome::Cancelled => return Err(ToolError::new("cancelled")),
            BridgeOutcome::Unavailable(why) if path.exists() => {
                return Err(not_applied(format!(
                    "the editor could not read `{}`: {why}",
                    op.path()
                )))
            }
            BridgeOutcome::Unavailable(_) => {}
        }
    }
    Ok(texts)
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
pub(super) fn exists(ctx: &ToolContext, path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok() || ctx.buffers.snapshot(path).is_some()
}

/// The text the user sees, and the buffer it came from when open.
fn read_current(
    ctx: &ToolContext,
    client: &HashMap<PathBuf, String>,
    path: &Path,
    written: &str,
    verb: &str,
) -> Result<(String, Option<crate::buffers::Snapshot>), ToolError> {
    if let Some(text) = client.get(path) {
        return Ok((text.clone(), None));
    }
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

/// Where a file's change starts: its first line that differs (1-based).
fn first_change(diff: &FileDiff) -> ToolLocation {
    let old = diff.old_text.as_deref().unwrap_or_default();
    let line = (!diff.new_text.is_empty()).then(|| {
        let same = old
            .lines()
            .zip(diff.new_text.lines())
            .take_while(|(a, b)| a == b)
            .count();
        u32::try_from(same + 1).unwrap_or(u32::MAX)
    });
    ToolLocation {
        path: diff.path.clone(),
        line,
    }
}
