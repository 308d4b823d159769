//! The network half of the sandbox: a new user namespace (so that no
//! privilege is needed) and a new network namespace, whose only interface
//! is a loopback of its own. The command can serve and reach itself on
//! 127.0.0.1 but nothing of the host's, loopback included.
//!
//! The user namespace maps the user's own uid and gid to themselves, so
//! files keep their owners and `id` reads as before.

use std::ffi::CStr;
use std::io;

/// Everything the child needs, formatted in the parent.
pub(super) struct Entry {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

impl Entry {
    pub(super) fn new() -> Self {
        // SAFETY: getuid/getgid cannot fail and touch no memory.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        Entry {
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        }
    }

    /// Moves the calling (forked, single-threaded) process into the new
    /// namespaces. Only system calls: safe between `fork` and `exec`.
    pub(super) fn enter(&self) -> io::Result<()> {
        // SAFETY: unshare takes flags only.
        if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // gid_map may only be written once setgroups is denied.
        write_file(c"/proc/self/setgroups", b"deny")?;
        write_file(c"/proc/self/uid_map", &self.uid_map)?;
        write_file(c"/proc/self/gid_map", &self.gid_map)?;
        // Without it even the namespace's own 127.0.0.1 is unreachable,
        // which breaks test suites that serve themselves; isolation holds
        // either way, so a failure is not an error.
        loopback_up();
        Ok(())
    }
}

fn write_file(path: &CStr, content: &[u8]) -> io::Result<()> {
    // SAFETY: a valid C string, a buffer with its length, and the fd
    // closed on every path.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let written = libc::write(fd, content.as_ptr().cast(), content.len());
        let error = io::Error::last_os_error();
        libc::close(fd);
        if written != content.len() as isize {
            return Err(error);
        }
    }
    Ok(())
}

fn loopback_up() {
    // SAFETY: a zeroed ifreq is valid; the name fits IFNAMSIZ; the socket
    // is closed after the one ioctl.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return;
        }
        let mut request: libc::ifreq = std::mem::zeroed();
        for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
            *slot = *byte as libc::c_char;
        }
        request.ifr_ifru.ifru_flags =
            (libc::IFF_UP | libc::IFF_LOOPBACK | libc::IFF_RUNNING) as libc::c_short;
        libc::ioctl(fd, libc::SIOCSIFFLAGS as _, &request);
        libc::close(fd);
    }
}
