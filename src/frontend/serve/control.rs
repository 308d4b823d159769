//! The serve's control methods, on jsonrpsee's WebSocket at `/`:
//! `serve/status` and `serve/stop` (what `tandem serve --status` and
//! `--stop` call). Editors do not use them: they talk through a tunnel.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use jsonrpsee::types::ErrorObjectOwned;
use jsonrpsee::RpcModule;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::core::daemon::Daemon;

/// Open control connections, for the idle timer and the connection limit.
#[derive(Default)]
pub struct ConnectionCount(AtomicUsize);

impl ConnectionCount {
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }

    /// Counts a connection until the guard drops.
    pub fn enter(self: &Arc<Self>) -> Counted {
        self.0.fetch_add(1, Ordering::SeqCst);
        Counted(self.clone())
    }
}

/// One connection counted.
pub struct Counted(Arc<ConnectionCount>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Ordering::SeqCst);
    }
}

pub struct Ctx {
    pub daemon: Arc<Daemon>,
    pub port: u16,
    pub stop: CancellationToken,
}

type RpcResult = Result<Value, ErrorObjectOwned>;

/// The control methods.
pub fn module(ctx: Ctx) -> Result<RpcModule<Ctx>, jsonrpsee::core::RegisterMethodError> {
    let mut module = RpcModule::new(ctx);
    module.register_method("serve/status", |_, ctx, _| {
        RpcResult::Ok(json!({
            "pid": std::process::id(),
            "port": ctx.port,
            "version": env!("CARGO_PKG_VERSION"),
            "clients": ctx.daemon.client_count(),
            "turnRunning": ctx.daemon.any_turn_running(),
        }))
    })?;
    module.register_method("serve/stop", |_, ctx, _| {
        tracing::info!("stop requested by a client");
        ctx.stop.cancel();
        RpcResult::Ok(Value::Null)
    })?;
    Ok(module)
}
