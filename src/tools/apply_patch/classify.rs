//! Classifying hunks: which hunks of an update show in a file's text now
//! (applied, not applied, or changed differently), exact where the user did not
//! edit around them.

use std::time::Duration;

use super::outcome::HunkOutcome;
use crate::tools::patch::AppliedHunk;

/// Which hunks of an update show in `result`, the file's text now.
///
/// The original is unchanged gaps around the hunks' old texts. Reading
/// `result` from the front, each hunk must be its new or its old text
/// followed by the next gap; from the back likewise: exact, and linear in
/// the file's size. A user edit elsewhere stops a pass; hunks neither pass
/// placed are placed through a line diff (see [`place_by_line_diff`]).
pub(super) fn classify_hunks(
    original: &str,
    hunks: &[AppliedHunk],
    result: &str,
) -> Vec<HunkOutcome> {
    let n = hunks.len();
    let gap = |i: usize| {
        let start = if i == 0 {
            0
        } else {
            hunks[i - 1].old_bytes.end
        };
        let end = if i == n {
            original.len()
        } else {
            hunks[i].old_bytes.start
        };
        &original[start..end.max(start)]
    };
    let old = |i: usize| &original[hunks[i].old_bytes.clone()];
    let new = |i: usize| hunks[i].new_text.as_str();
    let mut outcomes: Vec<Option<HunkOutcome>> = vec![None; n];

    // Front to back. `result[..p]` is explained, hunks `..front` decided.
    let mut p = 0;
    let mut front = 0;
    let mut gap_consumed = false;
    if result.starts_with(gap(0)) {
        p = gap(0).len();
        gap_consumed = true;
        while front < n {
            let rest = &result[p..];
            let after = gap(front + 1);
            let fits = |text: &str| rest.starts_with(text) && rest[text.len()..].starts_with(after);
            let (outcome, whole) = match (fits(new(front)), fits(old(front))) {
                (true, _) => (HunkOutcome::Applied, true),
                (false, true) => (HunkOutcome::NotApplied, true),
                // The gap after it differs: place the hunk alone if only
                // one reading fits, then stop.
                _ => match (rest.starts_with(new(front)), rest.starts_with(old(front))) {
                    (true, false) => (HunkOutcome::Applied, false),
                    (false, true) => (HunkOutcome::NotApplied, false),
                    _ => break,
                },
            };
            outcomes[front] = Some(outcome);
            p += match outcome {
                HunkOutcome::Applied => new(front).len(),
                _ => old(front).len(),
            };
            front += 1;
            gap_consumed = whole;
            if !whole {
                break;
            }
            p += after.len();
        }
    }

    // Back to front, within what the first pass left.
    let region = &result[p..];
    if front < n && region.ends_with(gap(n)) {
        let mut q = region.len() - gap(n).len();
        let mut back = n;
        while back > front {
            let i = back - 1;
            let head = &region[..q];
            let before = if i == front && gap_consumed {
                ""
            } else {
                gap(i)
            };
            let fits = |text: &str| {
                head.ends_with(text) && head[..head.len() - text.len()].ends_with(before)
            };
            let (outcome, whole) = match (fits(new(i)), fits(old(i))) {
                (true, _) => (HunkOutcome::Applied, true),
                (false, true) => (HunkOutcome::NotApplied, true),
                _ => match (head.ends_with(new(i)), head.ends_with(old(i))) {
                    (true, false) => (HunkOutcome::Applied, false),
                    (false, true) => (HunkOutcome::NotApplied, false),
                    _ => break,
                },
            };
            outcomes[i] = Some(outcome);
            q -= match outcome {
                HunkOutcome::Applied => new(i).len(),
                _ => old(i).len(),
            };
            back -= 1;
            if !whole {
                break;
            }
            q -= before.len();
        }
    }
    if outcomes.iter().any(Option::is_none) {
        place_by_line_diff(original, hunks, result, &mut outcomes);
    }
    outcomes
        .into_iter()
        .map(|o| o.unwrap_or(HunkOutcome::Changed))
        .collect()
}

