//! The shims' connection to the serve on a plain blocking socket: after
//! the handshake the socket leaves the runtime, and one thread sleeps in
//! `read(2)` on it while another writes to it (see `pipe`). A streamed
//! chunk costs the shim one `read` and one `write`: no reactor and no
//! `epoll_wait` on its way.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;

use super::stream::Stream;

/// A connected socket in blocking mode.
pub enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Socket {
    /// A second handle on the same connection (one per thread).
    pub fn try_clone(&self) -> io::Result<Socket> {
        Ok(match self {
            Socket::Tcp(s) => Socket::Tcp(s.try_clone()?),
            Socket::Unix(s) => Socket::Unix(s.try_clone()?),
        })
    }

    pub fn shutdown(&self, how: Shutdown) {
        let _ = match self {
            Socket::Tcp(s) => s.shutdown(how),
            Socket::Unix(s) => s.shutdown(how),
        };
    }
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.read(buf),
            Socket::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.write(buf),
            Socket::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A connection after its handshake: the socket, in blocking mode, and
/// what the serve sent after its answer (the start of its output).
pub struct Opened {
    pub socket: Socket,
    pub leftover: Vec<u8>,
    /// The serve takes the shim's stdio (see `stdio_pass`).
    pub pass_stdio: bool,
}

/// The stream out of the runtime, as a blocking socket.
pub fn blocking(stream: Stream) -> io::Result<Socket> {
    let socket = match stream {
        Stream::Tcp(s) => Socket::Tcp(s.into_std()?),
        Stream::Unix(s) => Socket::Unix(s.into_std()?),
    };
    match &socket {
        Socket::Tcp(s) => s.set_nonblocking(false)?,
        Socket::Unix(s) => s.set_nonblocking(false)?,
    }
    Ok(socket)
}
