//! The serve's connections: what each client said in `initialize` and the
//! documents its editor has open.
//!
//! Every connection mirrors its own editor's documents in a buffer cache of
//! its own, and a prompt or steer carries its connection's cache into the
//! session's inbox: the turn it opens reads that cache, whichever window
//! prompts next. When a connection closes its cache is emptied, so a turn
//! still reading it reads the files from disk.
//!
//! Invariant: changes from two windows are never mixed into one buffer,
//! and a turn never reads another window's documents than its opener's.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::buffers::{BufferCache, PositionEncoding, TextChange};
use crate::vocab::bridge::{ClientAbilities, ClientFacilities};

/// One connection's state.
pub struct Client {
    pub abilities: ClientAbilities,
    pub roots: Vec<PathBuf>,
    /// The `initializationOptions` it sent (a configuration layer under
    /// the `config` of the sessions it creates).
    pub init_options: Value,
    pub buffers: Arc<BufferCache>,
    /// `window.workDoneProgress`: it shows `$/progress`.
    pub work_done_progress: bool,
    /// Its own files and terminal (`tandem acp --attach` relays an ACP
    /// client's), for the turns it owns.
    pub facilities: ClientFacilities,
}

impl Client {
    fn new() -> Client {
        Client {
            abilities: ClientAbilities::default(),
            roots: Vec::new(),
            init_options: Value::Null,
            buffers: Arc::new(BufferCache::new()),
            work_done_progress: false,
            facilities: ClientFacilities::default(),
        }
    }
}

/// A document-sync operation, applied to a connection's cache.
pub enum DocOp<'a> {
    Open {
        path: PathBuf,
        version: i32,
        text: &'a str,
    },
    Change {
        path: &'a Path,
        version: i32,
        changes: &'a [TextChange],
    },
    Close(&'a Path),
    Saved {
        path: &'a Path,
        text: Option<&'a str>,
    },
}

impl DocOp<'_> {
    fn apply(&self, cache: &BufferCache) -> Result<(), String> {
        match self {
            DocOp::Open {
                path,
                version,
                text,
            } => cache.open(path.clone(), *version, text),
            DocOp::Change {
                path,
                version,
                changes,
            } => {
                return cache
                    .change(path, *version, changes)
                    .map_err(|e| e.to_string())
            }
            DocOp::Close(path) => cache.close(path),
            DocOp::Saved { path, text } => cache.saved(path, *text),
        }
        Ok(())
    }
}

pub struct Clients {
    clients: Mutex<HashMap<usize, Client>>,
}

impl Clients {
    pub fn new() -> Arc<Clients> {
        Arc::new(Clients {
            clients: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<usize, Client>> {
        self.clients.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn count(&self) -> usize {
        self.lock().len()
    }

    /// Registers a connection (idempotent).
    pub fn connected(&self, conn: usize) {
        self.lock().entry(conn).or_insert_with(Client::new);
    }

    /// Records what a connection said in `initialize`.
    pub fn initialize(
        &self,
        conn: usize,
        abilities: ClientAbilities,
        roots: Vec<PathBuf>,
        init_options: Value,
        encoding: PositionEncoding,
        work_done_progress: bool,
    ) {
        let mut clients = self.lock();
        let client = clients.entry(conn).or_insert_with(Client::new);
        client.abilities = abilities;
        client.roots = roots;
        client.init_options = init_options;
        client.buffers.set_encoding(encoding);
        client.work_done_progress = work_done_progress;
    }

    /// Records the files and terminal a connection offers (`initialize`).
    pub fn set_facilities(&self, conn: usize, facilities: ClientFacilities) {
        if let Some(client) = self.lock().get_mut(&conn) {
            client.facilities = facilities;
        }
    }

    pub fn facilities(&self, conn: usize) -> ClientFacilities {
        self.lock()
            .get(&conn)
            .map(|c| c.facilities)
            .unwrap_or_default()
    }

    pub fn work_done_progress(&self, conn: usize) -> bool {
        self.lock().get(&conn).is_some_and(|c| c.work_done_progress)
    }

    pub fn abilities(&self, conn: usize) -> ClientAbilities {
        self.lock()
            .get(&conn)
            .map(|c| c.abilities)
            .unwrap_or_default()
    }

    pub fn roots(&self, conn: usize) -> Vec<PathBuf> {
        self.lock()
            .get(&conn)
            .map(|c| c.roots.clone())
            .unwrap_or_default()
    }

    pub fn init_options(&self, conn: usize) -> Value {
        self.lock()
            .get(&conn)
            .map(|c| c.init_options.clone())
            .unwrap_or(Value::Null)
    }

    pub fn buffers(&self, conn: usize) -> Option<Arc<BufferCache>> {
        self.lock().get(&conn).map(|c| c.buffers.clone())
    }

    /// Changes a connection's root folders (`didChangeWorkspaceFolders`).
    pub fn change_roots(&self, conn: usize, removed: &[PathBuf], added: Vec<PathBuf>) {
        if let Some(client) = self.lock().get_mut(&conn) {
            client.roots.retain(|r| !removed.contains(r));
            client.roots.extend(added);
        }
    }

    /// Applies a document-sync operation from `conn`.
    pub fn document(&self, conn: usize, op: DocOp<'_>) -> Result<(), String> {
        match self.buffers(conn) {
            Some(own) => op.apply(&own),
            None => Ok(()),
        }
    }

    /// A connection closed: forget it and empty its cache, so turns that
    /// still hold it read the files from disk.
    pub fn remove(&self, conn: usize) {
        let Some(client) = self.lock().remove(&conn) else {
            return;
        };
        for path in client.buffers.open_paths() {
            client.buffers.close(&path);
        }
    }
}
