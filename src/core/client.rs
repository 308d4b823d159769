//! A client: one editor connection as the core sees it — its workspace
//! roots, its open documents, what it said it can do, its
//! `initializationOptions`, and how to ask it things (permission,
//! questions, edits).
//!
//! Every input a frontend hands the core names the client it came from,
//! and a turn runs with the client whose input opened it: its tools read
//! that client's buffers and ask through that client's link. `tandem lsp`
//! and `tandem acp` make one client for their connection; `tandem serve`
//! one per attached window.
//!
//! Invariant: a turn never reads another client's documents than its
//! opener's; two clients' document changes are never mixed in one buffer.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;

use crate::buffers::BufferCache;
use crate::config::{ConfigBuilder, ConfigError};
use crate::vocab::bridge::{ClientAbilities, ClientBridge, ClientFacilities, NoClient};
use crate::workspace::Workspace;

/// How a client is asked things, per session: a frontend serving one
/// editor returns the same bridge for every session; the serve routes a
/// session's requests to the windows following it.
pub trait ClientLink: Send + Sync {
    /// The bridge of a turn of `session_id` that this client opened:
    /// permission and questions, and edits to this client's buffers.
    fn turn_bridge(&self, session_id: &str) -> Arc<dyn ClientBridge>;

    /// A bridge to this client alone, for a keybinding task it asked for
    /// in `session_id` (the task's instruction and its inline edit).
    fn own_bridge(&self, session_id: &str) -> Arc<dyn ClientBridge> {
        self.turn_bridge(session_id)
    }

    /// The client went away: what it was asked fails.
    fn closed(&self) {}
}

/// A link that asks one bridge for every session (a stdio connection).
pub struct OneBridge(pub Arc<dyn ClientBridge>);

impl ClientLink for OneBridge {
    fn turn_bridge(&self, _session_id: &str) -> Arc<dyn ClientBridge> {
        self.0.clone()
    }
}

/// What a client declared in its handshake.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientCapabilities {
    pub abilities: ClientAbilities,
    /// Its own files and terminal (ACP's `fs/*`, `terminal/*`).
    pub facilities: ClientFacilities,
    /// `window.workDoneProgress`: it shows `$/progress`.
    pub work_done_progress: bool,
}

static NEXT_CLIENT: AtomicU64 = AtomicU64::new(1);

/// One editor connection.
pub struct Client {
    id: u64,
    buffers: Arc<BufferCache>,
    /// Its folders; the workspace of the sessions it makes without a
    /// folder of their own.
    workspace: Arc<Workspace>,
    init_options: Mutex<Value>,
    capabilities: Mutex<ClientCapabilities>,
    link: Arc<dyn ClientLink>,
}

impl Client {
    /// A client asked through `link`, with no folders, documents or
    /// options yet.
    pub fn new(link: Arc<dyn ClientLink>) -> Arc<Client> {
        Arc::new(Client {
            id: NEXT_CLIENT.fetch_add(1, Ordering::Relaxed),
            buffers: Arc::new(BufferCache::new()),
            workspace: Arc::new(Workspace::default()),
            init_options: Mutex::new(Value::Null),
            capabilities: Mutex::new(ClientCapabilities::default()),
            link,
        })
    }

    /// A client that cannot be asked anything (`tandem exec`, tests).
    pub fn headless() -> Arc<Client> {
        Client::new(Arc::new(OneBridge(Arc::new(NoClient))))
    }

    /// A client asked through one bridge for every session.
    pub fn with_bridge(bridge: Arc<dyn ClientBridge>) -> Arc<Client> {
        Client::new(Arc::new(OneBridge(bridge)))
    }

    /// Unique within the process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Its open documents.
    pub fn buffers(&self) -> &Arc<BufferCache> {
        &self.buffers
    }

    /// Its workspace folders.
    pub fn workspace(&self) -> &Arc<Workspace> {
        &self.workspace
    }

    pub fn roots(&self) -> Vec<PathBuf> {
        self.workspace.roots()
    }

    pub fn link(&self) -> &Arc<dyn ClientLink> {
        &self.link
    }

    /// The `initializationOptions` it sent (a configuration layer of the
    /// sessions it makes or loads, and of its task catalogs).
    pub fn init_options(&self) -> Value {
        self.init_options.lock().clone()
    }

    /// Sets its `initializationOptions` after checking that they form a
    /// valid configuration layer.
    pub fn set_init_options(&self, options: Value) -> Result<(), ConfigError> {
        // Only the layer itself: a broken config file is reported when a
        // session is made, naming the file, not as a bad initialize.
        ConfigBuilder::check("initializationOptions", &options)?;
        *self.init_options.lock() = options;
        Ok(())
    }

    pub fn capabilities(&self) -> ClientCapabilities {
        *self.capabilities.lock()
    }

    pub fn set_capabilities(&self, capabilities: ClientCapabilities) {
        *self.capabilities.lock() = capabilities;
    }

    /// The bridge of a turn of `session_id` this client opened.
    pub fn turn_bridge(&self, session_id: &str) -> Arc<dyn ClientBridge> {
        self.link.turn_bridge(session_id)
    }

    /// The connection closed: its documents are closed (a turn still
    /// holding the client reads the files from disk) and what it was asked
    /// fails.
    pub fn disconnect(&self) {
        for path in self.buffers.open_paths() {
            self.buffers.close(&path);
        }
        self.link.closed();
    }
}
