//! The content-addressed store under `$TANDEM_HOME/checkpoints/`: file
//! contents as `objects/<sha256>` (written once, shared by every checkpoint
//! that names them), and one manifest per checkpoint
//! (`manifests/<created ms>-<session>-<turn>.json`) naming its objects, so
//! pruning knows what is still referenced without reading session logs.
//!
//! **Invariant:** an object named by a manifest is never deleted. Writers
//! hold a shared `flock` on `lock` while they add objects and manifests;
//! pruning holds it exclusively, so it never sees a checkpoint half made.
//! Nothing here knows git or touches a workspace.

use std::collections::{BTreeSet, HashMap};
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The store of one `$TANDEM_HOME`.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

/// What one checkpoint keeps alive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub created_ms: u64,
    pub session: String,
    pub turn: String,
    /// The workspace root the checkpoint is counted against (`max_bytes`).
    pub workspace: String,
    pub objects: BTreeSet<String>,
}

/// How much to keep.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub keep_days: u64,
    pub max_bytes: u64,
}

/// What a prune did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    pub checkpoints: usize,
    pub objects: usize,
}

/// A held `flock`, released when dropped.
pub struct Lock(File);

impl Drop for Lock {
    fn drop(&mut self) {
        // SAFETY: the descriptor is open for the lifetime of `self.0`.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// SHA-256 of `bytes`, in lowercase hex.
pub fn hash_of(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

impl Store {
    pub fn new(home: &Path) -> Store {
        Store {
            root: home.join("checkpoints"),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn lock(&self, how: i32) -> io::Result<Option<Lock>> {
        fs::create_dir_all(&self.root)?;
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.root.join("lock"))?;
        // SAFETY: a valid descriptor; flock has no memory effects.
        let rc = unsafe { libc::flock(file.as_raw_fd(), how) };
        if rc == 0 {
            Ok(Some(Lock(file)))
        } else if how & libc::LOCK_NB != 0 {
            Ok(None)
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Held while adding objects and manifests.
    pub fn shared(&self) -> io::Result<Lock> {
        self.lock(libc::LOCK_SH)?
            .ok_or_else(|| io::Error::other("cannot lock the checkpoint store"))
    }

    fn object_path(&self, hash: &str) -> PathBuf {
        let (dir, rest) = hash.split_at(2.min(hash.len()));
        self.root.join("objects").join(dir).join(rest)
    }

    /// Stores `bytes` (once per content) and returns their hash. The object
    /// is complete on disk before its name exists.
    pub fn put(&self, bytes: &[u8]) -> io::Result<String> {
        let hash = hash_of(bytes);
        let path = self.object_path(&hash);
        if path.exists() {
            return Ok(hash);
        }
        let dir = path.parent().expect("an object has a directory");
        fs::create_dir_all(dir)?;
        write_atomically(&path, bytes, None)?;
        Ok(hash)
    }

    /// The bytes of an object, `None` when it is not (or no longer) stored.
    pub fn get(&self, hash: &str) -> io::Result<Option<Vec<u8>>> {
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(None);
        }
        match fs::read(self.object_path(hash)) {
            Ok(bytes) if hash_of(&bytes) == hash => Ok(Some(bytes)),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub fn has(&self, hash: &str) -> bool {
        self.object_path(hash).exists()
    }

    fn manifests_dir(&self) -> PathBuf {
        self.root.join("manifests")
    }

    /// Where a checkpoint's manifest lives.
    pub fn manifest_path(&self, created_ms: u64, session: &str, turn: &str) -> PathBuf {
        self.manifests_dir()
            .join(format!("{created_ms:013}-{session}-{turn}.json"))
    }

    /// Writes (or rewrites) a manifest, atomically.
    pub fn write_manifest(&self, manifest: &Manifest) -> io::Result<()> {
        fs::create_dir_all(self.manifests_dir())?;
        let path = self.manifest_path(manifest.created_ms, &manifest.session, &manifest.turn);
        let bytes = serde_json::to_vec(manifest).map_err(io::Error::other)?;
        write_atomically(&path, &bytes, None)
    }

    /// Every manifest, oldest first, with its path.
    pub fn manifests(&self) -> io::Result<Vec<(PathBuf, Manifest)>> {
        let mut out = Vec::new();
        let entries = match fs::read_dir(self.manifests_dir()) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(e),
        };
        for entry in entries {
            let path = entry?.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            match fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice::<Manifest>(&b).ok())
            {
                Some(manifest) => out.push((path, manifest)),
                None => tracing::warn!("unreadable checkpoint manifest {}", path.display()),
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    fn object_size(&self, hash: &str) -> u64 {
        fs::metadata(self.object_path(hash))
            .map(|m| m.len())
            .unwrap_or(0)
    }

    /// Bytes of the objects `workspace`'s checkpoints reference (each
    /// object counted once).
    pub fn workspace_bytes(&self, workspace: &str) -> io::Result<u64> {
        let mut objects = BTreeSet::new();
        for (_, m) in self.manifests()? {
            if m.workspace == workspace {
                objects.extend(m.objects);
            }
        }
        Ok(objects.iter().map(|h| self.object_size(h)).sum())
    }

    /// Drops checkpoints older than `keep_days`, then `workspace`'s oldest
    /// until what its checkpoints reference fits `max_bytes` (never
    /// `keep`, the checkpoint just made), then every object no remaining
    /// manifest names. Skipped (`None`) while another writer holds the store.
    pub fn prune(
        &self,
        workspace: &str,
        keep: &Path,
        bounds: Bounds,
    ) -> io::Result<Option<Pruned>> {
        let Some(_lock) = self.lock(libc::LOCK_EX | libc::LOCK_NB)? else {
            return Ok(None);
        };
        let mut pruned = Pruned::default();
        let oldest_kept = now_ms().saturating_sub(bounds.keep_days.saturating_mul(86_400_000));
        let mut kept = Vec::new();
        for (path, manifest) in self.manifests()? {
            if manifest.created_ms < oldest_kept && path != keep {
                remove_if_present(&path)?;
                pruned.checkpoints += 1;
            } else {
                kept.push((path, manifest));
            }
        }
        // Bytes per object, and how many of this workspace's checkpoints
        // name each one.
        let mut refs: HashMap<String, usize> = HashMap::new();
        for (_, m) in kept.iter().filter(|(_, m)| m.workspace == workspace) {
            for hash in &m.objects {
                *refs.entry(hash.clone()).or_default() += 1;
            }
        }
        let mut sizes: HashMap<String, u64> = HashMap::new();
        let mut total = 0;
        for hash in refs.keys() {
            let size = self.object_size(hash);
            total += size;
            sizes.insert(hash.clone(), size);
        }
        let mut remaining = Vec::new();
        for (path, manifest) in kept {
            if total > bounds.max_bytes && manifest.workspace == workspace && path != keep {
                for hash in &manifest.objects {
                    if let Some(count) = refs.get_mut(hash) {
                        *count -= 1;
                        if *count == 0 {
                            total -= sizes.get(hash).copied().unwrap_or(0);
                        }
                    }
                }
                remove_if_present(&path)?;
                pruned.checkpoints += 1;
            } else {
                remaining.push(manifest);
            }
        }
        let referenced: BTreeSet<&String> = remaining.iter().flat_map(|m| &m.objects).collect();
        let objects = self.root.join("objects");
        if let Ok(dirs) = fs::read_dir(&objects) {
            for dir in dirs.flatten() {
                let prefix = dir.file_name().to_string_lossy().into_owned();
                let Ok(files) = fs::read_dir(dir.path()) else {
                    continue;
                };
                for file in files.flatten() {
                    let name = file.file_name().to_string_lossy().into_owned();
                    if name.starts_with('.') {
                        continue;
                    }
                    let hash = format!("{prefix}{name}");
                    if !referenced.contains(&hash) {
                        remove_if_present(&file.path())?;
                        pruned.objects += 1;
                    }
                }
            }
        }
        Ok(Some(pruned))
    }
}

fn remove_if_present(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Writes `bytes` to a temporary file beside `path`, syncs it, gives it
/// `mode` and renames it into place: a reader (or a crash) sees the old
/// file or the new one, never a part.
pub fn write_atomically(path: &Path, bytes: &[u8], mode: Option<u32>) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::other(format!("{} has no directory", path.display())))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.tandem-{}-{}",
        std::process::id(),
        now_ms()
    ));
    let result = (|| {
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        if let Some(mode) = mode {
            file.set_permissions(fs::Permissions::from_mode(mode))?;
        }
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(store: &Store, at: u64, turn: &str, objects: &[&str]) -> PathBuf {
        let manifest = Manifest {
            created_ms: at,
            session: "s".to_string(),
            turn: turn.to_string(),
            workspace: "/w".to_string(),
            objects: objects.iter().map(|o| o.to_string()).collect(),
        };
        store.write_manifest(&manifest).unwrap();
        store.manifest_path(at, "s", turn)
    }

    #[test]
    fn pruning_keeps_the_store_under_its_bound_and_every_kept_checkpoint_whole() {
        let home = tempfile::tempdir().unwrap();
        let store = Store::new(home.path());
        let bounds = Bounds {
            keep_days: 14,
            max_bytes: 10_000,
        };
        let now = now_ms();
        // A file shared by every turn (deduplicated) and one new 1 KB
        // version per turn, over 60 turns.
        let shared = store.put(&[b's'; 500]).unwrap();
        for turn in 0..60u64 {
            let _lock = store.shared().unwrap();
            let version = store.put(format!("{turn:01000}").as_bytes()).unwrap();
            drop(_lock);
            let keep = manifest(
                &store,
                now + turn,
                &format!("t{turn}"),
                &[&shared, &version],
            );
            store
                .prune("/w", &keep, bounds)
                .unwrap()
                .expect("not contended");
            assert!(store.workspace_bytes("/w").unwrap() <= bounds.max_bytes);
            let kept = store.manifests().unwrap();
            assert!(kept.iter().any(|(p, _)| *p == keep), "the newest is kept");
            for (_, m) in &kept {
                for hash in &m.objects {
                    assert!(
                        store.get(hash).unwrap().is_some(),
                        "{hash} of {} missing",
                        m.turn
                    );
                }
            }
        }
        let kept = store.manifests().unwrap();
        assert!((8..=9).contains(&kept.len()), "{}", kept.len());
        assert_eq!(kept.last().unwrap().1.turn, "t59");
        // Nothing unreferenced is left: 1 shared + one object per kept turn.
        let objects = walk_objects(&store);
        assert_eq!(objects, kept.len() + 1);
    }

    #[test]
    fn checkpoints_older_than_keep_days_are_pruned() {
        let home = tempfile::tempdir().unwrap();
        let store = Store::new(home.path());
        let old_object = store.put(b"old").unwrap();
        let new_object = store.put(b"new").unwrap();
        let day = 86_400_000;
        manifest(&store, now_ms() - 15 * day, "t1", &[&old_object]);
        let keep = manifest(&store, now_ms(), "t2", &[&new_object]);
        let bounds = Bounds {
            keep_days: 14,
            max_bytes: 1 << 30,
        };
        let pruned = store.prune("/w", &keep, bounds).unwrap().unwrap();
        assert_eq!(
            pruned,
            Pruned {
                checkpoints: 1,
                objects: 1
            }
        );
        assert!(store.get(&old_object).unwrap().is_none());
        assert!(store.get(&new_object).unwrap().is_some());
    }

    fn walk_objects(store: &Store) -> usize {
        fs::read_dir(store.root().join("objects"))
            .unwrap()
            .flatten()
            .map(|d| fs::read_dir(d.path()).unwrap().count())
            .sum()
    }
}
