//! For the in-process benches of the agent loop: the scripted model server
//! on a thread of its own (as a real server would be another process, it
//! does not share the daemon's runtime), an event sink that stamps the
//! events it is told about, and a daemon with the default durability.
//! Needs `mod model_server` at the bench's root.
#![allow(dead_code)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{json, Value};
use tandem::core::client::{Client, OneBridge};
use tandem::core::daemon::{Daemon, DaemonOptions};
use tandem::core::log::{Durability, EventSink, LoggedEvent};
use tandem::vocab::bridge::NoClient;
use tandem::vocab::event::Event;

use crate::model_server::{ModelServer, MODEL_NAME};

/// Starts the model server on its own thread and current-thread runtime;
/// it serves until the process ends.
pub fn model_server_thread() -> Arc<ModelServer> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("model-server".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("model server runtime");
            runtime.block_on(async {
                let server = Arc::new(ModelServer::start().await);
                tx.send(server).expect("hand the server over");
                std::future::pending::<()>().await;
            });
        })
        .expect("model server thread");
    rx.recv().expect("model server started")
}

/// One stamped event: what it was and when the sink heard of it (after
/// the log write, and the fsync for boundaries).
#[derive(Debug, Clone)]
pub struct Stamped {
    pub at: Instant,
    pub event: Event,
}

/// Keeps the events whose type `keep` accepts, stamped on arrival.
pub struct StampingSink {
    keep: fn(&Event) -> bool,
    pub events: Mutex<Vec<Stamped>>,
}

impl StampingSink {
    pub fn new(keep: fn(&Event) -> bool) -> Arc<StampingSink> {
        Arc::new(StampingSink {
            keep,
            events: Mutex::new(Vec::new()),
        })
    }

    pub fn take(&self) -> Vec<Stamped> {
        std::mem::take(&mut *self.events.lock().unwrap())
    }
}

impl EventSink for StampingSink {
    fn on_event(&self, _session_id: &str, event: &LoggedEvent) {
        let at = Instant::now();
        if (self.keep)(&event.event) {
            self.events.lock().unwrap().push(Stamped {
                at,
                event: event.event.clone(),
            });
        }
    }
}

/// A daemon storing its sessions under `home`, with no editor attached.
pub fn daemon(home: &Path, durability: Durability, sink: Arc<dyn EventSink>) -> Arc<Daemon> {
    Daemon::new(DaemonOptions {
        home: home.to_path_buf(),
        durability,
        sink,
    })
}

/// A client of `daemon` that cannot be asked anything (no editor).
pub fn headless_client(daemon: &Daemon) -> Arc<Client> {
    daemon.connect(Arc::new(OneBridge(Arc::new(NoClient))))
}

/// Session configuration pointing at `server`, with `limits` merged in.
pub fn session_config(server: &ModelServer, model: Value, limits: Value) -> Value {
    let mut model_config = json!({
        "base_url": server.base_url(),
        "name": MODEL_NAME,
        "api_key_env": "TANDEM_BENCH_NO_SUCH_KEY",
    });
    if let (Some(base), Some(extra)) = (model_config.as_object_mut(), model.as_object()) {
        base.extend(extra.clone());
    }
    json!({"model": model_config, "limits": limits})
}
