//! The report to the model: what happened to the patch, file by file and
//! hunk by hunk; a patch that was wholly declined is a rejection.

use super::outcome::{FileOutcome, HunkOutcome, Outcome, Route, Wait};
use super::plan::{Plan, PlannedFile};
use super::settle::REPORT_WAIT;
use crate::tools::ToolError;
use crate::vocab::approval::ApprovalMode;

/// The report as the call's result: a rejection when nothing landed
/// because it was declined, else what happened.
pub(super) fn finish(
    plan: &Plan,
    outcomes: &[Outcome],
    mode: ApprovalMode,
) -> Result<String, ToolError> {
    let text = report(plan, outcomes, mode);
    if !outcomes.is_empty()
        && outcomes
            .iter()
            .all(|o| matches!(o, Outcome::Declined { .. }))
    {
        Err(ToolError::rejected(text))
    } else {
        Ok(text)
    }
}

/// The tool's result: what happened, file by file.
pub(super) fn report(plan: &Plan, outcomes: &[Outcome], mode: ApprovalMode) -> String {
    let mut lines = Vec::new();
    let mut files = Vec::new();
    let mut timed_out = false;
    let mut via_editor = false;
    let mut via_disk = false;
    for outcome in outcomes {
        match outcome {
            Outcome::Declined { reason, dismissed } => {
                let who = if mode == ApprovalMode::Review {
                    "The user rejected the patch"
                } else {
                    "The editor declined the patch"
                };
                let mut text = if *dismissed {
                    "The user dismissed the review of the patch; nothing was changed.".to_string()
                } else {
                    format!("{who}; nothing was changed.")
                };
                if let Some(reason) = reason {
                    let label = if mode == ApprovalMode::Review {
                        "Their comment"
                    } else {
                        "Reason"
                    };
                    text.push_str(&format!("\n{label}: {reason}"));
                }
                return text;
            }
            Outcome::Applied { files: f, route } => {
                files.extend(f.iter());
                match route {
                    Route::Disk => via_disk = true,
                    Route::Client => {}
                    Route::Editor(wait) => {
                        via_editor = true;
                        timed_out |= *wait == Wait::TimedOut;
                    }
                }
            }
        }
    }
    let complete = files.iter().all(|(_, o)| o.is_complete());
    let untouched = files.iter().all(|(_, o)| o.is_untouched());
    // Only a review that was seen to end can blame the user for a change
    // that did not land.
    let user_decided = mode == ApprovalMode::Review && !timed_out;
    let declined = if user_decided {
        "rejected by the user"
    } else {
        "not applied"
    };
    lines.push(if complete {
        "The patch was applied:".to_string()
    } else if untouched && timed_out {
        format!(
            "The editor said it applied the patch, but no change reached tandem within {}s; \
             as far as tandem can see, nothing was changed:",
            REPORT_WAIT.as_secs()
        )
    } else if untouched && user_decided {
        "The user rejected every change of the patch; nothing was changed:".to_string()
    } else if untouched {
        "The editor applied none of the patch's changes; nothing was changed:".to_string()
    } else if user_decided {
        "The patch was applied only in part (the user accepted some changes and rejected \
         others):"
            .to_string()
    } else {
        "The patch was applied only in part:".to_string()
    });
    for (i, outcome) in &files {
        lines.push(format!(
            "- {}",
            file_line(&plan.files[*i], outcome, declined)
        ));
    }
    if via_editor && via_disk && complete {
        lines.push(
            "(Open documents were changed in the editor, the other files on disk.)".to_string(),
        );
    }
    if !complete && !untouched {
        lines.push("Read the changed files again before patching them further.".to_string());
    }
    lines.join("\n")
}

/// One file's line of the report; `declined` says why a change is missing.
pub(super) fn file_line(file: &PlannedFile, outcome: &FileOutcome, declined: &str) -> String {
    let shown = &file.shown;
    match outcome {
        FileOutcome::Added => format!("{shown}: created"),
        FileOutcome::AddedEmpty => {
            format!("{shown}: created empty; its contents were {declined}")
        }
        FileOutcome::AddedDifferently => {
            format!("{shown}: created, but its contents differ from the patch")
        }
        FileOutcome::NotAdded => format!("{shown}: not created ({declined})"),
        FileOutcome::Deleted => format!("{shown}: deleted"),
        FileOutcome::NotDeleted => format!("{shown}: not deleted ({declined})"),
        FileOutcome::Missing => {
            format!("{shown}: no longer exists, so none of its hunks could be checked")
        }
        FileOutcome::Updated { moved, hunks } => {
            let to = file.shown_to.as_deref().unwrap_or_default();
            let mut parts = Vec::new();
            let name = match moved {
                Some(true) => {
                    parts.push("moved".to_string());
                    format!("{shown} -> {to}")
                }
                Some(false) => {
                    parts.push(format!("not moved to {to} ({declined})"));
                    shown.clone()
                }
                None => shown.clone(),
            };
            let numbers = |wanted: HunkOutcome| -> Vec<usize> {
                hunks
                    .iter()
                    .enumerate()
                    .filter(|(_, h)| **h == wanted)
                    .map(|(i, _)| i + 1)
                    .collect()
            };
            let phrase = |numbers: &[usize], what: &str| -> Option<String> {
                let list: Vec<String> = numbers.iter().map(usize::to_string).collect();
                match numbers.len() {
                    0 => None,
                    1 => Some(format!("hunk {} {what}", list[0])),
                    _ => Some(format!("hunks {} {what}", list.join(", "))),
                }
            };
            parts.extend(phrase(&numbers(HunkOutcome::Applied), "applied"));
            parts.extend(phrase(&numbers(HunkOutcome::NotApplied), declined));
            parts.extend(phrase(
                &numbers(HunkOutcome::Changed),
                "changed differently (the text there matches neither the original nor the patch)",
            ));
            format!("{name}: {}", parts.join("; "))
        }
    }
}
