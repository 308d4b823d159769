//! Which events of a session a fork starts with (`tandem/forkSession`,
//! ACP's `session/fork`): everything before the turn a user message
//! opened, or, without a message, everything before a turn still running.
//!
//! Invariant: the events kept are a prefix of the log, in order and
//! unchanged, less the lines of inputs that had not yet entered a turn or
//! been discarded there (a fork has no inbox to hold them) — so the fork's
//! replay is the original's up to that point, and loading it recovers
//! nothing.

use std::collections::HashSet;

use crate::core::log::LoggedEvent;
use crate::vocab::event::Event;

/// The events a fork of `events` holds: those before the turn that user
/// message `message_id` opened (the message itself and everything after
/// it are left out), or, with no message, the whole session but a turn
/// still running. `Err` says, for the user, why the message cannot be a
/// fork point.
pub fn fork_events(
    events: &[LoggedEvent],
    message_id: Option<&str>,
) -> Result<Vec<LoggedEvent>, String> {
    let cut = match message_id {
        Some(message) => turn_start_of(events, message)?,
        None => open_turn_start(events).unwrap_or(events.len()),
    };
    let kept = &events[..cut];
    let mut turns = HashSet::new();
    let mut settled = HashSet::new();
    for logged in kept {
        match &logged.event {
            Event::TurnStart { turn_id } => {
                turns.insert(turn_id.as_str());
            }
            Event::UserMessage { message_id, .. } | Event::InputDiscarded { message_id, .. } => {
                settled.insert(message_id.as_str());
            }
            _ => {}
        }
    }
    Ok(kept
        .iter()
        .filter(|logged| match &logged.event {
            Event::InputQueued { message_id, .. } => settled.contains(message_id.as_str()),
            event => event.turn_id().is_none_or(|turn| turns.contains(turn)),
        })
        .cloned()
        .collect())
}

/// Where the turn that `message` opened starts; an error for a message
/// that is not a turn's first user message.
fn turn_start_of(events: &[LoggedEvent], message: &str) -> Result<usize, String> {
    let entered = events.iter().find_map(|logged| match &logged.event {
        Event::UserMessage {
            turn_id,
            message_id,
            ..
        } if message_id == message => Some(turn_id.as_str()),
        _ => None,
    });
    let Some(turn) = entered else {
        let queued = events.iter().any(|logged| {
            matches!(&logged.event, Event::InputQueued { message_id, .. } if message_id == message)
        });
        if queued {
            return Err(format!(
                "messageId: `{message}` never entered a turn (it was discarded, or still waits)"
            ));
        }
        let known: Vec<&str> = openers(events).collect();
        return Err(if known.is_empty() {
            format!("messageId: no message `{message}`; the session has no user message yet")
        } else {
            format!(
                "messageId: no message `{message}` in the session; its prompts are {}",
                known.join(", ")
            )
        });
    };
    let opener = events.iter().find_map(|logged| match &logged.event {
        Event::UserMessage {
            turn_id,
            message_id,
            ..
        } if turn_id == turn => Some(message_id.as_str()),
        _ => None,
    });
    if opener != Some(message) {
        return Err(format!(
            "messageId: `{message}` steered turn {turn}, which `{}` opened: fork at `{0}`",
            opener.unwrap_or_default()
        ));
    }
    Ok(events
        .iter()
        .position(|logged| matches!(&logged.event, Event::TurnStart { turn_id } if turn_id == turn))
        .unwrap_or(0))
}

/// The first user message of every turn, in order.
fn openers(events: &[LoggedEvent]) -> impl Iterator<Item = &str> {
    let mut seen = HashSet::new();
    events.iter().filter_map(move |logged| match &logged.event {
        Event::UserMessage {
            turn_id,
            message_id,
            ..
        } if seen.insert(turn_id.as_str()) => Some(message_id.as_str()),
        _ => None,
    })
}

