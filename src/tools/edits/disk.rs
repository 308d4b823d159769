//! The disk route: atomic writes (staged in temporary files, then renamed
//! into place) so that either every file of a set changes or, when staging
//! fails, none does.

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use super::FileChange;

/// What to do on disk for a set of changes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DiskChanges {
    pub writes: Vec<DiskWrite>,
    /// Files removed once every write has landed (deletes, move sources).
    pub removals: Vec<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskWrite {
    pub path: PathBuf,
    pub text: String,
    /// The file whose permissions the new file keeps (the one it replaces
    /// or was moved from), so an executable script stays executable.
    pub permissions_of: Option<PathBuf>,
}

impl DiskChanges {
    pub fn of<'a>(changes: impl IntoIterator<Item = &'a FileChange>) -> DiskChanges {
        let mut disk = DiskChanges::default();
        for change in changes {
            match change {
                FileChange::Add { path, text } => disk.writes.push(DiskWrite {
                    path: path.clone(),
                    text: text.clone(),
                    permissions_of: None,
                }),
                FileChange::Delete { path, .. } => disk.removals.push(path.clone()),
                FileChange::Update {
                    path,
                    move_to,
                    update,
                    ..
                } => {
                    disk.writes.push(DiskWrite {
                        path: move_to.clone().unwrap_or_else(|| path.clone()),
                        text: update.new_text.clone(),
                        permissions_of: Some(path.clone()),
                    });
                    if move_to.is_some() {
                        disk.removals.push(path.clone());
                    }
                }
            }
        }
        disk
    }
}

/// Why the disk could not take a set of changes.
#[derive(Debug, thiserror::Error)]
#[error("{action} `{}`: {source}", .path.display())]
pub struct DiskError {
    pub action: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
    /// Files already changed when the error happened; empty when the error
    /// came while staging, before anything was touched.
    pub changed: Vec<PathBuf>,
}

/// Writes every file through a temporary file in its own directory, then
/// renames them all into place, then removes what is removed. A failure
/// while staging (a full disk, a path under a file, no permission) removes
/// the temporary files and the directories it created, leaving the disk as
/// it was. Renames within a directory do not fail in practice; if one did,
/// [`DiskError::changed`] says what had already landed.
pub fn apply_to_disk(changes: &DiskChanges) -> Result<(), DiskError> {
    let mut staged = Staged::default();
    for write in &changes.writes {
        if let Err(error) = staged.stage(write) {
            staged.discard();
            return Err(error);
        }
    }
    let mut changed = Vec::new();
    for (temp, path) in std::mem::take(&mut staged.temps) {
        if let Err(source) = std::fs::rename(&temp, &path) {
            let _ = std::fs::remove_file(&temp);
            return Err(DiskError {
                action: "cannot move the new text into place at",
                path,
                source,
                changed,
            });
        }
        changed.push(path);
    }
    for path in &changes.removals {
        match std::fs::remove_file(path) {
            Ok(()) => changed.push(path.clone()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(DiskError {
                    action: "cannot remove",
                    path: path.clone(),
                    source,
                    changed,
                })
            }
        }
    }
    Ok(())
}

/// Creates an empty file (and its missing parent directories) that must
/// not exist yet, for an editor that cannot create files itself.
pub fn create_empty_file(path: &Path) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map(drop)
}

/// Temporary files written so far, and directories created for them.
#[derive(Default)]
struct Staged {
    /// (temporary file, final path)
    temps: Vec<(PathBuf, PathBuf)>,
    created_dirs: Vec<PathBuf>,
}

impl Staged {
    fn stage(&mut self, write: &DiskWrite) -> Result<(), DiskError> {
        let fail = |action, source| DiskError {
            action,
            path: write.path.clone(),
            source,
            changed: Vec::new(),
        };
        let parent = write.path.parent().ok_or_else(|| {
            fail(
                "cannot write",
                io::Error::new(io::ErrorKind::InvalidInput, "the path has no parent folder"),
            )
        })?;
        self.create_dirs(parent)
            .map_err(|e| fail("cannot create the folder for", e))?;
        let (temp, mut file) =
            create_temp(parent, &write.path).map_err(|e| fail("cannot write", e))?;
        self.temps.push((temp.clone(), write.path.clone()));
        file.write_all(write.text.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| fail("cannot write", e))?;
        if let Some(permissions) = write
            .permissions_of
            .as_ref()
            .and_then(|from| std::fs::metadata(from).ok())
            .map(|m| m.permissions())
        {
            std::fs::set_permissions(&temp, permissions).map_err(|e| fail("cannot write", e))?;
        }
        Ok(())
    }

