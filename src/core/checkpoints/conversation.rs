//! Which events a conversation rewind took out of the model's context: from
//! the user message it named up to the `rewound` event. The log keeps them
//! (replay shows both); only the projection skips them. A conversation
//! rewind that names an earlier conversation rewind (a redo) undoes what
//! that one did: its dropped events are back, in log order.

use std::collections::HashMap;

use crate::vocab::event::Event;

/// For each event, whether a later `rewound` (with `conversation`) dropped
/// it. `instructions` events are never dropped: they say what the system
/// prompt is now, not what was said.
pub fn dropped_by_rewinds(events: &[&Event]) -> Vec<bool> {
    let mut dropped = vec![false; events.len()];
    // What each conversation rewind flipped: the indices, and to what.
    let mut flipped: HashMap<&str, (Vec<usize>, bool)> = HashMap::new();
    for (at, event) in events.iter().enumerate() {
        let Event::Rewound {
            rewind_id,
            to_message_id,
            conversation: true,
            ..
        } = event
        else {
            continue;
        };
        if let Some((indices, to)) = flipped.get(to_message_id.as_str()).cloned() {
            // A redo: what that rewind changed goes back.
            for &index in &indices {
                dropped[index] = !to;
            }
            flipped.insert(rewind_id, (indices, !to));
            continue;
        }
        let from = events[..at].iter().position(
            |e| matches!(e, Event::UserMessage { message_id, .. } if message_id == to_message_id),
        );
        let mut changed = Vec::new();
        if let Some(from) = from {
            for (index, event) in events.iter().enumerate().take(at).skip(from) {
                if !matches!(event, Event::Instructions { .. }) && !dropped[index] {
                    dropped[index] = true;
                    changed.push(index);
                }
            }
        }
        flipped.insert(rewind_id, (changed, true));
    }
    dropped
}

/// The user messages a conversation rewind to `to_message_id` takes out of
/// the context: that one and every later one still in it, in order. For a
/// redo (`to_message_id` names a conversation rewind), none.
pub fn messages_to_drop(events: &[&Event], to_message_id: &str) -> Vec<String> {
    let dropped = dropped_by_rewinds(events);
    let messages = events.iter().zip(dropped).filter_map(|(e, gone)| match e {
        Event::UserMessage { message_id, .. } if !gone => Some(message_id.clone()),
        _ => None,
    });
    messages.skip_while(|id| id != to_message_id).collect()
}

/// What a redo of the conversation rewind `rewind_id` does: the user
/// messages it takes out of the context again, and those it brings back.
pub fn redo_effect(events: &[&Event], rewind_id: &str) -> (Vec<String>, Vec<String>) {
    let before = dropped_by_rewinds(events);
    let redo = Event::Rewound {
        rewind_id: String::new(),
        to_message_id: rewind_id.to_string(),
        conversation: true,
        restored: Vec::new(),
        conflicts: Vec::new(),
        unrestorable: Vec::new(),
        untouched: Vec::new(),
        dropped_messages: Vec::new(),
        restored_messages: Vec::new(),
    };
    let mut with_redo: Vec<&Event> = events.to_vec();
    with_redo.push(&redo);
    let after = dropped_by_rewinds(&with_redo);
    let (mut dropped, mut restored) = (Vec::new(), Vec::new());
    for (i, event) in events.iter().enumerate() {
        if let Event::UserMessage { message_id, .. } = event {
            match (before[i], after[i]) {
                (false, true) => dropped.push(message_id.clone()),
                (true, false) => restored.push(message_id.clone()),
                _ => {}
            }
        }
    }
    (dropped, restored)
}

/// Whether `rewind_id` names a conversation rewind in `events`.
pub fn is_conversation_rewind(events: &[&Event], rewind_id: &str) -> bool {
    events.iter().any(|e| {
        matches!(e, Event::Rewound { rewind_id: id, conversation: true, .. } if id == rewind_id)
    })
}
