//! The check after an edit: once a patch has landed in the editor's
//! buffers, wait for the editor's diagnostics of the edited documents to
//! settle (its `tandem/diagnosticsChanged` for the version that holds the
//! patch, then a short quiet), and tell the model which errors are new in
//! the lines the patch changed.
//!
//! Invariant: the wait is capped at `[tools] diagnostics_settle_ms` however
//! many files there are and whatever the editor does; errors that were
//! there before the patch (same message, source and code) are not news;
//! only documents open in the editor are checked (their diagnostics are
//! the ones it reports).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use tokio::time::Instant;

use super::diagnostics::diagnostic_lines;
use super::Sources;
use crate::tools::edits::FileChange;
use crate::tools::ToolContext;
use crate::vocab::bridge::BridgeOutcome;
use crate::vocab::language::Diagnostic;

/// After the editor reported the patched version, how long without another
/// report means it is done (servers report in parts: syntax, then types).
const QUIET: Duration = Duration::from_millis(250);

/// A file a patch writes, and its text before.
#[derive(Debug, Clone)]
pub struct EditedFile {
    pub path: PathBuf,
    /// `None` for a new file (every line is changed).
    pub old_text: Option<String>,
}

/// The files a patch writes (a moved file at its new path; deleted files
/// have nothing left to check).
pub fn edited_files<'a>(changes: impl IntoIterator<Item = &'a FileChange>) -> Vec<EditedFile> {
    changes
        .into_iter()
        .filter_map(|change| match change {
            FileChange::Add { path, .. } => Some(EditedFile {
                path: path.clone(),
                old_text: None,
            }),
            FileChange::Update {
                path,
                move_to,
                old_text,
                ..
            } => Some(EditedFile {
                path: move_to.clone().unwrap_or_else(|| path.clone()),
                old_text: Some(old_text.clone()),
            }),
            FileChange::Delete { .. } => None,
        })
        .collect()
}

/// The editor's errors of the edited files before the patch.
pub struct Baseline {
    files: Vec<EditedFile>,
    before: HashMap<PathBuf, Vec<Diagnostic>>,
    /// What is left of the cap for the wait after the patch.
    settle: Duration,
    /// `[tools] diagnostics_settle_ms`.
    cap: Duration,
    /// When it was taken: a report from before cannot be about the patch
    /// (a file written to disk keeps its buffer version until the editor
    /// reloads it).
    taken: Instant,
}

/// Takes the errors before the patch, when the check is on and the client
/// offers diagnostics: the editor's last report, or (for a file it has not
/// reported on) its answer to `tandem/diagnostics`, within the settle cap.
pub async fn baseline(files: Vec<EditedFile>, ctx: &ToolContext) -> Option<Baseline> {
    let settle = ctx.diagnostics_settle?;
    if files.is_empty() || !ctx.bridge.abilities().language.diagnostics {
        return None;
    }
    let store = ctx.buffers.diagnostics();
    let mut before = HashMap::new();
    let mut unknown = Vec::new();
    for file in &files {
        match store.get(&file.path) {
            Some(report) => {
                before.insert(file.path.clone(), report.diagnostics);
            }
            None if ctx.buffers.snapshot(&file.path).is_some() => unknown.push(file.path.clone()),
            None => {}
        }
    }
    let taken = Instant::now();
    if !unknown.is_empty() {
        let asked = ctx.bridge.diagnostics(Some(unknown), &ctx.cancel);
        if let Ok(BridgeOutcome::Answered(answer)) = tokio::time::timeout(settle, asked).await {
            for file in answer.items {
                before.insert(file.path, file.diagnostics);
            }
        }
    }
    Some(Baseline {
        files,
        before,
        // One cap for both waits: an editor that answers nothing costs it once.
        settle: settle.saturating_sub(taken.elapsed()),
        cap: settle,
        taken,
    })
}

/// How waiting for one file's diagnostics ended.
enum Verdict {
    Settled(Vec<Diagnostic>),
    /// The editor said nothing about the patched version in time.
    Silent,
}

