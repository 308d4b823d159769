//! A rewind the daemon died in (a `rewind_started` without its `rewound`),
//! closed on load by appending only: each of its files was written whole
//! (an atomic rename) or not at all, and the disk says which.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::read_state;
use crate::core::log::{LoggedEvent, Recovered, SessionLog};
use crate::vocab::checkpoint::{CheckpointAfter, FileState};
use crate::vocab::event::Event;

/// Appends, for each interrupted rewind, a `rewind_file` for each file it
/// wrote but had not logged, its `checkpoint_end` and a `rewound` naming
/// the files restored and those left `untouched` (its conversation part
/// is not applied).
pub fn recover_rewinds(log: &SessionLog, events: &[LoggedEvent]) -> Vec<LoggedEvent> {
    let ended: BTreeSet<&str> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::Rewound { rewind_id, .. } => Some(rewind_id.as_str()),
            _ => None,
        })
        .collect();
    let Some(last) = events.last() else {
        return Vec::new();
    };
    let mark = Recovered {
        after_seq: last.seq,
        after_ts: last.ts.clone(),
    };
    let mut appended = Vec::new();
    for logged in events {
        let Event::RewindStarted {
            rewind_id,
            to_message_id,
            files,
            ..
        } = &logged.event
        else {
            continue;
        };
        if ended.contains(rewind_id.as_str()) {
            continue;
        }
        let logged_files: BTreeSet<&str> = events
            .iter()
            .filter_map(|e| match &e.event {
                Event::RewindFile {
                    rewind_id: id,
                    path,
                } if id == rewind_id => Some(path.as_str()),
                _ => None,
            })
            .collect();
        // What the rewind found (and stored) before writing.
        let mut found: BTreeMap<&str, &FileState> = BTreeMap::new();
        for e in events {
            if let Event::Checkpoint { turn_id, files } = &e.event {
                if turn_id == rewind_id {
                    for f in files {
                        if let Some(before) = &f.before {
                            found.insert(f.path.as_str(), before);
                        }
                    }
                }
            }
        }
        let (mut restored, mut untouched, mut afters) = (Vec::new(), Vec::new(), Vec::new());
        for path in files {
            let now = current(Path::new(path));
            let written = logged_files.contains(path.as_str())
                || found
                    .get(path.as_str())
                    .is_some_and(|before| before.hash != now.hash);
            if written {
                if !logged_files.contains(path.as_str()) {
                    appended.push(log.append_recovered(
                        Event::RewindFile {
                            rewind_id: rewind_id.clone(),
                            path: path.clone(),
                        },
                        &mark,
                    ));
                }
                restored.push(path.clone());
            } else {
                untouched.push(path.clone());
            }
            afters.push(CheckpointAfter {
                path: path.clone(),
                after: now,
            });
        }
        appended.push(log.append_recovered(
            Event::CheckpointEnd {
                turn_id: rewind_id.clone(),
                files: afters,
            },
            &mark,
        ));
        appended.push(log.append_recovered(
            Event::Rewound {
                rewind_id: rewind_id.clone(),
                to_message_id: to_message_id.clone(),
                conversation: false,
                restored,
                conflicts: Vec::new(),
                unrestorable: Vec::new(),
                untouched,
                dropped_messages: Vec::new(),
                restored_messages: Vec::new(),
            },
            &mark,
        ));
    }
    if !appended.is_empty() {
        log.sync();
    }
    appended
}

fn current(path: &Path) -> FileState {
    match read_state(path, None) {
        Ok(Some((bytes, mode))) => FileState {
            hash: Some(super::store::hash_of(&bytes)),
            mode,
        },
        _ => FileState::absent(),
    }
}
