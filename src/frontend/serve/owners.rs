//! Which connection owns each session's turn: the one whose prompt (or
//! waking steer) opened it. Its documents are what the turn's tools read
//! (the input carries its connection's buffer cache into the core) and its
//! editor is where the turn's `workspace/applyEdit`s go.
//!
//! The core takes a turn's documents from the input entered last in the
//! batch that opens it; this follows the same rule, from the log: after a
//! `turn_start`, the last message id of the first `input_claimed` names
//! the opener. A handler learns its input's message id only once it is
//! queued, so the opener's connection may become known just after the turn
//! claimed it; [`TurnOwners::note_origin`] settles that case.
//!
//! Invariant: a session's owner changes only when one of its turns opens
//! (or a client creates or loads it while no turn has named an owner), so
//! a running turn's edits never go to a window that prompted after it.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use crate::vocab::event::Event;

#[derive(Default)]
struct Owners {
    /// The owning connection of each session.
    owner: HashMap<String, usize>,
    /// Queued inputs' connections, by session and message id.
    origins: HashMap<String, HashMap<String, usize>>,
    /// Sessions whose turn started and has not claimed its opening batch.
    opening: HashSet<String>,
    /// A turn's opener whose connection is not known yet, by session.
    unresolved: HashMap<String, String>,
}

#[derive(Default)]
pub struct TurnOwners(Mutex<Owners>);

impl TurnOwners {
    fn lock(&self) -> std::sync::MutexGuard<'_, Owners> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self, session_id: &str) -> Option<usize> {
        self.lock().owner.get(session_id).copied()
    }

    /// Makes `conn` the owner if the session has none (a client created or
    /// loaded it). Returns whether the owner changed.
    pub fn claim_if_unowned(&self, session_id: &str, conn: usize) -> bool {
        let mut owners = self.lock();
        if owners.owner.contains_key(session_id) {
            return false;
        }
        owners.owner.insert(session_id.to_string(), conn);
        true
    }

    /// Records which connection queued input `message_id`. Returns whether
    /// that made `conn` the owner of a turn that already opened with it.
    pub fn note_origin(&self, session_id: &str, message_id: &str, conn: usize) -> bool {
        let mut owners = self.lock();
        if owners.unresolved.get(session_id).map(String::as_str) == Some(message_id) {
            owners.unresolved.remove(session_id);
            owners.owner.insert(session_id.to_string(), conn);
            return true;
        }
        owners
            .origins
            .entry(session_id.to_string())
            .or_default()
            .insert(message_id.to_string(), conn);
        false
    }

    /// Follows a session's log. Returns whether the owner changed.
    pub fn on_event(&self, session_id: &str, event: &Event) -> bool {
        let mut owners = self.lock();
        match event {
            Event::TurnStart { .. } => {
                owners.opening.insert(session_id.to_string());
                false
            }
            Event::InputClaimed { message_ids, .. } => {
                let opens = owners.opening.remove(session_id);
                let origins = owners.origins.entry(session_id.to_string()).or_default();
                let conns: Vec<Option<usize>> =
                    message_ids.iter().map(|id| origins.remove(id)).collect();
                if !opens {
                    return false;
                }
                let Some(opener) = message_ids.last() else {
                    return false;
                };
                match conns.last().copied().flatten() {
                    Some(conn) => owners.owner.insert(session_id.to_string(), conn) != Some(conn),
                    None => {
                        owners
                            .unresolved
                            .insert(session_id.to_string(), opener.clone());
                        false
                    }
                }
            }
            Event::InputDiscarded { message_id, .. } => {
                if let Some(origins) = owners.origins.get_mut(session_id) {
                    origins.remove(message_id);
                }
                false
            }
            Event::StepStart { .. } | Event::TurnEnd { .. } => {
                owners.opening.remove(session_id);
                false
            }
            _ => false,
        }
    }

    /// A connection closed: it owns nothing any more.
    pub fn disconnected(&self, conn: usize) {
        let mut owners = self.lock();
        owners.owner.retain(|_, c| *c != conn);
        for origins in owners.origins.values_mut() {
            origins.retain(|_, c| *c != conn);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claimed(ids: &[&str]) -> Event {
        Event::InputClaimed {
            turn_id: "t1".into(),
            message_ids: ids.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn the_opening_input_names_the_owner_and_a_later_prompt_does_not_take_over() {
        let owners = TurnOwners::default();
        assert!(owners.claim_if_unowned("s", 1));
        owners.note_origin("s", "m1", 2);
        owners.on_event(
            "s",
            &Event::TurnStart {
                turn_id: "t1".into(),
            },
        );
        assert!(owners.on_event("s", &claimed(&["m1"])));
        assert_eq!(owners.get("s"), Some(2));
        // Window 1 prompts while the turn runs: still window 2's turn.
        owners.note_origin("s", "m2", 1);
        owners.on_event(
            "s",
            &Event::StepStart {
                turn_id: "t1".into(),
                step: 1,
            },
        );
        assert_eq!(owners.get("s"), Some(2));
        owners.on_event(
            "s",
            &Event::TurnStart {
                turn_id: "t2".into(),
            },
        );
        owners.on_event("s", &claimed(&["m2"]));
        assert_eq!(owners.get("s"), Some(1));
    }

    #[test]
    fn an_origin_noted_after_the_turn_claimed_it_still_names_the_owner() {
        let owners = TurnOwners::default();
        owners.claim_if_unowned("s", 1);
        owners.on_event(
            "s",
            &Event::TurnStart {
                turn_id: "t1".into(),
            },
        );
        owners.on_event("s", &claimed(&["m0", "m1"]));
        assert_eq!(owners.get("s"), Some(1));
        assert!(owners.note_origin("s", "m1", 3));
        assert_eq!(owners.get("s"), Some(3));
    }

    #[test]
    fn a_steer_claimed_mid_turn_changes_nothing() {
        let owners = TurnOwners::default();
        owners.note_origin("s", "m1", 1);
        owners.on_event(
            "s",
            &Event::TurnStart {
                turn_id: "t1".into(),
            },
        );
        owners.on_event("s", &claimed(&["m1"]));
        owners.on_event(
            "s",
            &Event::StepStart {
                turn_id: "t1".into(),
                step: 1,
            },
        );
        owners.note_origin("s", "m2", 2);
        assert!(!owners.on_event("s", &claimed(&["m2"])));
        assert_eq!(owners.get("s"), Some(1));
    }
}
