//! Inline edit: the answer of an `edit = "selection"` task becomes one
//! replacement of the selected range, proposed to the editor as one
//! `workspace/applyEdit`.
//!
//! Invariant: only the selected range is ever replaced. The edit is computed
//! against the buffer the task started on; if the user typed meanwhile, it
//! is moved along when the selection's own text is unchanged and refused
//! when it is not. Text outside the range is never touched.

use std::ops::Range as Bytes;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::buffers::{BufferCache, PositionEncoding, Snapshot};
use crate::vocab::approval::ApprovalMode;
use crate::vocab::bridge::{ApplyEditRequest, BridgeOutcome, ClientBridge};
use crate::vocab::edit::{EditAnnotation, EditPosition, EditProposal, FileEdit, TextReplace};

/// How long an accepted edit may take to show up in the buffer cache.
const LANDING_WAIT: Duration = Duration::from_secs(2);

/// How a proposed inline edit ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditOutcome {
    /// The editor applied it.
    Accepted,
    /// The user declined it (`applied: false`, or dismissed the request).
    Rejected { reason: Option<String> },
    /// It was never proposed, or the editor could not apply it.
    Refused { reason: String },
}

impl EditOutcome {
    /// `accepted`, `rejected` or `refused`, as on the wire and in the log.
    pub fn as_str(&self) -> &'static str {
        match self {
            EditOutcome::Accepted => "accepted",
            EditOutcome::Rejected { .. } => "rejected",
            EditOutcome::Refused { .. } => "refused",
        }
    }
}

/// The model's answer without one surrounding markdown code fence.
pub fn strip_fence(answer: &str) -> String {
    let trimmed = answer.trim();
    let fence_len = trimmed.chars().take_while(|&c| c == '`').count();
    if fence_len >= 3 {
        let fence = &trimmed[..fence_len];
        if let Some(first_break) = trimmed.find('\n') {
            let body = &trimmed[first_break + 1..];
            if let Some(inner) = body.trim_end().strip_suffix(fence) {
                return inner.strip_suffix('\n').unwrap_or(inner).to_string();
            }
        }
    }
    // No fence: keep the answer, without the blank lines models add
    // around it.
    answer.trim_matches('\n').to_string()
}

/// The replacement with the original's trailing line break: a selection of
/// whole lines stays whole lines.
pub fn fit_line_break(replacement: &str, original: &str) -> String {
    let mut out = replacement.to_string();
    let break_of = |s: &str| {
        if s.ends_with("\r\n") {
            "\r\n"
        } else if s.ends_with('\n') {
            "\n"
        } else {
            ""
        }
    };
    match (break_of(original), break_of(replacement)) {
        ("", "") => {}
        ("", ending) => out.truncate(out.len() - ending.len()),
        (ending, "") if !replacement.is_empty() => out.push_str(ending),
        _ => {}
    }
    out
}

/// The replacement without the indentation that precedes the selection on
/// its line: a selection that starts after the indentation gets an answer
/// that models usually indent anyway.
pub fn fit_indent(replacement: &str, base: &str, selection_start: usize) -> String {
    let line_start = base[..selection_start].rfind('\n').map_or(0, |i| i + 1);
    let indent = &base[line_start..selection_start];
    if !indent.is_empty() && indent.trim().is_empty() {
        if let Some(rest) = replacement.strip_prefix(indent) {
            return rest.to_string();
        }
    }
    replacement.to_string()
}

/// Where the selection is in the current text: the same bytes when
/// nothing in or around it changed, moved when edits happened only outside
/// it, `None` when its own text changed.
pub fn locate(base: &str, selection: Bytes<usize>, current: &str) -> Option<Bytes<usize>> {
    if base == current {
        return Some(selection);
    }
    let original = &base[selection.clone()];
    // One changed region, found from both ends.
    let prefix = common_prefix(base, current);
    let max_suffix = base.len().min(current.len()) - prefix;
    let suffix = common_suffix(base, current, max_suffix);
    let changed_in_base = prefix..base.len() - suffix;
    let delta = current.len() as isize - base.len() as isize;
    if changed_in_base.end < selection.start
        || (changed_in_base.end == selection.start && changed_in_base.start < selection.start)
    {
        let shift = |b: usize| (b as isize + delta) as usize;
        let moved = shift(selection.start)..shift(selection.end);
        return (current.get(moved.clone()) == Some(original)).then_some(moved);
    }
    if changed_in_base.start > selection.end
        || (changed_in_base.start == selection.end && changed_in_base.end > selection.end)
    {
        return (current.get(selection.clone()) == Some(original)).then_some(selection);
    }
    // Edits on both sides (or an insertion right at an end): the selection
    // is where its text is now, the occurrence nearest to where it was.
    if original.is_empty() {
        return None;
    }
    current
        .match_indices(original)
        .map(|(at, _)| at)
        .min_by_key(|&at| at.abs_diff(selection.start))
        .map(|at| at..at + original.len())
}

