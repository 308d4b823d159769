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
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The request header a shim sends to pass its stdio.
pub const HEADER: &str = "Tandem-Stdio";
/// Its value.
pub const PASS: &str = "pass";

const FDS: usize = 2;
/// The bytes of FDS descriptors in a control message.
const FDS_BYTES: u32 = (FDS * std::mem::size_of::<RawFd>()) as u32;

/// What a `msghdr` of one byte and FDS descriptors points at, in `send`
/// and `receive` alike.
struct Buffers {
    byte: [u8; 1],
    iov: libc::iovec,
    control: Vec<u8>,
}

/// A `msghdr` over [`Buffers`], which stay borrowed while it is used.
struct Message<'a> {
    header: libc::msghdr,
    _buffers: PhantomData<&'a mut Buffers>,
}

impl Buffers {
    fn new(byte: u8) -> Buffers {
        // SAFETY: CMSG_SPACE only computes a size.
        let space = unsafe { libc::CMSG_SPACE(FDS_BYTES) } as usize;
        Buffers {
            byte: [byte],
            iov: libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            },
            control: vec![0u8; space],
        }
    }

    fn message(&mut self) -> Message<'_> {
        self.iov = libc::iovec {
            iov_base: self.byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        // SAFETY: a zeroed msghdr is valid; every pointer set below points
        // into `self`, which the returned message borrows, so it outlives
        // the sendmsg or recvmsg call.
        let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
        header.msg_iov = &mut self.iov;
        header.msg_iovlen = 1;
        header.msg_control = self.control.as_mut_ptr().cast();
        header.msg_controllen = self.control.len() as _;
        Message {
            header,
            _buffers: PhantomData,
        }
    }
}

/// Sends `fds` (stdin, stdout) over the connected Unix socket `socket`.
pub fn send(socket: RawFd, fds: [RawFd; FDS]) -> io::Result<()> {
    let mut buffers = Buffers::new(1);
    let message = buffers.message();
    // SAFETY: the control buffer has room for one header with FDS fds.
    unsafe {
        let header = libc::CMSG_FIRSTHDR(&message.header);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(FDS_BYTES) as _;
        std::ptr::copy_nonoverlapping(
            fds.as_ptr().cast::<u8>(),
            libc::CMSG_DATA(header),
            FDS_BYTES as usize,
        );
    }
    loop {
        // SAFETY: the message's buffers outlive the call.
        let sent = unsafe { libc::sendmsg(socket, &message.header, libc::MSG_NOSIGNAL) };
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
    let mut buffers = Buffers::new(0);
    let mut message = buffers.message();
    // SAFETY: the buffers outlive the call; MSG_CMSG_CLOEXEC keeps the
    // descriptors from leaking into the tools' children.
    let got = unsafe { libc::recvmsg(socket, &mut message.header, libc::MSG_CMSG_CLOEXEC) };
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
        let header = libc::CMSG_FIRSTHDR(&message.header);
        let expected = libc::CMSG_LEN(FDS_BYTES) as usize;
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
            FDS_BYTES as usize,
        );
        Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
    }
}
