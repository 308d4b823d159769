//! The editor route: the [`EditProposal`] for a set of changes, with
//! positions in the negotiated encoding, derived from the exact text the hunks
//! were computed against. The frontends turn it into their wire.

use super::FileChange;
use crate::buffers::{PositionEncoding, Snapshot};
use crate::tools::patch::AppliedHunk;
use crate::vocab::edit::{EditAnnotation, EditPosition, EditProposal, FileEdit, TextReplace};

/// What the client can take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditOptions {
    pub encoding: PositionEncoding,
    /// Creating, renaming and deleting files may be proposed. Without them
    /// an added file must exist (empty) before the edit that fills it.
    pub resource_operations: bool,
    /// `None` when the client has no change annotation support.
    pub annotation: Option<EditAnnotation>,
}

/// The proposal that makes `changes`, in patch order: a text edit per
/// changed file (versioned when open) with one replacement per hunk, and the
/// create, rename and delete operations around them.
pub fn edit_proposal<'a>(
    changes: impl IntoIterator<Item = &'a FileChange>,
    options: &EditOptions,
) -> EditProposal {
    let mut edits = Vec::new();
    for change in changes {
        match change {
            FileChange::Add { path, text } => {
                if options.resource_operations {
                    edits.push(FileEdit::Create { path: path.clone() });
                }
                if !text.is_empty() {
                    let at = EditPosition::default();
                    edits.push(FileEdit::Text {
                        path: path.clone(),
                        version: None,
                        edits: vec![TextReplace {
                            start: at,
                            end: at,
                            new_text: text.clone(),
                        }],
                    });
                }
            }
            FileChange::Delete { path, .. } => edits.push(FileEdit::Delete { path: path.clone() }),
            FileChange::Update {
                path,
                move_to,
                old_text,
                update,
                open,
            } => {
                let closed;
                let base = match open {
                    Some(snapshot) => snapshot,
                    None => {
                        closed = Snapshot::from_text(old_text, 0);
                        &closed
                    }
                };
                let replaces: Vec<TextReplace> = update
                    .hunks
                    .iter()
                    .filter(|h| !h.old_bytes.is_empty() || !h.new_text.is_empty())
                    .map(|h| text_replace(base, h, options.encoding))
                    .collect();
                if !replaces.is_empty() {
                    edits.push(FileEdit::Text {
                        path: path.clone(),
                        version: open.as_ref().map(|s| s.version),
                        edits: replaces,
                    });
                }
                if let Some(to) = move_to {
                    edits.push(FileEdit::Rename {
                        from: path.clone(),
                        to: to.clone(),
                    });
                }
            }
        }
    }
    EditProposal {
        changes: edits,
        annotation: options.annotation.clone(),
    }
}

/// One hunk as a replacement against `base`, the text it was computed on.
fn text_replace(base: &Snapshot, hunk: &AppliedHunk, encoding: PositionEncoding) -> TextReplace {
    let position = |byte: usize| {
        let char_idx = base.rope.byte_to_char(byte.min(base.rope.len_bytes()));
        let at = base.char_to_position(char_idx, encoding);
        EditPosition {
            line: at.line,
            character: at.character,
        }
    };
    TextReplace {
        start: position(hunk.old_bytes.start),
        end: position(hunk.old_bytes.end),
        new_text: hunk.new_text.clone(),
    }
}
