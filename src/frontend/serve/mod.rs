//! `tandem serve`: one long-lived daemon for all of a user's editor
//! windows, on loopback TCP and on the Unix socket `$TANDEM_HOME/serve.sock`
//! (which the shims prefer).
//!
//! ```text
//! editor ─stdio─► tandem lsp --attach (pipe: bytes) ─► GET /lsp, Upgrade: tandem ─► tunnel
//!                                                                                    │
//!      the same LSP (or ACP) frontend as over stdio, one per connection ◄────────────┘
//!                 │ a Client each                       ▲ the sessions it follows
//!                 ▼                                     │
//!               Daemon (one) ──── every event ────► Followers
//! serve --status / --stop ─► ws://…/ (jsonrpsee) ─► control
//! ```
//!
//! - `state` — serve.json and the lock; `listen` — the TCP and Unix
//!   listeners and the socket file; `stream` — a connection over either;
//!   `auth` — the token and Origin check in front of every connection;
//!   `tunnel` — an editor's connection, run by its protocol's frontend;
//!   `control` — the jsonrpsee methods (`serve/status`, `serve/stop`);
//!   `client`, `pipe` and `shim_socket` — the other end: the control calls
//!   and the shims (`tandem lsp --attach`, `tandem acp --attach`);
//!   `stdio_pass` — a shim handing the serve its stdin and stdout over the
//!   Unix socket, so the serve reads and writes the editor's pipes itself.
//! - Who hears which session, and who is asked a turn's questions, is
//!   `frontend::followers`.
//!
//! Invariant: the serve binds 127.0.0.1 and its own 0600 socket only, and
//! nothing reaches a frontend or a method without the token, over either.

pub mod auth;
pub mod client;
mod control;
pub mod listen;
pub mod pipe;
pub mod shim_socket;
pub mod state;
pub mod stdio_pass;
pub mod stream;
pub mod tunnel;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonrpsee::server::{Server, ServerConfig};
use tokio_util::sync::CancellationToken;

use self::control::ConnectionCount;
use self::state::{ServeInfo, ServeLock};
use crate::config::{ConfigBuilder, ServeConfig};
use crate::core::daemon::{Daemon, DaemonOptions};
use crate::core::liveness::process_alive;
use crate::core::log::Durability;

/// Reads `[serve]` from the user's config.toml and the environment.
pub fn serve_config(home: &std::path::Path) -> Result<ServeConfig, String> {
    ConfigBuilder::standard(home, &[])
        .and_then(|b| b.build())
        .map(|c| c.serve)
        .map_err(|e| e.to_string())
}

/// Runs the serve until `serve --stop`, a signal, or the idle timeout.
/// Returns the process's exit status.
pub async fn run(home: PathBuf, durability: Durability) -> u8 {
    match run_inner(home, durability).await {
        Ok(()) => 0,
        Err(e) => {
            // stderr is the log (see main.rs), which the file gets too.
            tracing::error!("tandem serve: {e}");
            1
        }
    }
}

