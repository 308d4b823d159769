//! Where tandem keeps its state when the client starts it without `HOME`
//! (agentic.nvim passes only `PATH` and its own variables): the password
//! database's home directory, and never a temporary directory — without
//! any home, tandem says so and stops before writing anything.

use std::os::unix::process::CommandExt;
use std::process::{Command, Output};

use crate::support::client::tandem_bin;

/// `tandem sessions` run as `uid` (and gid) with only `PATH` set.
fn sessions_as(uid: u32) -> Option<Output> {
    // SAFETY: geteuid has no failure mode.
    if unsafe { libc::geteuid() } != 0 {
        let message = "not run: changing to another uid needs root";
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{message}");
        eprintln!("{message}");
        return None;
    }
    let cwd = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        cwd.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    Some(
        Command::new(tandem_bin())
            .arg("sessions")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .current_dir(cwd.path())
            .uid(uid)
            .gid(uid)
            .output()
            .unwrap(),
    )
}

#[test]
fn without_home_the_state_directory_is_under_the_password_databases_home() {
    // `nobody` has a home in every passwd (`/nonexistent` on Debian).
    let entry = Command::new("getent")
        .args(["passwd", "nobody"])
        .output()
        .unwrap();
    let entry = String::from_utf8(entry.stdout).unwrap();
    let fields: Vec<&str> = entry.trim().split(':').collect();
    let (uid, home) = (fields[2].parse::<u32>().unwrap(), fields[5]);
    let Some(out) = sessions_as(uid) else { return };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        stdout.trim(),
        format!("no sessions in {home}/.local/state/tandem/sessions"),
        "{out:?}"
    );
}

#[test]
fn without_home_or_a_password_entry_tandem_says_so_and_writes_nothing() {
    // A uid no passwd entry has.
    let uid = (40_000..60_000)
        .find(|uid| {
            !Command::new("getent")
                .args(["passwd", &uid.to_string()])
                .status()
                .unwrap()
                .success()
        })
        .unwrap();
    // Where the state went before: under the temp dir (the child's is
    // /tmp, its environment being cleared).
    let fallback = std::path::Path::new("/tmp/.local/state/tandem/logs/tandem.log");
    let before = std::fs::metadata(fallback).map(|m| m.len()).ok();
    let Some(out) = sessions_as(uid) else { return };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(
        stderr.contains(&format!(
            "TANDEM_HOME and HOME are unset, and the password database has no home directory for uid {uid}; set HOME or TANDEM_HOME"
        )),
        "{stderr}"
    );
    // Nothing was put in the temp dir instead.
    assert_eq!(
        std::fs::metadata(fallback).map(|m| m.len()).ok(),
        before,
        "tandem logged under /tmp"
    );
}
