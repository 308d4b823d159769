//! A computed patch turned into changes: an LSP `WorkspaceEdit` for the
//! editor to review and apply, or atomic writes to disk.
//!
//! Invariant: nothing here decides *whether* to change anything, or reads
//! the files it changes. Callers compute every file's new text first (so a
//! patch lands whole or not at all) and pick a route; positions are derived
//! from the exact text the hunks were computed against, in the negotiated
//! encoding.

use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::patch::{AppliedHunk, AppliedUpdate};
use crate::buffers::{Position, PositionEncoding, Snapshot};

/// One file's part of a patch, computed before anything is touched.
#[derive(Debug, Clone)]
pub enum FileChange {
    Add {
        path: PathBuf,
        text: String,
    },
    Delete {
        path: PathBuf,
        old_text: String,
        /// The buffer the text came from, when the file is open.
        open: Option<Snapshot>,
    },
    Update {
        path: PathBuf,
        /// The new path of a move; never equal to `path`.
        move_to: Option<PathBuf>,
        old_text: String,
        update: AppliedUpdate,
        /// The buffer `old_text` came from, when the file is open; the
        /// edit is then versioned with its version.
        open: Option<Snapshot>,
    },
}

impl FileChange {
    /// The path the change reads or removes (for a move, the source).
    pub fn path(&self) -> &Path {
        match self {
            FileChange::Add { path, .. }
            | FileChange::Delete { path, .. }
            | FileChange::Update { path, .. } => path,
        }
    }

    /// Whether the text came from an open buffer.
    pub fn is_open(&self) -> bool {
        match self {
            FileChange::Add { .. } => false,
            FileChange::Delete { open, .. } | FileChange::Update { open, .. } => open.is_some(),
        }
    }

    /// Whether applying it needs a create, rename or delete operation.
    pub fn needs_file_operation(&self) -> bool {
        match self {
            FileChange::Add { .. } | FileChange::Delete { .. } => true,
            FileChange::Update { move_to, .. } => move_to.is_some(),
        }
    }
}

/// The change annotation every edit of one patch carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Annotation {
    pub id: String,
    pub label: String,
    /// Asks the editor to let the user review the edit (VS Code's refactor
    /// preview) before applying it.
    pub needs_confirmation: bool,
    pub description: Option<String>,
}

/// What the client can take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditOptions {
    pub encoding: PositionEncoding,
    /// `CreateFile`, `RenameFile` and `DeleteFile` may be used. Without them
    /// an added file must exist (empty) before the edit that fills it.
    pub resource_operations: bool,
    /// `None` when the client has no change annotation support.
    pub annotation: Option<Annotation>,
}

