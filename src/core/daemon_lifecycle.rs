//! The end of a session's life in a daemon: renaming it, closing it (its
//! task stopped and its memory freed, its log kept — unless no prompt ever
//! reached it) and deleting it (its log removed, refused while it works).
//!
//! Invariant: a closed session has no task left and is no longer among the
//! daemon's sessions, and the sink was told (`EventSink::closed`); a
//! deleted one has no log, and a session with a turn
//! running or prompts waiting is never deleted.

use super::{valid_session_id, Daemon, DaemonError};
use crate::core::log::lock_owner;
use crate::core::session::RunState;

impl Daemon {
    /// Gives a loaded session the user's name for it (a `title_changed`
    /// event, so every client following it hears of it).
    pub fn rename_session(&self, id: &str, title: String) -> Result<(), DaemonError> {
        self.session(id)?.rename(title);
        Ok(())
    }

    /// Closes a session: its work is cancelled as by `cancel` (queued
    /// prompts answered `cancelled`), its task ends, and the daemon drops
    /// it; its log stays, to be loaded again, unless no input ever reached
    /// it, when the log goes too. Closing a session this daemon does not
    /// have is a no-op (`false`).
    pub async fn close_session(&self, id: &str) -> bool {
        let Some(session) = self.sessions.lock().remove(id) else {
            return false;
        };
        session.cancel(false);
        session.shutdown.cancel();
        let task = {
            let mut tasks = self.tasks.lock();
            tasks
                .iter()
                .position(|(of, _)| of == id)
                .map(|at| tasks.swap_remove(at).1)
        };
        if let Some(task) = task {
            let _ = task.await;
        }
        session.log.sync();
        if session.is_empty() {
            if let Err(e) = std::fs::remove_file(session.log.path()) {
                tracing::warn!("cannot remove the empty session {id}: {e}");
            }
        }
        // The sink forgets who followed it, unless a load opened it again
        // meanwhile (a load follows under `loading`).
        let _loading = self.loading.lock();
        if !self.sessions.lock().contains_key(id) {
            self.sink.closed(id);
        }
        true
    }

    /// Deletes a session's log (closing it first when loaded): it is gone
    /// from every listing and cannot be loaded. Refused while a turn runs
    /// or prompts wait in it, and while another tandem process has it
    /// open; a session that does not exist is already deleted (`Ok`).
    pub async fn delete_session(&self, id: &str) -> Result<(), DaemonError> {
        if !valid_session_id(id) {
            return Ok(());
        }
        if let Ok(session) = self.session(id) {
            if matches!(session.run_state(), RunState::Running { .. })
                || session.queued_prompts() > 0
            {
                return Err(DaemonError::Busy(format!(
                    "session `{id}` is working: cancel its turn before deleting it"
                )));
            }
            self.close_session(id).await;
        } else if let Some(pid) = lock_owner(&self.sessions_dir(), id) {
            if pid != std::process::id() {
                return Err(DaemonError::Busy(format!(
                    "session `{id}` is open in another tandem (pid {pid}): close it there first"
                )));
            }
        }
        let path = self.sessions_dir().join(format!("{id}.jsonl"));
        // Its images go with it (none: nothing to remove).
        let _ = std::fs::remove_dir_all(crate::core::images::images_dir(&path));
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(DaemonError::Storage(format!(
                "cannot delete {}: {e}",
                path.display()
            ))),
        }
    }

    /// Removes the logs of this daemon's sessions that no input ever
    /// reached, after [`Daemon::shutdown`]: a chat opened and closed
    /// unused leaves nothing behind (an ACP client opens one per window).
    pub fn drop_empty_sessions(&self) {
        for session in self.sessions.lock().values().filter(|s| s.is_empty()) {
            if let Err(e) = std::fs::remove_file(session.log.path()) {
                tracing::warn!("cannot remove the empty session {}: {e}", session.id);
            }
        }
    }
}
