//! Which events a conversation rewind took out of the model's context: from
//! the user message it named up to the `rewound` event. The log keeps them
//! (replay shows both); only the projection skips them.

use crate::vocab::event::Event;

/// The user messages a conversation rewind to `to_message_id` takes out of
/// the context: that one and every later one still in it, in order.
pub fn messages_to_drop(events: &[&Event], to_message_id: &str) -> Vec<String> {
    let dropped = dropped_by_rewinds(events);
    let messages = events.iter().zip(dropped).filter_map(|(e, gone)| match e {
        Event::UserMessage { message_id, .. } if !gone => Some(message_id.clone()),
        _ => None,
    });
    messages.skip_while(|id| id != to_message_id).collect()
}

/// For each event, whether a later `rewound` (with `conversation`) dropped
/// it. `instructions` events are never dropped: they say what the system
/// prompt is now, not what was said.
pub fn dropped_by_rewinds(events: &[&Event]) -> Vec<bool> {
    let mut dropped = vec![false; events.len()];
    for (at, event) in events.iter().enumerate() {
        let Event::Rewound {
            to_message_id,
            conversation: true,
            ..
        } = event
        else {
            continue;
        };
        let from = events[..at].iter().position(
            |e| matches!(e, Event::UserMessage { message_id, .. } if message_id == to_message_id),
        );
        if let Some(from) = from {
            for (index, event) in events.iter().enumerate().take(at).skip(from) {
                if !matches!(event, Event::Instructions { .. }) {
                    dropped[index] = true;
                }
            }
        }
    }
    dropped
}
