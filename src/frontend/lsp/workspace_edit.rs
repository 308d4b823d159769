//! `EditProposal` → LSP `WorkspaceEdit` (with `documentChanges`), as
//! `lsp-types` (re-exported by tower-lsp) spells it: the LSP frontend's
//! `to_proto` for edits, used by `Outgoing` for `workspace/applyEdit` over
//! stdio and through the serve.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;
use tower_lsp::lsp_types::{
    AnnotatedTextEdit, ChangeAnnotation, CreateFile, CreateFileOptions, DeleteFile,
    DeleteFileOptions, DocumentChangeOperation, DocumentChanges, OneOf,
    OptionalVersionedTextDocumentIdentifier, Position, Range, RenameFile, RenameFileOptions,
    ResourceOp, TextDocumentEdit, TextEdit, Url, WorkspaceEdit,
};

use crate::vocab::edit::{EditPosition, EditProposal, FileEdit};

/// The `WorkspaceEdit` that makes `proposal`, every change annotated when
/// the proposal has an annotation.
pub fn workspace_edit(proposal: &EditProposal) -> WorkspaceEdit {
    let annotation_id = proposal.annotation.as_ref().map(|a| a.id.clone());
    let no_overwrite = || {
        Some(CreateFileOptions {
            overwrite: Some(false),
            ignore_if_exists: Some(false),
        })
    };
    let operations = proposal
        .changes
        .iter()
        .map(|change| match change {
            FileEdit::Create { path } => {
                DocumentChangeOperation::Op(ResourceOp::Create(CreateFile {
                    uri: uri(path),
                    options: no_overwrite(),
                    annotation_id: annotation_id.clone(),
                }))
            }
            FileEdit::Rename { from, to } => {
                DocumentChangeOperation::Op(ResourceOp::Rename(RenameFile {
                    old_uri: uri(from),
                    new_uri: uri(to),
                    options: Some(RenameFileOptions {
                        overwrite: Some(false),
                        ignore_if_exists: Some(false),
                    }),
                    annotation_id: annotation_id.clone(),
                }))
            }
            FileEdit::Delete { path } => {
                DocumentChangeOperation::Op(ResourceOp::Delete(DeleteFile {
                    uri: uri(path),
                    options: Some(DeleteFileOptions {
                        recursive: Some(false),
                        ignore_if_not_exists: Some(false),
                        // lsp-types 0.94 has the annotation here, not beside
                        // `options` where LSP puts it; `workspace_edit_json`
                        // moves it.
                        annotation_id: annotation_id.clone(),
                    }),
                }))
            }
            FileEdit::Text {
                path,
                version,
                edits,
            } => DocumentChangeOperation::Edit(TextDocumentEdit {
                text_document: OptionalVersionedTextDocumentIdentifier {
                    uri: uri(path),
                    version: *version,
                },
                edits: edits
                    .iter()
                    .map(|replace| {
                        let text_edit = TextEdit {
                            range: Range {
                                start: position(replace.start),
                                end: position(replace.end),
                            },
                            new_text: replace.new_text.clone(),
                        };
                        match &annotation_id {
                            Some(id) => OneOf::Right(AnnotatedTextEdit {
                                text_edit,
                                annotation_id: id.clone(),
                            }),
                            None => OneOf::Left(text_edit),
                        }
                    })
                    .collect(),
            }),
        })
        .collect();
    WorkspaceEdit {
        changes: None,
        document_changes: Some(DocumentChanges::Operations(operations)),
        change_annotations: proposal.annotation.as_ref().map(|a| {
            HashMap::from([(
                a.id.clone(),
                ChangeAnnotation {
                    label: a.label.clone(),
                    needs_confirmation: Some(a.needs_confirmation),
                    description: a.description.clone(),
                },
            )])
        }),
    }
}

