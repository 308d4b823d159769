//! The trajectory walk on logs written by hand: old logs (before
//! `model_request` and the `recovered` mark) still read and count, and
//! `--turn` narrows or says what there is.

use super::select::select;
use super::trajectory::{walk, DaemonState, ReplayOptions};
use crate::core::log::LoggedEvent;

fn parse(lines: &[&str]) -> Vec<LoggedEvent> {
    lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// A turn as a daemon from before issue 19 logged it: no `model_request`,
/// one failed attempt, one answer with a tool call and its result.
const OLD_TURN: &[&str] = &[
    r#"{"seq":1,"ts":"2026-12-01T10:00:00.000Z","type":"input_queued","message_id":"m1","queue":"next_turn","content":[{"kind":"text","text":"hi"}]}"#,
    r#"{"seq":2,"ts":"2026-12-01T10:00:00.001Z","type":"turn_start","turn_id":"t1"}"#,
    r#"{"seq":3,"ts":"2026-12-01T10:00:00.002Z","type":"user_message","turn_id":"t1","message_id":"m1","content":[{"kind":"text","text":"hi"}]}"#,
    r#"{"seq":4,"ts":"2026-12-01T10:00:00.003Z","type":"step_start","turn_id":"t1","step":1}"#,
    r#"{"seq":5,"ts":"2026-12-01T10:00:00.004Z","type":"attempt_failed","turn_id":"t1","step":1,"attempt":1,"error_kind":"overloaded","message":"busy","retry":true}"#,
    r#"{"seq":6,"ts":"2026-12-01T10:00:00.005Z","type":"assistant_message","turn_id":"t1","step":1,"attempt":2,"provider":"openai","model":"m","text":"","tool_calls":[{"id":"c1","name":"grep","arguments":"{}"}],"finish_reason":"tool_calls","usage":{"input_tokens":3,"output_tokens":1}}"#,
    r#"{"seq":7,"ts":"2026-12-01T10:00:00.006Z","type":"tool_call","turn_id":"t1","call_id":"c1","name":"grep","arguments":{},"title":"grep","kind":"search"}"#,
    r#"{"seq":8,"ts":"2026-12-01T10:00:00.007Z","type":"tool_result","turn_id":"t1","call_id":"c1","status":"not_run","output":"no"}"#,
    r#"{"seq":9,"ts":"2026-12-01T10:00:00.008Z","type":"step_end","turn_id":"t1","step":1}"#,
    r#"{"seq":10,"ts":"2026-12-01T10:00:00.009Z","type":"turn_end","turn_id":"t1","stop_reason":"cancelled","usage":{}}"#,
];

#[test]
fn an_old_log_counts_its_requests_from_answers_and_failures() {
    let events = parse(OLD_TURN);
    assert!(events.iter().all(|e| e.recovered.is_none()));
    let options = ReplayOptions::default();
    let selected = select(&events, None).unwrap();
    let walk = walk(&selected, &options, DaemonState::NotRunning);
    let counts = &walk.summary.model_requests;
    assert_eq!((counts.sent, counts.completed, counts.failed), (2, 1, 1));
    assert_eq!(counts.cut_short, 0);
    assert_eq!(walk.summary.tool_calls.requested, 1);
    assert_eq!(walk.summary.tool_calls.results, 1);
    assert!(walk.summary.open_turn.is_none());
    let text: Vec<&str> = walk.lines.iter().map(|l| l.text.as_str()).collect();
    assert!(text.contains(&"tool grep [c1] -> not_run: no"), "{text:?}");
    assert!(text.contains(&"queued m1 (next_turn): hi"), "{text:?}");
}

#[test]
fn the_recovered_mark_round_trips_and_is_absent_otherwise() {
    let line = r#"{"seq":11,"ts":"2026-12-01T11:00:00.000Z","recovered":{"after_seq":10,"after_ts":"2026-12-01T10:00:00.009Z"},"type":"step_end","turn_id":"t1","step":1}"#;
    let event: LoggedEvent = serde_json::from_str(line).unwrap();
    let mark = event.recovered.as_ref().unwrap();
    assert_eq!(
        (mark.after_seq, mark.after_ts.as_str()),
        (10, "2026-12-01T10:00:00.009Z")
    );
    assert_eq!(serde_json::to_string(&event).unwrap(), line);
    let old: LoggedEvent = serde_json::from_str(OLD_TURN[3]).unwrap();
    assert_eq!(serde_json::to_string(&old).unwrap(), OLD_TURN[3]);
}

#[test]
fn a_turn_is_selected_by_number_or_id_with_its_inputs() {
    let events = parse(OLD_TURN);
    for turn in ["1", "t1"] {
        assert_eq!(select(&events, Some(turn)).unwrap().len(), events.len());
    }
    assert_eq!(
        select(&events, Some("2")).unwrap_err(),
        "no turn t2 in this session; its turns are t1"
    );
    assert_eq!(
        select(&events[..1], Some("1")).unwrap_err(),
        "no turn t1 in this session; it has no turns"
    );
}

#[test]
fn an_open_turn_reads_by_whether_its_daemon_runs() {
    let events = parse(&OLD_TURN[..7]);
    let selected = select(&events, None).unwrap();
    let options = ReplayOptions::default();
    let stopped = walk(&selected, &options, DaemonState::NotRunning);
    let last = &stopped.lines.last().unwrap().text;
    assert!(
        last.starts_with("== t1 is open (daemon not running)"),
        "{last}"
    );
    let unfinished = &stopped.lines[stopped.lines.len() - 2].text;
    assert_eq!(
        unfinished,
        "tool grep [c1] has no result: never started before the daemon stopped"
    );
    let running = walk(&selected, &options, DaemonState::Running { pid: 42 });
    let last = &running.lines.last().unwrap().text;
    assert_eq!(last, "== t1 is open (running in daemon pid 42)");
    let call = &running.lines[running.lines.len() - 2].text;
    assert_eq!(call, "tool grep [c1] has not started yet");
}

#[test]
fn queues_and_statuses_read_with_the_protocols_names() {
    let events = parse(&[
        r#"{"seq":1,"ts":"2026-12-01T10:00:00.000Z","type":"input_queued","message_id":"m2","queue":"next_step","content":[{"kind":"text","text":"also this"}]}"#,
        r#"{"seq":2,"ts":"2026-12-01T10:00:00.001Z","type":"input_discarded","message_id":"m2","reason":"gone"}"#,
    ]);
    let selected = select(&events, None).unwrap();
    let options = ReplayOptions::default();
    let walk = walk(&selected, &options, DaemonState::NotRunning);
    let text: Vec<&str> = walk.lines.iter().map(|l| l.text.as_str()).collect();
    assert_eq!(
        text,
        ["queued m2 (next_step): also this", "discarded m2: gone"]
    );
}