/// The LSP `WorkspaceEdit` (with `documentChanges`) that makes `changes`,
/// in patch order: a `TextDocumentEdit` per changed file (versioned when
/// open, `version: null` otherwise) with one `TextEdit` per hunk, and the
/// create, rename and delete operations around them.
pub fn workspace_edit<'a>(
    changes: impl IntoIterator<Item = &'a FileChange>,
    options: &EditOptions,
) -> Value {
    let annotation_id = options.annotation.as_ref().map(|a| a.id.as_str());
    let annotate = |mut value: Value| {
        if let (Some(id), Some(object)) = (annotation_id, value.as_object_mut()) {
            object.insert("annotationId".to_string(), json!(id));
        }
        value
    };
    let mut document_changes = Vec::new();
    for change in changes {
        match change {
            FileChange::Add { path, text } => {
                let uri = file_uri(path);
                if options.resource_operations {
                    document_changes.push(annotate(json!({
                        "kind": "create",
                        "uri": uri,
                        "options": {"overwrite": false, "ignoreIfExists": false},
                    })));
                }
                if !text.is_empty() {
                    let at = json!({"line": 0, "character": 0});
                    document_changes.push(json!({
                        "textDocument": {"uri": uri, "version": null},
                        "edits": [annotate(json!({
                            "range": {"start": at, "end": at},
                            "newText": text,
                        }))],
                    }));
                }
            }
            FileChange::Delete { path, .. } => {
                document_changes.push(annotate(json!({
                    "kind": "delete",
                    "uri": file_uri(path),
                    "options": {"recursive": false, "ignoreIfNotExists": false},
                })));
            }
            FileChange::Update {
                path,
                move_to,
                old_text,
                update,
                open,
            } => {
                let uri = file_uri(path);
                let closed;
                let base = match open {
                    Some(snapshot) => snapshot,
                    None => {
                        closed = Snapshot::from_text(old_text, 0);
                        &closed
                    }
                };
                let edits: Vec<Value> = update
                    .hunks
                    .iter()
                    .filter(|h| !h.old_bytes.is_empty() || !h.new_text.is_empty())
                    .map(|h| annotate(text_edit(base, h, options.encoding)))
                    .collect();
                if !edits.is_empty() {
                    document_changes.push(json!({
                        "textDocument": {"uri": uri, "version": open.as_ref().map(|s| s.version)},
                        "edits": edits,
                    }));
                }
                if let Some(to) = move_to {
                    document_changes.push(annotate(json!({
                        "kind": "rename",
                        "oldUri": uri,
                        "newUri": file_uri(to),
                        "options": {"overwrite": false, "ignoreIfExists": false},
                    })));
                }
            }
        }
    }
    let mut edit = Map::new();
    edit.insert(
        "documentChanges".to_string(),
        Value::Array(document_changes),
    );
    if let Some(a) = &options.annotation {
        let mut annotation = json!({"label": a.label, "needsConfirmation": a.needs_confirmation});
        if let Some(description) = &a.description {
            annotation["description"] = json!(description);
        }
        edit.insert(
            "changeAnnotations".to_string(),
            json!({ a.id.clone(): annotation }),
        );
    }
    Value::Object(edit)
}

/// One hunk as an LSP `TextEdit` against `base`, the text it was computed on.
fn text_edit(base: &Snapshot, hunk: &AppliedHunk, encoding: PositionEncoding) -> Value {
    let position = |byte: usize| {
        let char_idx = base.rope.byte_to_char(byte.min(base.rope.len_bytes()));
        lsp_position(base.char_to_position(char_idx, encoding))
    };
    json!({
        "range": {"start": position(hunk.old_bytes.start), "end": position(hunk.old_bytes.end)},
        "newText": hunk.new_text,
    })
}

fn lsp_position(position: Position) -> Value {
    json!({"line": position.line, "character": position.character})
}

/// A `file://` URI for an absolute path, percent-encoding every byte that
/// is not unreserved (RFC 3986) or `/`.
pub fn file_uri(path: &Path) -> String {
    let text = path.to_string_lossy();
    let mut uri = String::with_capacity(text.len() + 7);
    uri.push_str("file://");
    if !text.starts_with('/') {
        uri.push('/');
    }
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                uri.push(byte as char)
            }
            _ => {
                let _ = write!(uri, "%{byte:02X}");
            }
        }
    }
    uri
}

/// What to do on disk for a set of changes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DiskChanges {
    pub writes: Vec<DiskWrite>,
    /// Files removed once every write has landed (deletes, move sources).
    pub removals: Vec<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskWrite {
    pub path: PathBuf,
    pub text: String,
    /// The file whose permissions the new file keeps (the one it replaces
    /// or was moved from), so an executable script stays executable.
    pub permissions_of: Option<PathBuf>,
}

impl DiskChanges {
    pub fn of<'a>(changes: impl IntoIterator<Item = &'a FileChange>) -> DiskChanges {
        let mut disk = DiskChanges::default();
        for change in changes {
            match change {
                FileChange::Add { path, text } => disk.writes.push(DiskWrite {
                    path: path.clone(),
                    text: text.clone(),
                    permissions_of: None,
                }),
                FileChange::Delete { path, .. } => disk.removals.push(path.clone()),
                FileChange::Update {
                    path,
                    move_to,
                    update,
                    ..
                } => {
                    disk.writes.push(DiskWrite {
                        path: move_to.clone().unwrap_or_else(|| path.clone()),
                        text: update.new_text.clone(),
                        permissions_of: Some(path.clone()),
                    });
                    if move_to.is_some() {
                        disk.removals.push(path.clone());
                    }
                }
            }
        }
        disk
    }
}

