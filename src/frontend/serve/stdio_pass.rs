//! Handing an editor's stdio to the serve: over the Unix socket, a shim
//! that asked for it (`Tandem-Stdio: pass` in its tunnel request) sends its
//! own stdin and stdout right after the `101` (`SCM_RIGHTS`, with one byte),
//! then only waits for the serve to close the connection. The serve reads
//! and writes the editor's pipes itself, exactly as `tandem lsp` does on
//! stdio: no hop through the shim for any frame.
//!
//! Invariant: a descriptor received is owned by exactly one `OwnedFd`,
//! closed when the connection ends; nothing is received without the
//! header, and never over TCP.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The request header a shim sends to pass its stdio.
pub const HEADER: &str = "Tandem-Stdio";
/// Its value.
pub const PASS: &str = "pass";

const FDS: usize = 2;

/// Sends `fds` (stdin, stdout) over the connected Unix socket `socket`.
pub fn send(socket: RawFd, fds: [RawFd; FDS]) -> io::Result<()> {
    let mut byte = [1u8];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE((FDS * std::mem::size_of::<RawFd>()) as u32) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: a zeroed msghdr is valid; every pointer set below points at
    // memory that outlives the sendmsg call.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.as_mut_ptr().cast();
    message.msg_controllen = space as _;
    // SAFETY: the control buffer has room for one header with FDS fds.
    unsafe {
        let header = libc::CMSG_FIRSTHDR(&message);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN((FDS * std::mem::size_of::<RawFd>()) as u32) as _;
        std::ptr::copy_nonoverlapping(
            fds.as_ptr().cast::<u8>(),
            libc::CMSG_DATA(header),
            FDS * std::mem::size_of::<RawFd>(),
        );
    }
    loop {
        // SAFETY: as above.
        let sent = unsafe { libc::sendmsg(socket, &message, libc::MSG_NOSIGNAL) };
        if sent >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Receives the two descriptors a shim sends on `stream` after the `101`.
pub async fn receive(stream: &tokio::net::UnixStream) -> io::Result<(OwnedFd, OwnedFd)> {
    loop {
        stream.readable().await?;
        match stream.try_io(tokio::io::Interest::READABLE, || {
            receive_now(stream.as_raw_fd())
        }) {
            Ok(fds) => return Ok(fds),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
}

fn receive_now(socket: RawFd) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut byte = [0u8];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE((FDS * std::mem::size_of::<RawFd>()) as u32) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: as in `send`.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.as_mut_ptr().cast();
    message.msg_controllen = space as _;
    // SAFETY: the buffers outlive the call; MSG_CMSG_CLOEXEC keeps the
    // descriptors from leaking into the tools' children.
    let got = unsafe { libc::recvmsg(socket, &mut message, libc::MSG_CMSG_CLOEXEC) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    if got == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the shim closed before passing its stdio",
        ));
    }
    // SAFETY: the kernel filled the control buffer; the header is checked
    // before its data is read.
    unsafe {
        let header = libc::CMSG_FIRSTHDR(&message);
        let expected = libc::CMSG_LEN((FDS * std::mem::size_of::<RawFd>()) as u32) as usize;
        if header.is_null()
            || (*header).cmsg_level != libc::SOL_SOCKET
            || (*header).cmsg_type != libc::SCM_RIGHTS
            || (*header).cmsg_len as usize != expected
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the shim sent no stdio descriptors",
            ));
        }
        let mut fds = [0 as RawFd; FDS];
        std::ptr::copy_nonoverlapping(
            libc::CMSG_DATA(header),
            fds.as_mut_ptr().cast::<u8>(),
            FDS * std::mem::size_of::<RawFd>(),
        );
        Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
    }
}
