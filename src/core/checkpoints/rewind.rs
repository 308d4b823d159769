//! Rewinding: every file the turns from a user message on changed goes
//! back to its content before them — unless the user changed it since (a
//! conflict, with a diff, left alone unless forced).
//!
//! The plan reads only the log and the store. The run logs
//! `rewind_started` (synced) with the files it will write, makes the rewind
//! a checkpoint of its own (so it can be undone), then restores each file:
//! an open buffer through the editor (`workspace/applyEdit`, so its undo
//! works), a closed file by an atomic rename (never half written), each
//! followed by a `rewind_file`; then `checkpoint_end` and `rewound`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::store::{write_atomically, Store};
use super::{capture, read_state, workspace_key, Recording, SessionCheckpoints};
use crate::buffers::BufferCache;
use crate::config::checkpoints::CheckpointsConfig;
use crate::core::log::{LoggedEvent, SessionLog};
use crate::vocab::bridge::{ApplyEditRequest, BridgeOutcome, ClientBridge};
use crate::vocab::checkpoint::FileState;
pub use crate::vocab::checkpoint::RewindStatus;
use crate::vocab::edit::{EditPosition, EditProposal, FileEdit, TextReplace};
use crate::vocab::event::Event;

/// Which conflicting files to overwrite anyway.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Force {
    #[default]
    None,
    All,
    Paths(Vec<String>),
}

