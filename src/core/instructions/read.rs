//! Reading instruction files, cheaply when nothing changed: a file is
//! read again (and hashed) only when its size or modification time
//! differs from the last read; otherwise a `stat` is all a turn costs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use sha2::{Digest, Sha256};

/// One file's content as last read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FileText {
    pub bytes: u64,
    pub sha256: String,
    /// The content, invalid UTF-8 replaced.
    pub text: String,
}

#[derive(Debug, Clone)]
struct Cached {
    len: u64,
    modified: Option<SystemTime>,
    file: Arc<FileText>,
}

/// The files read so far, by path.
#[derive(Debug, Default)]
pub(super) struct FileReader {
    cache: HashMap<PathBuf, Cached>,
}

impl FileReader {
    /// The file's content, or `None` when it is not a readable regular
    /// file (an unreadable one is logged).
    pub(super) fn read(&mut self, path: &Path) -> Option<Arc<FileText>> {
        let meta = match std::fs::metadata(path) {
            Ok(meta) if meta.is_file() => meta,
            _ => {
                self.cache.remove(path);
                return None;
            }
        };
        let modified = meta.modified().ok();
        if let Some(cached) = self.cache.get(path) {
            if cached.len == meta.len() && cached.modified == modified && modified.is_some() {
                return Some(cached.file.clone());
            }
        }
        let raw = match std::fs::read(path) {
            Ok(raw) => raw,
            Err(e) => {
                tracing::warn!("cannot read instruction file {}: {e}", path.display());
                self.cache.remove(path);
                return None;
            }
        };
        let file = Arc::new(FileText {
            bytes: raw.len() as u64,
            sha256: hex(&Sha256::digest(&raw)),
            text: String::from_utf8_lossy(&raw).into_owned(),
        });
        self.cache.insert(
            path.to_path_buf(),
            Cached {
                len: meta.len(),
                modified,
                file: file.clone(),
            },
        );
        Some(file)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_hashed_and_read_again_when_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("AGENTS.md");
        std::fs::write(&path, "abc").unwrap();
        let mut reader = FileReader::default();
        let first = reader.read(&path).unwrap();
        assert_eq!(first.bytes, 3);
        assert_eq!(
            first.sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(Arc::ptr_eq(&first, &reader.read(&path).unwrap()), "cached");
        std::fs::write(&path, "abcd").unwrap();
        assert_eq!(reader.read(&path).unwrap().text, "abcd");
        std::fs::remove_file(&path).unwrap();
        assert!(reader.read(&path).is_none());
        assert!(reader.read(dir.path()).is_none(), "a directory is no file");
    }
}
