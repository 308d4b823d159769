//! Telling the model that a failure came from the sandbox.
//!
//! The kernel gives a denied command a plain errno (Landlock: `EACCES`; the
//! network namespace: `ENETUNREACH`, failed name lookups), so the command
//! itself prints the usual message. This reads the command's output for
//! those messages and names the cause, so that the model asks the user (or
//! writes elsewhere) instead of retrying or chasing file permissions:
//!
//! - A line with "Permission denied", "Operation not permitted" or
//!   "Read-only file system" names a path (the word before the message,
//!   the one after it, or any word with a `/` past the program's name,
//!   quotes stripped). If that
//!   path, resolved against the command's directory, is outside the
//!   writable paths and the daemon itself (unconfined) could write it, the
//!   sandbox denied the write. A path the daemon could not write either is
//!   an ordinary permission error and gets no note.
//! - With the network off, a line with a connection or name-resolution
//!   error gets one note that the network is off. Where the network is
//!   taken away by Landlock and seccomp (no namespaces), a denied socket,
//!   `connect` or `bind` reads "Permission denied": such lines, and bash's
//!   `/dev/tcp/...` and `/dev/udp/...` pseudo-paths, count as network
//!   errors, never as denied writes.
//! - A line saying "no new privileges" (sudo refusing to run) gets one note
//!   that the sandbox forbids gaining privileges.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::SandboxPolicy;

const DENIED_MARKERS: [&str; 3] = [
    "Permission denied",
    "Operation not permitted",
    "Read-only file system",
];

const NETWORK_MARKERS: [&str; 9] = [
    "Network is unreachable",
    "Could not resolve host",
    "Temporary failure in name resolution",
    "Name or service not known",
    "No address associated with hostname",
    "failed to lookup address",
    "getaddrinfo",
    "Connection refused",
    "Cannot assign requested address",
];

/// Denials of the network fallback (`EACCES` from Landlock or seccomp):
/// the failing call's name before the message, or bash's pseudo-paths.
const SOCKET_DENIAL_MARKERS: [&str; 5] = [
    "connect: Permission denied",
    "bind: Permission denied",
    "socket: Permission denied",
    "/dev/tcp/",
    "/dev/udp/",
];

/// How the model can get the command run unconfined: the last note.
const ESCALATE: &str = "to run a command outside the sandbox, call exec_command again with \
                        `with_escalated_permissions: true` and a `justification`: the user will \
                        be asked";

/// At most this many denied paths are named.
const MAX_PATHS: usize = 3;

/// Notes for the model on what in `output` the sandbox caused, one per
/// line; empty when nothing points at it.
pub fn explain(output: &str, policy: &SandboxPolicy, workdir: &Path) -> Vec<String> {
    let mut denied: Vec<PathBuf> = Vec::new();
    let mut network = false;
    let mut privileges = false;
    for line in output.lines() {
        // sudo and other setuid programs under `no_new_privs`.
        if line.contains("no new privileges") {
            privileges = true;
        }
        if SOCKET_DENIAL_MARKERS.iter().any(|m| line.contains(m)) {
            network |= !policy.network;
            continue;
        }
        if let Some(marker) = DENIED_MARKERS.iter().find(|m| line.contains(*m)) {
            for path in named_paths(line, marker, workdir) {
                if denied.len() < MAX_PATHS
                    && !denied.contains(&path)
                    && !policy.allows_write(&path)
                    && daemon_could_write(&path)
                {
                    denied.push(path);
                }
            }
        }
        if !policy.network && NETWORK_MARKERS.iter().any(|m| line.contains(m)) {
            network = true;
        }
    }
    let mut notes: Vec<String> = denied
        .iter()
        .map(|path| {
            if policy.read_only {
                format!(
                    "write denied by the sandbox (read-only mode): {}; ask the user",
                    path.display()
                )
            } else {
                format!(
                    "write outside the workspace denied by the sandbox: {}; ask the user or use a path inside the workspace",
                    path.display()
                )
            }
        })
        .collect();
    if network {
        notes.push(
            "network access is off in the sandbox: the command has only a loopback of its own; ask the user, who can set `[sandbox] network = true`"
                .to_string(),
        );
    }
    if privileges {
        notes.push(
            "the sandbox forbids gaining privileges (sudo, setuid programs); ask the user"
                .to_string(),
        );
    }
    if !notes.is_empty() {
        notes.push(ESCALATE.to_string());
    }
    notes
}

