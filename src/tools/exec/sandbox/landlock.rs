//! The filesystem half of the sandbox: a Landlock ruleset that handles
//! every filesystem right the kernel knows, grants the read rights beneath
//! `/` and every right beneath the writable paths. Where the network
//! namespace cannot be made, the same ruleset also handles TCP `connect`
//! and `bind` (ABI 4, Linux 6.7) with no port allowed, and scopes abstract
//! Unix sockets to the sandbox where the kernel can (ABI 6): the network
//! fallback, with `seccomp.rs` for the other sockets.
//!
//! Best effort across kernels for the filesystem (the crate's default): an
//! older ABI enforces what it can. The network rules are a hard
//! requirement: a kernel without them fails to create the ruleset rather
//! than run the command with its network. A kernel without Landlock at all
//! is caught by the probe first, and by [`restrict_self`] refusing to run
//! unconfined.

use std::io;

use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

use super::probe::LandlockSupport;
use super::SandboxPolicy;

/// The newest ABI this code asks for; the kernel grants what it has.
const ABI_WANTED: ABI = ABI::V6;

/// The first ABI with network rules.
const ABI_NETWORK: ABI = ABI::V4;

/// The ruleset of `policy`, created (with its file descriptor) in the
/// parent; `network_rules` adds the TCP denials of the fallback. Writable
/// paths that do not exist are skipped.
pub(super) fn ruleset(policy: &SandboxPolicy, network_rules: bool) -> io::Result<RulesetCreated> {
    let to_io = |e: landlock::RulesetError| io::Error::other(format!("landlock: {e}"));
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(ABI_WANTED))
        .map_err(to_io)?;
    if network_rules {
        // Handled with no rule: every TCP connect and bind is denied.
        ruleset = ruleset
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessNet::from_all(ABI_NETWORK))
            .map_err(to_io)?
            .set_compatibility(CompatLevel::BestEffort)
            .scope(Scope::AbstractUnixSocket)
            .map_err(to_io)?;
    }
    ruleset
        .create()
        .map_err(to_io)?
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(ABI_WANTED)))
        .map_err(to_io)?
        .add_rules(path_beneath_rules(
            &policy.writable,
            AccessFs::from_all(ABI_WANTED),
        ))
        .map_err(to_io)
}

/// Confines the calling process (the forked child) to `ruleset`, with
/// `no_new_privs`. Allocation-free on every path: the errors are plain
/// errno values, which is all `exec`'s error pipe carries anyway.
pub(super) fn restrict_self(ruleset: RulesetCreated) -> io::Result<()> {
    match ruleset.restrict_self() {
        Ok(status) if status.ruleset != RulesetStatus::NotEnforced => Ok(()),
        Ok(_) => Err(io::Error::from_raw_os_error(libc::ENOSYS)),
        Err(_) => Err(io::Error::from_raw_os_error(libc::EPERM)),
    }
}

/// The kernel's Landlock, or why there is none, from the crate's own
/// status: a throwaway thread restricts itself (a Landlock domain and
/// `no_new_privs` are per thread, and end with it) and reads the status
/// that `restrict_self` reports.
pub(super) fn support() -> Result<LandlockSupport, String> {
    let probe = std::thread::Builder::new()
        .name("landlock-probe".to_string())
        .spawn(|| {
            Ruleset::default()
                .handle_access(AccessFs::from_all(ABI_WANTED))?
                .create()?
                .restrict_self()
        })
        .map_err(|e| format!("Landlock could not be probed: {e}"))?;
    let status = probe
        .join()
        .map_err(|_| "Landlock could not be probed: the probe panicked".to_string())?
        .map_err(|e| format!("Landlock is not usable: {e}"))?;
    match status.landlock {
        LandlockStatus::Available {
            effective_abi,
            kernel_abi,
        } => Ok(LandlockSupport {
            abi: kernel_abi.map_or(effective_abi as i64, i64::from),
            network_rules: effective_abi >= ABI_NETWORK,
        }),
        LandlockStatus::NotImplemented => {
            Err("the kernel has no Landlock (Linux 5.13 or later needed)".to_string())
        }
        LandlockStatus::NotEnabled => Err(
            "Landlock is disabled in this kernel (add `landlock` to the `lsm=` boot parameter)"
                .to_string(),
        ),
    }
}