fn common_prefix(a: &str, b: &str) -> usize {
    let mut n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    // Stay on a char boundary of both.
    while n > 0 && !(a.is_char_boundary(n) && b.is_char_boundary(n)) {
        n -= 1;
    }
    n
}

fn common_suffix(a: &str, b: &str, max: usize) -> usize {
    let mut n = a
        .bytes()
        .rev()
        .zip(b.bytes().rev())
        .take(max)
        .take_while(|(x, y)| x == y)
        .count();
    while n > 0 && !(a.is_char_boundary(a.len() - n) && b.is_char_boundary(b.len() - n)) {
        n -= 1;
    }
    n
}

/// What an inline edit replaces, as the task saw it when it started.
#[derive(Debug, Clone)]
pub struct Selection {
    pub path: PathBuf,
    /// The document's text when the task started.
    pub base: String,
    /// The selected bytes of `base`.
    pub bytes: Bytes<usize>,
    /// Whether the document was open in the editor (else it was on disk).
    pub open: bool,
}

/// Everything the proposal needs from the session and the editor.
pub struct EditContext<'a> {
    pub bridge: &'a dyn ClientBridge,
    pub buffers: &'a BufferCache,
    pub mode: ApprovalMode,
    pub task_id: &'a str,
    pub task_title: &'a str,
    /// Names the change annotation (`tandem-task-<session>-<turn>`).
    pub annotation_id: String,
    pub cancel: &'a CancellationToken,
}

/// Proposes `replacement` for the selection, rebased on the current text,
/// and waits for the answer (and, once accepted, for the change to show up).
pub async fn propose(
    cx: &EditContext<'_>,
    selection: &Selection,
    replacement: &str,
) -> EditOutcome {
    if cx.mode == ApprovalMode::ReadOnly {
        return EditOutcome::Refused {
            reason: "the session is in read-only mode, so no edit was proposed".to_string(),
        };
    }
    let abilities = cx.bridge.abilities();
    if !abilities.apply_edit {
        return EditOutcome::Refused {
            reason: "the editor cannot apply edits (no workspace.applyEdit with documentChanges)"
                .to_string(),
        };
    }
    let (current, version) = current_text(cx.buffers, &selection.path, selection.open);
    let Some(current) = current else {
        return EditOutcome::Refused {
            reason: "the document was closed while the task ran".to_string(),
        };
    };
    let Some(at) = locate(&selection.base, selection.bytes.clone(), &current) else {
        return EditOutcome::Refused {
            reason: "the selected text changed while the task ran, so the edit was not proposed"
                .to_string(),
        };
    };
    let snapshot = Snapshot::from_text(&current, version.unwrap_or(0));
    let encoding = cx.buffers.encoding();
    let range = edit_range(&snapshot, at.clone(), encoding);
    let review = cx.mode == ApprovalMode::Review;
    let label = format!("tandem: {}", cx.task_title);
    let edit = EditProposal {
        changes: vec![FileEdit::Text {
            path: selection.path.clone(),
            version,
            edits: vec![TextReplace {
                start: range.start,
                end: range.end,
                new_text: replacement.to_string(),
            }],
        }],
        annotation: abilities.change_annotations.then(|| EditAnnotation {
            id: cx.annotation_id.clone(),
            label: label.clone(),
            needs_confirmation: review,
            description: Some(format!(
                "Proposed by the tandem agent (task `{}`)",
                cx.task_id
            )),
        }),
    };
    let mut changes = cx.buffers.subscribe();
    let request = ApplyEditRequest { edit, label };
    match cx.bridge.apply_edit(request, cx.cancel).await {
        BridgeOutcome::Answered(answer) if answer.applied => {}
        BridgeOutcome::Answered(answer) => {
            return EditOutcome::Rejected {
                reason: answer.failure_reason.filter(|r| !r.trim().is_empty()),
            }
        }
        BridgeOutcome::Cancelled => return EditOutcome::Rejected { reason: None },
        BridgeOutcome::Unavailable(why) => {
            return EditOutcome::Refused {
                reason: format!("the editor could not apply it: {why}"),
            }
        }
    }
    // Applied: wait for the editor's didChange (or the disk) to show it, so
    // what the model is told next is what the buffer holds.
    let expected_start = at.start;
    let deadline = Instant::now() + LANDING_WAIT;
    loop {
        let (now, _) = current_text(cx.buffers, &selection.path, selection.open);
        if now
            .as_deref()
            .and_then(|t| t.get(expected_start..expected_start + replacement.len()))
            == Some(replacement)
        {
            return EditOutcome::Accepted;
        }
        tokio::select! {
            _ = cx.cancel.cancelled() => return EditOutcome::Accepted,
            _ = tokio::time::sleep_until(deadline) => {
                tracing::warn!(path = %selection.path.display(), "an accepted inline edit did not show up in the buffer");
                return EditOutcome::Accepted;
            }
            changed = changes.changed() => {
                if changed.is_err() {
                    tokio::time::sleep_until(deadline).await;
                }
            }
        }
    }
}

