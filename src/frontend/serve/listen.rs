//! The serve's two listeners, one jsonrpsee service behind both: the
//! loopback TCP port (any client that speaks WebSocket) and the Unix socket
//! `$TANDEM_HOME/serve.sock`, which the shims prefer (a hop over it is
//! cheaper than over loopback TCP: BENCHMARKS.md §9).
//!
//! Invariant: both listeners hand every connection to the same service
//! (bearer token and Origin check, connection limit, message limits, graceful
//! stop); the socket's file mode (0600, in the 0700 home) is a second wall
//! in front of that check, not a replacement for it. The socket file is
//! only created, replaced or removed while this serve holds the lock.

use std::future::Future;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use jsonrpsee::server::StopHandle;
use tokio::net::{TcpListener, UnixListener};

use super::stream::Stream;

/// Serves one accepted connection to its end.
pub type ServeConnection =
    Arc<dyn Fn(Stream) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// `sun_path`'s size on Linux; a path must be shorter (its NUL ends it).
const SUN_PATH: usize = 108;

pub fn socket_path(home: &Path) -> PathBuf {
    home.join("serve.sock")
}

/// The socket file this serve made; removed when dropped, if it is still
/// the one we made.
pub struct SocketFile {
    path: PathBuf,
    id: (u64, u64),
}

impl SocketFile {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.id) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Listens on `$TANDEM_HOME/serve.sock`, mode 0600 from the moment that
/// name exists: bound under a temporary name, narrowed, then renamed over
/// whatever a killed serve left there. The caller holds the serve lock and
/// has checked the home. `None` (and a log line saying why) when the socket
/// cannot be made: the serve then runs on its TCP port alone.
pub fn bind_unix(home: &Path) -> Option<(UnixListener, SocketFile)> {
    let path = socket_path(home);
    let tmp = home.join(".serve.sock");
    if tmp.as_os_str().len() >= SUN_PATH {
        tracing::warn!(
            "no Unix socket: {} is longer than a socket path may be ({} bytes); \
             clients use the TCP port",
            tmp.display(),
            SUN_PATH - 1
        );
        return None;
    }
    match bind_at(&tmp, &path) {
        Ok(bound) => Some(bound),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            tracing::warn!(
                "no Unix socket at {}: {e}; clients use the TCP port",
                path.display()
            );
            None
        }
    }
}

fn bind_at(tmp: &Path, path: &Path) -> std::io::Result<(UnixListener, SocketFile)> {
    // Ours to remove: we hold the lock, so no running serve owns it.
    match std::fs::remove_file(tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let listener = UnixListener::bind(tmp)?;
    std::fs::set_permissions(tmp, std::fs::Permissions::from_mode(0o600))?;
    // A socket file a killed serve left behind is replaced here; anything
    // else at that name (a directory) makes the rename fail.
    if std::fs::symlink_metadata(path).is_ok_and(|m| !m.file_type().is_dir()) {
        tracing::info!("replacing {} left by an earlier serve", path.display());
    }
    std::fs::rename(tmp, path)?;
    let meta = std::fs::symlink_metadata(path)?;
    Ok((
        listener,
        SocketFile {
            path: path.to_path_buf(),
            id: (meta.dev(), meta.ino()),
        },
    ))
}

/// One of the serve's two listeners.
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

impl Listener {
    async fn accept(&self) -> std::io::Result<Stream> {
        match self {
            Listener::Tcp(listener) => {
                let (socket, _) = listener.accept().await?;
                // As jsonrpsee's own server does: a chunk's frame goes out
                // now, not after the next one.
                let _ = socket.set_nodelay(true);
                Ok(Stream::Tcp(socket))
            }
            Listener::Unix(listener) => Ok(Stream::Unix(listener.accept().await?.0)),
        }
    }
}

/// Accepts on `listener` until the serve stops.
pub async fn accept(listener: Listener, serve: ServeConnection, stop: StopHandle) {
    let stopped = stop.shutdown();
    tokio::pin!(stopped);
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => match accepted {
                Ok(stream) => {
                    tokio::spawn(serve(stream));
                }
                Err(e) => accept_failed(e).await,
            },
        }
    }
}

/// An accept that failed (out of file descriptors, a connection reset
/// before it was taken): logged, and a short pause so a lasting failure
/// does not spin.
async fn accept_failed(e: std::io::Error) {
    tracing::debug!("accepting a connection failed: {e}");
    tokio::time::sleep(Duration::from_millis(10)).await;
}