/// Waits for the editor's verdict on the patched documents and returns the
/// paragraph for the patch's result; `None` when no edited file is open in
/// the editor.
pub async fn check(baseline: Baseline, ctx: &ToolContext) -> Option<String> {
    let start = Instant::now();
    let deadline = start + baseline.settle;
    // The documents the patch landed in, at the version that holds it.
    let open: Vec<(&EditedFile, i32, String)> = baseline
        .files
        .iter()
        .filter_map(|f| {
            let snapshot = ctx.buffers.snapshot(&f.path)?;
            Some((f, snapshot.version, snapshot.rope.to_string()))
        })
        .collect();
    if open.is_empty() {
        return None;
    }
    let store = ctx.buffers.diagnostics();
    let mut changes = store.subscribe();
    let verdicts = loop {
        let now = Instant::now();
        let mut wake = deadline;
        let mut verdicts = Vec::new();
        let mut waiting = false;
        for (file, version, _) in &open {
            match store.get(&file.path) {
                Some(report)
                    if report.at > baseline.taken
                        && report.version.map_or(report.at >= start, |v| v >= *version) =>
                {
                    if now >= report.at + QUIET || now >= deadline {
                        verdicts.push(Verdict::Settled(report.diagnostics));
                    } else {
                        waiting = true;
                        wake = wake.min(report.at + QUIET);
                        verdicts.push(Verdict::Silent);
                    }
                }
                _ => {
                    waiting = true;
                    verdicts.push(Verdict::Silent);
                }
            }
        }
        if !waiting || now >= deadline {
            break verdicts;
        }
        tokio::select! {
            _ = ctx.cancel.cancelled() => return None,
            _ = changes.changed() => {}
            _ = tokio::time::sleep_until(wake) => {}
        }
    };
    let mut sources = Sources::new(ctx);
    let mut news = Vec::new();
    let mut silent = Vec::new();
    for ((file, _, now_text), verdict) in open.iter().zip(verdicts) {
        let after = match verdict {
            Verdict::Settled(after) => after,
            Verdict::Silent => {
                silent.push(sources.shown(&file.path));
                continue;
            }
        };
        let changed = changed_lines(file.old_text.as_deref(), now_text);
        let before = baseline.before.get(&file.path).cloned().unwrap_or_default();
        for d in new_errors(&before, after, &changed) {
            news.push(diagnostic_lines(&file.path, &d, &mut sources));
        }
    }
    let mut lines = Vec::new();
    let checked = open.len() - silent.len();
    match news.len() {
        _ if checked == 0 => {}
        0 => lines.push("The editor reports no new errors in the changed lines.".to_string()),
        1 => lines.push("The editor reports 1 new error in the changed lines:".to_string()),
        n => lines.push(format!(
            "The editor reports {n} new errors in the changed lines:"
        )),
    }
    lines.extend(news.into_iter().flatten());
    if !silent.is_empty() {
        lines.push(format!(
            "The editor reported no diagnostics for {} within {} ms; not checked.",
            silent.join(", "),
            baseline.cap.as_millis()
        ));
    }
    Some(lines.join("\n"))
}

/// The lines (0-based, of `now`) the patch changed: inserted or replaced
/// lines, and the line where lines were removed.
fn changed_lines(old: Option<&str>, now: &str) -> Vec<std::ops::Range<u32>> {
    let Some(old) = old else {
        return std::iter::once(0..u32::MAX).collect();
    };
    let diff = similar::TextDiff::from_lines(old, now);
    diff.ops()
        .iter()
        .filter_map(|op| {
            let (tag, _, new) = op.as_tag_tuple();
            if tag == similar::DiffTag::Equal {
                return None;
            }
            let start = new.start as u32;
            let end = (new.end as u32).max(start + 1);
            Some(start..end)
        })
        .collect()
}

/// The errors of `after` in the `changed` lines that `before` does not
/// account for (matched one for one by message, source and code).
fn new_errors(
    before: &[Diagnostic],
    after: Vec<Diagnostic>,
    changed: &[std::ops::Range<u32>],
) -> Vec<Diagnostic> {
    let key = |d: &Diagnostic| (d.message.clone(), d.source.clone(), d.code.clone());
    let mut known: HashMap<_, usize> = HashMap::new();
    for d in before.iter().filter(|d| d.is_error()) {
        *known.entry(key(d)).or_default() += 1;
    }
    let mut news = Vec::new();
    for d in after.into_iter().filter(Diagnostic::is_error) {
        if let Some(n) = known.get_mut(&key(&d)).filter(|n| **n > 0) {
            *n -= 1;
            continue;
        }
        let (first, last) = (d.range.start.line, d.range.end.line.max(d.range.start.line));
        if changed.iter().any(|r| first < r.end && last >= r.start) {
            news.push(d);
        }
    }
    news
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::language::{Severity, TextPosition, TextRange};

    fn error(line: u32, message: &str) -> Diagnostic {
        let at = TextPosition { line, character: 0 };
        Diagnostic {
            range: TextRange { start: at, end: at },
            severity: Some(Severity::Error),
            message: message.to_string(),
            source: Some("test".to_string()),
            code: None,
        }
    }

    #[test]
    fn changed_lines_are_the_inserted_and_replaced_ones() {
        let old = "a\nb\nc\nd\n";
        let now = "a\nB\nc\nnew\nd\n";
        assert_eq!(changed_lines(Some(old), now), vec![1..2, 3..4]);
        let whole: Vec<std::ops::Range<u32>> = std::iter::once(0..u32::MAX).collect();
        assert_eq!(changed_lines(None, now), whole);
        // A removal marks the line where it was.
        assert_eq!(changed_lines(Some("a\nb\nc\n"), "a\nc\n"), vec![1..2]);
    }

    #[test]
    fn only_errors_in_changed_lines_that_were_not_there_before_are_new() {
        let before = vec![error(5, "old problem")];
        let after = vec![
            error(1, "introduced"),
            error(6, "old problem"),
            error(9, "outside the change"),
            Diagnostic {
                severity: Some(Severity::Warning),
                ..error(1, "a warning")
            },
        ];
        let news = new_errors(&before, after, &[0..2, 6..7]);
        let messages: Vec<&str> = news.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(messages, ["introduced"]);
    }
}