    /// `create_dir_all`, remembering each directory it made.
    fn create_dirs(&mut self, dir: &Path) -> io::Result<()> {
        let mut missing = Vec::new();
        let mut at = dir;
        while !at.exists() {
            missing.push(at.to_path_buf());
            match at.parent() {
                Some(parent) => at = parent,
                None => break,
            }
        }
        for dir in missing.into_iter().rev() {
            std::fs::create_dir(&dir)?;
            self.created_dirs.push(dir);
        }
        Ok(())
    }

    fn discard(&mut self) {
        for (temp, _) in self.temps.drain(..) {
            let _ = std::fs::remove_file(temp);
        }
        for dir in self.created_dirs.drain(..).rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// A new file next to `path`, named so it cannot clash with a real one.
fn create_temp(dir: &Path, path: &Path) -> io::Result<(PathBuf, std::fs::File)> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut attempts = 0;
    loop {
        let temp = dir.join(format!(
            ".{name}.tandem-{}-{:08x}.tmp",
            std::process::id(),
            fastrand::u32(..)
        ));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
        {
            Ok(file) => return Ok((temp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempts < 16 => attempts += 1,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = walk(dir)
            .into_iter()
            .map(|p| crate::workspace::slash_path(p.strip_prefix(dir).expect("inside")))
            .collect();
        names.sort();
        names
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                out.push(path.clone());
                out.extend(walk(&path));
            } else {
                out.push(path);
            }
        }
        out
    }

    #[test]
    fn atomic_writes_land_every_file_and_leave_no_temporary_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::write(root.join("keep.txt"), "old\n").expect("write");
        std::fs::write(root.join("gone.txt"), "bye\n").expect("write");
        std::fs::write(root.join("from.txt"), "moving\n").expect("write");
        let changes = DiskChanges {
            writes: vec![
                DiskWrite {
                    path: root.join("keep.txt"),
                    text: "new\n".to_string(),
                    permissions_of: Some(root.join("keep.txt")),
                },
                DiskWrite {
                    path: root.join("deep/er/to.txt"),
                    text: "moved\n".to_string(),
                    permissions_of: Some(root.join("from.txt")),
                },
            ],
            removals: vec![root.join("gone.txt"), root.join("from.txt")],
        };
        apply_to_disk(&changes).expect("applies");
        assert_eq!(
            std::fs::read_to_string(root.join("keep.txt")).expect("read"),
            "new\n"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("deep/er/to.txt")).expect("read"),
            "moved\n"
        );
        assert_eq!(
            files_in(root),
            vec!["deep", "deep/er", "deep/er/to.txt", "keep.txt"]
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_rewritten_file_keeps_its_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let script = dir.path().join("run.sh");
        std::fs::write(&script, "echo 1\n").expect("write");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        apply_to_disk(&DiskChanges {
            writes: vec![DiskWrite {
                path: script.clone(),
                text: "echo 2\n".to_string(),
                permissions_of: Some(script.clone()),
            }],
            removals: Vec::new(),
        })
        .expect("applies");
        let mode = std::fs::metadata(&script)
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
    }

    #[test]
    fn a_failed_staging_leaves_the_disk_as_it_was() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::write(root.join("first.txt"), "untouched\n").expect("write");
        std::fs::write(root.join("blocker"), "a file, not a folder\n").expect("write");
        std::fs::write(root.join("doomed.txt"), "still here\n").expect("write");
        let changes = DiskChanges {
            writes: vec![
                DiskWrite {
                    path: root.join("first.txt"),
                    text: "changed\n".to_string(),
                    permissions_of: None,
                },
                DiskWrite {
                    path: root.join("new/dir/ok.txt"),
                    text: "x\n".to_string(),
                    permissions_of: None,
                },
                DiskWrite {
                    path: root.join("blocker/inside.txt"),
                    text: "cannot\n".to_string(),
                    permissions_of: None,
                },
            ],
            removals: vec![root.join("doomed.txt")],
        };
        let error = apply_to_disk(&changes).expect_err("a folder under a file fails");
        assert!(error.path.ends_with("blocker/inside.txt"), "{error}");
        assert!(error.changed.is_empty());
        assert_eq!(
            std::fs::read_to_string(root.join("first.txt")).expect("read"),
            "untouched\n"
        );
        assert_eq!(files_in(root), vec!["blocker", "doomed.txt", "first.txt"]);
    }
}
