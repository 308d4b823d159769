//! Forking a session (`tandem/forkSession`, ACP's `session/fork`): a new
//! session whose log is the original's up to a user message (see
//! `history::fork_events`), written whole under a new id and then loaded
//! without a replay, ready for prompts.
//!
//! Invariant: the original is only read — its log, its lock and its
//! running turn are untouched; a fork is on disk complete (renamed into
//! place) before anything can load it.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use super::{valid_session_id, Daemon, DaemonError};
use crate::core::client::Client;
use crate::core::history::fork_events;
use crate::core::log::{now_rfc3339, read_log, Durability, LogHeader, LoggedEvent};
use crate::core::session::Session;

impl Daemon {
    /// Forks session `id` before the turn that user message `message_id`
    /// opened (the whole session, less a turn still running, without
    /// one). The session need not be loaded. The fork is loaded (no replay)
    /// for `client`, as a load from it would be, and returned.
    pub fn fork_session(
        &self,
        client: &Arc<Client>,
        id: &str,
        message_id: Option<&str>,
    ) -> Result<Arc<Session>, DaemonError> {
        self.fork_session_in(client, id, message_id, Vec::new())
    }

    /// [`Daemon::fork_session`] with more workspace roots (ACP's
    /// `additionalDirectories` of `session/fork`): the fork's roots are the
    /// original's plus these, and a fork with a folder of its own keeps
    /// them in its log's header, as a new session would.
    pub fn fork_session_in(
        &self,
        client: &Arc<Client>,
        id: &str,
        message_id: Option<&str>,
        more: Vec<PathBuf>,
    ) -> Result<Arc<Session>, DaemonError> {
        let path = match self.session(id) {
            Ok(session) => session.log.path().to_path_buf(),
            Err(_) if valid_session_id(id) => self.sessions_dir().join(format!("{id}.jsonl")),
            Err(e) => return Err(e),
        };
        if !path.exists() {
            return Err(DaemonError::UnknownSession(id.to_string()));
        }
        let (header, events) = read_log(&path).map_err(|e| DaemonError::Storage(e.to_string()))?;
        let events = fork_events(&events, message_id).map_err(DaemonError::InvalidParams)?;
        let fork_id = uuid::Uuid::new_v4().simple().to_string();
        let mut header = LogHeader {
            session_id: fork_id.clone(),
            created: now_rfc3339(),
            ..header
        };
        if header.workspace_folder.is_some() {
            for root in &more {
                if !header.workspace.contains(root) {
                    header.workspace.push(root.clone());
                }
            }
        }
        // The fork's images first, so its log never names a missing one.
        link_images(&path, &self.sessions_dir().join(format!("{fork_id}.jsonl")))
            .map_err(|e| DaemonError::Storage(format!("cannot copy the fork's images: {e}")))?;
        self.write_fork(&header, &events)
            .map_err(|e| DaemonError::Storage(format!("cannot write the fork: {e}")))?;
        tracing::info!(from = id, fork = %fork_id, at = ?message_id, events = events.len(), "forked a session");
        let (session, _) = self.load_session_with(client, &fork_id, false, more)?;
        Ok(session)
    }

    /// Writes a fork's log beside a temporary name, then renames it into
    /// place.
    fn write_fork(&self, header: &LogHeader, events: &[LoggedEvent]) -> std::io::Result<()> {
        let dir = self.sessions_dir();
        let path = dir.join(format!("{}.jsonl", header.session_id));
        let partial = dir.join(format!(".{}.jsonl.partial", header.session_id));
        let mut out = std::io::BufWriter::new(std::fs::File::create(&partial)?);
        let written = (|| {
            serde_json::to_writer(&mut out, header)?;
            out.write_all(b"\n")?;
            for event in events {
                serde_json::to_writer(&mut out, event)?;
                out.write_all(b"\n")?;
            }
            let file = out.into_inner().map_err(|e| e.into_error())?;
            if !matches!(self.durability, Durability::Flush) {
                file.sync_data()?;
            }
            std::fs::rename(&partial, &path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        written
    }
}

/// Gives the fork at `to` the images of the session at `from`: hard links
/// where the file system allows (images are never changed in place),
/// copies otherwise.
fn link_images(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    let source = crate::core::images::images_dir(from);
    let Ok(entries) = std::fs::read_dir(&source) else {
        return Ok(());
    };
    let target = crate::core::images::images_dir(to);
    std::fs::create_dir_all(&target)?;
    for entry in entries {
        let entry = entry?;
        let dest = target.join(entry.file_name());
        if std::fs::hard_link(entry.path(), &dest).is_err() {
            std::fs::copy(entry.path(), &dest)?;
        }
    }
    Ok(())
}
