//! The filesystem half of the sandbox: a Landlock ruleset that handles
//! every filesystem right the kernel knows, grants the read rights beneath
//! `/` and every right beneath the writable paths.
//!
//! Best effort across kernels (the crate's default): an older ABI enforces
//! what it can. A kernel without Landlock at all is caught by the probe
//! first, and by [`restrict_self`] refusing to run unconfined.

use std::io;

use landlock::{
    path_beneath_rules, Access, AccessFs, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr,
    RulesetStatus, ABI,
};

use super::SandboxPolicy;

/// The newest ABI this code asks for; the kernel grants what it has.
const ABI_WANTED: ABI = ABI::V6;

/// The ruleset of `policy`, created (with its file descriptor) in the
/// parent. Writable paths that do not exist are skipped.
pub(super) fn ruleset(policy: &SandboxPolicy) -> io::Result<RulesetCreated> {
    let to_io = |e: landlock::RulesetError| io::Error::other(format!("landlock: {e}"));
    Ruleset::default()
        .handle_access(AccessFs::from_all(ABI_WANTED))
        .map_err(to_io)?
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

/// The Landlock ABI version the kernel offers, or why there is none.
pub(super) fn abi_version() -> Result<i64, String> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with this flag the call reads no memory (attr is null, size 0)
    // and only returns a number.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if version >= 1 {
        Ok(version)
    } else {
        let e = io::Error::last_os_error();
        Err(match e.raw_os_error() {
            Some(libc::ENOSYS) => {
                "the kernel has no Landlock (Linux 5.13 or later needed)".to_string()
            }
            Some(libc::EOPNOTSUPP) => {
                "Landlock is disabled in this kernel (add `landlock` to the `lsm=` boot parameter)"
                    .to_string()
            }
            _ => format!("Landlock is not usable: {e}"),
        })
    }
}
