//! The sandbox with real shells through `run_command`: what a confined
//! command can and cannot write, and its network. (The same behaviours run
//! end to end through the binary in `tests/e2e/sandbox`.)

use std::path::Path;

use tokio_util::sync::CancellationToken;

use super::super::{run_command, CommandEnd, CommandSpec};
use std::path::PathBuf;

use super::SandboxPolicy;
use crate::config::sandbox::{SandboxConfig, SandboxMode};

async fn run_in(policy: &SandboxPolicy, workdir: &Path, cmd: &str) -> (CommandEnd, String) {
    let mut spec = CommandSpec::new(cmd, workdir);
    spec.sandbox = Some(policy.clone());
    let outcome = run_command(spec, CancellationToken::new(), |_| {})
        .await
        .expect("command starts");
    (outcome.end, outcome.output)
}

fn workspace_policy(root: &Path) -> SandboxPolicy {
    SandboxPolicy {
        writable: vec![root.to_path_buf(), "/dev/null".into()],
        network: false,
        read_only: false,
    }
}

#[tokio::test]
async fn writes_inside_pass_and_writes_outside_fail_with_eacces() {
    if !super::probe::support().available() {
        eprintln!("skipped: {}", super::probe::support().summary());
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir_in("/var/tmp").unwrap();
    let policy = workspace_policy(root.path());
    let (end, output) = run_in(&policy, root.path(), "echo hi > inside && cat inside").await;
    assert_eq!((end, output.as_str()), (CommandEnd::Exited(0), "hi\n"));

    let target = outside.path().join("x");
    let (end, output) = run_in(
        &policy,
        root.path(),
        &format!(
            "echo x > {} 2>&1; sh -c 'echo y > {}'",
            target.display(),
            target.display()
        ),
    )
    .await;
    assert_ne!(end, CommandEnd::Exited(0), "{output}");
    assert!(output.contains("Permission denied"), "{output}");
    assert!(!target.exists());
}

#[test]
fn workspace_write_allows_roots_temp_and_extra_paths_relative_to_the_first_root() {
    let root = tempfile::tempdir().unwrap();
    let config = SandboxConfig {
        writable: vec![PathBuf::from("cache"), PathBuf::from("/opt/extra")],
        ..SandboxConfig::default()
    };
    let policy = SandboxPolicy::new(&config, &[root.path().to_path_buf()]);
    assert!(policy.allows_write(&root.path().join("new/file")));
    assert!(policy.allows_write(&root.path().join("cache/x")));
    assert!(policy.allows_write(Path::new("/opt/extra/y")));
    assert!(policy.allows_write(&std::env::temp_dir().join("t")));
    assert!(policy.allows_write(Path::new("/dev/null")));
    assert!(!policy.allows_write(Path::new("/etc/passwd")));
    assert!(!policy.network);
}

#[test]
fn read_only_allows_only_the_device_files() {
    let root = tempfile::tempdir().unwrap();
    let config = SandboxConfig {
        mode: SandboxMode::ReadOnly,
        ..SandboxConfig::default()
    };
    let policy = SandboxPolicy::new(&config, &[root.path().to_path_buf()]);
    assert!(!policy.allows_write(&root.path().join("f")));
    assert!(policy.allows_write(Path::new("/dev/null")));
}

#[test]
fn a_path_through_a_symlink_is_judged_by_where_it_leads() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir_in("/var/tmp").unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("link")).unwrap();
    let config = SandboxConfig::default();
    let policy = SandboxPolicy {
        writable: vec![root.path().to_path_buf()],
        ..SandboxPolicy::new(&config, &[])
    };
    assert!(!policy.allows_write(&root.path().join("link/x")));
    assert!(policy.allows_write(&root.path().join("plain/../x")));
}
