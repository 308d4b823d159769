//! What a sandboxed command may write: the workspace yes; anything else no,
//! however the path is spelled and however deep the process tree.

use serde_json::json;

use super::{config, editor_on, run_one, var_tmp_dir};
use crate::support::model_server::ModelServer;

#[tokio::test]
async fn a_write_inside_the_workspace_passes_and_one_outside_is_denied_with_a_clear_result() {
    if !super::kernel_can_sandbox() {
        return;
    }
    let server = ModelServer::start().await;
    let root = var_tmp_dir();
    let outside = var_tmp_dir();
    let target = outside.path().join("x");
    let (mut editor, _) = editor_on(root.path(), &[]).await;
    let session = editor.new_session(config(&server, "auto", json!({}))).await;

    let cmd = format!("echo in > inside.txt; echo out > {}", target.display());
    let result = run_one(&server, &mut editor, &session, json!({"cmd": cmd})).await;

    assert_eq!(
        std::fs::read_to_string(root.path().join("inside.txt")).unwrap(),
        "in\n"
    );
    assert!(!target.exists(), "the write outside went through: {result}");
    assert!(result.starts_with("exit code "), "{result}");
    let note = format!(
        "\n[sandbox] write outside the workspace denied by the sandbox: {}; ask the user or use a path inside the workspace",
        target.display()
    );
    assert!(result.contains(&note), "{result}");
    assert!(result.contains("Permission denied"), "{result}");
}

#[tokio::test]
async fn escapes_through_dotdot_symlinks_and_proc_self_cwd_are_denied() {
    if !super::kernel_can_sandbox() {
        return;
    }
    let server = ModelServer::start().await;
    let root = var_tmp_dir();
    let outside = var_tmp_dir();
    let name = outside.path().file_name().unwrap().to_str().unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("link")).unwrap();
    let (mut editor, _) = editor_on(root.path(), &[]).await;
    let session = editor.new_session(config(&server, "auto", json!({}))).await;

    let cmd = format!(
        "echo 1 > ../{name}/dotdot; echo 2 > link/symlink; echo 3 > /proc/self/cwd/../{name}/proc; \
         (cd .. && echo 4 > {name}/cd); ln -s /etc/hostname link/made-link; mkdir link/dir; \
         mv inside.txt link/; true"
    );
    std::fs::write(root.path().join("inside.txt"), "keep").unwrap();
    let result = run_one(&server, &mut editor, &session, json!({"cmd": cmd})).await;

    let left: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "written outside: {left:?}\n{result}");
    assert!(root.path().join("inside.txt").exists(), "{result}");
    // The command's status stands; the notes name the resolved place.
    assert!(
        result.starts_with("exit code 0\n[sandbox] write outside"),
        "{result}"
    );
}

#[tokio::test]
async fn child_processes_inherit_the_sandbox() {
    if !super::kernel_can_sandbox() {
        return;
    }
    let server = ModelServer::start().await;
    let root = var_tmp_dir();
    let outside = var_tmp_dir();
    let (mut editor, _) = editor_on(root.path(), &[]).await;
    let session = editor.new_session(config(&server, "auto", json!({}))).await;
    let (nested, detached) = (
        outside.path().join("nested"),
        outside.path().join("detached"),
    );

    let cmd = format!(
        "sh -c 'sh -c \"echo x > {}\"'; setsid -w sh -c 'echo y > {}'; sh -c 'sh -c \"echo z > inner.txt\"'",
        nested.display(),
        detached.display()
    );
    let result = run_one(&server, &mut editor, &session, json!({"cmd": cmd})).await;

    assert!(!nested.exists() && !detached.exists(), "{result}");
    assert!(root.path().join("inner.txt").exists(), "{result}");
}

#[tokio::test]
async fn read_only_mode_denies_writes_in_the_workspace_too() {
    if !super::kernel_can_sandbox() {
        return;
    }
    let server = ModelServer::start().await;
    let root = var_tmp_dir();
    let (mut editor, _) = editor_on(root.path(), &[]).await;
    let session = editor
        .new_session(config(&server, "auto", json!({"mode": "read-only"})))
        .await;

    let result = run_one(
        &server,
        &mut editor,
        &session,
        json!({"cmd": "cat /etc/hostname > /dev/null && echo read-ok; touch new.txt"}),
    )
    .await;

    assert!(!root.path().join("new.txt").exists(), "{result}");
    assert!(result.contains("read-ok"), "reading still works: {result}");
    let note = format!(
        "[sandbox] write denied by the sandbox (read-only mode): {}",
        root.path()
            .canonicalize()
            .unwrap()
            .join("new.txt")
            .display()
    );
    assert!(result.contains(&note), "{result}");
}

#[tokio::test]
async fn the_writable_setting_opens_one_more_directory_and_mode_off_opens_all() {
    if !super::kernel_can_sandbox() {
        return;
    }
    let server = ModelServer::start().await;
    let root = var_tmp_dir();
    let extra = var_tmp_dir();
    let (mut editor, _) = editor_on(root.path(), &[]).await;
    let session = editor
        .new_session(config(&server, "auto", json!({"writable": [extra.path()]})))
        .await;
    let cmd = format!("echo cache > {}/c", extra.path().display());
    let result = run_one(&server, &mut editor, &session, json!({"cmd": cmd})).await;
    assert_eq!(result, "exit code 0");
    assert!(extra.path().join("c").exists());

    let other = var_tmp_dir();
    let off = editor
        .new_session(config(&server, "auto", json!({"mode": "off"})))
        .await;
    let cmd = format!("echo free > {}/f", other.path().display());
    let result = run_one(&server, &mut editor, &off, json!({"cmd": cmd})).await;
    assert_eq!(result, "exit code 0");
    assert!(other.path().join("f").exists());
}
