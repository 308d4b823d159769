//! The scan around a command: every workspace file (the walker `list_files`
//! uses, so gitignored files are out) by size and modification time,
//! before and after, and the paths that differ. Contents are never read
//! here; only the changed files are hashed, by the caller.
//!
//! Incremental within a turn ([`ScanCache`]): the walk after one command
//! is the walk before the next, so a command costs one walk, not two. The
//! files tandem knows may change between two commands (the turn's patched
//! files, open buffers, files of earlier checkpoints) are not taken from
//! that walk but stat'ed afresh around each command ([`changed_around`]).
//! A file outside those that another program changes between two commands
//! of one turn is counted as the next command's change (listed, never
//! overwritten). The content of a known file is hashed again only when its
//! size, mtime or mode changed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use ignore::WalkState;
use parking_lot::Mutex;

use crate::vocab::checkpoint::FileState;
use crate::workspace::walk_builder;

/// A file's size and mtime.
pub type Stat = (u64, Option<SystemTime>);

/// The size and mtime of every visible file under some roots.
#[derive(Debug, Default)]
pub struct Stats(HashMap<PathBuf, Stat>);

impl Stats {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, path: &Path) -> bool {
        self.0.contains_key(path)
    }
}

/// Walks `roots` (in parallel) and notes each file's size and mtime.
pub fn stat_tree(roots: &[PathBuf]) -> Stats {
    let found = Mutex::new(HashMap::new());
    for root in roots {
        walk_builder(root).build_parallel().run(|| {
            let found = &found;
            Box::new(move |entry| {
                let Ok(entry) = entry else {
                    return WalkState::Continue;
                };
                if !entry.file_type().is_some_and(|t| t.is_file()) {
                    return WalkState::Continue;
                }
                if let Ok(meta) = entry.metadata() {
                    found
                        .lock()
                        .insert(entry.into_path(), (meta.len(), meta.modified().ok()));
                }
                WalkState::Continue
            })
        });
    }
    Stats(found.into_inner())
}

/// The files created, deleted or changed (size or mtime) between two scans,
/// sorted.
pub fn changed(before: &Stats, after: &Stats) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = after
        .0
        .iter()
        .filter(|(path, stat)| before.0.get(*path) != Some(stat))
        .map(|(path, _)| path.clone())
        .chain(
            before
                .0
                .keys()
                .filter(|path| !after.0.contains_key(*path))
                .cloned(),
        )
        .collect();
    paths.sort();
    paths
}

/// A file's size, mtime and mode as `stat` says now; `None` when absent.
pub fn file_key(path: &Path) -> Option<(Stat, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(path).ok()?;
    Some((
        (meta.len(), meta.modified().ok()),
        meta.permissions().mode() & 0o7777,
    ))
}

/// The files a command changed: the walks' difference for the files not
/// in `known`, and for those in `known` (stat'ed just before the command)
/// whether `stat` says they differ now. Sorted.
pub fn changed_around(
    before: &Stats,
    after: &Stats,
    known: &HashMap<PathBuf, Option<Stat>>,
) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = changed(before, after)
        .into_iter()
        .filter(|path| !known.contains_key(path))
        .chain(
            known
                .iter()
                .filter(|(path, stat)| file_key(path).map(|(s, _)| s) != **stat)
                .map(|(path, _)| path.clone()),
        )
        .collect();
    paths.sort();
    paths
}

/// What one session keeps between its commands: the last walk (for the
/// turn it was taken in) and the stored content of known files by their
/// size, mtime and mode.
#[derive(Default)]
pub struct ScanCache {
    last: Option<LastWalk>,
    states: HashMap<PathBuf, ((Stat, u32), FileState)>,
}

struct LastWalk {
    turn: String,
    roots: Vec<PathBuf>,
    stats: Stats,
    taken: Instant,
}

impl ScanCache {
    /// The walk after this turn's last command, when it covered `roots`;
    /// taken (a command running at the same time walks for itself).
    pub fn take_walk(&mut self, turn: &str, roots: &[PathBuf]) -> Option<Stats> {
        match self.last.take() {
            Some(last) if last.turn == turn && last.roots == roots => Some(last.stats),
            _ => None,
        }
    }

    /// Keeps a walk taken after a command, unless a later one is kept.
    pub fn keep_walk(&mut self, turn: &str, roots: &[PathBuf], stats: Stats, taken: Instant) {
        if self
            .last
            .as_ref()
            .is_some_and(|last| last.turn == turn && last.taken > taken)
        {
            return;
        }
        self.last = Some(LastWalk {
            turn: turn.to_string(),
            roots: roots.to_vec(),
            stats,
            taken,
        });
    }

