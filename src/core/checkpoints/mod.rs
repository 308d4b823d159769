//! Checkpoints: the prior content of every file a turn changes, kept so a
//! turn can be undone (`tandem/rewind`) without git and without losing the
//! user's own work.
//!
//! Before the first change a turn makes to a file (an `apply_patch` about
//! to write it, found by parsing the patch), the file as the user sees it
//! (the buffer when open, else the disk: bytes and mode, or absent) goes
//! into the content-addressed [`store`] and a `checkpoint` event names it.
//! Around each `exec_command` the workspace is scanned ([`scan`]); the files
//! a command changed get the content tandem held for them from before the
//! command (files of earlier checkpoints and open ones, read just before),
//! or are listed as unrestorable. At the turn's end `checkpoint_end`
//! records what the turn left, which a rewind compares with the files then
//! to tell the user's later changes (conflicts) from the agent's.
//!
//! **Invariant:** never runs git, never touches `.git`; every content a
//! `checkpoint` event names is in the store before the change it precedes.

mod conversation;
mod listing;
mod recovery;
mod rewind;
pub mod scan;
pub mod store;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;

pub use self::conversation::{
    dropped_by_rewinds, is_conversation_rewind, messages_to_drop, redo_effect,
};
pub use self::listing::render_checkpoints;
pub use self::recovery::recover_rewinds;
pub use self::rewind::{
    plan_rewind, rewind_start, run_rewind, Force, RewindFileReport, RewindPlan, RewindRun,
    RewindStatus,
};
use self::scan::{ScanCache, Stat, Stats};
use self::store::{Bounds, Manifest, Store};
use crate::buffers::BufferCache;
use crate::config::checkpoints::CheckpointsConfig;
use crate::core::log::SessionLog;
use crate::tools::patch::{parse_patch, FileOp};
use crate::tools::ToolContext;
use crate::vocab::checkpoint::{CheckpointAfter, CheckpointFile, FileState};
use crate::vocab::event::Event;

/// A session's checkpoints: the one being made by the running turn, and
/// the files earlier ones covered.
pub struct SessionCheckpoints {
    store: Store,
    session_id: String,
    turn: Mutex<Option<Recording>>,
    /// Files of this session's checkpoints: their content before a command
    /// is read, so a command's change to them can be undone.
    seen: Mutex<BTreeSet<PathBuf>>,
    /// A rewind of the conversation was logged since the session task
    /// last built its context.
    conversation_rewound: std::sync::atomic::AtomicBool,
    /// Held while a rewind runs: one at a time.
    rewinding: tokio::sync::Mutex<()>,
    /// The last walk of this turn and known files' stored states.
    scans: Mutex<ScanCache>,
}

/// One checkpoint being made (a turn's, or a rewind's).
pub struct Recording {
    pub id: String,
    workspace: String,
    created_ms: u64,
    files: BTreeMap<PathBuf, Option<FileState>>,
    /// Files a command changed: what the turn left of them is the disk's
    /// (an editor reloads a clean buffer later).
    by_command: BTreeSet<PathBuf>,
    objects: BTreeSet<String>,
}

impl Recording {
    pub fn new(id: &str, workspace: String) -> Self {
        Recording {
            id: id.to_string(),
            workspace,
            created_ms: store::now_ms(),
            files: BTreeMap::new(),
            by_command: BTreeSet::new(),
            objects: BTreeSet::new(),
        }
    }

    fn manifest(&self, session: &str) -> Manifest {
        Manifest {
            created_ms: self.created_ms,
            session: session.to_string(),
            turn: self.id.clone(),
            workspace: self.workspace.clone(),
            objects: self.objects.clone(),
        }
    }
}

/// The key a workspace's checkpoints are counted under.
pub fn workspace_key(roots: &[PathBuf]) -> String {
    roots
        .first()
        .map(|r| r.display().to_string())
        .unwrap_or_default()
}

/// Reads a file as the user sees it (the buffer when open) into the store.
pub fn capture(store: &Store, path: &Path, buffers: Option<&BufferCache>) -> io::Result<FileState> {
    match read_state(path, buffers)? {
        None => Ok(FileState::absent()),
        Some((bytes, mode)) => Ok(FileState {
            hash: Some(store.put(&bytes)?),
            mode,
        }),
    }
}