/// Why the disk could not take a set of changes.
#[derive(Debug, thiserror::Error)]
#[error("{action} `{}`: {source}", .path.display())]
pub struct DiskError {
    pub action: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
    /// Files already changed when the error happened; empty when the error
    /// came while staging, before anything was touched.
    pub changed: Vec<PathBuf>,
}

/// Writes every file through a temporary file in its own directory, then
/// renames them all into place, then removes what is removed. A failure
/// while staging (a full disk, a path under a file, no permission) removes
/// the temporary files and the directories it created, leaving the disk as
/// it was. Renames within a directory do not fail in practice; if one did,
/// [`DiskError::changed`] says what had already landed.
pub fn apply_to_disk(changes: &DiskChanges) -> Result<(), DiskError> {
    let mut staged = Staged::default();
    for write in &changes.writes {
        if let Err(error) = staged.stage(write) {
            staged.discard();
            return Err(error);
        }
    }
    let mut changed = Vec::new();
    for (temp, path) in std::mem::take(&mut staged.temps) {
        if let Err(source) = std::fs::rename(&temp, &path) {
            let _ = std::fs::remove_file(&temp);
            return Err(DiskError {
                action: "cannot move the new text into place at",
                path,
                source,
                changed,
            });
        }
        changed.push(path);
    }
    for path in &changes.removals {
        match std::fs::remove_file(path) {
            Ok(()) => changed.push(path.clone()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(DiskError {
                    action: "cannot remove",
                    path: path.clone(),
                    source,
                    changed,
                })
            }
        }
    }
    Ok(())
}

/// Creates an empty file (and its missing parent directories) that must
/// not exist yet, for an editor that cannot create files itself.
pub fn create_empty_file(path: &Path) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map(drop)
}

/// Temporary files written so far, and directories created for them.
#[derive(Default)]
struct Staged {
    /// (temporary file, final path)
    temps: Vec<(PathBuf, PathBuf)>,
    created_dirs: Vec<PathBuf>,
}

impl Staged {
    fn stage(&mut self, write: &DiskWrite) -> Result<(), DiskError> {
        let fail = |action, source| DiskError {
            action,
            path: write.path.clone(),
            source,
            changed: Vec::new(),
        };
        let parent = write.path.parent().ok_or_else(|| {
            fail(
                "cannot write",
                io::Error::new(io::ErrorKind::InvalidInput, "the path has no parent folder"),
            )
        })?;
        self.create_dirs(parent)
            .map_err(|e| fail("cannot create the folder for", e))?;
        let (temp, mut file) =
            create_temp(parent, &write.path).map_err(|e| fail("cannot write", e))?;
        self.temps.push((temp.clone(), write.path.clone()));
        file.write_all(write.text.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| fail("cannot write", e))?;
        if let Some(permissions) = write
            .permissions_of
            .as_ref()
            .and_then(|from| std::fs::metadata(from).ok())
            .map(|m| m.permissions())
        {
            std::fs::set_permissions(&temp, permissions).map_err(|e| fail("cannot write", e))?;
        }
        Ok(())
    }

    /// `create_dir_all`, remembering each directory it made.
    fn create_dirs(&mut self, dir: &Path) -> io::Result<()> {
        let mut missing = Vec::new();
        let mut at = dir;
        while !at.exists() {
            missing.push(at.to_path_buf());
            match at.parent() {
                Some(parent) => at = parent,
                None => break,
            }
        }
        for dir in missing.into_iter().rev() {
            std::fs::create_dir(&dir)?;
            self.created_dirs.push(dir);
        }
        Ok(())
    }