async fn run_inner(home: PathBuf, durability: Durability) -> Result<(), String> {
    state::private_home(&home).map_err(|e| e.to_string())?;
    let _lock = ServeLock::acquire(&home).map_err(|e| e.to_string())?;
    let config = serve_config(&home)?;
    let token = auth::new_token().map_err(|e| format!("cannot make a token: {e}"))?;

    // The one thread streams every session: fsyncs go to the blocking
    // pool, and what acknowledges an event waits for them there.
    // `TANDEM_SERVE_INLINE_FSYNC=1` keeps them on the thread, for
    // benches/serve_fsync.rs's comparison.
    let inline = std::env::var("TANDEM_SERVE_INLINE_FSYNC").is_ok_and(|v| v == "1");
    let durability = match durability {
        Durability::Fsync if !inline => Durability::FsyncInBackground,
        other => other,
    };
    let followers = crate::frontend::followers::Followers::new();
    let daemon = Daemon::new(DaemonOptions {
        home: home.clone(),
        durability,
        sink: followers.clone(),
    });
    let count = Arc::new(ConnectionCount::default());
    let services = Server::builder()
        .set_config(
            ServerConfig::builder()
                .ws_only()
                .max_connections(config.max_connections)
                .max_request_body_size(config.max_message_bytes)
                .max_response_body_size(config.max_message_bytes)
                .build(),
        )
        .set_http_middleware(tower::ServiceBuilder::new().layer(auth::AuthLayer(
            auth::Policy::new(&token, config.allowed_origins.clone()),
        )))
        // One builder for both listeners: one connection limit and one
        // sequence of connection ids across them.
        .to_service_builder();
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1: {e}"))?;
    let port = tcp
        .local_addr()
        .map_err(|e| format!("cannot read the listening port: {e}"))?
        .port();
    let unix = listen::bind_unix(&home);
    let tunnels = tunnel::Tunnels::new(
        daemon.clone(),
        followers,
        auth::Policy::new(&token, config.allowed_origins.clone()),
        config.max_connections as usize,
        port,
    );

    let stop = CancellationToken::new();
    let methods: jsonrpsee::Methods = control::module(control::Ctx {
        daemon: daemon.clone(),
        port,
        stop: stop.clone(),
    })
    .map_err(|e| format!("cannot register the control methods: {e}"))?
    .into();
    let (stop_handle, handle) = jsonrpsee::server::stop_channel();
    let serve_connection: listen::ServeConnection = {
        let stop_handle = stop_handle.clone();
        let count = count.clone();
        Arc::new(move |io: stream::Stream| {
            let transport = io.transport().name();
            let service = services.clone().build(methods.clone(), stop_handle.clone());
            let stopped = stop_handle.clone().shutdown();
            let tunnels = tunnels.clone();
            let others = count.get();
            let count = count.clone();
            Box::pin(async move {
                // An editor's tunnel runs here to its end; anything else
                // is jsonrpsee's.
                let Some(io) = tunnel::route(io, &tunnels, others).await else {
                    return;
                };
                tracing::info!(transport, "a client connected");
                // Counted while the connection lasts: past the upgrade,
                // its WebSocket runs on without this future.
                let io = io.holding(count.enter());
                if let Err(e) =
                    jsonrpsee::server::serve_with_graceful_shutdown(io, service, stopped).await
                {
                    tracing::debug!(transport, "connection ended: {e}");
                }
            })
        })
    };
    tokio::spawn(listen::accept(
        listen::Listener::Tcp(tcp),
        serve_connection.clone(),
        stop_handle.clone(),
    ));
    let socket_file = unix.map(|(listener, file)| {
        tokio::spawn(listen::accept(
            listen::Listener::Unix(listener),
            serve_connection,
            stop_handle.clone(),
        ));
        file
    });
    drop(stop_handle);
    let socket = socket_file.as_ref().map(|f| f.path().to_path_buf());
    let pid = std::process::id();
    state::write_info(
        &home,
        &ServeInfo {
            port,
            pid,
            token,
            version: env!("CARGO_PKG_VERSION").to_string(),
            socket: socket.clone(),
        },
    )
    .map_err(|e| e.to_string())?;
    tracing::info!(
        port,
        pid,
        socket = socket.as_ref().map(|p| p.display().to_string()),
        "tandem serve listening on 127.0.0.1"
    );

    let why = tokio::select! {
        _ = stop.cancelled() => "stop requested",
        _ = signal() => "signal",
        _ = idle(config.idle_exit(), count.clone(), daemon.clone()) => "idle",
    };
    tracing::info!("tandem serve stopping ({why})");
    state::remove_info(&home, pid);
    let _ = handle.stop();
    daemon.shutdown().await;
    let _ = tokio::time::timeout(Duration::from_secs(2), handle.stopped()).await;
    drop(socket_file);
    Ok(())
}

async fn signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => std::future::pending().await,
    }
}

/// Resolves once no client has been connected and no turn has run for
/// `limit` (never without a limit).
async fn idle(limit: Option<Duration>, count: Arc<ConnectionCount>, daemon: Arc<Daemon>) {
    let Some(limit) = limit else {
        return std::future::pending().await;
    };
    let tick = (limit / 4).clamp(Duration::from_millis(50), Duration::from_secs(30));
    let mut since = Instant::now();
    loop {
        tokio::time::sleep(tick).await;
        if count.get() > 0 || daemon.client_count() > 0 || daemon.any_turn_running() {
            since = Instant::now();
        } else if since.elapsed() >= limit {
            return;
        }
    }
}

/// `tandem serve --status`: prints what the running serve says.
pub async fn status(home: PathBuf) -> u8 {
    let info = match state::read_info(&home) {
        Ok(Some(info)) if state::is_running(&home) => info,
        Ok(_) => {
            println!("tandem serve is not running");
            return 3;
        }
        Err(e) => {
            eprintln!("tandem serve: {e}");
            return 1;
        }
    };
    match client::call(&info, "serve/status").await {
        Ok(status) => {
            println!(
                "tandem serve {} running: pid {}, port {}, {} client(s), {}",
                status["version"].as_str().unwrap_or("?"),
                status["pid"],
                status["port"],
                status["clients"],
                if status["turnRunning"] == true {
                    "a turn is running"
                } else {
                    "no turn running"
                }
            );
            0
        }
        Err(e) => {
            eprintln!(
                "tandem serve: pid {} holds the lock but does not answer: {e}",
                info.pid
            );
            1
        }
    }
}

/// `tandem serve --stop`: asks the running serve to stop and waits (up to
/// 10 s) until its process is gone: it releases its lock just before it
/// exits, and its sessions' locks (which name its pid) only when it has
/// (a serve started right after the lock is released could otherwise find
/// them taken).
pub async fn stop(home: PathBuf) -> u8 {
    let info = match state::read_info(&home) {
        Ok(Some(info)) if state::is_running(&home) => info,
        Ok(_) => {
            println!("tandem serve is not running");
            return 0;
        }
        Err(e) => {
            eprintln!("tandem serve: {e}");
            return 1;
        }
    };
    if let Err(e) = client::call(&info, "serve/stop").await {
        eprintln!("tandem serve: cannot ask pid {} to stop: {e}", info.pid);
        return 1;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while state::is_running(&home) || process_alive(info.pid) {
        if Instant::now() >= deadline {
            eprintln!("tandem serve: pid {} did not stop within 10 s", info.pid);
            return 1;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    println!("tandem serve (pid {}) stopped", info.pid);
    0
}