/// The JSON of [`workspace_edit`], with a delete's `annotationId` where
/// LSP 3.16 defines it (on the operation, not in its `options`).
pub fn workspace_edit_json(proposal: &EditProposal) -> Value {
    let mut edit = serde_json::to_value(workspace_edit(proposal)).unwrap_or(Value::Null);
    let operations = edit
        .get_mut("documentChanges")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten();
    for operation in operations.filter(|op| op["kind"] == "delete") {
        let id = operation
            .get_mut("options")
            .and_then(Value::as_object_mut)
            .and_then(|options| options.remove("annotationId"));
        if let (Some(id), Some(object)) = (id, operation.as_object_mut()) {
            object.insert("annotationId".to_string(), id);
        }
    }
    edit
}

fn uri(path: &Path) -> Url {
    Url::parse(&crate::workspace::file_uri(path))
        .unwrap_or_else(|_| Url::parse("file:///").expect("a constant URI parses"))
}

fn position(at: EditPosition) -> Position {
    Position {
        line: at.line,
        character: at.character,
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use serde_json::{json, Value};

    use super::*;
    use crate::buffers::{Position, PositionEncoding, Snapshot};
    use crate::tools::edits::{edit_proposal, EditOptions, FileChange};
    use crate::tools::patch::AppliedUpdate;
    use crate::vocab::edit::EditAnnotation;

    /// The wire JSON of the proposal the tools make for `changes`.
    fn workspace_edit<'a>(
        changes: impl IntoIterator<Item = &'a FileChange>,
        options: &EditOptions,
    ) -> Value {
        workspace_edit_json(&edit_proposal(changes, options))
    }
    use crate::tools::patch::{apply_hunks, parse_patch, FileOp};

    /// The update of `text` that the patch's first (Update) section makes.
    fn update_of(text: &str, patch: &str) -> AppliedUpdate {
        let patch = parse_patch(patch).expect("patch parses");
        let FileOp::Update { hunks, .. } = &patch.ops[0] else {
            panic!("not an update: {patch:?}");
        };
        apply_hunks("f", text, hunks).expect("hunks apply")
    }

    fn update_change(text: &str, patch: &str, open: Option<i32>) -> FileChange {
        FileChange::Update {
            path: PathBuf::from("/ws/f.rs"),
            move_to: None,
            old_text: text.to_string(),
            update: update_of(text, patch),
            open: open.map(|version| Snapshot::from_text(text, version)),
        }
    }

    fn options(encoding: PositionEncoding) -> EditOptions {
        EditOptions {
            encoding,
            resource_operations: true,
            annotation: None,
        }
    }

    /// (start, end, new text) of each edit of the first document change.
    type Ranges = Vec<((u64, u64), (u64, u64), String)>;

    fn ranges(edit: &Value) -> Ranges {
        edit["documentChanges"][0]["edits"]
            .as_array()
            .expect("edits")
            .iter()
            .map(|e| {
                let p = |at: &Value| {
                    (
                        at["line"].as_u64().expect("line"),
                        at["character"].as_u64().expect("character"),
                    )
                };
                (
                    p(&e["range"]["start"]),
                    p(&e["range"]["end"]),
                    e["newText"].as_str().expect("newText").to_string(),
                )
            })
            .collect()
    }

    /// Applies LSP edits the way an editor does, to check that they give
    /// the patch's text.
    fn apply_like_an_editor(text: &str, edit: &Value, encoding: PositionEncoding) -> String {
        let cache = crate::buffers::BufferCache::new();
        cache.set_encoding(encoding);
        let path = PathBuf::from("/nonexistent-tandem-test/edit.txt");
        cache.open(path.clone(), 1, text);
        // LSP edits are all relative to the original: apply from the end.
        let mut changes: Vec<_> = ranges(edit)
            .into_iter()
            .map(|(start, end, text)| crate::buffers::TextChange {
                range: Some(crate::buffers::Range {
                    start: Position {
                        line: start.0 as u32,
                        character: start.1 as u32,
                    },
                    end: Position {
                        line: end.0 as u32,
                        character: end.1 as u32,
                    },
                }),
                text,
            })
            .collect();
        changes.reverse();
        cache.change(&path, 2, &changes).expect("edits fit");
        cache.read_text(&path).expect("open")
    }

    const EMOJI_PATCH: &str = "*** Begin Patch\n*** Update File: f\n@@\n-let b = 1; // 😀日本\n+let b = 2; // 😀日本\n@@\n-😀😀 x😀y\n+😀😀 x🎉y\n*** End Patch";

    #[test]
    fn utf16_positions_count_emoji_as_two_units_and_cjk_as_one() {
        let text = "😀 日本 a\nlet b = 1; // 😀日本\n😀😀 x😀y\n";
        let change = update_change(text, EMOJI_PATCH, Some(3));
        let edit = workspace_edit([&change], &options(PositionEncoding::Utf16));
        let ranges = ranges(&edit);
        assert_eq!(ranges[0].0, (1, 0));
        // "let b = 1; // " is 14 units, 😀 two, 日本 two.
        assert_eq!(ranges[0].1, (1, 18));
        // A replaced line is matched whole: the range starts at the line.
        assert_eq!(ranges[1].0, (2, 0));
        assert_eq!(ranges[1].1, (2, 9));
        assert_eq!(
            apply_like_an_editor(text, &edit, PositionEncoding::Utf16),
            "😀 日本 a\nlet b = 2; // 😀日本\n😀😀 x🎉y\n"
        );
    }

    #[test]
    fn utf8_and_utf32_positions_follow_the_negotiated_encoding() {
        let text = "a\nlet b = 1; // 😀日本\n😀😀 x😀y\n";
        let change = update_change(text, EMOJI_PATCH, None);
        let utf8 = workspace_edit([&change], &options(PositionEncoding::Utf8));
        // 14 bytes, 😀 four, 日本 six.
        assert_eq!(ranges(&utf8)[0].1, (1, 24));
        let utf32 = workspace_edit([&change], &options(PositionEncoding::Utf32));
        assert_eq!(ranges(&utf32)[0].1, (1, 17));
        for (encoding, edit) in [
            (PositionEncoding::Utf8, &utf8),
            (PositionEncoding::Utf32, &utf32),
        ] {
            assert_eq!(
                apply_like_an_editor(text, edit, encoding),
                "a\nlet b = 2; // 😀日本\n😀😀 x🎉y\n"
            );
        }
    }

    #[test]
    fn crlf_file_edits_keep_its_line_endings_and_stop_before_them() {
        let text = "one\r\ntwo\r\nthree\r\n";
        let patch =
            "*** Begin Patch\n*** Update File: f\n@@\n one\n-two\n+2\n+2b\n three\n*** End Patch";
        let change = update_change(text, patch, Some(1));
        let edit = workspace_edit([&change], &options(PositionEncoding::Utf16));
        assert_eq!(ranges(&edit), vec![((1, 0), (1, 3), "2\r\n2b".to_string())]);
        assert_eq!(
            apply_like_an_editor(text, &edit, PositionEncoding::Utf16),
            "one\r\n2\r\n2b\r\nthree\r\n"
        );
    }

    #[test]
    fn open_documents_get_their_version_and_closed_files_version_null() {
        let text = "a\nb\n";
        let patch = "*** Begin Patch\n*** Update File: f\n@@\n-b\n+c\n*** End Patch";
        let open = update_change(text, patch, Some(7));
        let closed = update_change(text, patch, None);
        let edit = workspace_edit([&open], &options(PositionEncoding::Utf16));
        assert_eq!(edit["documentChanges"][0]["textDocument"]["version"], 7);
        assert_eq!(
            edit["documentChanges"][0]["textDocument"]["uri"],
            "file:///ws/f.rs"
        );
        let edit = workspace_edit([&closed], &options(PositionEncoding::Utf16));
        let document = &edit["documentChanges"][0]["textDocument"];
        assert!(document["version"].is_null(), "{document}");
        assert!(
            document
                .as_object()
                .expect("object")
                .contains_key("version"),
            "OptionalVersionedTextDocumentIdentifier wants version present: {document}"
        );
    }

    #[test]
    fn one_annotation_per_patch_is_declared_and_used_by_every_change() {
        let text = "a\nb\nc\n";
        let patch = "*** Begin Patch\n*** Update File: f\n@@\n-a\n+A\n@@\n-c\n+C\n*** End Patch";
        let update = update_change(text, patch, Some(1));
        let add = FileChange::Add {
            path: PathBuf::from("/ws/new.txt"),
            text: "hi\n".to_string(),
        };
        let delete = FileChange::Delete {
            path: PathBuf::from("/ws/old.txt"),
            old_text: "bye\n".to_string(),
            open: None,
        };
        let mut options = options(PositionEncoding::Utf16);
        options.annotation = Some(EditAnnotation {
            id: "tandem-patch-call_1".to_string(),
            label: "Update f (2 hunks)".to_string(),
            needs_confirmation: true,
            description: Some("Proposed by the agent".to_string()),
        });
        let edit = workspace_edit([&update, &add, &delete], &options);
        assert_eq!(
            edit["changeAnnotations"],
            json!({"tandem-patch-call_1": {
                "label": "Update f (2 hunks)",
                "needsConfirmation": true,
                "description": "Proposed by the agent",
            }})
        );
        let mut annotated = 0;
        for change in edit["documentChanges"].as_array().expect("changes") {
            let targets: Vec<&Value> = match change.get("edits") {
                Some(edits) => edits.as_array().expect("edits").iter().collect(),
                None => vec![change],
            };
            for target in targets {
                assert_eq!(target["annotationId"], "tandem-patch-call_1", "{target}");
                annotated += 1;
            }
        }
        // Two hunk edits, create + its content, delete.
        assert_eq!(annotated, 5);
    }

    #[test]
    fn without_annotation_support_no_annotation_appears() {
        let change = update_change(
            "a\n",
            "*** Begin Patch\n*** Update File: f\n@@\n-a\n+b\n*** End Patch",
            None,
        );
        let edit = workspace_edit([&change], &options(PositionEncoding::Utf16));
        assert!(edit.get("changeAnnotations").is_none(), "{edit}");
        assert!(!edit.to_string().contains("annotationId"), "{edit}");
    }

    #[test]
    fn add_move_and_delete_become_create_rename_and_delete_operations() {
        let text = "keep\nold\n";
        let mut moved = update_change(
            text,
            "*** Begin Patch\n*** Update File: f\n@@\n-old\n+new\n*** End Patch",
            None,
        );
        if let FileChange::Update { move_to, .. } = &mut moved {
            *move_to = Some(PathBuf::from("/ws/dir/g.rs"));
        }
        let add = FileChange::Add {
            path: PathBuf::from("/ws/a b.txt"),
            text: "line\n".to_string(),
        };
        let delete = FileChange::Delete {
            path: PathBuf::from("/ws/gone.txt"),
            old_text: String::new(),
            open: None,
        };
        let edit = workspace_edit([&add, &moved, &delete], &options(PositionEncoding::Utf16));
        let changes = edit["documentChanges"].as_array().expect("changes");
        assert_eq!(
            changes[0],
            json!({"kind": "create", "uri": "file:///ws/a%20b.txt",
                   "options": {"overwrite": false, "ignoreIfExists": false}})
        );
        assert_eq!(
            changes[1],
            json!({"textDocument": {"uri": "file:///ws/a%20b.txt", "version": null},
                   "edits": [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                              "newText": "line\n"}]})
        );
        // The text edit addresses the file before it is renamed.
        assert_eq!(changes[2]["textDocument"]["uri"], "file:///ws/f.rs");
        assert_eq!(
            changes[3],
            json!({"kind": "rename", "oldUri": "file:///ws/f.rs", "newUri": "file:///ws/dir/g.rs",
                   "options": {"overwrite": false, "ignoreIfExists": false}})
        );
        assert_eq!(
            changes[4],
            json!({"kind": "delete", "uri": "file:///ws/gone.txt",
                   "options": {"recursive": false, "ignoreIfNotExists": false}})
        );
        assert_eq!(changes.len(), 5);
    }

    #[test]
    fn without_resource_operations_an_added_file_is_only_filled() {
        let add = FileChange::Add {
            path: PathBuf::from("/ws/new.txt"),
            text: "x\n".to_string(),
        };
        let mut options = options(PositionEncoding::Utf16);
        options.resource_operations = false;
        let edit = workspace_edit([&add], &options);
        let changes = edit["documentChanges"].as_array().expect("changes");
        assert_eq!(changes.len(), 1);
        assert!(changes[0].get("kind").is_none(), "{edit}");
    }
}
