//! A watch on the client's end of stdout, how far behind it reads: bytes written
//! and not read yet, as the kernel counts them (Linux: `FIONREAD` on a
//! pipe, `SIOCOUTQ` on a Unix socket, which is what libuv — so VS Code
//! and Neovim — gives a child for its stdio), and the frames they belong
//! to.
//!
//! Invariant: frames are written whole and unbuffered, so what the kernel
//! holds is exactly what the client has not read; elsewhere (a file, a
//! terminal, another OS) nothing is known and nothing waits.

use std::collections::VecDeque;
use std::fs::File;

/// A handle of its own on the client's output (stdout, a tunnel's socket),
/// which the writer writes one frame at a time through another handle.
pub(crate) struct ClientOut {
    file: File,
    kind: Option<Kind>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Pipe,
    Socket,
}

impl ClientOut {
    /// A handle of its own on stdout (a duplicate of fd 1).
    pub(crate) fn stdout() -> std::io::Result<ClientOut> {
        use std::os::fd::AsFd;
        let fd = std::io::stdout().as_fd().try_clone_to_owned()?;
        Ok(ClientOut::new(File::from(fd)))
    }

    pub(crate) fn new(file: File) -> ClientOut {
        let mut out = ClientOut { file, kind: None };
        out.kind = kind_of(&out.file);
        if out.kind.is_some() && out.unread().is_none() {
            out.kind = None;
        }
        out
    }

    /// A handle of its own on a socket a runtime also reads and writes.
    pub(crate) fn socket(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<ClientOut> {
        Ok(ClientOut::new(File::from(fd.try_clone_to_owned()?)))
    }

    /// Bytes written that the client has not read yet; `None` when the
    /// kernel cannot tell (not a pipe or socket, not Linux).
    pub(crate) fn unread(&self) -> Option<usize> {
        unread_bytes(&self.file, self.kind?)
    }

    /// Whether the client closed its end (a write would fail).
    pub(crate) fn reader_gone(&self) -> bool {
        reader_gone(&self.file)
    }
}

#[cfg(target_os = "linux")]
fn kind_of(file: &File) -> Option<Kind> {
    use std::os::unix::fs::FileTypeExt;
    let kind = file.metadata().ok()?.file_type();
    if kind.is_fifo() {
        Some(Kind::Pipe)
    } else if kind.is_socket() {
        Some(Kind::Socket)
    } else {
        None
    }
}

#[cfg(not(target_os = "linux"))]
fn kind_of(_file: &File) -> Option<Kind> {
    None
}

#[cfg(target_os = "linux")]
fn unread_bytes(file: &File, kind: Kind) -> Option<usize> {
    use std::os::fd::AsRawFd;
    let request = match kind {
        // A pipe's FIONREAD counts what is in it, from either end.
        Kind::Pipe => libc::FIONREAD,
        // A Unix socket's send queue holds what the peer has not read.
        Kind::Socket => libc::TIOCOUTQ,
    };
    let mut count: libc::c_int = 0;
    // SAFETY: the fd is open for as long as `file` lives, and both
    // requests write one int through the pointer, which points at one.
    let result = unsafe { libc::ioctl(file.as_raw_fd(), request, &mut count) };
    (result == 0).then(|| count.max(0) as usize)
}

#[cfg(not(target_os = "linux"))]
fn unread_bytes(_file: &File, _kind: Kind) -> Option<usize> {
    None
}

#[cfg(unix)]
fn reader_gone(file: &File) -> bool {
    use std::os::fd::AsRawFd;
    let mut poll = libc::pollfd {
        fd: file.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd, a zero timeout.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready > 0 && poll.revents & (libc::POLLERR | libc::POLLHUP) != 0
}

#[cfg(not(unix))]
fn reader_gone(_file: &File) -> bool {
    false
}

/// The frames written to the client and not read yet, from the end
/// offsets of the last frames written and the kernel's unread count.
#[derive(Default)]
pub(crate) struct Backlog {
    written: u64,
    /// Where each frame not known to be read ends, oldest first.
    ends: VecDeque<u64>,
}

impl Backlog {
    pub(crate) fn wrote(&mut self, bytes: usize) {
        self.written += bytes as u64;
        self.ends.push_back(self.written);
    }

    /// With `unread` bytes still in the kernel, how many frames the client
    /// has not finished reading.
    pub(crate) fn frames_unread(&mut self, unread: usize) -> usize {
        let read = self.written.saturating_sub(unread as u64);
        while self.ends.front().is_some_and(|&end| end <= read) {
            self.ends.pop_front();
        }
        self.ends.len()
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn unread_bytes_of_a_pipe_count_down_as_the_reader_reads() {
        let (mut reader, writer) = std::io::pipe().unwrap();
        let out = ClientOut::new(File::from(std::os::fd::OwnedFd::from(writer)));
        assert_eq!(out.unread(), Some(0));
        (&out.file).write_all(b"0123456789").unwrap();
        assert_eq!(out.unread(), Some(10));
        let mut four = [0; 4];
        reader.read_exact(&mut four).unwrap();
        assert_eq!(out.unread(), Some(6));
        assert!(!out.reader_gone());
        drop(reader);
        assert!(out.reader_gone());
    }

    #[test]
    fn a_unix_socket_counts_what_the_peer_has_not_read() {
        let (ours, mut theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let out = ClientOut::new(File::from(std::os::fd::OwnedFd::from(ours)));
        assert_eq!(out.unread(), Some(0));
        (&out.file).write_all(b"frame").unwrap();
        assert!(out.unread().unwrap() > 0);
        let mut five = [0; 5];
        theirs.read_exact(&mut five).unwrap();
        assert_eq!(out.unread(), Some(0));
    }

    #[test]
    fn a_file_is_not_watched() {
        let file = tempfile::tempfile().unwrap();
        assert_eq!(ClientOut::new(file).unread(), None);
    }

    #[test]
    fn the_backlog_counts_frames_not_wholly_read() {
        let mut backlog = Backlog::default();
        for _ in 0..3 {
            backlog.wrote(10);
        }
        assert_eq!(backlog.frames_unread(30), 3);
        assert_eq!(backlog.frames_unread(25), 3, "the first is half read");
        assert_eq!(backlog.frames_unread(20), 2);
        assert_eq!(backlog.frames_unread(0), 0);
    }
}
