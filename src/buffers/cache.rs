//! [`BufferCache`]: the open documents, keyed by normalized path, updated
//! by the editor's `didOpen`/`didChange`/`didSave`/`didClose`. A change is
//! all or nothing, and every applied change is announced to subscribers.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use parking_lot::RwLock;
use tokio::sync::watch;

use super::document::{Content, Document, Snapshot};
use super::{BufferError, PositionEncoding, TextChange};

/// The open documents, keyed by absolute (canonical where it exists) path.
#[derive(Debug, Default)]
pub struct BufferCache {
    docs: RwLock<HashMap<PathBuf, Document>>,
    encoding: RwLock<PositionEncoding>,
    /// Bumped after every change to the documents, so a tool waiting for
    /// the editor to report an edit can wait instead of polling.
    changes: watch::Sender<u64>,
    /// The editor's latest diagnostics per document (`tandem/diagnosticsChanged`).
    diagnostics: super::diagnostics::DiagnosticsStore,
}

impl BufferCache {
    pub fn new() -> Self {
        BufferCache::default()
    }

    /// Sets how incoming positions count characters, as negotiated at
    /// `initialize`.
    pub fn set_encoding(&self, encoding: PositionEncoding) {
        *self.encoding.write() = encoding;
    }

    pub fn encoding(&self) -> PositionEncoding {
        *self.encoding.read()
    }

    /// The editor's diagnostics as it last reported them.
    pub fn diagnostics(&self) -> &super::diagnostics::DiagnosticsStore {
        &self.diagnostics
    }

    /// A receiver that is marked changed after every `open`, applied
    /// `change`, `close` and `saved` from now on.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// `didOpen`: starts mirroring `path`, replacing any earlier copy.
    pub fn open(&self, path: PathBuf, version: i32, text: &str) {
        let key = normalize_path(&path);
        let doc = Document {
            content: Content::new(text),
            version,
        };
        self.docs.write().insert(key, doc);
        self.changed();
    }

    /// Applies the changes in order; all or nothing.
    pub fn change(
        &self,
        path: &Path,
        version: i32,
        changes: &[TextChange],
    ) -> Result<(), BufferError> {
        let key = normalize_path(path);
        let enc = self.encoding();
        let mut docs = self.docs.write();
        let doc = docs
            .get_mut(&key)
            .ok_or_else(|| BufferError::NotOpen(path.display().to_string()))?;
        // Work on a clone (O(1) for ropes) so that a bad change — or a panic,
        // after which the lock is free to others — never leaves a partly
        // applied notification behind.
        let mut content = doc.content.clone();
        for change in changes {
            let Some(range) = change.range else {
                content = Content::new(&change.text);
                continue;
            };
            content
                .edit(range, &change.text, enc)
                .map_err(|e| BufferError::BadRange {
                    path: path.display().to_string(),
                    range,
                    lines: e.lines,
                })?;
        }
        doc.content = content;
        doc.version = version;
        drop(docs);
        self.changed();
        Ok(())
    }

    /// `didClose`: stops mirroring `path`; reads go to disk again.
    pub fn close(&self, path: &Path) {
        let key = normalize_path(path);
        self.docs.write().remove(&key);
        self.diagnostics.forget(&key);
        self.changed();
    }

    /// `didSave`; when the client includes the text, it replaces the buffer.
    pub fn saved(&self, path: &Path, text: Option<&str>) {
        let Some(text) = text else { return };
        let key = normalize_path(path);
        if let Some(doc) = self.docs.write().get_mut(&key) {
            doc.content = Content::new(text);
        }
        self.changed();
    }

    /// The open document's current text and version, or `None` if not open.
    pub fn snapshot(&self, path: &Path) -> Option<Snapshot> {
        let key = normalize_path(path);
        let docs = self.docs.read();
        docs.get(&key).map(|doc| Snapshot {
            rope: doc.content.text.clone(),
            version: doc.version,
        })
    }

    /// The text the user sees: the buffer when open, else the file on disk.
    pub fn read_text(&self, path: &Path) -> std::io::Result<String> {
        match self.snapshot(path) {
            // Convert outside the lock: it is O(n).
            Some(snapshot) => Ok(snapshot.rope.to_string()),
            None => std::fs::read_to_string(path),
        }
    }

    /// Paths of open documents, normalized, in sorted order.
    pub fn open_paths(&self) -> Vec<PathBuf> {
        let docs = self.docs.read();
        let mut paths: Vec<PathBuf> = docs.keys().cloned().collect();
        paths.sort();
        paths
    }
}

/// The cache key for `path`: canonical when it exists, so `/a/./b` and
/// symlinks meet what tools resolve. When it does not exist (a new, unsaved
/// file, or one deleted under the editor), its nearest existing ancestor is
/// canonicalized and the rest appended, so the key stays the same when the
/// file later appears or goes; with no existing ancestor, `path` as given.
pub(super) fn normalize_path(path: &Path) -> PathBuf {
    let mut existing = path;
    let mut missing = Vec::new();
    loop {
        if let Ok(mut resolved) = std::fs::canonicalize(existing) {
            // The missing part has no symlinks (it does not exist), so `..`
            // in it can be resolved lexically.
            for component in missing.iter().rev() {
                match component {
                    Component::ParentDir => {
                        resolved.pop();
                    }
                    Component::Normal(name) => resolved.push(name),
                    _ => {}
                }
            }
            return resolved;
        }
        let mut components = existing.components();
        match components.next_back() {
            Some(component @ (Component::Normal(_) | Component::ParentDir | Component::CurDir)) => {
                missing.push(component);
                existing = components.as_path();
            }
            _ => return path.to_path_buf(),
        }
        if existing.as_os_str().is_empty() {
            return path.to_path_buf();
        }
    }
}
