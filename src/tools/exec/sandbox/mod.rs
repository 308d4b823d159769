//! The exec sandbox: what a command may touch, and the mechanism that holds
//! it to that on Linux.
//!
//! - Filesystem (`landlock.rs`): Landlock lets the command read everywhere
//!   and write only beneath the policy's writable paths (the workspace
//!   roots, the system temp dir, `[sandbox] writable`, a few device files).
//!   The kernel checks the resolved path, so `..`, symlinks and
//!   `/proc/self/cwd` lead nowhere else.
//! - Network (`netns.rs`): unless `[sandbox] network = true`, the command
//!   gets a user and network namespace of its own, whose only interface is
//!   its own loopback. Where unprivileged user namespaces are blocked
//!   (Ubuntu 24.04 and later), the fallback: Landlock's network rules deny
//!   every TCP connect and bind (`landlock.rs`) and a seccomp filter
//!   refuses every other socket but Unix ones (`seccomp.rs`).
//! - Both are entered in the forked child before `exec` and inherited by
//!   everything the command starts; nothing can leave them.
//! - `probe.rs` finds out once whether this machine can do both, and how;
//!   `denial.rs` tells the model when a failure came from the sandbox.
//!
//! Invariant: a command that should be confined and cannot be is never run
//! silently: [`Confinement::Unavailable`] makes the driver ask the user.

pub mod denial;
#[cfg(target_os = "linux")]
mod landlock;
#[cfg(target_os = "linux")]
mod netns;
pub mod probe;
#[cfg(target_os = "linux")]
mod seccomp;
#[cfg(all(test, target_os = "linux"))]
mod tests;

use std::io;
use std::path::{Path, PathBuf};

use crate::config::sandbox::{SandboxConfig, SandboxMode};
#[cfg(target_os = "linux")]
use probe::NetworkIsolation;

/// Device files every confined command may write: output sinks and
/// terminals that tools open as a matter of course.
const WRITABLE_DEVICES: [&str; 8] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// What one confined command may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// Paths beneath which the command may write (and create, delete,
    /// rename); everything else is read-only.
    pub writable: Vec<PathBuf>,
    /// Whether the command keeps the host's network.
    pub network: bool,
    /// `read-only` mode: `writable` holds only the device files.
    pub read_only: bool,
}

/// How a command will run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confinement {
    /// Inside the sandbox, under this policy.
    Sandboxed(SandboxPolicy),
    /// `[sandbox] mode = "off"`: unconfined by the user's choice.
    Off,
    /// The sandbox is wanted but this machine cannot provide it; the
    /// reason, for the user.
    Unavailable(String),
}

impl Confinement {
    /// How a command with this `config` in a workspace with these `roots`
    /// runs on this machine.
    pub fn plan(config: &SandboxConfig, roots: &[PathBuf]) -> Confinement {
        if config.mode == SandboxMode::Off {
            return Confinement::Off;
        }
        let support = probe::support();
        if let Err(why) = &support.filesystem {
            return Confinement::Unavailable(why.clone());
        }
        if !config.network {
            if let Err(why) = &support.network {
                return Confinement::Unavailable(why.clone());
            }
        }
        Confinement::Sandboxed(SandboxPolicy::new(config, roots))
    }

    /// Whether the command runs confined.
    pub fn is_sandboxed(&self) -> bool {
        matches!(self, Confinement::Sandboxed(_))
    }
}

impl SandboxPolicy {
    /// The policy of `config` (not `off`) for a workspace with `roots`.
    pub fn new(config: &SandboxConfig, roots: &[PathBuf]) -> SandboxPolicy {
        let read_only = config.mode == SandboxMode::ReadOnly;
        let mut writable: Vec<PathBuf> = WRITABLE_DEVICES.iter().map(PathBuf::from).collect();
        if !read_only {
            writable.extend(roots.iter().cloned());
            writable.push(std::env::temp_dir());
            let base = roots.first().map(PathBuf::as_path);
            writable.extend(config.writable.iter().map(|p| expand(p, base)));
        }
        SandboxPolicy {
            writable,
            network: config.network,
            read_only,
        }
    }