/// The document's text now (buffer, else disk) and its buffer version.
fn current_text(buffers: &BufferCache, path: &Path, open: bool) -> (Option<String>, Option<i32>) {
    match buffers.snapshot(path) {
        Some(snapshot) => (Some(snapshot.rope.to_string()), Some(snapshot.version)),
        None if !open => (std::fs::read_to_string(path).ok(), None),
        None => (None, None),
    }
}

/// The range `bytes` covers in `snapshot`, as positions in `encoding`.
fn edit_range(
    snapshot: &Snapshot,
    bytes: Bytes<usize>,
    encoding: PositionEncoding,
) -> std::ops::Range<EditPosition> {
    let position = |byte: usize| {
        let p = snapshot.char_to_position(snapshot.rope.byte_to_char(byte), encoding);
        EditPosition {
            line: p.line,
            character: p.character,
        }
    };
    position(bytes.start)..position(bytes.end)
}

/// What the model reads about the outcome, at its next request.
pub fn outcome_message(
    outcome: &EditOutcome,
    task_title: &str,
    file: &str,
    lines: &str,
    turn_id: &str,
) -> String {
    let what =
        format!("Your replacement for {lines} of `{file}` (task \"{task_title}\", turn {turn_id})");
    match outcome {
        EditOutcome::Accepted => {
            format!("[tandem] {what} was accepted by the user and is in the file now.")
        }
        EditOutcome::Rejected {
            reason: Some(reason),
        } => {
            format!("[tandem] {what} was rejected by the user; nothing was changed. Their comment: {reason}")
        }
        EditOutcome::Rejected { reason: None } => {
            format!("[tandem] {what} was rejected by the user; nothing was changed.")
        }
        EditOutcome::Refused { reason } => {
            format!("[tandem] {what} was not applied: {reason}.")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_surrounding_fence_is_stripped() {
        assert_eq!(strip_fence("```rust\nfn a() {}\n```\n"), "fn a() {}");
        assert_eq!(strip_fence("\nfn a() {}\n\n"), "fn a() {}");
        assert_eq!(strip_fence("````\n```x```\n````"), "```x```");
        assert_eq!(strip_fence("```rust\nunclosed"), "```rust\nunclosed");
    }

    #[test]
    fn the_indentation_before_the_selection_is_not_repeated() {
        assert_eq!(fit_indent("    b = 2;", "a\n    b = 1;\n", 6), "b = 2;");
        assert_eq!(fit_indent("    b = 2;", "a\n    b = 1;\n", 2), "    b = 2;");
        assert_eq!(fit_indent("b = 2;", "a\n    b = 1;\n", 6), "b = 2;");
    }

    #[test]
    fn the_line_break_follows_the_original() {
        assert_eq!(fit_line_break("b", "a\n"), "b\n");
        assert_eq!(fit_line_break("b\n", "a"), "b");
        assert_eq!(fit_line_break("b\n", "a\n"), "b\n");
        assert_eq!(fit_line_break("b", "a\r\n"), "b\r\n");
    }

    #[test]
    fn edits_outside_the_selection_move_it_and_edits_inside_refuse_it() {
        let base = "one\ntwo\nthree\n";
        let sel = 4..8; // "two\n"
        assert_eq!(locate(base, sel.clone(), base), Some(4..8));
        assert_eq!(locate(base, sel.clone(), "one\ntwo\nthree!\n"), Some(4..8));
        assert_eq!(
            locate(base, sel.clone(), "zero\none\ntwo\nthree\n"),
            Some(9..13)
        );
        assert_eq!(
            locate(base, sel.clone(), "0\none\ntwo\nthree\n4\n"),
            Some(6..10)
        );
        assert_eq!(locate(base, sel.clone(), "one\ntwX\nthree\n"), None);
        assert_eq!(locate(base, sel, "one\nthree\n"), None);
    }
}
