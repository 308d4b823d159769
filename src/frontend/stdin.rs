//! The process's stdin for `tandem lsp`: a pipe or socket is read through
//! the runtime's reactor, so a frame's bytes wake the task that parses
//! them directly. tokio's own `Stdin` reads on the blocking pool, which
//! puts a second thread's wake-up between the editor's write and the
//! loop (on a loaded machine, a time slice each).
//!
//! Anything else (a file, a terminal) falls back to tokio's `Stdin`.
//! **Invariant:** stdin's blocking mode is what we found once the reader
//! is dropped (children are started with stdin null, so none sees the
//! non-blocking descriptor meanwhile).

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, ReadBuf};

/// Stdin as an `AsyncRead`: through the reactor when it is a pipe or a
/// socket, else tokio's blocking-pool `Stdin`.
pub fn reader() -> Box<dyn AsyncRead + Unpin + Send> {
    match PipeStdin::of(io::stdin().as_fd()) {
        Ok(Some(pipe)) => Box::new(pipe),
        Ok(None) => Box::new(tokio::io::stdin()),
        Err(e) => {
            tracing::debug!("stdin read on the blocking pool: {e}");
            Box::new(tokio::io::stdin())
        }
    }
}

/// An editor's pipe or socket handed over by a shim (`serve::stdio_pass`),
/// read through the reactor; `None` when it is neither.
pub(crate) fn fd_reader(
    fd: std::os::fd::BorrowedFd<'_>,
) -> io::Result<Option<impl AsyncRead + Unpin + Send>> {
    PipeStdin::of(fd)
}

pub(crate) struct PipeStdin {
    /// A duplicate of the descriptor: the same open pipe, owned here.
    fd: AsyncFd<OwnedFd>,
    /// The file status flags stdin had, put back on drop.
    flags: libc::c_int,
}

impl PipeStdin {
    fn of(input: std::os::fd::BorrowedFd<'_>) -> io::Result<Option<PipeStdin>> {
        let raw = input.as_raw_fd();
        // SAFETY: fstat and fcntl on fd 0 with valid pointers; no memory
        // is shared with the kernel beyond the call.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(raw, &mut stat) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let kind = stat.st_mode & libc::S_IFMT;
        if kind != libc::S_IFIFO && kind != libc::S_IFSOCK {
            return Ok(None);
        }
        let flags = unsafe { libc::fcntl(raw, libc::F_GETFL) };
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        if unsafe { libc::fcntl(raw, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let registered = input.try_clone_to_owned().and_then(|owned| {
            // SAFETY: the descriptor is owned by the `AsyncFd`, so it
            // stays open and names the same pipe for its lifetime.
            unsafe { AsyncFd::register_with_interest(owned, tokio::io::Interest::READABLE) }
                .map_err(|e| e.into_parts().1)
        });
        match registered {
            Ok(fd) => Ok(Some(PipeStdin { fd, flags })),
            Err(e) => {
                unsafe { libc::fcntl(raw, libc::F_SETFL, flags) };
                Err(e)
            }
        }
    }
}

impl Drop for PipeStdin {
    fn drop(&mut self) {
        // SAFETY: as in `of`; the duplicate shares the file status flags.
        unsafe { libc::fcntl(self.fd.get_ref().as_raw_fd(), libc::F_SETFL, self.flags) };
    }
}

impl AsyncRead for PipeStdin {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.fd.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            let read = guard.try_io(|fd| {
                // SAFETY: `unfilled` is valid for writes of its length.
                let n = unsafe {
                    libc::read(
                        fd.as_raw_fd(),
                        unfilled.as_mut_ptr().cast::<libc::c_void>(),
                        unfilled.len(),
                    )
                };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            });
            match read {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                // Not readable after all: readiness was cleared, wait again.
                Err(_would_block) => continue,
            }
        }
    }
}
