//! Summaries of the session logs for `tandem/listSessions` and
//! `tandem sessions`.

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::core::log::{read_log_contents, LogError};
use crate::core::title::title_of_prompt;
use crate::vocab::event::Event;

/// One line of `tandem/listSessions` (read back by `tandem acp --attach`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    pub session_id: String,
    /// The session's title: the last `title_changed`, else the header's,
    /// else the first line of the first prompt (at most 60 characters).
    pub title: String,
    pub workspace: Vec<String>,
    pub created: String,
    pub updated: String,
    pub state: SessionState,
    pub turn_count: usize,
    pub kind: SessionKind,
    /// No prompt ever reached the session (ACP's `session/list` leaves it
    /// out). Absent (false) from a serve that predates it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub empty: bool,
}

/// Where a listed session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// A turn is running in this daemon.
    Running,
    Idle,
    /// Its log ends inside a turn.
    Interrupted,
    Unreadable,
}

impl std::fmt::Display for SessionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SessionState::Running => "running",
            SessionState::Idle => "idle",
            SessionState::Interrupted => "interrupted",
            SessionState::Unreadable => "unreadable",
        })
    }
}

/// A chat, or the session keybinding tasks run in (the log header's
/// `kind`: `task`; absent for chats).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionKind {
    #[default]
    Chat,
    Task,
}

/// Summaries of the logs in a directory, newest first; `running` says
/// which sessions this daemon has loaded and whether a turn runs.
pub fn list_session_logs(dir: &Path, running: &HashMap<String, bool>) -> Vec<SessionSummary> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        match summarize(&path, running) {
            Ok(summary) => out.push(summary),
            Err(e) => {
                let id = path
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or_default()
                    .to_string();
                out.push(SessionSummary {
                    session_id: id,
                    title: e.to_string(),
                    workspace: Vec::new(),
                    created: String::new(),
                    updated: String::new(),
                    state: SessionState::Unreadable,
                    turn_count: 0,
                    kind: SessionKind::Chat,
                    empty: false,
                });
            }
        }
    }
    out.sort_by(|a, b| b.updated.cmp(&a.updated));
    out
}

fn summarize(path: &Path, running: &HashMap<String, bool>) -> Result<SessionSummary, LogError> {
    let contents = read_log_contents(path)?;
    let header = contents.header;
    let mut turns = 0;
    let mut open = false;
    let mut first_prompt = None;
    let mut empty = true;
    let mut titled = None;
    for logged in &contents.events {
        match &logged.event {
            Event::InputQueued { .. } => empty = false,
            Event::TurnStart { .. } => {
                turns += 1;
                open = true;
            }
            Event::TurnEnd { .. } => open = false,
            Event::UserMessage { content, .. } if first_prompt.is_none() => {
                first_prompt = title_of_prompt(content);
            }
            Event::TitleChanged { title, .. } => titled = Some(title.clone()),
            _ => {}
        }
    }
    // Logs before issue 29 have no `title_changed`: their first prompt.
    let title = titled
        .or_else(|| header.title.clone())
        .or(first_prompt)
        .unwrap_or_else(|| "(no prompt yet)".to_string());
    let state = match running.get(&header.session_id) {
        Some(true) => SessionState::Running,
        Some(false) => SessionState::Idle,
        None if open => SessionState::Interrupted,
        None => SessionState::Idle,
    };
    Ok(SessionSummary {
        session_id: header.session_id,
        title,
        workspace: header
            .workspace
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        updated: contents
            .events
            .last()
            .map(|e| e.ts.clone())
            .unwrap_or_else(|| header.created.clone()),
        created: header.created,
        state,
        turn_count: turns,
        kind: match header.kind.as_deref() {
            Some("task") => SessionKind::Task,
            _ => SessionKind::Chat,
        },
        empty,
    })
}