/// Where a turn that never ended starts (a turn running now).
fn open_turn_start(events: &[LoggedEvent]) -> Option<usize> {
    let mut open = None;
    for (at, logged) in events.iter().enumerate() {
        match &logged.event {
            Event::TurnStart { .. } => open = Some(at),
            Event::TurnEnd { .. } => open = None,
            _ => {}
        }
    }
    open
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(lines: &[&str]) -> Vec<LoggedEvent> {
        lines
            .iter()
            .enumerate()
            .map(|(i, line)| {
                let mut value: serde_json::Value = serde_json::from_str(line).unwrap();
                value["seq"] = serde_json::json!(i + 1);
                value["ts"] = serde_json::json!("2026-12-01T10:00:00.000Z");
                serde_json::from_value(value).unwrap()
            })
            .collect()
    }

    const TEXT: &str = r#"[{"kind":"text","text":"x"}]"#;

    fn two_turns_and_a_waiting_prompt() -> Vec<LoggedEvent> {
        let queued = |m: &str| {
            format!(
                r#"{{"type":"input_queued","message_id":"{m}","queue":"next_turn","content":{TEXT}}}"#
            )
        };
        let turn = |t: &str, m: &str| {
            vec![
                format!(r#"{{"type":"turn_start","turn_id":"{t}"}}"#),
                format!(r#"{{"type":"input_claimed","turn_id":"{t}","message_ids":["{m}"]}}"#),
                format!(
                    r#"{{"type":"user_message","turn_id":"{t}","message_id":"{m}","content":{TEXT}}}"#
                ),
                format!(
                    r#"{{"type":"turn_end","turn_id":"{t}","stop_reason":"end_turn","usage":{{}}}}"#
                ),
            ]
        };
        let mut lines = vec![queued("m1")];
        lines.extend(turn("t1", "m1"));
        lines.push(queued("m2"));
        // m3 is queued while t2 runs, and steers it.
        let mut t2 = turn("t2", "m2");
        t2.insert(1, queued("m3"));
        t2.insert(
            4,
            r#"{"type":"user_message","turn_id":"t2","message_id":"m3","content":[]}"#.to_string(),
        );
        lines.extend(t2);
        lines.push(queued("m4"));
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        log(&refs)
    }

    fn kinds(events: &[LoggedEvent]) -> Vec<String> {
        events
            .iter()
            .map(|e| {
                let v = serde_json::to_value(&e.event).unwrap();
                let id = v["message_id"].as_str().or(v["turn_id"].as_str());
                format!("{} {}", v["type"].as_str().unwrap(), id.unwrap_or(""))
            })
            .collect()
    }

    #[test]
    fn a_fork_at_a_prompt_keeps_what_came_before_its_turn() {
        let events = two_turns_and_a_waiting_prompt();
        let fork = fork_events(&events, Some("m2")).unwrap();
        assert_eq!(
            kinds(&fork),
            [
                "input_queued m1",
                "turn_start t1",
                "input_claimed t1",
                "user_message m1",
                "turn_end t1"
            ]
        );
        assert!(fork.iter().zip(&events).all(|(a, b)| a == b), "a prefix");
        assert!(fork_events(&events, Some("m1")).unwrap().is_empty());
    }

    #[test]
    fn without_a_message_the_whole_session_less_waiting_input() {
        let events = two_turns_and_a_waiting_prompt();
        let fork = fork_events(&events, None).unwrap();
        assert_eq!(fork.len(), events.len() - 1);
        assert_eq!(kinds(&fork).last().unwrap(), "turn_end t2");
        // A turn still running is left out, with the input it took.
        let running = &events[..events.len() - 2];
        assert_eq!(
            kinds(&fork_events(running, None).unwrap()).last().unwrap(),
            "turn_end t1"
        );
    }

    #[test]
    fn a_message_that_is_no_fork_point_is_named_in_the_error() {
        let events = two_turns_and_a_waiting_prompt();
        let steer = fork_events(&events, Some("m3")).unwrap_err();
        assert!(
            steer.contains("`m3` steered turn t2") && steer.contains("`m2`"),
            "{steer}"
        );
        let waiting = fork_events(&events, Some("m4")).unwrap_err();
        assert!(waiting.contains("never entered a turn"), "{waiting}");
        let unknown = fork_events(&events, Some("m9")).unwrap_err();
        assert!(unknown.ends_with("its prompts are m1, m2"), "{unknown}");
    }
}
