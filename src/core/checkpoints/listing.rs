//! `tandem replay --checkpoints`: each checkpoint of a session, the message
//! to rewind to for it, and whether each file can still be restored.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use super::store::Store;
use crate::core::log::{LogHeader, LoggedEvent};
use crate::vocab::checkpoint::FileState;
use crate::vocab::event::{Event, UserContent};

struct Listed {
    ts: String,
    /// What `toMessageId` undoes it, and what that message said.
    anchor: String,
    said: String,
    files: BTreeMap<String, (Option<FileState>, bool)>,
}

/// The checkpoints of a session's log, oldest first, for people.
pub fn render_checkpoints(header: &LogHeader, events: &[LoggedEvent], store: &Store) -> String {
    let mut anchors: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut listed: BTreeMap<String, Listed> = BTreeMap::new();
    for logged in events {
        match &logged.event {
            Event::UserMessage {
                turn_id,
                message_id,
                content,
            } => {
                anchors
                    .entry(turn_id.clone())
                    .or_insert_with(|| (message_id.clone(), first_line(content)));
            }
            Event::RewindStarted {
                rewind_id,
                to_message_id,
                ..
            } => {
                anchors.insert(
                    rewind_id.clone(),
                    (
                        rewind_id.clone(),
                        format!("the rewind to before {to_message_id}"),
                    ),
                );
            }
            Event::Checkpoint { turn_id, files } => {
                let entry = listed.entry(turn_id.clone()).or_insert_with(|| {
                    order.push(turn_id.clone());
                    let (anchor, said) = anchors.get(turn_id).cloned().unwrap_or_default();
                    Listed {
                        ts: logged.ts.clone(),
                        anchor,
                        said,
                        files: BTreeMap::new(),
                    }
                });
                for file in files {
                    entry
                        .files
                        .entry(file.path.clone())
                        .or_insert((file.before.clone(), file.by_command));
                }
            }
            _ => {}
        }
    }
    let mut out = format!("session {}\n", header.session_id);
    if order.is_empty() {
        out.push_str("no checkpoints: no turn of this session changed a file\n");
        return out;
    }
    let root = header.workspace.first();
    for id in order {
        let entry = &listed[&id];
        let _ = writeln!(
            out,
            "{id}  {}  rewind with toMessageId {}: {}",
            entry.ts, entry.anchor, entry.said
        );
        for (path, (before, by_command)) in &entry.files {
            let shown = root
                .and_then(|r| Path::new(path).strip_prefix(r).ok())
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| path.clone());
            let state = match before {
                None => "changed by a command, cannot be restored".to_string(),
                Some(b) if b.hash.as_ref().is_some_and(|h| !store.has(h)) => {
                    "pruned, cannot be restored".to_string()
                }
                Some(b) if !b.exists() => {
                    format!("created{}", if *by_command { " by a command" } else { "" })
                }
                Some(_) if *by_command => "changed by a command, restorable".to_string(),
                Some(_) => "restorable".to_string(),
            };
            let _ = writeln!(out, "    {shown}  {state}");
        }
    }
    out
}

fn first_line(content: &[UserContent]) -> String {
    content
        .iter()
        .find_map(|c| match c {
            UserContent::Text { text } => text.lines().next().map(str::to_string),
            UserContent::Resource { .. } | UserContent::Image { .. } => None,
        })
        .unwrap_or_default()
}