    /// Whether `path` (absolute) lies beneath a writable path. Both sides
    /// are compared canonicalized where they exist, as the kernel sees them.
    pub fn allows_write(&self, path: &Path) -> bool {
        let path = canonical_prefix(path);
        self.writable
            .iter()
            .any(|w| path.starts_with(canonical_prefix(w)))
    }

    /// Makes the hook that confines a forked child before it execs, with
    /// the network isolation this machine has: every allocation and path
    /// lookup happens here, in the parent.
    #[cfg(target_os = "linux")]
    pub(super) fn prepare(&self) -> io::Result<ChildConfinement> {
        let isolation = match (&probe::support().network, self.network) {
            (_, true) => None,
            (Ok(isolation), false) => Some(*isolation),
            (Err(why), false) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("no network isolation on this machine: {why}"),
                ))
            }
        };
        self.prepare_with(isolation)
    }

    /// [`prepare`](Self::prepare) with the network taken away by
    /// `isolation` (`None`: the command keeps the network).
    #[cfg(target_os = "linux")]
    fn prepare_with(&self, isolation: Option<NetworkIsolation>) -> io::Result<ChildConfinement> {
        let fallback = isolation == Some(NetworkIsolation::LandlockSeccomp);
        Ok(ChildConfinement {
            netns: (isolation == Some(NetworkIsolation::Namespaces)).then(netns::Entry::new),
            landlock: Some(landlock::ruleset(self, fallback)?),
            seccomp: fallback.then(seccomp::program).transpose()?,
        })
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn prepare(&self) -> io::Result<ChildConfinement> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the exec sandbox needs Linux",
        ))
    }
}

/// The confinement of one child, ready to enter after `fork`.
pub(super) struct ChildConfinement {
    #[cfg(target_os = "linux")]
    netns: Option<netns::Entry>,
    #[cfg(target_os = "linux")]
    landlock: Option<::landlock::RulesetCreated>,
    #[cfg(target_os = "linux")]
    seccomp: Option<::seccompiler::BpfProgram>,
}

impl ChildConfinement {
    /// Enters the namespaces, then restricts the filesystem (and, in the
    /// fallback, TCP), then installs the socket filter. Runs in the forked
    /// child between `fork` and `exec`: only system calls, no allocation,
    /// no locks. The namespaces come first, while `/proc/self` is still
    /// writable for the id maps.
    #[cfg(target_os = "linux")]
    pub(super) fn enter(&mut self) -> io::Result<()> {
        if let Some(netns) = &self.netns {
            netns.enter()?;
        }
        match self.landlock.take() {
            Some(ruleset) => landlock::restrict_self(ruleset)?,
            // A second call (there is none) must not run unconfined.
            None => return Err(io::Error::from_raw_os_error(libc::EPERM)),
        }
        match &self.seccomp {
            Some(program) => seccomp::apply(program),
            None => Ok(()),
        }
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn enter(&mut self) -> io::Result<()> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

/// `~/x` under `$HOME`, a relative path under the first workspace root.
fn expand(path: &Path, base: Option<&Path>) -> PathBuf {
    if let Ok(rest) = path.strip_prefix("~") {
        if let Some(home) = std::env::var_os("HOME") {
            return PathBuf::from(home).join(rest);
        }
    }
    match base {
        Some(base) if path.is_relative() => base.join(path),
        _ => path.to_path_buf(),
    }
}

/// `path` with its longest existing prefix canonicalized (a file about to
/// be created does not exist yet, its directory does).
fn canonical_prefix(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut current = path;
    loop {
        if let Ok(canonical) = current.canonicalize() {
            return rest.iter().rev().fold(canonical, |p, part| p.join(part));
        }
        match (current.parent(), current.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                current = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}
