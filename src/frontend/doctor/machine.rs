//! This machine: whether `TANDEM_HOME` can be written, and which exec
//! sandbox holds commands here (or why none).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::config::sandbox::{SandboxConfig, SandboxMode};
use crate::tools::exec::sandbox::probe::{self, NetworkIsolation, SandboxSupport};

use super::{Check, Section, Status};

/// `TANDEM_HOME` (sessions, logs, checkpoints) must be writable: a file is
/// written and removed there. A home that does not exist yet is judged by
/// its nearest existing parent, where the daemon will create it (nothing
/// is created here).
pub(super) fn home_writable(home: &Path) -> Check {
    let fix = "make it writable by you (chown or chmod), or set TANDEM_HOME to a directory you own";
    let shown = home.display();
    if home.is_dir() {
        let probe = home.join(format!(".doctor-{}.tmp", std::process::id()));
        return match std::fs::write(&probe, b"tandem doctor\n") {
            Ok(()) => {
                let _ = std::fs::remove_file(&probe);
                Check::new(
                    "state.home",
                    Section::State,
                    Status::Ok,
                    format!("TANDEM_HOME {shown} is writable"),
                )
            }
            Err(e) => Check::new(
                "state.home",
                Section::State,
                Status::Fail,
                format!("TANDEM_HOME {shown} is not writable: {e}"),
            )
            .with_fix(fix),
        };
    }
    if home.exists() {
        return Check::new(
            "state.home",
            Section::State,
            Status::Fail,
            format!("TANDEM_HOME {shown} is not a directory"),
        )
        .with_fix("remove that file, or set TANDEM_HOME to a directory you own");
    }
    // The nearest thing that exists: a file there means no directory can be.
    let parent = home.ancestors().skip(1).find(|p| p.exists());
    match parent {
        Some(parent) if parent.is_dir() && writable(parent) => Check::new(
            "state.home",
            Section::State,
            Status::Ok,
            format!(
                "TANDEM_HOME {shown} does not exist yet; it will be created in {}",
                parent.display()
            ),
        ),
        _ => Check::new(
            "state.home",
            Section::State,
            Status::Fail,
            format!("TANDEM_HOME {shown} does not exist and cannot be created"),
        )
        .with_fix(fix),
    }
}

fn writable(path: &Path) -> bool {
    let Ok(c_path) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a valid C string; access(2) only reads it.
    unsafe { libc::access(c_path.as_ptr(), libc::W_OK) == 0 }
}

/// The mechanism in force, or why there is none and what would give one.
pub(super) fn sandbox(config: &SandboxConfig) -> Vec<Check> {
    let support = probe::support();
    let mut checks = vec![mechanism(support)];
    if config.mode == SandboxMode::Off {
        checks.push(
            Check::new(
                "sandbox.mode",
                Section::Sandbox,
                Status::Warn,
                "sandbox.mode = \"off\": commands run unconfined, with your rights and network \
                 (unasked in auto mode)",
            )
            .with_fix("remove `mode = \"off\"` from [sandbox] to confine commands again"),
        );
    } else if config.network {
        checks.push(Check::new(
            "sandbox.mode",
            Section::Sandbox,
            Status::Ok,
            format!(
                "sandbox.mode = \"{}\", with sandbox.network = true: commands keep the network",
                config.mode.as_str()
            ),
        ));
    }
    checks
}

fn mechanism(support: &SandboxSupport) -> Check {
    let status = if support.available() {
        Status::Ok
    } else {
        Status::Warn
    };
    let check = Check::new(
        "sandbox.mechanism",
        Section::Sandbox,
        status,
        support.summary(),
    );
    match (&support.filesystem, &support.network) {
        (Ok(_), Ok(NetworkIsolation::Namespaces)) => check,
        (Ok(_), Ok(NetworkIsolation::LandlockSeccomp)) => Check {
            message: format!(
                "{}\nfor a loopback of their own: allow unprivileged user namespaces (see \
                 `unshare -rn true`; Ubuntu: `sudo sysctl -w \
                 kernel.apparmor_restrict_unprivileged_userns=0`), or set sandbox.network = true",
                check.message
            ),
            ..check
        },
        (Err(why), _) | (_, Err(why)) => check.with_fix(unavailable_fix(why)),
    }
}

/// What gives this machine a sandbox, from the probe's reason.
fn unavailable_fix(why: &str) -> String {
    if why.contains("simulated") {
        return format!(
            "unset {} and {} (switches for tests)",
            probe::SIMULATE_UNAVAILABLE_ENV,
            probe::SIMULATE_NO_NAMESPACES_ENV
        );
    }
    if why.contains("platform") {
        return "there is none on this platform: every command asks; sandbox.mode = \"off\" runs \
                them unconfined instead (unasked in auto mode)"
            .to_string();
    }
    if why.contains("no Landlock") {
        return "boot Linux 5.13 or later with Landlock built in".to_string();
    }
    if why.contains("Landlock is disabled") {
        return "add `landlock` to the kernel's `lsm=` boot parameter".to_string();
    }
    "allow unprivileged user namespaces (check with `unshare -rn true`; Ubuntu 24.04: \
     `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`; Debian before 11: \
     `sudo sysctl -w kernel.unprivileged_userns_clone=1`), or boot Linux 6.7 or later, whose \
     Landlock confines the network without them"
        .to_string()
}