    fn discard(&mut self) {
        for (temp, _) in self.temps.drain(..) {
            let _ = std::fs::remove_file(temp);
        }
        for dir in self.created_dirs.drain(..).rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// A new file next to `path`, named so it cannot clash with a real one.
fn create_temp(dir: &Path, path: &Path) -> io::Result<(PathBuf, std::fs::File)> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut attempts = 0;
    loop {
        let temp = dir.join(format!(
            ".{name}.tandem-{}-{:08x}.tmp",
            std::process::id(),
            fastrand::u32(..)
        ));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
        {
            Ok(file) => return Ok((temp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempts < 16 => attempts += 1,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        options.annotation = Some(Annotation {
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

    #[test]
    fn uris_percent_encode_what_is_not_unreserved() {
        assert_eq!(
            file_uri(Path::new("/a b/ü#?%.rs")),
            "file:///a%20b/%C3%BC%23%3F%25.rs"
        );
    }

    fn files_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = walk(dir)
            .into_iter()
            .map(|p| crate::workspace::slash_path(p.strip_prefix(dir).expect("inside")))
            .collect();
        names.sort();
        names
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                out.push(path.clone());
                out.extend(walk(&path));
            } else {
                out.push(path);
            }
        }
        out
    }

    #[test]
    fn atomic_writes_land_every_file_and_leave_no_temporary_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::write(root.join("keep.txt"), "old\n").expect("write");
        std::fs::write(root.join("gone.txt"), "bye\n").expect("write");
        std::fs::write(root.join("from.txt"), "moving\n").expect("write");
        let changes = DiskChanges {
            writes: vec![
                DiskWrite {
                    path: root.join("keep.txt"),
                    text: "new\n".to_string(),
                    permissions_of: Some(root.join("keep.txt")),
                },
                DiskWrite {
                    path: root.join("deep/er/to.txt"),
                    text: "moved\n".to_string(),
                    permissions_of: Some(root.join("from.txt")),
                },
            ],
            removals: vec![root.join("gone.txt"), root.join("from.txt")],
        };
        apply_to_disk(&changes).expect("applies");
        assert_eq!(
            std::fs::read_to_string(root.join("keep.txt")).expect("read"),
            "new\n"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("deep/er/to.txt")).expect("read"),
            "moved\n"
        );
        assert_eq!(
            files_in(root),
            vec!["deep", "deep/er", "deep/er/to.txt", "keep.txt"]
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_rewritten_file_keeps_its_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let script = dir.path().join("run.sh");
        std::fs::write(&script, "echo 1\n").expect("write");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        apply_to_disk(&DiskChanges {
            writes: vec![DiskWrite {
                path: script.clone(),
                text: "echo 2\n".to_string(),
                permissions_of: Some(script.clone()),
            }],
            removals: Vec::new(),
        })
        .expect("applies");
        let mode = std::fs::metadata(&script)
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
    }

    #[test]
    fn a_failed_staging_leaves_the_disk_as_it_was() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::write(root.join("first.txt"), "untouched\n").expect("write");
        std::fs::write(root.join("blocker"), "a file, not a folder\n").expect("write");
        std::fs::write(root.join("doomed.txt"), "still here\n").expect("write");
        let changes = DiskChanges {
            writes: vec![
                DiskWrite {
                    path: root.join("first.txt"),
                    text: "changed\n".to_string(),
                    permissions_of: None,
                },
                DiskWrite {
                    path: root.join("new/dir/ok.txt"),
                    text: "x\n".to_string(),
                    permissions_of: None,
                },
                DiskWrite {
                    path: root.join("blocker/inside.txt"),
                    text: "cannot\n".to_string(),
                    permissions_of: None,
                },
            ],
            removals: vec![root.join("doomed.txt")],
        };
        let error = apply_to_disk(&changes).expect_err("a folder under a file fails");
        assert!(error.path.ends_with("blocker/inside.txt"), "{error}");
        assert!(error.changed.is_empty());
        assert_eq!(
            std::fs::read_to_string(root.join("first.txt")).expect("read"),
            "untouched\n"
        );
        assert_eq!(files_in(root), vec!["blocker", "doomed.txt", "first.txt"]);
    }
}
