//! Whether this machine can sandbox commands, and with which mechanism,
//! found out once per process and logged once.
//!
//! Two switches, for tests only (never for users):
//! - `TANDEM_SANDBOX_SIMULATE_UNAVAILABLE=1` makes the answer "no", so the
//!   fallback (ask before every command) can be tested on a machine that
//!   has the sandbox.
//! - `TANDEM_SANDBOX_SIMULATE_NO_NAMESPACES=1` reports user namespaces as
//!   blocked, so the network fallback (Landlock's TCP rules and a seccomp
//!   socket filter) is what confines commands, as on Ubuntu 24.04.

use std::sync::OnceLock;

/// The environment variable that simulates a machine without the sandbox.
pub const SIMULATE_UNAVAILABLE_ENV: &str = "TANDEM_SANDBOX_SIMULATE_UNAVAILABLE";

/// The environment variable (test-only) that simulates a machine whose
/// unprivileged user namespaces are blocked.
pub const SIMULATE_NO_NAMESPACES_ENV: &str = "TANDEM_SANDBOX_SIMULATE_NO_NAMESPACES";

/// What the kernel's Landlock offers, as the landlock crate reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LandlockSupport {
    /// The kernel's ABI version.
    pub abi: i64,
    /// Whether it has the network rules (ABI 4, Linux 6.7, or later).
    pub network_rules: bool,
}

/// How a command's network is taken away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkIsolation {
    /// A user and network namespace of its own: only its own loopback.
    Namespaces,
    /// Where namespaces are blocked: Landlock denies every TCP connect and
    /// bind, a seccomp filter refuses every socket but Unix and TCP ones.
    /// No loopback of its own: the command cannot serve TCP either.
    LandlockSeccomp,
}

impl NetworkIsolation {
    /// Its name on the wire and in `tandem doctor --json`.
    pub fn name(self) -> &'static str {
        match self {
            NetworkIsolation::Namespaces => "namespaces",
            NetworkIsolation::LandlockSeccomp => "landlock+seccomp",
        }
    }
}

/// What the sandbox can use here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSupport {
    /// The Landlock ABI version (filesystem confinement), or why none.
    pub filesystem: Result<i64, String>,
    /// The mechanism that isolates the network, or why there is none.
    pub network: Result<NetworkIsolation, String>,
    /// Why user and network namespaces are not used, when they are not.
    pub namespaces: Result<(), String>,
}

impl SandboxSupport {
    /// Whether both halves work.
    pub fn available(&self) -> bool {
        self.filesystem.is_ok() && self.network.is_ok()
    }

    /// One line for logs and for the user, naming the mechanism in force.
    pub fn summary(&self) -> String {
        match (&self.filesystem, &self.network) {
            (Ok(abi), Ok(NetworkIsolation::Namespaces)) => {
                format!("exec sandbox available: Landlock ABI {abi}, user and network namespaces")
            }
            (Ok(abi), Ok(NetworkIsolation::LandlockSeccomp)) => format!(
                "exec sandbox available: Landlock ABI {abi} with its TCP rules and a seccomp socket filter, \
                 as user namespaces are unavailable ({}); commands cannot use TCP or UDP at all, not even \
                 on a loopback of their own",
                self.namespaces.as_ref().err().map_or("?", String::as_str)
            ),
            (Err(why), _) | (_, Err(why)) => format!(
                "exec sandbox unavailable: {why}; every command asks permission, even in auto mode"
            ),
        }
    }
}

/// The probe's result, computed (and logged) on first use.
pub fn support() -> &'static SandboxSupport {
    static SUPPORT: OnceLock<SandboxSupport> = OnceLock::new();
    SUPPORT.get_or_init(|| {
        let support = detect();
        if support.available() {
            tracing::info!("{}", support.summary());
        } else {
            tracing::warn!("{}", support.summary());
        }
        support
    })
}

fn switch_on(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0")
}

fn detect() -> SandboxSupport {
    if switch_on(SIMULATE_UNAVAILABLE_ENV) {
        let why = format!("simulated ({SIMULATE_UNAVAILABLE_ENV} is set)");
        return SandboxSupport {
            filesystem: Err(why.clone()),
            network: Err(why.clone()),
            namespaces: Err(why),
        };
    }
    detect_platform()
}

