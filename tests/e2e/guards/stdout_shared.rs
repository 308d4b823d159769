//! The daemon's stdout is an open file it shares with whoever gave it (an
//! editor, a shell): it writes it through the reactor without leaving it
//! non-blocking for them. A pipe is opened again as an open file of its
//! own (the shared one stays blocking all along); a socket's one open file
//! is non-blocking while the writer runs and gets its flags back before
//! the daemon exits.

use std::os::fd::{AsRawFd, OwnedFd};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, BufReader};
use tokio::process::Command;

use super::slow_reader::initialize;
use crate::support::client::tandem_bin;

fn non_blocking(fd: &OwnedFd) -> bool {
    // SAFETY: fcntl on an open descriptor, no pointers.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    assert!(flags >= 0, "F_GETFL: {}", std::io::Error::last_os_error());
    flags & libc::O_NONBLOCK != 0
}

/// Runs `tandem lsp` with `daemon_end` as its stdout, of which `shared` is
/// a duplicate (the same open file) and `ours` the other end; says whether
/// `shared` was non-blocking while the daemon ran, and checks it is not
/// once the daemon exited.
async fn run_with(daemon_end: OwnedFd, ours: Box<dyn AsyncRead + Unpin + Send>) -> bool {
    let home = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let shared = daemon_end.try_clone().unwrap();
    assert!(!non_blocking(&shared), "the test's end starts blocking");
    let mut child = Command::new(tandem_bin())
        .arg("lsp")
        .env("TANDEM_HOME", home.path())
        .env("TANDEM_FSYNC", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::from(daemon_end))
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(ours);
    // Answered: the writer runs.
    initialize(&mut stdin, &mut stdout, root.path()).await;
    let while_running = non_blocking(&shared);
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the daemon exits at the end of its input")
        .unwrap();
    assert!(status.success(), "{status:?}");
    assert!(
        !non_blocking(&shared),
        "stdout's open file left non-blocking after the daemon exited"
    );
    while_running
}

#[tokio::test]
async fn a_pipe_given_as_stdout_stays_blocking_for_whoever_shares_it() {
    let (reader, writer) = std::io::pipe().unwrap();
    let reader = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(reader)).unwrap();
    let while_running = run_with(OwnedFd::from(writer), Box::new(reader)).await;
    assert!(
        !while_running,
        "the daemon made the pipe's shared open file non-blocking"
    );
}

#[tokio::test]
async fn a_socket_given_as_stdout_gets_its_flags_back_before_the_daemon_exits() {
    let (theirs, ours) = std::os::unix::net::UnixStream::pair().unwrap();
    ours.set_nonblocking(true).unwrap();
    let ours = tokio::net::UnixStream::from_std(ours).unwrap();
    let while_running = run_with(OwnedFd::from(theirs), Box::new(ours)).await;
    assert!(
        while_running,
        "a socket is written through the reactor: non-blocking while the daemon runs"
    );
}
