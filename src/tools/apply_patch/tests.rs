//! The tool end to end, against a scripted editor: the routes of each
//! approval mode and what the model is told.

use std::path::PathBuf;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::buffers::{BufferCache, TextChange};
use crate::vocab::bridge::{
    ApplyEditRequest, ApplyEditResponse, ClientAbilities, ClientBridge, PermissionChoice,
    UserInputRequest,
};
use crate::vocab::edit::{EditProposal, FileEdit};
use crate::workspace::Workspace;

type EditHandler = dyn Fn(&EditProposal) -> BridgeOutcome<ApplyEditResponse> + Send + Sync;

/// An editor whose answers the test scripts; it records every edit.
struct FakeEditor {
    abilities: ClientAbilities,
    on_edit: Box<EditHandler>,
    permission: Option<PermissionChoice>,
    edits: Mutex<Vec<ApplyEditRequest>>,
    permission_requests: Mutex<usize>,
}

impl FakeEditor {
    fn new(
        abilities: ClientAbilities,
        on_edit: impl Fn(&EditProposal) -> BridgeOutcome<ApplyEditResponse> + Send + Sync + 'static,
    ) -> Self {
        FakeEditor {
            abilities,
            on_edit: Box::new(on_edit),
            permission: None,
            edits: Mutex::new(Vec::new()),
            permission_requests: Mutex::new(0),
        }
    }
}

#[async_trait::async_trait]
impl ClientBridge for FakeEditor {
    fn abilities(&self) -> ClientAbilities {
        self.abilities
    }
    async fn request_permission(
        &self,
        _: PermissionRequest,
        _: &CancellationToken,
    ) -> BridgeOutcome<crate::vocab::bridge::PermissionAnswer> {
        *self.permission_requests.lock() += 1;
        match self.permission {
            Some(choice) => BridgeOutcome::Answered(choice.into()),
            None => BridgeOutcome::Unavailable("no".into()),
        }
    }
    async fn request_user_input(
        &self,
        _: UserInputRequest,
        _: &CancellationToken,
    ) -> BridgeOutcome<Value> {
        BridgeOutcome::Unavailable("no".into())
    }
    async fn apply_edit(
        &self,
        request: ApplyEditRequest,
        _: &CancellationToken,
    ) -> BridgeOutcome<ApplyEditResponse> {
        let answer = (self.on_edit)(&request.edit);
        self.edits.lock().push(request);
        answer
    }
}

fn applied(yes: bool, reason: Option<&str>) -> BridgeOutcome<ApplyEditResponse> {
    BridgeOutcome::Answered(ApplyEditResponse {
        applied: yes,
        failure_reason: reason.map(str::to_string),
    })
}

struct Fixture {
    root: tempfile::TempDir,
    buffers: Arc<BufferCache>,
    events: Arc<Mutex<Vec<ToolEvent>>>,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            root: tempfile::tempdir().expect("tempdir"),
            buffers: Arc::new(BufferCache::new()),
            events: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.root.path().join(relative)
    }

    fn write(&self, relative: &str, text: &str) {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.path(relative)).expect("read")
    }

    fn context(&self, mode: ApprovalMode, bridge: Arc<dyn ClientBridge>) -> ToolContext {
        let workspace = Arc::new(Workspace::new(vec![self.root.path().to_path_buf()]));
        let mut ctx = ToolContext::new(workspace, self.buffers.clone(), CancellationToken::new());
        ctx.mode = mode;
        ctx.bridge = bridge;
        ctx.call_id = "call_1".to_string();
        let events = self.events.clone();
        ctx.emit = Arc::new(move |e| events.lock().push(e));
        ctx
    }

    async fn run(&self, ctx: &ToolContext, patch: &str) -> Result<String, ToolError> {
        ApplyPatch.run(json!({ "input": patch }), ctx).await
    }
}

fn auto() -> Arc<dyn ClientBridge> {
    Arc::new(crate::vocab::bridge::NoClient)
}

const MULTI: &str = "*** Begin Patch
*** Add File: new/added.txt
+fresh
*** Update File: src/lib.rs
@@
-fn one() {}
+fn one() { 1 }
@@
-fn three() {}
+fn three() { 3 }
*** Update File: old_name.rs
*** Move to: moved/new_name.rs
@@
-moved
+moved and changed
*** Delete File: gone.txt
*** End Patch";

fn multi_fixture() -> Fixture {
    let fx = Fixture::new();
    fx.write("src/lib.rs", "fn one() {}\nfn two() {}\nfn three() {}\n");
    fx.write("old_name.rs", "moved\n");
    fx.write("gone.txt", "bye\n");
    fx
}

