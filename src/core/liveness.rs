//! Whether a process still runs: the one answer that the session locks
//! (`log.rs`) and `tandem serve --stop` (`frontend/serve`) both use.
//!
//! **Lock semantics.** A `<session>.lock` or a serve names its owner by
//! pid; the owner holds it while [`process_alive`] says so. A zombie does
//! not: it has exited, closed its files and can never write again, it only
//! waits for its parent to read its status (a shim that started a serve may
//! not have reaped it yet; a `kill -9`ed daemon under an init that never
//! reaps stays a zombie). So a lock naming a zombie is stale and is taken
//! over, and `serve --stop` counts a zombie serve as stopped. The kernel does
//! not reuse a zombie's pid until it is reaped, so taking its lock over
//! cannot race a new owner of that pid. The error goes the safe way only: a
//! pid reused after the reap by an unrelated process reads as alive, and the
//! lock is refused (naming that pid) rather than taken from a live owner.

use std::path::Path;

/// Whether `pid` runs: this process, or one whose `/proc/<pid>/stat` state
/// is neither zombie (`Z`) nor dead (`X`). Without `/proc`, whether
/// `kill(pid, 0)` finds it (which cannot tell a zombie).
pub fn process_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat_state(&stat).is_some_and(|state| state != 'Z' && state != 'X'),
        Err(_) if Path::new("/proc/self/stat").exists() => false,
        Err(_) => {
            // SAFETY: signal 0 only checks that the pid exists.
            let found = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0;
            found || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
        }
    }
}

/// The state letter of a `/proc/<pid>/stat` line: `pid (comm) STATE ...`,
/// where `comm` may hold spaces and parentheses (so: after the last `)`).
fn stat_state(stat: &str) -> Option<char> {
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    fn state_of(pid: u32) -> Option<char> {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .as_deref()
            .and_then(stat_state)
    }

    #[test]
    fn this_process_and_a_running_child_are_alive() {
        assert!(process_alive(std::process::id()));
        let mut child = Command::new("sleep")
            .arg("30")
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        assert!(process_alive(child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_zombie_child_is_not_alive_and_neither_is_it_once_reaped() {
        // A real child that exits and is not reaped: it stays a zombie
        // until `wait`.
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        let deadline = Instant::now() + Duration::from_secs(10);
        while state_of(pid) != Some('Z') {
            assert!(Instant::now() < deadline, "pid {pid} never became a zombie");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            Path::new(&format!("/proc/{pid}")).exists(),
            "the zombie still has its /proc entry"
        );
        assert!(!process_alive(pid), "a zombie holds no lock");
        child.wait().unwrap();
        assert!(!process_alive(pid));
    }

    #[test]
    fn pids_no_process_can_have_are_not_alive() {
        assert!(!process_alive(0));
        assert!(!process_alive(u32::MAX - 1));
    }

    #[test]
    fn the_state_is_read_after_the_last_parenthesis_of_the_name() {
        assert_eq!(stat_state("42 (a) b) (c) Z 1 2 3"), Some('Z'));
        assert_eq!(stat_state("42 (sleep) S 1"), Some('S'));
        assert_eq!(stat_state("garbage"), None);
    }
}