/// Places the undecided hunks by diffing the original and `result` by
/// line. The unchanged lines next to a hunk's old lines say where its
/// region is in `result`: that region (or, with one neighbour kept, the
/// lines right after or before it) is the hunk's new lines or its old ones.
/// When the user edited next to the hunk too, the nearest unchanged lines
/// around it bound a window that holds the new lines or the old ones.
/// Anything else is [`HunkOutcome::Changed`]. Used only when the user edited
/// around the hunks, since a diff costs more than the exact passes.
fn place_by_line_diff(
    original: &str,
    hunks: &[AppliedHunk],
    result: &str,
    outcomes: &mut [Option<HunkOutcome>],
) {
    let diff = similar::TextDiff::configure()
        .timeout(Duration::from_millis(250))
        .diff_lines(original, result);
    let (old, new) = (diff.old_slices(), diff.new_slices());
    // For each original line that is still there, its line in `result`.
    let mut kept: Vec<Option<usize>> = vec![None; old.len()];
    for op in diff.ops() {
        if let similar::DiffOp::Equal {
            old_index,
            new_index,
            len,
        } = *op
        {
            for k in 0..len {
                kept[old_index + k] = Some(new_index + k);
            }
        }
    }
    let content = |line: &str| {
        let line = line.strip_suffix('\n').unwrap_or(line);
        line.strip_suffix('\r').unwrap_or(line).to_string()
    };
    let lines = |from: usize, to: usize| -> Option<Vec<String>> {
        new.get(from..to)
            .map(|lines| lines.iter().map(|l| content(l)).collect())
    };
    // Where a region starting at original line `line` starts in `result`,
    // from the nearest kept line above it, looking no higher than `floor`.
    let start_of = |line: usize, floor: usize| -> Option<usize> {
        let mut j = line;
        while j > floor && kept[j - 1].is_none() {
            j -= 1;
        }
        if j == 0 {
            Some(0)
        } else {
            kept[j - 1].map(|r| r + 1)
        }
    };
    // Where a region ending before original line `line` ends in `result`.
    let end_of = |line: usize, ceiling: usize| -> Option<usize> {
        let mut j = line;
        while j < ceiling && kept[j].is_none() {
            j += 1;
        }
        if j >= old.len() {
            Some(new.len())
        } else {
            kept[j]
        }
    };
    let contains = |hay: &[String], needle: &[String]| {
        needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
    };
    for (hunk, outcome) in hunks.iter().zip(outcomes.iter_mut()) {
        if outcome.is_some() {
            continue;
        }
        let end = hunk.old_lines.end.min(old.len());
        let first = hunk.old_lines.start.min(end);
        let was: Vec<String> = old[first..end].iter().map(|l| content(l)).collect();
        let readings = [
            (hunk.new_lines.as_slice(), HunkOutcome::Applied),
            (was.as_slice(), HunkOutcome::NotApplied),
        ];
        let (start, stop) = (start_of(first, first), end_of(end, end));
        let exact = || {
            let region = lines(start?, stop?)?;
            readings
                .iter()
                .find(|(text, _)| *text == region.as_slice())
                .map(|(_, o)| *o)
        };
        // With one neighbour, an empty reading proves nothing.
        let after_start = || {
            let s = start?;
            readings
                .iter()
                .find(|(text, _)| {
                    !text.is_empty() && lines(s, s + text.len()).as_deref() == Some(*text)
                })
                .map(|(_, o)| *o)
        };
        let before_stop = || {
            let e = stop?;
            readings
                .iter()
                .find(|(text, _)| {
                    !text.is_empty()
                        && e.checked_sub(text.len())
                            .is_some_and(|s| lines(s, e).as_deref() == Some(*text))
                })
                .map(|(_, o)| *o)
        };
        let window = || {
            let region = lines(start_of(first, 0)?, end_of(end, old.len())?)?;
            match (contains(&region, &hunk.new_lines), contains(&region, &was)) {
                (true, false) => Some(HunkOutcome::Applied),
                (false, true) => Some(HunkOutcome::NotApplied),
                _ => None,
            }
        };
        *outcome = exact()
            .or_else(after_start)
            .or_else(before_stop)
            .or_else(window)
            .or(Some(HunkOutcome::Changed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::patch::{apply_hunks, parse_patch, FileOp};

    fn hunks_of(original: &str, patch: &str) -> Vec<AppliedHunk> {
        let patch = parse_patch(patch).expect("parses");
        let FileOp::Update { hunks, .. } = &patch.ops[0] else {
            panic!("not an update")
        };
        apply_hunks("f", original, hunks).expect("applies").hunks
    }

    const THREE: &str =
        "*** Begin Patch\n*** Update File: f\n@@\n-b\n+B\n@@\n-d\n+D\n@@\n-f\n+F\n*** End Patch";
    const LETTERS: &str = "a\nb\nc\nd\ne\nf\ng\n";

    #[test]
    fn hunks_are_told_apart_when_only_some_were_accepted() {
        use HunkOutcome::*;
        let hunks = hunks_of(LETTERS, THREE);
        let cases = [
            ("a\nB\nc\nD\ne\nF\ng\n", [Applied, Applied, Applied]),
            (LETTERS, [NotApplied, NotApplied, NotApplied]),
            ("a\nB\nc\nd\ne\nF\ng\n", [Applied, NotApplied, Applied]),
            ("a\nb\nc\nD\ne\nf\ng\n", [NotApplied, Applied, NotApplied]),
            (
                "a\nB\nc\nsomething else\ne\nF\ng\n",
                [Applied, Changed, Applied],
            ),
        ];
        for (result, expected) in cases {
            assert_eq!(
                classify_hunks(LETTERS, &hunks, result),
                expected,
                "{result:?}"
            );
        }
    }

    #[test]
    fn a_user_edit_between_hunks_does_not_hide_what_landed() {
        use HunkOutcome::*;
        let hunks = hunks_of(LETTERS, THREE);
        // Typed into the gap between hunks 1 and 2, and at the very top.
        let result = "top\na\nB\nc typed\nD\ne\nf\ng\n";
        assert_eq!(
            classify_hunks(LETTERS, &hunks, result),
            [Applied, Applied, NotApplied]
        );
        let result = "a\nB\nc typed\nD\ne\nf\ng\n";
        assert_eq!(
            classify_hunks(LETTERS, &hunks, result),
            [Applied, Applied, NotApplied]
        );
        // Edits in two gaps stop both exact passes; the line diff places
        // the hunk between them.
        let result = "a\nB\nc typed\nD\ne typed\nF\ng\n";
        assert_eq!(
            classify_hunks(LETTERS, &hunks, result),
            [Applied, Applied, Applied]
        );
    }

    #[test]
    fn pure_insertions_and_deletions_are_placed_too() {
        use HunkOutcome::*;
        let patch = "*** Begin Patch\n*** Update File: f\n@@\n a\n+inserted\n b\n@@\n e\n-f\n g\n*** End Patch";
        let hunks = hunks_of(LETTERS, patch);
        assert_eq!(
            classify_hunks(LETTERS, &hunks, "a\ninserted\nb\nc\nd\ne\ng\n"),
            [Applied, Applied]
        );
        assert_eq!(
            classify_hunks(LETTERS, &hunks, "a\nb\nc\nd\ne\ng\n"),
            [NotApplied, Applied]
        );
        assert_eq!(
            classify_hunks(LETTERS, &hunks, "a\ninserted\nb\nc\nd\ne\nf\ng\n"),
            [Applied, NotApplied]
        );
    }
}
