//! `tandem replay --json`: the log's own vocabulary, one JSON object per
//! line — the header, the selected events exactly as logged (`recovered`
//! marks included), and a last `replay_summary` line with the counts and
//! the turn left open, if any.

use serde::Serialize;

use super::select::select;
use super::trajectory::{walk, DaemonState, ReplayOptions, ReplaySummary};
use crate::core::log::{LogHeader, LoggedEvent};

#[derive(Serialize)]
struct SummaryLine<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    session_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    turn_id: Option<&'a str>,
    #[serde(flatten)]
    summary: &'a ReplaySummary,
}

/// The trajectory for tools; `Err` names a turn that is not there.
pub fn render_json_lines(
    header: &LogHeader,
    events: &[LoggedEvent],
    options: &ReplayOptions,
    daemon: DaemonState,
) -> Result<String, String> {
    let selected = select(events, options.turn.as_deref())?;
    let walk = walk(&selected, options, daemon);
    let mut out = String::new();
    let mut push = |value: Result<String, serde_json::Error>| {
        out.push_str(&value.unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}")));
        out.push('\n');
    };
    push(serde_json::to_string(header));
    for logged in &selected {
        push(serde_json::to_string(logged));
    }
    let turn_id = selected
        .iter()
        .find_map(|e| e.event.turn_id())
        .filter(|_| options.turn.is_some());
    push(serde_json::to_string(&SummaryLine {
        kind: "replay_summary",
        session_id: &header.session_id,
        turn_id,
        summary: &walk.summary,
    }));
    Ok(out)
}