/// A file's bytes (the buffer's text when open) and mode; `None`: absent.
pub fn read_state(
    path: &Path,
    buffers: Option<&BufferCache>,
) -> io::Result<Option<(Vec<u8>, Option<u32>)>> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(path).ok();
    let mode = meta.as_ref().map(|m| m.permissions().mode() & 0o7777);
    if let Some(snapshot) = buffers.and_then(|b| b.snapshot(path)) {
        return Ok(Some((snapshot.rope.to_string().into_bytes(), mode)));
    }
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some((bytes, mode))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) if meta.as_ref().is_some_and(|m| m.is_dir()) => Err(io::Error::other(format!(
            "{} is a directory: {e}",
            path.display()
        ))),
        Err(e) => Err(e),
    }
}

/// The home a session log lives under (`$TANDEM_HOME/sessions/<id>.jsonl`).
fn home_of(log: &Path) -> PathBuf {
    log.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

impl SessionCheckpoints {
    pub fn for_log(session_id: &str, log: &Path) -> Self {
        SessionCheckpoints {
            store: Store::new(&home_of(log)),
            session_id: session_id.to_string(),
            turn: Mutex::new(None),
            seen: Mutex::new(BTreeSet::new()),
            conversation_rewound: Default::default(),
            rewinding: tokio::sync::Mutex::new(()),
            scans: Mutex::new(ScanCache::default()),
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The right to rewind; `None` while another rewind runs.
    pub fn rewinding(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        self.rewinding.try_lock().ok()
    }

    /// Says the next turn must rebuild the model's context from the log.
    pub fn mark_conversation_rewound(&self) {
        self.conversation_rewound
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether a rewind of the conversation happened since last asked.
    pub fn take_conversation_rewound(&self) -> bool {
        self.conversation_rewound
            .swap(false, std::sync::atomic::Ordering::SeqCst)
    }

    /// A known file's disk content, stored; read and hashed again only
    /// when its size, mtime or mode changed since it was last stored here.
    fn known_state(&self, path: &Path, key: Option<(Stat, u32)>) -> io::Result<FileState> {
        if let Some(key) = key {
            let cached = self.scans.lock().state(path, key);
            if let Some(state) =
                cached.filter(|s| s.hash.as_deref().is_some_and(|h| self.store.has(h)))
            {
                return Ok(state);
            }
        }
        let state = capture(&self.store, path, None)?;
        if let Some(key) = key.filter(|k| scan::file_key(path) == Some(*k)) {
            self.scans
                .lock()
                .remember(path.to_path_buf(), key, state.clone());
        }
        Ok(state)
    }

    /// Adds `files` (those not yet in it) to `recording`, their content
    /// already stored, and logs them as a `checkpoint` (fsynced: it is a
    /// durable boundary) with the manifest written first.
    pub fn record(
        &self,
        recording: &mut Recording,
        files: Vec<(PathBuf, Option<FileState>, bool)>,
        log: &SessionLog,
    ) -> io::Result<()> {
        let mut logged = Vec::new();
        for (path, before, by_command) in files {
            if recording.files.contains_key(&path) {
                continue;
            }
            if let Some(hash) = before.as_ref().and_then(|b| b.hash.clone()) {
                recording.objects.insert(hash);
            }
            recording.files.insert(path.clone(), before.clone());
            if by_command {
                recording.by_command.insert(path.clone());
            }
            logged.push(CheckpointFile {
                path: path.display().to_string(),
                before,
                by_command,
            });
        }
        if logged.is_empty() {
            return Ok(());
        }
        self.store
            .write_manifest(&recording.manifest(&self.session_id))?;
        log.append(Event::Checkpoint {
            turn_id: recording.id.clone(),
            files: logged,
        });
        Ok(())
    }

    /// Logs what a checkpoint's files are now (`checkpoint_end`), their
    /// content stored, then prunes the store to its bounds.
    pub fn finish(
        &self,
        mut recording: Recording,
        afters: Vec<(PathBuf, FileState)>,
        log: &SessionLog,
        config: &CheckpointsConfig,
    ) {
        let mut files = Vec::new();
        for (path, after) in afters {
            if let Some(hash) = &after.hash {
                recording.objects.insert(hash.clone());
            }
            files.push(CheckpointAfter {
                path: path.display().to_string(),
                after,
            });
        }
        if let Err(e) = self
            .store
            .write_manifest(&recording.manifest(&self.session_id))
        {
            tracing::warn!("cannot write the checkpoint manifest: {e}");
        }
        log.append(Event::CheckpointEnd {
            turn_id: recording.id.clone(),
            files,
        });
        self.seen.lock().extend(recording.files.keys().cloned());
        let keep = self
            .store
            .manifest_path(recording.created_ms, &self.session_id, &recording.id);
        let bounds = Bounds {
            keep_days: config.keep_days,
            max_bytes: config.max_bytes,
        };
        match self.store.prune(&recording.workspace, &keep, bounds) {
            Ok(Some(pruned)) if pruned.checkpoints > 0 || pruned.objects > 0 => {
                tracing::debug!(?pruned, "checkpoints pruned");
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("cannot prune the checkpoint store: {e}"),
        }
    }

    fn with_turn<T>(
        &self,
        turn_id: &str,
        roots: &[PathBuf],
        f: impl FnOnce(&mut Recording) -> T,
    ) -> T {
        let mut turn = self.turn.lock();
        if turn.as_ref().is_none_or(|r| r.id != turn_id) {
            *turn = Some(Recording::new(turn_id, workspace_key(roots)));
        }
        f(turn.as_mut().expect("just set"))
    }

    /// Before an `apply_patch` runs: the files it names (created, updated,
    /// deleted, moved from and to) as they are now.
    pub async fn before_patch(
        self: &Arc<Self>,
        turn_id: &str,
        args: &Value,
        ctx: &ToolContext,
        log: &Arc<SessionLog>,
    ) {
        let Some(input) = args
            .get("input")
            .or_else(|| args.get("patch"))
            .and_then(Value::as_str)
        else {
            return;
        };
        let Ok(patch) = parse_patch(input) else {
            return;
        };
        let mut paths = Vec::new();
        for op in &patch.ops {
            let mut names = vec![op.path()];
            if let FileOp::Update {
                move_to: Some(to), ..
            } = op
            {
                names.push(to.as_str());
            }
            for name in names {
                if let Ok(path) = ctx.workspace.resolve(name) {
                    paths.push(path);
                }
            }
        }
        let (this, turn_id, buffers, roots, log) = (
            self.clone(),
            turn_id.to_string(),
            ctx.buffers.clone(),
            ctx.workspace.roots(),
            log.clone(),
        );
        let done = tokio::task::spawn_blocking(move || -> io::Result<()> {
            let _lock = this.store.shared()?;
            let mut files = Vec::new();
            for path in paths {
                let state = capture(&this.store, &path, Some(&buffers))?;
                files.push((path, Some(state), false));
            }
            this.with_turn(&turn_id, &roots, |rec| this.record(rec, files, &log))
        })
        .await;
        report_failure(done);
    }

    /// Before an `exec_command` runs: the workspace's sizes and mtimes,
    /// and the content of the files tandem can restore (open ones and
    /// those of this session's checkpoints). `None` when scans are off.
    pub async fn before_command(
        self: &Arc<Self>,
        config: &CheckpointsConfig,
        ctx: &ToolContext,
        turn_id: &str,
    ) -> Option<CommandWatch> {
        if !config.scan_commands {
            return None;
        }
        let roots = ctx.workspace.roots();
        if roots.is_empty() {
            return None;
        }
        let mut known: Vec<PathBuf> = ctx.buffers.open_paths();
        known.extend(self.seen.lock().iter().cloned());
        if let Some(turn) = &*self.turn.lock() {
            known.extend(turn.files.keys().cloned());
        }
        let (this, turn_id) = (self.clone(), turn_id.to_string());
        let watch = tokio::task::spawn_blocking(move || -> io::Result<CommandWatch> {
            let reused = this.scans.lock().take_walk(&turn_id, &roots);
            let stats = reused.unwrap_or_else(|| scan::stat_tree(&roots));
            let _lock = this.store.shared()?;
            let mut states = HashMap::new();
            let mut fresh = HashMap::new();
            for path in known {
                if roots.iter().any(|r| path.starts_with(r)) {
                    let key = scan::file_key(&path);
                    fresh.insert(path.clone(), key.map(|(stat, _)| stat));
                    // The disk's content: a command changes the disk.
                    if let Ok(state) = this.known_state(&path, key) {
                        states.insert(path, state);
                    }
                }
            }
            Ok(CommandWatch {
                roots,
                stats,
                fresh,
                known: states,
            })
        })
        .await;
        match watch {
            Ok(Ok(watch)) => Some(watch),
            other => {
                report_failure(other.map(|r| r.map(|_| ())));
                None
            }
        }
    }

    /// After a command: the files it changed join the turn's checkpoint,
    /// with the content noted before it ran, or as unrestorable.
    pub async fn after_command(
        self: &Arc<Self>,
        watch: CommandWatch,
        turn_id: &str,
        log: &Arc<SessionLog>,
    ) {
        let (this, turn_id, log) = (self.clone(), turn_id.to_string(), log.clone());
        let done = tokio::task::spawn_blocking(move || -> io::Result<()> {
            let taken = std::time::Instant::now();
            let after = scan::stat_tree(&watch.roots);
            let changed = scan::changed_around(&watch.stats, &after, &watch.fresh);
            this.scans
                .lock()
                .keep_walk(&turn_id, &watch.roots, after, taken);
            if changed.is_empty() {
                return Ok(());
            }
            let _lock = this.store.shared()?;
            let files = changed
                .into_iter()
                .map(|path| {
                    let before = match watch.known.get(&path) {
                        Some(state) => Some(state.clone()),
                        None if !watch.stats.contains(&path) => Some(FileState::absent()),
                        None => None,
                    };
                    (path, before, true)
                })
                .collect();
            this.with_turn(&turn_id, &watch.roots, |rec| this.record(rec, files, &log))
        })
        .await;
        report_failure(done);
    }

    /// At a turn's end: what it left of its checkpoint's files.
    pub async fn end_turn(
        self: &Arc<Self>,
        turn_id: &str,
        buffers: &Arc<BufferCache>,
        log: &Arc<SessionLog>,
        config: &CheckpointsConfig,
    ) {
        self.scans.lock().forget_walk();
        let recording = {
            let mut turn = self.turn.lock();
            match turn.take() {
                Some(rec) if rec.id == turn_id => rec,
                _ => return,
            }
        };
        let (this, buffers, log, config) =
            (self.clone(), buffers.clone(), log.clone(), config.clone());
        let done = tokio::task::spawn_blocking(move || -> io::Result<()> {
            let afters = {
                let _lock = this.store.shared()?;
                let mut afters = Vec::new();
                for path in recording.files.keys() {
                    let buffers = (!recording.by_command.contains(path)).then_some(&*buffers);
                    afters.push((path.clone(), capture(&this.store, path, buffers)?));
                }
                afters
            };
            this.finish(recording, afters, &log, &config);
            Ok(())
        })
        .await;
        report_failure(done);
    }
}

/// What was noted before a command ran.
pub struct CommandWatch {
    roots: Vec<PathBuf>,
    stats: Stats,
    /// The known files' size and mtime just before the command.
    fresh: HashMap<PathBuf, Option<Stat>>,
    known: HashMap<PathBuf, FileState>,
}

fn report_failure(done: Result<io::Result<()>, tokio::task::JoinError>) {
    match done {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!("checkpoint not recorded: {e}"),
        Err(e) => tracing::warn!("checkpoint not recorded: {e}"),
    }
}

/// How `tandem replay` shows a checkpoint or rewind event.
pub fn replay_line(event: &Event) -> Option<String> {
    match event {
        Event::Checkpoint { turn_id, files } => {
            let names: Vec<String> = files
                .iter()
                .map(|f| match (&f.before, f.by_command) {
                    (None, _) => format!("{} (changed by a command, cannot be restored)", f.path),
                    (Some(b), true) if !b.exists() => format!("{} (created by a command)", f.path),
                    (Some(_), true) => format!("{} (changed by a command)", f.path),
                    (Some(b), false) if !b.exists() => format!("{} (new)", f.path),
                    (Some(_), false) => f.path.clone(),
                })
                .collect();
            Some(format!("checkpoint {turn_id}: {}", names.join(", ")))
        }
        Event::CheckpointEnd { .. } | Event::RewindFile { .. } => None,
        Event::RewindStarted {
            rewind_id,
            to_message_id,
            files,
            conversation,
        } => Some(format!(
            "rewind {rewind_id} to before {to_message_id} started: {} file(s){}",
            files.len(),
            if *conversation {
                " and the conversation"
            } else {
                ""
            }
        )),
        Event::Rewound {
            rewind_id,
            to_message_id,
            conversation,
            restored,
            conflicts,
            unrestorable,
            untouched,
            ..
        } => {
            let mut parts = vec![format!("{} restored", restored.len())];
            if !untouched.is_empty() {
                parts.push(format!(
                    "the daemon stopped during it; not written: {}",
                    untouched.join(", ")
                ));
            }
            if !conflicts.is_empty() {
                parts.push(format!("conflicts (left alone): {}", conflicts.join(", ")));
            }
            if !unrestorable.is_empty() {
                parts.push(format!("cannot be restored: {}", unrestorable.join(", ")));
            }
            if *conversation {
                parts.push(format!("the conversation now ends before {to_message_id}"));
            }
            Some(format!("rewound {rewind_id}: {}", parts.join("; ")))
        }
        _ => None,
    }
}
