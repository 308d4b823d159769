//! Whether this machine can sandbox commands, found out once per process
//! and logged once.
//!
//! `TANDEM_SANDBOX_SIMULATE_UNAVAILABLE=1` makes the answer "no", so the
//! fallback (ask before every command) can be tested on a machine that has
//! the sandbox.

use std::sync::OnceLock;

/// The environment variable that simulates a machine without the sandbox.
pub const SIMULATE_UNAVAILABLE_ENV: &str = "TANDEM_SANDBOX_SIMULATE_UNAVAILABLE";

/// What the sandbox can use here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSupport {
    /// The Landlock ABI version (filesystem confinement), or why none.
    pub filesystem: Result<i64, String>,
    /// Whether unprivileged user + network namespaces work (network
    /// isolation), or why not.
    pub network: Result<(), String>,
}

impl SandboxSupport {
    /// Whether both halves work.
    pub fn available(&self) -> bool {
        self.filesystem.is_ok() && self.network.is_ok()
    }

    /// One line for logs and for the user.
    pub fn summary(&self) -> String {
        match (&self.filesystem, &self.network) {
            (Ok(abi), Ok(())) => {
                format!("exec sandbox available: Landlock ABI {abi}, user and network namespaces")
            }
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

fn detect() -> SandboxSupport {
    if std::env::var_os(SIMULATE_UNAVAILABLE_ENV).is_some_and(|v| !v.is_empty() && v != "0") {
        let why = format!("simulated ({SIMULATE_UNAVAILABLE_ENV} is set)");
        return SandboxSupport {
            filesystem: Err(why.clone()),
            network: Err(why),
        };
    }
    detect_platform()
}

#[cfg(target_os = "linux")]
fn detect_platform() -> SandboxSupport {
    SandboxSupport {
        filesystem: super::landlock::abi_version(),
        network: network_namespaces_work(),
    }
}

#[cfg(not(target_os = "linux"))]
fn detect_platform() -> SandboxSupport {
    let why = "no exec sandbox on this platform (Linux only)".to_string();
    SandboxSupport {
        filesystem: Err(why.clone()),
        network: Err(why),
    }
}

/// Starts `/bin/sh -c 'exit 0'` in fresh user and network namespaces, the
/// way commands will be: the only sure test (distributions switch
/// unprivileged user namespaces off in several ways).
#[cfg(target_os = "linux")]
fn network_namespaces_work() -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let entry = super::netns::Entry::new();
    let mut command = std::process::Command::new("/bin/sh");
    command
        .args(["-c", "exit 0"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: the hook only makes system calls (see `Entry::enter`).
    unsafe {
        command.pre_exec(move || entry.enter());
    }
    match command.status() {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!("a command in a new network namespace failed ({status})")),
        Err(e) => Err(format!(
            "unprivileged user and network namespaces do not work here ({e}; see `unshare -rn true`)"
        )),
    }
}
