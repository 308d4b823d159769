//! The editors tandem has extensions for, when they are on `PATH`: their
//! versions (`nvim --version`, `code --version`) against what the
//! extensions need (editors/nvim: Neovim 0.11; editors/vscode: VS Code
//! 1.91, its `engines.vscode`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use super::{Check, Section, Status};

/// `code --version` starts Electron's launcher: allow it some time.
const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

struct Editor {
    id: &'static str,
    name: &'static str,
    program: &'static str,
    /// The oldest version the extension supports (major, minor).
    oldest: (u64, u64),
}

const EDITORS: [Editor; 2] = [
    Editor {
        id: "editors.nvim",
        name: "Neovim",
        program: "nvim",
        oldest: (0, 11),
    },
    Editor {
        id: "editors.vscode",
        name: "VS Code",
        program: "code",
        oldest: (1, 91),
    },
];

pub(super) async fn check() -> Vec<Check> {
    let mut checks = Vec::new();
    for editor in &EDITORS {
        checks.push(version(editor).await);
    }
    checks
}

async fn version(editor: &Editor) -> Check {
    let Some(path) = on_path(editor.program) else {
        return Check::new(
            editor.id,
            Section::Editors,
            Status::Skip,
            format!("{}: `{}` is not on PATH", editor.name, editor.program),
        );
    };
    let run = tokio::process::Command::new(&path)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(VERSION_TIMEOUT, run).await {
        Ok(Ok(output)) if output.status.success() => output,
        Ok(Ok(output)) => {
            return failed(editor, &path, &String::from_utf8_lossy(&output.stderr));
        }
        Ok(Err(e)) => return failed(editor, &path, &e.to_string()),
        Err(_) => {
            return failed(
                editor,
                &path,
                &format!("no answer within {} s", VERSION_TIMEOUT.as_secs()),
            )
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let first = stdout.lines().next().unwrap_or("").trim();
    let shown = format!("{}: {first} ({})", editor.name, path.display());
    match parse_version(first) {
        Some(found) if found < editor.oldest => Check::new(
            editor.id,
            Section::Editors,
            Status::Warn,
            format!(
                "{shown}: older than the {}.{} tandem's extension needs",
                editor.oldest.0, editor.oldest.1
            ),
        )
        .with_fix(format!(
            "install {} {}.{} or newer",
            editor.name, editor.oldest.0, editor.oldest.1
        )),
        _ => Check::new(editor.id, Section::Editors, Status::Ok, shown),
    }
}

fn failed(editor: &Editor, path: &Path, why: &str) -> Check {
    Check::new(
        editor.id,
        Section::Editors,
        Status::Warn,
        format!(
            "{}: `{} --version` failed: {}",
            editor.name,
            path.display(),
            why.trim()
        ),
    )
    .with_fix(format!("check the {} installation", editor.name))
}

/// The first executable `program` on `PATH`.
fn on_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// `(major, minor)` of the first `N.N` in a version line: `NVIM v0.11.4`,
/// `1.95.3`.
fn parse_version(line: &str) -> Option<(u64, u64)> {
    line.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find_map(|word| {
            let mut parts = word.split('.');
            let major = parts.next()?.parse().ok()?;
            let minor = parts.next()?.parse().ok()?;
            Some((major, minor))
        })
}

#[cfg(test)]
mod tests {
    use super::parse_version;

    #[test]
    fn versions_are_read_from_the_first_line_of_each_editor() {
        assert_eq!(parse_version("NVIM v0.11.4"), Some((0, 11)));
        assert_eq!(parse_version("NVIM v0.7.2"), Some((0, 7)));
        assert_eq!(parse_version("1.95.3"), Some((1, 95)));
        assert_eq!(parse_version("no version here"), None);
    }
}
