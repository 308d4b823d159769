//! The scan around a command: every workspace file (the walker `list_files`
//! uses, so gitignored files are out) by size and modification time,
//! before and after, and the paths that differ. Contents are never read
//! here; only the changed files are hashed, by the caller.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use ignore::WalkState;

use crate::workspace::walk_builder;

/// The size and mtime of every visible file under some roots.
#[derive(Debug, Default)]
pub struct Stats(HashMap<PathBuf, (u64, Option<SystemTime>)>);

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
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(entry.into_path(), (meta.len(), meta.modified().ok()));
                }
                WalkState::Continue
            })
        });
    }
    Stats(found.into_inner().unwrap_or_else(|e| e.into_inner()))
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
}