impl Force {
    fn covers(&self, path: &str) -> bool {
        match self {
            Force::None => false,
            Force::All => true,
            Force::Paths(paths) => paths.iter().any(|p| p == path),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewindFileReport {
    /// Absolute.
    pub path: String,
    pub status: RewindStatus,
    /// For a conflict: from what the agent left to what the file is now.
    pub diff: Option<String>,
    pub reason: Option<String>,
}

struct Planned {
    path: PathBuf,
    target: Option<FileState>,
    report: RewindFileReport,
}

/// A rewind's files, decided.
pub struct RewindPlan {
    files: Vec<Planned>,
}

impl RewindPlan {
    pub fn reports(&self) -> Vec<RewindFileReport> {
        self.files.iter().map(|f| f.report.clone()).collect()
    }
}

/// Where the changes to undo start in the log: the start of the turn that
/// entered user message `to`, or rewind `to` (a redo); `None` if neither.
pub fn rewind_start(events: &[LoggedEvent], to: &str) -> Option<usize> {
    let turn = events.iter().find_map(|e| match &e.event {
        Event::UserMessage {
            message_id,
            turn_id,
            ..
        } if message_id == to => Some(turn_id.clone()),
        _ => None,
    });
    match turn {
        Some(turn) => events
            .iter()
            .position(|e| matches!(&e.event, Event::TurnStart { turn_id } if *turn_id == turn)),
        None => events.iter().position(
            |e| matches!(&e.event, Event::RewindStarted { rewind_id, .. } if rewind_id == to),
        ),
    }
}

/// Decides each file: its state before the first checkpoint from `start`
/// on is the target; what the last of them left is what it must still be,
/// or the user changed it (a conflict, unless `force` covers it).
pub fn plan_rewind(
    events: &[LoggedEvent],
    start: usize,
    store: &Store,
    buffers: &BufferCache,
    force: &Force,
) -> RewindPlan {
    let mut targets: BTreeMap<String, Option<FileState>> = BTreeMap::new();
    let mut left: BTreeMap<String, Option<FileState>> = BTreeMap::new();
    for logged in &events[start.min(events.len())..] {
        match &logged.event {
            Event::Checkpoint { files, .. } => {
                for file in files {
                    targets
                        .entry(file.path.clone())
                        .or_insert_with(|| file.before.clone());
                    // Unknown until its checkpoint ends.
                    left.insert(file.path.clone(), None);
                }
            }
            Event::CheckpointEnd { files, .. } => {
                for file in files {
                    left.insert(file.path.clone(), Some(file.after.clone()));
                }
            }
            _ => {}
        }
    }
    let files = targets
        .into_iter()
        .map(|(path, target)| {
            let expected = left.get(&path).cloned().flatten();
            decide(
                PathBuf::from(&path),
                target,
                expected,
                store,
                buffers,
                force,
            )
        })
        .collect();
    RewindPlan { files }
}

fn decide(
    path: PathBuf,
    target: Option<FileState>,
    expected: Option<FileState>,
    store: &Store,
    buffers: &BufferCache,
    force: &Force,
) -> Planned {
    let shown = path.display().to_string();
    let report = |status, diff, reason: Option<&str>| RewindFileReport {
        path: shown.clone(),
        status,
        diff,
        reason: reason.map(str::to_string),
    };
    let Some(wanted) = &target else {
        return Planned {
            report: report(
                RewindStatus::Unrestorable,
                None,
                Some(
                    "changed by a command, cannot be restored: tandem had no prior content for it",
                ),
            ),
            path,
            target,
        };
    };
    if wanted.hash.as_ref().is_some_and(|h| !store.has(h)) {
        return Planned {
            report: report(
                RewindStatus::Unrestorable,
                None,
                Some("its checkpoint was pruned from the store"),
            ),
            path,
            target,
        };
    }
    let current = match read_state(&path, Some(buffers)) {
        Ok(now) => now,
        Err(e) => {
            let reason = format!("cannot read it: {e}");
            return Planned {
                report: report(RewindStatus::Failed, None, Some(&reason)),
                path,
                target,
            };
        }
    };
    let now = state_of(&current);
    if same(&now, wanted) {
        return Planned {
            report: report(RewindStatus::Unchanged, None, None),
            path,
            target,
        };
    }
    let agents = expected.as_ref().is_some_and(|e| same(&now, e));
    if agents || force.covers(&shown) {
        return Planned {
            report: report(RewindStatus::Restore, None, None),
            path,
            target,
        };
    }
    let before_user = expected
        .as_ref()
        .and_then(|e| e.hash.as_ref())
        .and_then(|h| store.get(h).ok().flatten());
    let diff = conflict_diff(
        &shown,
        before_user.as_deref(),
        current.as_ref().map(|c| c.0.as_slice()),
    );
    let reason = match expected {
        Some(_) => "changed since the agent's turn (on disk or unsaved in the editor); not overwritten without force",
        None => "what the agent left is not on record (its turn did not end); not overwritten without force",
    };
    Planned {
        report: report(RewindStatus::Conflict, Some(diff), Some(reason)),
        path,
        target,
    }
}

fn state_of(current: &Option<(Vec<u8>, Option<u32>)>) -> FileState {
    match current {
        None => FileState::absent(),
        Some((bytes, mode)) => FileState {
            hash: Some(super::store::hash_of(bytes)),
            mode: *mode,
        },
    }
}

/// Same content, and the same mode where both are known.
fn same(a: &FileState, b: &FileState) -> bool {
    a.hash == b.hash && (a.mode.is_none() || b.mode.is_none() || a.mode == b.mode)
}

fn conflict_diff(path: &str, agents: Option<&[u8]>, now: Option<&[u8]>) -> String {
    let text = |b: Option<&[u8]>| b.map(|b| String::from_utf8_lossy(b).into_owned());
    let (old, new) = (
        text(agents).unwrap_or_default(),
        text(now).unwrap_or_default(),
    );
    similar::TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("{path} (as the agent left it)"),
            &format!("{path} (now)"),
        )
        .to_string()
}

/// What a rewind runs with.
pub struct RewindRun<'a> {
    pub checkpoints: &'a Arc<SessionCheckpoints>,
    pub log: &'a SessionLog,
    pub buffers: &'a Arc<BufferCache>,
    pub bridge: &'a Arc<dyn ClientBridge>,
    pub roots: &'a [PathBuf],
    pub config: &'a CheckpointsConfig,
    pub rewind_id: &'a str,
    pub to_message_id: &'a str,
    pub conversation: bool,
    /// With `conversation`: the user messages it drops, and (a redo) those
    /// it brings back.
    pub dropped_messages: Vec<String>,
    pub restored_messages: Vec<String>,
}

/// Restores the plan's files and logs the rewind; returns each file's end.
pub async fn run_rewind(plan: RewindPlan, run: RewindRun<'_>) -> Vec<RewindFileReport> {
    let store = run.checkpoints.store().clone();
    let writes: Vec<&Planned> = plan
        .files
        .iter()
        .filter(|f| f.report.status == RewindStatus::Restore)
        .collect();
    run.log.append(Event::RewindStarted {
        rewind_id: run.rewind_id.to_string(),
        to_message_id: run.to_message_id.to_string(),
        files: writes.iter().map(|f| f.report.path.clone()).collect(),
        conversation: run.conversation,
    });
    // The rewind is a checkpoint: what it overwrites is stored first.
    let mut recording = Recording::new(run.rewind_id, workspace_key(run.roots));
    let mut befores = Vec::new();
    let lock = store.shared();
    for file in &writes {
        match capture(&store, &file.path, Some(run.buffers)) {
            Ok(state) => befores.push((file.path.clone(), Some(state), false)),
            Err(e) => tracing::warn!(
                "cannot store {} before the rewind: {e}",
                file.path.display()
            ),
        }
    }
    if let Err(e) = run.checkpoints.record(&mut recording, befores, run.log) {
        tracing::warn!("the rewind's own checkpoint was not recorded: {e}");
    }
    drop(lock);
    let pause = test_pause();
    let mut reports = Vec::new();
    let mut afters = Vec::new();
    for file in &plan.files {
        let mut report = file.report.clone();
        if report.status == RewindStatus::Restore {
            let target = file.target.clone().unwrap_or_default();
            match restore(&file.path, &target, &store, run.buffers, run.bridge).await {
                Ok(()) => {
                    report.status = RewindStatus::Restored;
                    run.log.append(Event::RewindFile {
                        rewind_id: run.rewind_id.to_string(),
                        path: report.path.clone(),
                    });
                    afters.push((file.path.clone(), target));
                    if let Some(pause) = pause {
                        run.log.sync();
                        tokio::time::sleep(pause).await;
                    }
                }
                Err(reason) => {
                    report.status = RewindStatus::Failed;
                    report.reason = Some(reason);
                    if let Ok(state) = capture(&store, &file.path, Some(run.buffers)) {
                        afters.push((file.path.clone(), state));
                    }
                }
            }
        }
        reports.push(report);
    }
    run.checkpoints
        .finish(recording, afters, run.log, run.config);
    let named = |status: RewindStatus| -> Vec<String> {
        reports
            .iter()
            .filter(|r| r.status == status)
            .map(|r| r.path.clone())
            .collect()
    };
    run.log.append(Event::Rewound {
        rewind_id: run.rewind_id.to_string(),
        to_message_id: run.to_message_id.to_string(),
        conversation: run.conversation,
        restored: named(RewindStatus::Restored),
        conflicts: named(RewindStatus::Conflict),
        unrestorable: named(RewindStatus::Unrestorable),
        untouched: Vec::new(),
        dropped_messages: run.dropped_messages,
        restored_messages: run.restored_messages,
    });
    reports
}

/// `TANDEM_TEST_REWIND_PAUSE_MS`: a pause after each restored file, so a
/// test can kill the daemon in the middle of a rewind.
fn test_pause() -> Option<std::time::Duration> {
    std::env::var("TANDEM_TEST_REWIND_PAUSE_MS")
        .ok()?
        .parse()
        .ok()
        .map(std::time::Duration::from_millis)
}

/// Puts one file back: through the editor when it is open there (so its
/// undo works), else on disk atomically, with its mode.
async fn restore(
    path: &Path,
    target: &FileState,
    store: &Store,
    buffers: &BufferCache,
    bridge: &Arc<dyn ClientBridge>,
) -> Result<(), String> {
    let abilities = bridge.abilities();
    let open = buffers.snapshot(path);
    let Some(hash) = &target.hash else {
        if open.is_some() && abilities.apply_edit && abilities.resource_operations {
            let edit = EditProposal {
                changes: vec![FileEdit::Delete {
                    path: path.to_path_buf(),
                }],
                annotation: None,
            };
            return through_editor(edit, bridge).await;
        }
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(format!("cannot delete it: {e}"))
            }
            _ => Ok(()),
        };
    };
    let bytes = store
        .get(hash)
        .map_err(|e| format!("cannot read its stored content: {e}"))?
        .ok_or_else(|| "its stored content is gone (pruned)".to_string())?;
    if let (Some(snapshot), true) = (&open, abilities.apply_edit) {
        if let Ok(text) = String::from_utf8(bytes.clone()) {
            let end = snapshot.char_to_position(snapshot.rope.len_chars(), buffers.encoding());
            let edit = EditProposal {
                changes: vec![FileEdit::Text {
                    path: path.to_path_buf(),
                    version: Some(snapshot.version),
                    edits: vec![TextReplace {
                        start: EditPosition::default(),
                        end: EditPosition {
                            line: end.line,
                            character: end.character,
                        },
                        new_text: text,
                    }],
                }],
                annotation: None,
            };
            return through_editor(edit, bridge).await;
        }
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    write_atomically(path, &bytes, target.mode).map_err(|e| format!("cannot write it: {e}"))
}

async fn through_editor(edit: EditProposal, bridge: &Arc<dyn ClientBridge>) -> Result<(), String> {
    let request = ApplyEditRequest {
        edit,
        label: "tandem: restore checkpoint".to_string(),
    };
    match bridge.apply_edit(request, &CancellationToken::new()).await {
        BridgeOutcome::Answered(answer) if answer.applied => Ok(()),
        BridgeOutcome::Answered(answer) => Err(format!(
            "the editor did not apply the restore{}",
            answer
                .failure_reason
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        )),
        BridgeOutcome::Cancelled => Err("the editor cancelled the restore".to_string()),
        BridgeOutcome::Unavailable(why) => Err(format!("the editor cannot apply it: {why}")),
    }
}
