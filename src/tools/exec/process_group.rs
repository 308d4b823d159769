//! The command's process group: killed whole (SIGKILL) before its leader is
//! dropped, so no process it started outlives the call.

use std::io;

use tokio::process::Child;

const SIGKILL: i32 = 9;
/// The child, owned so that the group is killed before the `Child` is
/// dropped (and possibly reaped): while the leader is unreaped its pid, and
/// so the pgid, cannot be reused.
pub(super) struct ProcessGroup {
    pub(super) child: Child,
    pub(super) pgid: i32,
    pub(super) reaped: bool,
}

impl ProcessGroup {
    pub(super) fn new(child: Child) -> io::Result<Self> {
        let pid = child
            .id()
            .ok_or_else(|| io::Error::other("command exited before its pid was known"))?;
        let pgid = i32::try_from(pid)
            .map_err(|_| io::Error::other(format!("pid {pid} does not fit a pid_t")))?;
        Ok(ProcessGroup {
            child,
            pgid,
            reaped: false,
        })
    }

    /// SIGKILLs every process in the group. Failure (the group is already
    /// gone) needs no handling.
    pub(super) fn kill(&self) {
        extern "C" {
            fn kill(pid: i32, sig: i32) -> i32;
        }
        // SAFETY: kill(2) takes two integers and touches no memory of ours.
        // The negative pid addresses the group we created with
        // process_group(0), whose id is the leader's pid (always > 0).
        let _ = unsafe { kill(-self.pgid, SIGKILL) };
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        // The future was dropped mid-run, or the kill's grace ran out before
        // the reap. tokio's kill_on_drop then reaps the leader in the
        // background.
        if !self.reaped {
            self.kill();
        }
    }
}
