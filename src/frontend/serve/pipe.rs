//! `tandem lsp --attach` and `tandem acp --attach`: what an editor spawns
//! to share the user's serve. It finds the serve (starting one if none
//! runs), opens a tunnel (`GET /lsp` or `/acp` with the bearer token and
//! `Upgrade: tandem`, see `tunnel`), and from then on carries bytes: the
//! editor's stdin to the serve, the serve's answer to stdout. The serve
//! runs the same frontend for the tunnel as `tandem lsp` or `tandem acp`
//! runs on stdio, so the editor sees exactly what it would see there.
//!
//! Invariant: no protocol logic here. The bytes pass through unchanged
//! and in order, each as soon as it is read (one thread per direction,
//! blocking reads and writes: no runtime on the path of a chunk).

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::fd::AsFd;
use std::path::Path;

use super::client::tunnel_or_start;
use super::shim_socket::Socket;
use super::tunnel::Protocol;

/// Carries the editor's bytes to the serve and back until either side
/// ends. Exit status: 0 once the serve has closed the connection (after
/// the editor's `exit`, or the end of its input), 1 when the serve cannot
/// be reached or the connection fails.
pub async fn run(home: &Path, protocol: Protocol) -> u8 {
    let who = match protocol {
        Protocol::Lsp => "tandem lsp --attach",
        Protocol::Acp => "tandem acp --attach",
    };
    let opened = match tunnel_or_start(home, protocol).await {
        Ok(opened) => opened,
        Err(e) => {
            tracing::error!("{who}: {e}");
            return 1;
        }
    };
    let relayed = if opened.pass_stdio {
        tokio::task::spawn_blocking(move || hand_over(opened.socket)).await
    } else {
        tokio::task::spawn_blocking(move || relay(opened.socket, opened.leftover)).await
    };
    match relayed {
        Ok(Ok(())) => {
            tracing::info!("{who}: the serve closed the connection");
            0
        }
        Ok(Err(e)) => {
            tracing::error!("{who}: the connection to the serve failed: {e}");
            1
        }
        Err(e) => {
            tracing::error!("{who}: {e}");
            1
        }
    }
}

/// Hands the serve our stdin and stdout, then waits until it closes the
/// connection (the editor's input ended, or `exit`, or the serve stopped).
fn hand_over(mut socket: Socket) -> io::Result<()> {
    let Socket::Unix(unix) = &socket else {
        return Err(io::Error::other(
            "stdio can only be passed over the Unix socket",
        ));
    };
    use std::os::fd::AsRawFd;
    super::stdio_pass::send(unix.as_raw_fd(), [0, 1])?;
    let mut sink = [0u8; 256];
    loop {
        match socket.read(&mut sink) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Both directions, on two threads; returns when the serve's side ends.
fn relay(socket: Socket, leftover: Vec<u8>) -> io::Result<()> {
    let mut to_serve = socket.try_clone()?;
    std::thread::Builder::new()
        .name("tandem-shim-in".to_string())
        .spawn(move || {
            let mut stdin = io::stdin().lock();
            // The editor's input ended (or the serve is gone): the serve
            // hears the end of input, as `tandem lsp` would on stdin.
            let _ = copy(&mut stdin, &mut to_serve);
            to_serve.shutdown(Shutdown::Write);
        })?;
    // Our own handle on fd 1, unbuffered: each read goes out in one
    // write (std's stdout would split a frame at its last newline).
    let mut stdout = std::fs::File::from(io::stdout().as_fd().try_clone_to_owned()?);
    stdout.write_all(&leftover)?;
    let mut from_serve = socket;
    copy(&mut from_serve, &mut stdout)
}

/// Copies until the end of `from`, writing each read at once.
fn copy(from: &mut impl Read, to: &mut impl Write) -> io::Result<()> {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
        to.flush()?;
    }
}
