//! `--turn N`: the events of one turn out of a session's log.

use std::collections::HashSet;

use crate::core::log::LoggedEvent;
use crate::vocab::event::Event;

/// The events of one turn (`t3` or `3`): its own, and the inputs it took
/// (queued and discarded lines of the messages it claimed or entered).
/// Without a turn, all of them.
pub fn select<'e>(
    events: &'e [LoggedEvent],
    turn: Option<&str>,
) -> Result<Vec<&'e LoggedEvent>, String> {
    let Some(turn) = turn else {
        return Ok(events.iter().collect());
    };
    let turn_id = if turn.starts_with('t') {
        turn.to_string()
    } else {
        format!("t{turn}")
    };
    let mut turns = Vec::new();
    let mut messages = HashSet::new();
    for logged in events {
        match &logged.event {
            Event::TurnStart { turn_id } => turns.push(turn_id.clone()),
            Event::InputClaimed {
                turn_id: t,
                message_ids,
            } if *t == turn_id => messages.extend(message_ids.iter().cloned()),
            Event::UserMessage {
                turn_id: t,
                message_id,
                ..
            } if *t == turn_id => {
                messages.insert(message_id.clone());
            }
            _ => {}
        }
    }
    if !turns.contains(&turn_id) {
        let known = if turns.is_empty() {
            "it has no turns".to_string()
        } else {
            format!("its turns are {}", turns.join(", "))
        };
        return Err(format!("no turn {turn_id} in this session; {known}"));
    }
    Ok(events
        .iter()
        .filter(|logged| match &logged.event {
            Event::InputQueued { message_id, .. } | Event::InputDiscarded { message_id, .. } => {
                messages.contains(message_id)
            }
            event => event.turn_id() == Some(turn_id.as_str()),
        })
        .collect())
}
