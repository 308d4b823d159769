//! Reading sessions back: crash recovery of a log that never closed its
//! turn ([`recovery`]), summaries for `listSessions` ([`sessions`]), and
//! the trajectory `tandem replay` prints for people and tools
//! ([`trajectory`] follows the story, [`text`] and [`json`] print it).

mod fork;
mod image_lines;
mod json;
mod names;
mod recovery;
mod select;
mod sessions;
mod text;
mod trajectory;

#[cfg(test)]
mod tests;

pub use fork::fork_events;
pub use json::render_json_lines;
pub use recovery::{recover_interrupted, INTERRUPTED_RESULT};
pub use sessions::{list_session_logs, SessionKind, SessionState, SessionSummary};
pub use text::render_trajectory;
pub use trajectory::{DaemonState, ReplayOptions, ReplaySummary};

/// The first line of `text`, at most `max` characters (with `…` when cut).
pub fn shorten(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() <= max {
        line.to_string()
    } else {
        let cut: String = line.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

/// How `tandem replay` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplayFormat {
    /// The trajectory for people.
    #[default]
    Text,
    /// One JSON object per line, the log's vocabulary.
    Json,
    /// The file ledger (`--files`): the files read and edited, with their
    /// size on disk now (relative paths against the first workspace root).
    Files,
    /// The checkpoints (`--checkpoints`): what each turn can be rewound to.
    Checkpoints,
}

/// `tandem replay`: reads the session's log without opening it (no lock
/// taken, nothing recovered), asks its lock whether a daemon has it open,
/// and prints it. `Err` is the message for the user.
pub fn replay_session(
    sessions_dir: &std::path::Path,
    session_id: &str,
    options: &ReplayOptions,
    format: ReplayFormat,
) -> Result<String, String> {
    let path = sessions_dir.join(format!("{session_id}.jsonl"));
    if !path.exists() {
        return Err(format!(
            "no session {session_id} in {} (see `tandem sessions`)",
            sessions_dir.display()
        ));
    }
    let (header, events) = crate::core::log::read_log(&path).map_err(|e| e.to_string())?;
    let daemon = match crate::core::log::lock_owner(sessions_dir, session_id) {
        Some(pid) => DaemonState::Running { pid },
        None => DaemonState::NotRunning,
    };
    match format {
        ReplayFormat::Text => render_trajectory(&header, &events, options, daemon),
        ReplayFormat::Json => render_json_lines(&header, &events, options, daemon),
        ReplayFormat::Files => Ok(render_files(&header, &events)),
        ReplayFormat::Checkpoints => {
            let home = sessions_dir.parent().unwrap_or(sessions_dir);
            let store = crate::core::checkpoints::store::Store::new(home);
            Ok(crate::core::checkpoints::render_checkpoints(
                &header, &events, &store,
            ))
        }
    }
}

fn render_files(
    header: &crate::core::log::LogHeader,
    events: &[crate::core::log::LoggedEvent],
) -> String {
    use crate::core::ledger::{FileFacts, Ledger};
    let ledger = Ledger::from_events(events.iter().map(|logged| &logged.event));
    let root = header.workspace.first();
    let facts = |path: &str| {
        let path = match root {
            Some(root) => root.join(path),
            None => std::path::PathBuf::from(path),
        };
        Some(FileFacts {
            size: std::fs::metadata(path).ok().map(|m| m.len()),
            unsaved: false,
        })
    };
    match ledger.render(facts) {
        Some(text) => format!("{text}\n"),
        None => "No files were read or edited in this session.\n".to_string(),
    }
}