/// The paths a permission error line may name, resolved against `workdir`
/// and through symlinks and `..`.
fn named_paths(line: &str, marker: &str, workdir: &Path) -> Vec<PathBuf> {
    const QUOTES: [char; 6] = ['\'', '"', '`', '‘', '’', ','];
    let clean = |word: &str| {
        word.trim_matches(|c: char| QUOTES.contains(&c) || c == ':' || c.is_whitespace())
            .to_string()
    };
    let (before, after) = line.split_once(marker).unwrap_or((line, ""));
    let mut words: Vec<String> = Vec::new();
    if let Some(last) = before
        .trim_end()
        .trim_end_matches(':')
        .split_whitespace()
        .last()
    {
        words.push(clean(last));
    }
    if let Some(first) = after.split_whitespace().next() {
        words.push(clean(first));
    }
    // Past the program's own name (`/bin/bash: line 1: x: ...`).
    let message = line.split_once(": ").map_or(line, |(_, rest)| rest);
    words.extend(
        message
            .split(|c: char| c.is_whitespace() || QUOTES.contains(&c))
            .map(clean)
            .filter(|w| w.contains('/')),
    );
    let mut paths = Vec::new();
    for word in words {
        // `sh: 1:` and `[Errno 13]` are no paths.
        if word.is_empty() || word.chars().all(|c| c.is_ascii_digit()) || word.starts_with('[') {
            continue;
        }
        // The command's /proc/self/cwd is its workdir, not the daemon's.
        // Named as the kernel resolved it: where the write would have gone.
        let path = super::canonical_prefix(&match word.strip_prefix("/proc/self/cwd") {
            Some(rest) => workdir.join(rest.trim_start_matches('/')),
            None => workdir.join(&word),
        });
        if !paths.contains(&path) {
            paths.push(path);
        }
    }
    paths
}

/// Whether the daemon, unconfined, may write `path` (or create it in its
/// nearest existing directory): if so, a denial came from the sandbox.
fn daemon_could_write(path: &Path) -> bool {
    let mut current = path;
    loop {
        if std::fs::symlink_metadata(current).is_ok() {
            let Ok(c_path) = CString::new(current.as_os_str().as_bytes()) else {
                return false;
            };
            // SAFETY: a valid C string; access(2) only reads it.
            return unsafe { libc::access(c_path.as_ptr(), libc::W_OK) } == 0;
        }
        match current.parent() {
            Some(parent) => current = parent,
            None => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(root: &Path) -> SandboxPolicy {
        SandboxPolicy {
            writable: vec![root.to_path_buf()],
            network: false,
            read_only: false,
        }
    }

    #[test]
    fn common_shell_and_tool_messages_name_the_denied_path() {
        let root = tempfile::tempdir().unwrap();
        // The daemon must be able to write the path for it to count as
        // the sandbox's denial: a fresh dir outside the policy.
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("x");
        let shown = target.display();
        for line in [
            format!("sh: 1: cannot create {shown}: Permission denied"),
            format!("touch: cannot touch '{shown}': Permission denied"),
            format!("mkdir: cannot create directory ‘{shown}’: Permission denied"),
            format!("PermissionError: [Errno 13] Permission denied: '{shown}'"),
        ] {
            let notes = explain(&line, &policy(root.path()), root.path());
            assert_eq!(notes.len(), 2, "{line}: {notes:?}");
            assert!(notes[1].contains("with_escalated_permissions"), "{notes:?}");
            assert!(
                notes[0].starts_with(&format!(
                    "write outside the workspace denied by the sandbox: {shown}; ask the user"
                )),
                "{notes:?}"
            );
        }
    }

    #[test]
    fn relative_paths_resolve_against_the_workdir_and_inside_ones_are_not_denials() {
        let root = tempfile::tempdir().unwrap();
        let notes = explain(
            "sh: 1: cannot create inside.txt: Permission denied",
            &policy(root.path()),
            root.path(),
        );
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn network_errors_get_one_note_only_when_the_network_is_off() {
        let root = tempfile::tempdir().unwrap();
        let output = "curl: (7) Failed to connect: Network is unreachable\ncurl: (6) Could not resolve host: x\n";
        let notes = explain(output, &policy(root.path()), root.path());
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].starts_with("network access is off in the sandbox"));
        let open = SandboxPolicy {
            network: true,
            ..policy(root.path())
        };
        assert!(explain(output, &open, root.path()).is_empty());
    }

    #[test]
    fn socket_denials_of_the_fallback_are_network_notes_not_denied_writes() {
        let root = tempfile::tempdir().unwrap();
        let output = "bash: connect: Permission denied\n\
                      bash: line 1: /dev/tcp/127.0.0.1/8080: Permission denied\n";
        let notes = explain(output, &policy(root.path()), root.path());
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].starts_with("network access is off in the sandbox"));
        let open = SandboxPolicy {
            network: true,
            ..policy(root.path())
        };
        assert!(explain(output, &open, root.path()).is_empty());
    }

    #[test]
    fn sudo_refused_for_no_new_privileges_gets_a_note() {
        let root = tempfile::tempdir().unwrap();
        let notes = explain(
            "sudo: The \"no new privileges\" flag is set, which prevents sudo from running as root.",
            &policy(root.path()),
            root.path(),
        );
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].starts_with("the sandbox forbids gaining privileges"));
    }
}
