//! The human trajectory of `tandem replay`: one line per moment, indented
//! by level (turn, step, call), whole texts under their line with `--full`,
//! and the counts at the end.

use std::fmt::Write as _;

use super::select::select;
use super::trajectory::{walk, DaemonState, ReplayOptions, ReplaySummary};
use crate::core::log::{LogHeader, LoggedEvent};

/// A session's trajectory for people; `Err` names a turn that is not there.
pub fn render_trajectory(
    header: &LogHeader,
    events: &[LoggedEvent],
    options: &ReplayOptions,
    daemon: DaemonState,
) -> Result<String, String> {
    let selected = select(events, options.turn.as_deref())?;
    let walk = walk(&selected, options, daemon);
    let mut out = String::new();
    let workspace: Vec<String> = header
        .workspace
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let _ = writeln!(
        out,
        "session {} created {} in {}",
        header.session_id,
        header.created,
        workspace.join(", ")
    );
    let mut in_recovery: Option<&str> = None;
    for line in &walk.lines {
        if line.text.starts_with("== turn ") {
            out.push('\n');
        }
        let recovered = line.recovered_at.as_deref();
        if let (Some(at), true) = (recovered, recovered != in_recovery) {
            let _ = writeln!(
                out,
                "{} -- the daemon stopped after this point; crash recovery wrote what follows at {at}",
                line.ts
            );
        }
        in_recovery = recovered;
        let indent = "  ".repeat(line.depth);
        let mark = recovered
            .map(|at| format!("  [recovery, written {at}]"))
            .unwrap_or_default();
        let _ = writeln!(out, "{} {indent}{}{mark}", line.ts, line.text);
        if let Some(block) = &line.block {
            let pad = " ".repeat(line.ts.len() + 1) + &"  ".repeat(line.depth + 1);
            for text in block.lines() {
                let _ = writeln!(out, "{pad}| {text}");
            }
        }
    }
    let _ = writeln!(out, "\n-- {}", summary_line(&walk.summary));
    Ok(out)
}

/// `1 turn`, `2 turns`.
fn count(n: usize, what: &str) -> String {
    match n {
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    }
}

fn summary_line(summary: &ReplaySummary) -> String {
    let r = &summary.model_requests;
    let mut requests = format!(
        "{} ({} completed, {} failed, {} cut short",
        count(r.sent, "model request"),
        r.completed,
        r.failed,
        r.cut_short
    );
    if r.in_flight > 0 {
        let _ = write!(requests, ", {} in flight", r.in_flight);
    }
    requests.push(')');
    let open = summary
        .open_turn
        .as_ref()
        .map(|t| format!(" ({} open)", t.turn_id))
        .unwrap_or_default();
    format!(
        "{}{open}, {requests}, {} requested, {}",
        count(summary.turns, "turn"),
        count(summary.tool_calls.requested, "tool call"),
        count(summary.tool_calls.results, "tool result")
    )
}