#[tokio::test]
async fn auto_mode_writes_a_multi_file_patch_to_disk_and_says_what_changed() {
    let fx = multi_fixture();
    let ctx = fx.context(ApprovalMode::Auto, auto());
    let out = fx.run(&ctx, MULTI).await.expect("applies");
    assert_eq!(fx.read("new/added.txt"), "fresh\n");
    assert_eq!(
        fx.read("src/lib.rs"),
        "fn one() { 1 }\nfn two() {}\nfn three() { 3 }\n"
    );
    assert_eq!(fx.read("moved/new_name.rs"), "moved and changed\n");
    assert!(!fx.path("old_name.rs").exists());
    assert!(!fx.path("gone.txt").exists());
    assert_eq!(
        out,
        "The patch was applied:\n\
         - new/added.txt: created\n\
         - src/lib.rs: hunks 1, 2 applied\n\
         - old_name.rs -> moved/new_name.rs: moved; hunk 1 applied\n\
         - gone.txt: deleted"
    );
    let diffs: Vec<(String, Option<String>, String)> = fx
        .events
        .lock()
        .iter()
        .filter_map(|e| match e {
            ToolEvent::Diffs(files) => Some(files.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .concat()
        .into_iter()
        .map(|f| (f.path, f.old_text, f.new_text))
        .collect();
    let diff_events = fx
        .events
        .lock()
        .iter()
        .filter(|e| matches!(e, ToolEvent::Diffs(_)))
        .count();
    assert_eq!(diff_events, 1, "one event carries every file");
    let root = fx.root.path().canonicalize().unwrap();
    let abs = |p: &str| root.join(p).display().to_string();
    assert_eq!(
        diffs,
        vec![
            (abs("new/added.txt"), None, "fresh\n".into()),
            (
                abs("src/lib.rs"),
                Some("fn one() {}\nfn two() {}\nfn three() {}\n".into()),
                "fn one() { 1 }\nfn two() {}\nfn three() { 3 }\n".into()
            ),
            (
                abs("moved/new_name.rs"),
                Some("moved\n".into()),
                "moved and changed\n".into()
            ),
            (abs("gone.txt"), Some("bye\n".into()), String::new()),
        ]
    );
}

#[tokio::test]
async fn a_hunk_that_does_not_match_in_the_second_file_leaves_the_first_untouched() {
    let fx = Fixture::new();
    fx.write("a.txt", "alpha\n");
    fx.write("b.txt", "bravo\n");
    let ctx = fx.context(ApprovalMode::Auto, auto());
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n*** Add File: c.txt\n+new\n*** Update File: b.txt\n@@\n-charlie\n+CHARLIE\n*** End Patch";
    let error = fx.run(&ctx, patch).await.expect_err("b.txt does not match");
    assert!(
        error.0.starts_with("b.txt: hunk 1 of 1 did not match"),
        "{error}"
    );
    assert!(error.0.contains("nothing was changed"), "{error}");
    assert_eq!(fx.read("a.txt"), "alpha\n");
    assert!(!fx.path("c.txt").exists());
    assert!(fx.events.lock().is_empty(), "no diff before it fits");
}

#[tokio::test]
async fn adding_an_existing_file_or_updating_a_missing_one_is_refused() {
    let fx = Fixture::new();
    fx.write("here.txt", "x\n");
    let ctx = fx.context(ApprovalMode::Auto, auto());
    let error = fx
        .run(
            &ctx,
            "*** Begin Patch\n*** Add File: here.txt\n+y\n*** End Patch",
        )
        .await
        .expect_err("exists");
    assert!(error.0.contains("`here.txt` already exists"), "{error}");
    for (verb, patch) in [
        (
            "update",
            "*** Begin Patch\n*** Update File: nope.txt\n@@\n-a\n+b\n*** End Patch",
        ),
        (
            "delete",
            "*** Begin Patch\n*** Delete File: nope.txt\n*** End Patch",
        ),
    ] {
        let error = fx.run(&ctx, patch).await.expect_err("missing");
        assert!(
            error
                .0
                .contains(&format!("cannot {verb} `nope.txt`: it does not exist")),
            "{error}"
        );
    }
    assert_eq!(fx.read("here.txt"), "x\n");
}

#[tokio::test]
async fn paths_outside_the_workspace_are_refused_before_anything_changes() {
    let fx = Fixture::new();
    fx.write("in.txt", "x\n");
    let ctx = fx.context(ApprovalMode::Auto, auto());
    let patch = "*** Begin Patch\n*** Update File: in.txt\n@@\n-x\n+y\n*** Add File: ../escape.txt\n+z\n*** End Patch";
    let error = fx.run(&ctx, patch).await.expect_err("escape");
    assert!(error.0.contains("outside the workspace"), "{error}");
    assert_eq!(fx.read("in.txt"), "x\n");
}

#[tokio::test]
async fn the_patch_applies_to_the_unsaved_buffer_and_the_cache_follows() {
    let fx = Fixture::new();
    fx.write("doc.rs", "on disk\n");
    fx.buffers
        .open(fx.path("doc.rs"), 4, "typed\nby the user\n");
    let ctx = fx.context(ApprovalMode::Auto, auto());
    fx.run(
        &ctx,
        "*** Begin Patch\n*** Update File: doc.rs\n@@\n typed\n-by the user\n+by the agent\n*** End Patch",
    )
    .await
    .expect("applies to the buffer");
    assert_eq!(fx.read("doc.rs"), "typed\nby the agent\n");
    let snapshot = fx.buffers.snapshot(&fx.path("doc.rs")).expect("open");
    assert_eq!(snapshot.rope.to_string(), "typed\nby the agent\n");
}

#[tokio::test]
async fn read_only_mode_changes_nothing() {
    let fx = Fixture::new();
    fx.write("a.txt", "a\n");
    let ctx = fx.context(ApprovalMode::ReadOnly, auto());
    let out = fx
        .run(
            &ctx,
            "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\n*** End Patch",
        )
        .await
        .expect_err("a rejection");
    assert_eq!(out, ToolError::rejected(READ_ONLY));
    assert_eq!(fx.read("a.txt"), "a\n");
}

fn editor_abilities() -> ClientAbilities {
    ClientAbilities {
        apply_edit: true,
        change_annotations: true,
        resource_operations: true,
        ..ClientAbilities::default()
    }
}

#[tokio::test]
async fn review_mode_sends_one_annotated_edit_and_reports_it_applied_once_the_buffer_shows_it() {
    let fx = Fixture::new();
    let doc = fx.path("doc.rs");
    fx.write("doc.rs", "old\n");
    fx.buffers.open(doc.clone(), 3, "keep\nold\n");
    let buffers = fx.buffers.clone();
    let path = doc.clone();
    // Like VS Code: the didChange reaches us before the answer.
    let editor = Arc::new(FakeEditor::new(editor_abilities(), move |_| {
        buffers
            .change(
                &path,
                4,
                &[TextChange {
                    range: None,
                    text: "keep\nnew\n".into(),
                }],
            )
            .expect("change");
        applied(true, None)
    }));
    let ctx = fx.context(ApprovalMode::Review, editor.clone());
    let out = fx
        .run(
            &ctx,
            "*** Begin Patch\n*** Update File: doc.rs\n@@\n keep\n-old\n+new\n*** End Patch",
        )
        .await
        .expect("applies");
    assert_eq!(out, "The patch was applied:\n- doc.rs: hunk 1 applied");
    let edits = editor.edits.lock();
    assert_eq!(edits.len(), 1);
    assert_eq!(edits[0].label, "Update doc.rs (1 hunk)");
    let edit = &edits[0].edit;
    assert!(
        matches!(
            &edit.changes[0],
            FileEdit::Text {
                version: Some(3),
                ..
            }
        ),
        "{edit:?}"
    );
    let annotation = edit.annotation.as_ref().expect("annotated");
    assert_eq!(annotation.id, "tandem-patch-call_1");
    assert!(annotation.needs_confirmation);
    // The disk is the editor's business now.
    assert_eq!(fx.read("doc.rs"), "old\n");
    assert!(fx.events.lock().contains(&ToolEvent::Waiting(
        crate::vocab::tool_call::WaitingFor::Permission
    )));
}

#[tokio::test]
async fn a_rejection_is_a_result_with_the_users_comment_and_removes_nothing() {
    let fx = Fixture::new();
    fx.write("a.txt", "a\n");
    let mut abilities = editor_abilities();
    abilities.resource_operations = false;
    let editor = Arc::new(FakeEditor::new(abilities, |_| {
        applied(false, Some("not like this"))
    }));
    let ctx = fx.context(ApprovalMode::Review, editor);
    let out = fx
        .run(
            &ctx,
            "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\n*** Add File: n.txt\n+n\n*** End Patch",
        )
        .await
        .expect_err("a rejection");
    assert_eq!(
        out,
        ToolError::rejected(
            "The user rejected the patch; nothing was changed.\nTheir comment: not like this"
        )
    );
    assert_eq!(fx.read("a.txt"), "a\n");
    assert!(
        !fx.path("n.txt").exists(),
        "the empty file made for the editor is gone again"
    );
}

#[tokio::test]
async fn an_accepted_edit_that_never_shows_up_is_reported_as_such() {
    let fx = Fixture::new();
    fx.write("a.txt", "a\n");
    let editor = Arc::new(FakeEditor::new(editor_abilities(), |_| applied(true, None)));
    let ctx = fx.context(ApprovalMode::Review, editor);
    let out = fx
        .run(
            &ctx,
            "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\n*** End Patch",
        )
        .await
        .expect("a result");
    assert!(
        out.starts_with(
            "The editor said it applied the patch, but no change reached tandem within 2s"
        ),
        "{out}"
    );
    assert!(out.contains("a.txt: hunk 1 not applied"), "{out}");
}

#[tokio::test]
async fn cancelling_while_waiting_for_the_editor_is_an_error() {
    let fx = Fixture::new();
    fx.write("a.txt", "a\n");
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let editor = Arc::new(FakeEditor::new(editor_abilities(), move |_| {
        trigger.cancel();
        applied(true, None)
    }));
    let mut ctx = fx.context(ApprovalMode::Review, editor);
    ctx.cancel = cancel;
    let error = fx
        .run(
            &ctx,
            "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\n*** End Patch",
        )
        .await
        .expect_err("cancelled");
    assert_eq!(error.0, "cancelled");
}

#[tokio::test]
async fn review_without_apply_edit_asks_permission_and_writes_when_allowed() {
    let fx = Fixture::new();
    fx.write("a.txt", "a\n");
    let asks = ClientAbilities {
        request_permission: true,
        ..ClientAbilities::default()
    };
    let mut editor = FakeEditor::new(asks, |_| unreachable!("no applyEdit"));
    editor.permission = Some(PermissionChoice::AllowOnce);
    let editor = Arc::new(editor);
    let ctx = fx.context(ApprovalMode::Review, editor.clone());
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\n*** End Patch";
    let out = fx.run(&ctx, patch).await.expect("applies");
    assert_eq!(out, "The patch was applied:\n- a.txt: hunk 1 applied");
    assert_eq!(fx.read("a.txt"), "b\n");
    assert_eq!(*editor.permission_requests.lock(), 1);
}

#[tokio::test]
async fn review_with_nobody_to_ask_is_rejected_and_says_how_to_let_the_agent_write() {
    let fx = Fixture::new();
    fx.write("a.txt", "a\n");
    let ctx = fx.context(ApprovalMode::Review, auto());
    let out = fx
        .run(
            &ctx,
            "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\n*** End Patch",
        )
        .await
        .expect_err("a rejection");
    assert_eq!(out, ToolError::rejected(CANNOT_REVIEW));
    assert_eq!(fx.read("a.txt"), "a\n");
}

#[tokio::test]
async fn auto_mode_sends_open_documents_to_the_editor_and_writes_closed_files() {
    let fx = Fixture::new();
    fx.write("open.rs", "disk\n");
    fx.write("closed.rs", "closed\n");
    fx.buffers.open(fx.path("open.rs"), 1, "buffer\n");
    let buffers = fx.buffers.clone();
    let open = fx.path("open.rs");
    let editor = Arc::new(FakeEditor::new(editor_abilities(), move |_| {
        buffers
            .change(
                &open,
                2,
                &[TextChange {
                    range: None,
                    text: "BUFFER\n".into(),
                }],
            )
            .expect("change");
        applied(true, None)
    }));
    let ctx = fx.context(ApprovalMode::Auto, editor.clone());
    let patch = "*** Begin Patch\n*** Update File: open.rs\n@@\n-buffer\n+BUFFER\n*** Update File: closed.rs\n@@\n-closed\n+CLOSED\n*** End Patch";
    let out = fx.run(&ctx, patch).await.expect("applies");
    assert!(out.starts_with("The patch was applied:"), "{out}");
    assert_eq!(fx.read("closed.rs"), "CLOSED\n");
    assert_eq!(fx.read("open.rs"), "disk\n", "the editor owns the open one");
    let edits = editor.edits.lock();
    let changes = &edits[0].edit.changes;
    assert_eq!(changes.len(), 1, "only the open document: {changes:?}");
    let annotation = edits[0].edit.annotation.as_ref().expect("annotated");
    assert_eq!(annotation.id, "tandem-patch-call_1");
    assert!(!annotation.needs_confirmation);
}

#[test]
fn the_title_summarizes_the_patch() {
    assert_eq!(
        ApplyPatch.title(&json!({"input": MULTI})),
        "Patch: Add new/added.txt, update src/lib.rs (2 hunks), move old_name.rs to moved/new_name.rs (1 hunk), delete gone.txt"
    );
    assert_eq!(ApplyPatch.title(&json!({"input": "garbage"})), "Patch");
}