#[cfg(target_os = "linux")]
fn detect_platform() -> SandboxSupport {
    let landlock = super::landlock::support();
    let namespaces = if switch_on(SIMULATE_NO_NAMESPACES_ENV) {
        Err(format!("simulated ({SIMULATE_NO_NAMESPACES_ENV} is set)"))
    } else {
        network_namespaces_work()
    };
    let network = match (&namespaces, &landlock) {
        (Ok(()), _) => Ok(NetworkIsolation::Namespaces),
        // Without Landlock the filesystem's reason says it all.
        (Err(ns), Err(_)) => Err(ns.clone()),
        (Err(ns), Ok(landlock)) if !landlock.network_rules => Err(format!(
            "{ns}; and Landlock ABI {} has no network rules to fall back on (ABI 4, Linux 6.7 or later)",
            landlock.abi
        )),
        (Err(ns), Ok(_)) => fallback_works()
            .map(|()| NetworkIsolation::LandlockSeccomp)
            .map_err(|e| format!("{ns}; and the Landlock + seccomp fallback failed: {e}")),
    };
    SandboxSupport {
        filesystem: landlock.map(|l| l.abi),
        network,
        namespaces,
    }
}

#[cfg(not(target_os = "linux"))]
fn detect_platform() -> SandboxSupport {
    let why = "no exec sandbox on this platform (Linux only)".to_string();
    SandboxSupport {
        filesystem: Err(why.clone()),
        network: Err(why.clone()),
        namespaces: Err(why),
    }
}

/// Starts `/bin/sh -c 'exit 0'` in fresh user and network namespaces, the
/// way commands will be: the only sure test (distributions switch
/// unprivileged user namespaces off in several ways).
#[cfg(target_os = "linux")]
fn network_namespaces_work() -> Result<(), String> {
    let entry = super::netns::Entry::new();
    // SAFETY: the hook only makes system calls (see `Entry::enter`).
    match unsafe { run_probe(move || entry.enter()) } {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!("a command in a new network namespace failed ({status})")),
        Err(e) => Err(format!(
            "unprivileged user and network namespaces do not work here ({e}; see `unshare -rn true`)"
        )),
    }
}

/// Starts `/bin/sh -c 'exit 0'` under the fallback, as commands will be,
/// after checking in the child that a UDP socket is refused.
#[cfg(target_os = "linux")]
fn fallback_works() -> Result<(), String> {
    let policy = super::SandboxPolicy {
        writable: vec!["/dev/null".into()],
        network: false,
        read_only: true,
    };
    let mut confinement = policy
        .prepare_with(Some(NetworkIsolation::LandlockSeccomp))
        .map_err(|e| e.to_string())?;
    let hook = move || {
        confinement.enter()?;
        // SAFETY: socket takes plain values; a descriptor it returns is
        // closed at once.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
        if fd >= 0 {
            unsafe { libc::close(fd) };
            return Err(std::io::Error::from_raw_os_error(libc::EPROTO));
        }
        Ok(())
    };
    // SAFETY: the hook only makes system calls (see
    // `ChildConfinement::enter`).
    match unsafe { run_probe(hook) } {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!("a command under it failed ({status})")),
        Err(e) if e.raw_os_error() == Some(libc::EPROTO) => {
            Err("the seccomp filter let a UDP socket through".to_string())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Runs `/bin/sh -c 'exit 0'` with `hook` between fork and exec.
///
/// # Safety
/// `hook` runs in the forked child: it must only make system calls (no
/// allocation, no locks).
#[cfg(target_os = "linux")]
unsafe fn run_probe(
    hook: impl FnMut() -> std::io::Result<()> + Send + Sync + 'static,
) -> std::io::Result<std::process::ExitStatus> {
    use std::os::unix::process::CommandExt;
    let mut command = std::process::Command::new("/bin/sh");
    command
        .args(["-c", "exit 0"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: the caller's promise.
    unsafe {
        command.pre_exec(hook);
    }
    command.status()
}
