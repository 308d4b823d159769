//! Which tasks a range offers: the choice behind `textDocument/codeAction`.
//!
//! Invariant: pure and cheap — a function of the task catalog, the range,
//! the document's text where the range is empty, and the ranges of the
//! diagnostics; O(log n) in the document's size.

use crate::buffers::{LineOutOfRange, Position, PositionEncoding, Range, Snapshot};
use crate::config::tasks::{TaskCatalog, TaskDef, When};

/// The range a task works on, after an empty range was widened to its line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub range: Range,
    /// The range holds text (a selection, or a cursor on a line that is
    /// not blank).
    pub has_text: bool,
}

/// The range a request names, as tasks see it: a non-empty range as is; an
/// empty one (a cursor) widened to its whole line, without the line break.
/// Without the document's text an empty range stays as it is.
pub fn target(
    snapshot: Option<&Snapshot>,
    range: Range,
    encoding: PositionEncoding,
) -> Result<Target, LineOutOfRange> {
    let Some(snapshot) = snapshot else {
        return Ok(Target {
            range,
            has_text: true,
        });
    };
    // Checks both ends exist (a line past the end is an error).
    snapshot.position_to_char(range.start, encoding)?;
    snapshot.position_to_char(range.end, encoding)?;
    if range.start != range.end {
        return Ok(Target {
            range,
            has_text: true,
        });
    }
    let line = range.start.line;
    let start = snapshot.position_to_char(Position { line, character: 0 }, encoding)?;
    // The end of the line's content: `character` past the end clamps to
    // it, before the line break.
    let end = snapshot.position_to_char(
        Position {
            line,
            character: u32::MAX,
        },
        encoding,
    )?;
    let text = snapshot.rope.slice(start..end);
    let has_text = text.chars().any(|c| !c.is_whitespace());
    Ok(Target {
        range: Range {
            start: Position { line, character: 0 },
            end: snapshot.char_to_position(end, encoding),
        },
        has_text,
    })
}

fn key(p: &Position) -> (u32, u32) {
    (p.line, p.character)
}

/// Whether two ranges share a position (touching ends count, so a
/// diagnostic at the cursor belongs to it).
pub fn intersects(a: &Range, b: &Range) -> bool {
    key(&a.start) <= key(&b.end) && key(&b.start) <= key(&a.end)
}

/// A task a range offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer<'a> {
    pub task: &'a TaskDef,
    /// The editor's preferred action: `Fix` when diagnostics are in range.
    pub preferred: bool,
}

/// The tasks `target` offers, in catalog order: `when = "always"` always,
/// `selection` when the target holds text, `diagnostics` when
/// `diagnostics_in_range > 0` (and then a `quickfix` is preferred).
pub fn offers<'a>(
    catalog: &'a TaskCatalog,
    target: &Target,
    diagnostics_in_range: usize,
) -> Vec<Offer<'a>> {
    catalog
        .tasks()
        .iter()
        .filter(|task| match task.when {
            When::Always => true,
            When::Selection => target.has_text,
            When::Diagnostics => diagnostics_in_range > 0,
        })
        .map(|task| Offer {
            task,
            preferred: task.when == When::Diagnostics
                && task.kind == "quickfix"
                && diagnostics_in_range > 0,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn pos(line: u32, character: u32) -> Position {
        Position { line, character }
    }

    fn range(a: (u32, u32), b: (u32, u32)) -> Range {
        Range {
            start: pos(a.0, a.1),
            end: pos(b.0, b.1),
        }
    }

    #[test]
    fn an_empty_range_widens_to_its_line() {
        let snapshot = Snapshot::from_text("fn a() {}\n\n  let x = 1;\r\nend", 3);
        let t = target(
            Some(&snapshot),
            range((2, 4), (2, 4)),
            PositionEncoding::Utf16,
        )
        .unwrap();
        assert_eq!(t.range, range((2, 0), (2, 12)));
        assert!(t.has_text);
        let blank = target(
            Some(&snapshot),
            range((1, 0), (1, 0)),
            PositionEncoding::Utf16,
        )
        .unwrap();
        assert!(!blank.has_text);
        assert!(target(
            Some(&snapshot),
            range((9, 0), (9, 0)),
            PositionEncoding::Utf16
        )
        .is_err());
    }

    #[test]
    fn fix_is_offered_and_preferred_only_with_diagnostics() {
        let catalog = TaskCatalog::from_config(&BTreeMap::new());
        let t = Target {
            range: range((0, 0), (1, 0)),
            has_text: true,
        };
        let ids = |offers: Vec<Offer>| -> Vec<(String, bool)> {
            offers
                .iter()
                .map(|o| (o.task.id.clone(), o.preferred))
                .collect()
        };
        let without = ids(offers(&catalog, &t, 0));
        assert!(without.iter().all(|(id, _)| id != "fix"));
        assert_eq!(without.len(), 4);
        let with = ids(offers(&catalog, &t, 2));
        assert_eq!(with[0], ("fix".to_string(), true));
        assert!(with[1..].iter().all(|(_, preferred)| !preferred));
    }

    #[test]
    fn touching_ranges_intersect() {
        assert!(intersects(&range((1, 0), (1, 5)), &range((1, 5), (1, 5))));
        assert!(!intersects(&range((1, 0), (1, 5)), &range((2, 0), (2, 1))));
        assert!(intersects(&range((0, 0), (9, 0)), &range((3, 2), (3, 4))));
    }
}
