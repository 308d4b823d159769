//! What a running serve leaves on disk for its clients: `serve.json` (port,
//! pid, token, version, socket) and the lock that keeps a second serve out.
//!
//! Invariant: the token is only ever written to a file of mode 0600 in a
//! directory no one else can write to; a serve.json or home that others
//! could write (or read, for serve.json) is refused, never used.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The contents of `$TANDEM_HOME/serve.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServeInfo {
    pub port: u16,
    pub pid: u32,
    /// 64 hex digits (256 random bits).
    pub token: String,
    pub version: String,
    /// The Unix socket the serve also listens on (`$TANDEM_HOME/serve.sock`);
    /// absent when it could not make one (the path too long for a socket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<PathBuf>,
}

/// Why the serve's state cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is writable by other users (mode {mode:o}); run `chmod 700 {path}` first")]
    HomeNotPrivate { path: PathBuf, mode: u32 },
    #[error("{path} is readable or writable by other users (mode {mode:o}); delete it and start `tandem serve` again")]
    FileNotPrivate { path: PathBuf, mode: u32 },
    #[error("{path} is not a serve state file: {message}")]
    Malformed { path: PathBuf, message: String },
    #[error("tandem serve is already running (pid {pid}, port {port})")]
    AlreadyRunning { pid: u32, port: u16 },
    #[error("tandem serve is already running (its lock {0} is held)")]
    Locked(PathBuf),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StateError + '_ {
    move |source| StateError::Io {
        path: path.to_path_buf(),
        source,
    }
}

pub fn info_path(home: &Path) -> PathBuf {
    home.join("serve.json")
}

fn lock_path(home: &Path) -> PathBuf {
    home.join("serve.lock")
}

/// Makes `$TANDEM_HOME` if needed (mode 0700) and checks that no one else
/// can write to it; a home that is merely readable by others is narrowed to
/// 0700, since it is tandem's own state directory.
pub fn private_home(home: &Path) -> Result<(), StateError> {
    if !home.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(home)
            .map_err(io(home))?;
    }
    let mode = std::fs::metadata(home)
        .map_err(io(home))?
        .permissions()
        .mode()
        & 0o777;
    if mode & 0o022 != 0 {
        return Err(StateError::HomeNotPrivate {
            path: home.to_path_buf(),
            mode,
        });
    }
    if mode != 0o700 {
        std::fs::set_permissions(home, std::fs::Permissions::from_mode(0o700)).map_err(io(home))?;
    }
    Ok(())
}

/// The lock a serve holds for as long as it runs (an advisory `flock`, so
/// it goes away with the process however it ends).
pub struct ServeLock {
    _file: File,
}

impl ServeLock {
    /// Takes the lock, or says which serve holds it.
    pub fn acquire(home: &Path) -> Result<ServeLock, StateError> {
        let path = lock_path(home);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(io(&path))?;
        match file.try_lock() {
            Ok(()) => Ok(ServeLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => Err(match read_info(home) {
                Ok(Some(info)) => StateError::AlreadyRunning {
                    pid: info.pid,
                    port: info.port,
                },
                _ => StateError::Locked(path),
            }),
            Err(std::fs::TryLockError::Error(e)) => Err(io(&path)(e)),
        }
    }
}

/// Whether a serve holds the lock right now.
pub fn is_running(home: &Path) -> bool {
    let Ok(file) = File::open(lock_path(home)) else {
        return false;
    };
    matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock))
}

/// Writes serve.json (mode 0600 from its creation: written to a temporary
/// file of that mode, then renamed over the old one).
pub fn write_info(home: &Path, info: &ServeInfo) -> Result<(), StateError> {
    let path = info_path(home);
    let tmp = home.join(format!(".serve.json.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut file = OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io(&tmp))?;
    let body = serde_json::to_vec_pretty(info).unwrap_or_default();
    file.write_all(&body)
        .and_then(|_| file.sync_all())
        .map_err(io(&tmp))?;
    std::fs::rename(&tmp, &path).map_err(io(&path))
}

/// Removes serve.json if it is still ours.
pub fn remove_info(home: &Path, pid: u32) {
    if let Ok(Some(info)) = read_info(home) {
        if info.pid == pid {
            let _ = std::fs::remove_file(info_path(home));
        }
    }
}

/// Reads serve.json; `None` when there is none. Refuses a file others may
/// read or write, or a home others may write.
pub fn read_info(home: &Path) -> Result<Option<ServeInfo>, StateError> {
    let path = info_path(home);
    let meta = match std::fs::metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&path)(e)),
    };
    let home_mode = std::fs::metadata(home)
        .map_err(io(home))?
        .permissions()
        .mode()
        & 0o777;
    if home_mode & 0o022 != 0 {
        return Err(StateError::HomeNotPrivate {
            path: home.to_path_buf(),
            mode: home_mode,
        });
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(StateError::FileNotPrivate { path, mode });
    }
    let text = std::fs::read_to_string(&path).map_err(io(&path))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| StateError::Malformed {
            path,
            message: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> ServeInfo {
        ServeInfo {
            port: 4242,
            pid: std::process::id(),
            token: "ab".repeat(32),
            version: "0.1.0".into(),
            socket: Some(PathBuf::from("/run/home/serve.sock")),
        }
    }

    #[test]
    fn serve_json_is_written_0600_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        private_home(&home).unwrap();
        assert_eq!(
            std::fs::metadata(&home).unwrap().permissions().mode() & 0o777,
            0o700
        );
        write_info(&home, &info()).unwrap();
        let mode = std::fs::metadata(info_path(&home))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(read_info(&home).unwrap(), Some(info()));
    }

    #[test]
    fn a_serve_json_others_can_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        private_home(&home).unwrap();
        write_info(&home, &info()).unwrap();
        std::fs::set_permissions(info_path(&home), std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            read_info(&home),
            Err(StateError::FileNotPrivate { .. })
        ));
    }

    #[test]
    fn a_home_others_can_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir(&home).unwrap();
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(matches!(
            private_home(&home),
            Err(StateError::HomeNotPrivate { .. })
        ));
    }

    #[test]
    fn the_lock_keeps_a_second_serve_out() {
        let dir = tempfile::tempdir().unwrap();
        let _first = ServeLock::acquire(dir.path()).unwrap();
        assert!(is_running(dir.path()));
        assert!(ServeLock::acquire(dir.path()).is_err());
    }
}
