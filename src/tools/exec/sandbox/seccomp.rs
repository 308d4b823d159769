//! The socket half of the network fallback: a seccomp filter that refuses
//! every socket but Unix ones and TCP, for machines where the network
//! namespace cannot be made (unprivileged user namespaces blocked).
//! Landlock's network rules (`landlock.rs`) then deny TCP `connect` and
//! `bind`; together no packet leaves the command but through a Unix socket.
//!
//! Refused with `EACCES`, the errno Landlock gives a denied connection:
//! - `socket` of any family but `AF_UNIX`, `AF_INET`, `AF_INET6`
//!   (netlink, packet, vsock, ...), and of `AF_INET`/`AF_INET6` any type
//!   but `SOCK_STREAM` with protocol 0 or TCP (so UDP, raw, SCTP, MPTCP);
//! - `socketpair` of any family but `AF_UNIX`;
//! - `sendto`, `sendmsg`, `sendmmsg` with `MSG_FASTOPEN`, which connects
//!   a TCP socket without `connect`;
//! - `io_uring_setup`: io_uring ops (`IORING_OP_SOCKET`) never pass
//!   through seccomp. Programs fall back to plain system calls.
//! - On x86_64, the x32 entries of all these. A system call of another
//!   architecture (i386's `int 0x80`) kills the process (seccompiler's
//!   architecture check), so 32-bit programs do not run in the fallback.

use std::collections::BTreeMap;
use std::io;

use seccompiler::{
    BackendError, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch,
};

/// `__X32_SYSCALL_BIT`: x32 system calls are x86_64's numbers with this
/// bit set, checked against the same architecture.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: i64 = 0x4000_0000;

/// x32's own numbers of `sendmsg` and `sendmmsg` (x86_64's differ).
#[cfg(target_arch = "x86_64")]
const X32_SENDMSG: i64 = 518;
#[cfg(target_arch = "x86_64")]
const X32_SENDMMSG: i64 = 538;

/// The low bits of `socket`'s type that hold the type (`SOCK_TYPE_MASK`);
/// the rest are `SOCK_NONBLOCK` and `SOCK_CLOEXEC`.
const SOCK_TYPE_MASK: u64 = 0xf;

/// The compiled filter, made in the parent (it allocates).
pub(super) fn program() -> io::Result<BpfProgram> {
    fn to_io(e: impl std::fmt::Display) -> io::Error {
        io::Error::other(format!("seccomp: {e}"))
    }
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| {
        io::Error::new(
            io::ErrorKind::Unsupported,
            format!("seccomp: no filter for {}: {e}", std::env::consts::ARCH),
        )
    })?;
    let filter = SeccompFilter::new(
        rules().map_err(to_io)?,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .map_err(to_io)?;
    BpfProgram::try_from(filter).map_err(to_io)
}

/// Installs `program` on the calling (forked) thread. It sets
/// `no_new_privs` first, as an unprivileged filter must. No allocation:
/// the errors are plain errno values.
pub(super) fn apply(program: &BpfProgram) -> io::Result<()> {
    seccompiler::apply_filter(program).map_err(|e| match e {
        seccompiler::Error::Prctl(e) | seccompiler::Error::Seccomp(e) => e,
        _ => io::Error::from_raw_os_error(libc::EPERM),
    })
}

type Rules = BTreeMap<i64, Vec<SeccompRule>>;

fn rules() -> Result<Rules, BackendError> {
    let mut socket = vec![SeccompRule::new(vec![
        arg(0, SeccompCmpOp::Ne, libc::AF_UNIX)?,
        arg(0, SeccompCmpOp::Ne, libc::AF_INET)?,
        arg(0, SeccompCmpOp::Ne, libc::AF_INET6)?,
    ])?];
    for family in [libc::AF_INET, libc::AF_INET6] {
        // Every type but SOCK_STREAM, whatever the flags beside it.
        for kind in (0..=SOCK_TYPE_MASK as i32).filter(|k| *k != libc::SOCK_STREAM) {
            socket.push(SeccompRule::new(vec![
                arg(0, SeccompCmpOp::Eq, family)?,
                arg(1, SeccompCmpOp::MaskedEq(SOCK_TYPE_MASK), kind)?,
            ])?);
        }
        // A stream of another protocol than TCP: 1..=5 and above 6.
        socket.push(SeccompRule::new(vec![
            arg(0, SeccompCmpOp::Eq, family)?,
            arg(2, SeccompCmpOp::Gt, libc::IPPROTO_TCP)?,
        ])?);
        socket.push(SeccompRule::new(vec![
            arg(0, SeccompCmpOp::Eq, family)?,
            arg(2, SeccompCmpOp::Ne, 0)?,
            arg(2, SeccompCmpOp::Lt, libc::IPPROTO_TCP)?,
        ])?);
    }
    let socketpair = vec![SeccompRule::new(vec![arg(
        0,
        SeccompCmpOp::Ne,
        libc::AF_UNIX,
    )?])?];
    let fastopen = |index| -> Result<Vec<SeccompRule>, BackendError> {
        let flag = libc::MSG_FASTOPEN as u32 as u64;
        Ok(vec![SeccompRule::new(vec![SeccompCondition::new(
            index,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(flag),
            flag,
        )?])?])
    };
    let mut rules = Rules::new();
    rules.insert(libc::SYS_socket, socket);
    rules.insert(libc::SYS_socketpair, socketpair);
    rules.insert(libc::SYS_sendto, fastopen(3)?);
    rules.insert(libc::SYS_sendmsg, fastopen(2)?);
    rules.insert(libc::SYS_sendmmsg, fastopen(3)?);
    // No conditions: always refused.
    rules.insert(libc::SYS_io_uring_setup, Vec::new());
    #[cfg(target_arch = "x86_64")]
    for number in [
        libc::SYS_socket,
        libc::SYS_socketpair,
        libc::SYS_sendto,
        X32_SENDMSG,
        X32_SENDMMSG,
        libc::SYS_io_uring_setup,
    ] {
        rules.insert(number | X32_SYSCALL_BIT, Vec::new());
    }
    Ok(rules)
}

/// A condition on an `int` argument (its low 32 bits: the kernel ignores
/// the rest, so must the filter).
fn arg(index: u8, op: SeccompCmpOp, value: i32) -> Result<SeccompCondition, BackendError> {
    SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value as u32 as u64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_filter_compiles_for_this_architecture_within_the_kernel_limit() {
        // BPF_MAXINSNS: a longer program is refused by seccomp(2).
        let program = super::program().expect("compiles");
        assert!(
            !program.is_empty() && program.len() <= 4096,
            "{}",
            program.len()
        );
    }
}