    /// Drops the walk (a turn ended).
    pub fn forget_walk(&mut self) {
        self.last = None;
    }

    /// The stored state of `path` when it was read with this key.
    pub fn state(&self, path: &Path, key: (Stat, u32)) -> Option<FileState> {
        self.states
            .get(path)
            .filter(|(k, _)| *k == key)
            .map(|(_, state)| state.clone())
    }

    pub fn remember(&mut self, path: PathBuf, key: (Stat, u32), state: FileState) {
        self.states.insert(path, (key, state));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_finds_created_changed_and_deleted_files_but_not_ignored_ones() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        std::fs::write(root.join(".gitignore"), "build/\n").unwrap();
        std::fs::write(root.join("same.txt"), "same").unwrap();
        std::fs::write(root.join("grows.txt"), "a").unwrap();
        std::fs::write(root.join("goes.txt"), "x").unwrap();
        std::fs::create_dir(root.join("build")).unwrap();
        let before = stat_tree(std::slice::from_ref(&root));
        std::fs::write(root.join("grows.txt"), "ab").unwrap();
        std::fs::remove_file(root.join("goes.txt")).unwrap();
        std::fs::write(root.join("new.txt"), "n").unwrap();
        std::fs::write(root.join("build/out.o"), "o").unwrap();
        let after = stat_tree(std::slice::from_ref(&root));
        let names: Vec<String> = changed(&before, &after)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["goes.txt", "grows.txt", "new.txt"]);
    }

    #[test]
    fn known_files_are_compared_by_a_fresh_stat_not_by_the_walk() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        std::fs::write(root.join("walked.txt"), "w").unwrap();
        std::fs::write(root.join("known.txt"), "k").unwrap();
        // The walk after the previous command, reused as this one's before.
        let before = stat_tree(std::slice::from_ref(&root));
        // Between the two commands a patch creates and changes known files.
        std::fs::write(root.join("patched.txt"), "p").unwrap();
        std::fs::write(root.join("known.txt"), "kk").unwrap();
        let known: HashMap<PathBuf, Option<Stat>> = ["patched.txt", "known.txt", "open.txt"]
            .iter()
            .map(|n| (root.join(n), file_key(&root.join(n)).map(|(s, _)| s)))
            .collect();
        // The command changes the walked file and one known file.
        std::fs::write(root.join("walked.txt"), "ww").unwrap();
        std::fs::write(root.join("open.txt"), "o").unwrap();
        let after = stat_tree(std::slice::from_ref(&root));
        let names: Vec<String> = changed_around(&before, &after, &known)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["open.txt", "walked.txt"]);
    }

    #[test]
    fn a_walk_is_reused_only_in_its_turn_and_roots_and_only_once() {
        let roots = vec![PathBuf::from("/w")];
        let mut cache = ScanCache::default();
        let now = Instant::now();
        cache.keep_walk("t1", &roots, Stats::default(), now);
        assert!(cache.take_walk("t2", &roots).is_none());
        cache.keep_walk("t1", &roots, Stats::default(), now);
        assert!(cache.take_walk("t1", &[PathBuf::from("/v")]).is_none());
        cache.keep_walk("t1", &roots, Stats::default(), now);
        assert!(cache.take_walk("t1", &roots).is_some());
        assert!(cache.take_walk("t1", &roots).is_none());
        // An older walk (a command that ended later but walked earlier)
        // does not replace a newer one.
        let mut newer = Stats::default();
        newer.0.insert(PathBuf::from("/w/a"), (1, None));
        cache.keep_walk("t1", &roots, newer, now);
        cache.keep_walk(
            "t1",
            &roots,
            Stats::default(),
            now - std::time::Duration::from_secs(1),
        );
        assert_eq!(cache.take_walk("t1", &roots).unwrap().len(), 1);
        cache.keep_walk("t1", &roots, Stats::default(), now);
        cache.forget_walk();
        assert!(cache.take_walk("t1", &roots).is_none());
    }

    #[test]
    fn a_known_state_is_reused_only_for_the_same_size_mtime_and_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        std::fs::write(&path, "one").unwrap();
        let key = file_key(&path).unwrap();
        let mut cache = ScanCache::default();
        let state = FileState {
            hash: Some("h".into()),
            mode: Some(key.1),
        };
        cache.remember(path.clone(), key, state.clone());
        assert_eq!(cache.state(&path, key), Some(state));
        std::fs::write(&path, "three").unwrap();
        assert_eq!(cache.state(&path, file_key(&path).unwrap()), None);
    }
}
