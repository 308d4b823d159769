//! Keybinding tasks: an editor's selection, a task from the catalog, and a
//! turn that works on exactly that range.
//!
//! - [`catalog`] picks the tasks a range offers (code actions);
//! - [`prompt`] renders what the model is asked;
//! - [`inline_edit`] turns an `edit = "selection"` answer into one proposed
//!   replacement of the range;
//! - [`run`] resolves a request against the buffer cache, runs the turn in
//!   the workspace's task session and reports how it ended.
//!
//! Invariant: offering tasks reads only the buffer cache and the
//! configuration (cached per workspace); it never waits on a session, a
//! model or the editor, so a code action request is answered while turns
//! stream.

pub mod catalog;
pub mod inline_edit;
pub mod prompt;
pub mod run;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::Mutex;
use serde_json::Value;

use crate::buffers::{BufferCache, Range};
use crate::config::tasks::TaskCatalog;
use crate::config::{ConfigBuilder, ConfigError};
use crate::core::client::Client;
use crate::vocab::bridge::ClientBridge;

/// A diagnostic the editor attached to a task request.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskDiagnostic {
    pub range: Range,
    pub message: String,
    /// LSP severity: 1 error, 2 warning, 3 information, 4 hint.
    pub severity: Option<u32>,
    pub source: Option<String>,
    pub code: Option<String>,
}

/// Who asked for a task: the client it came from (its documents, folders,
/// `initializationOptions` and editor), so a task reads that window's
/// unsaved text and its question and inline edit go to that window.
#[derive(Clone)]
pub struct TaskOrigin {
    pub client: Arc<Client>,
    /// The `config` of a task session made for this origin.
    pub session_config: Option<Value>,
}

impl TaskOrigin {
    /// Tasks asked for by `client`.
    pub fn of(client: &Arc<Client>) -> TaskOrigin {
        TaskOrigin {
            client: client.clone(),
            session_config: None,
        }
    }

    /// The documents the task (and its turn) reads.
    pub fn buffers(&self) -> &Arc<BufferCache> {
        self.client.buffers()
    }

    /// The workspace roots: which folder a file belongs to.
    pub fn roots(&self) -> Vec<PathBuf> {
        self.client.roots()
    }

    /// The editor to ask for the instruction and to propose the inline
    /// edit to, for a task running in session `session_id`.
    pub fn bridge(&self, session_id: &str) -> Arc<dyn ClientBridge> {
        self.client.link().own_bridge(session_id)
    }
}

/// The daemon's task state: task catalogs cached per workspace, and the
/// task session of each workspace root.
#[derive(Default)]
pub struct TaskState {
    catalogs: Mutex<HashMap<Vec<PathBuf>, CachedCatalog>>,
    /// Workspace root (or `None` outside every root) to its task session.
    pub(crate) sessions: Mutex<HashMap<Option<PathBuf>, String>>,
}

struct CachedCatalog {
    stamp: Stamp,
    catalog: Arc<TaskCatalog>,
}

/// What a cached catalog was built from: the configuration files'
/// modification times and the `initializationOptions` it saw.
#[derive(Debug, Clone, PartialEq)]
struct Stamp {
    files: Vec<Option<SystemTime>>,
    init: Value,
}

impl TaskState {
    /// The catalog for a workspace's roots, rebuilt only when a
    /// configuration file or `initializationOptions` changed. A cheap `stat`
    /// per file on a hit; no lock is held while a catalog is built.
    pub fn catalog(
        &self,
        home: &Path,
        roots: &[PathBuf],
        init: &Value,
    ) -> Result<Arc<TaskCatalog>, ConfigError> {
        let mut files = vec![home.join("config.toml")];
        files.extend(roots.iter().map(|r| r.join(".tandem/config.toml")));
        let stamp = Stamp {
            files: files
                .iter()
                .map(|f| std::fs::metadata(f).and_then(|m| m.modified()).ok())
                .collect(),
            init: init.clone(),
        };
        if let Some(cached) = self.catalogs.lock().get(roots).filter(|c| c.stamp == stamp) {
            return Ok(cached.catalog.clone());
        }
        let config = ConfigBuilder::standard(home, roots)?
            .json("initializationOptions", init)?
            .build()?;
        let catalog = Arc::new(TaskCatalog::from_config(&config.tasks));
        self.catalogs.lock().insert(
            roots.to_vec(),
            CachedCatalog {
                stamp,
                catalog: catalog.clone(),
            },
        );
        Ok(catalog)
    }
}

/// The roots whose configuration applies to a file: the root holding it,
/// else all of them.
pub fn config_roots(path: &Path, roots: &[PathBuf]) -> Vec<PathBuf> {
    match root_of(path, roots) {
        Some(root) => vec![root],
        None => roots.to_vec(),
    }
}

/// The workspace root a file belongs to (the deepest root holding it).
pub fn root_of(path: &Path, roots: &[PathBuf]) -> Option<PathBuf> {
    roots
        .iter()
        .filter(|root| path.starts_with(root))
        .max_by_key(|root| root.components().count())
        .cloned()
}
