//! The headless frontend: `tandem exec "task" [--file F --range L1:L2]`.
//!
//! Streams the answer to stdout as it arrives (on a terminal; into a pipe,
//! each completed model answer is written whole), tool activity to stderr, and
//! exits with a status derived from the stop reason. There is no editor to
//! ask, so in `review` mode commands and edits are refused (the model is
//! told why); `--mode auto` lets the agent act.
//!
//! Invariant: stdout carries the answer text only.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;

use crate::core::client::OneBridge;
use crate::core::daemon::{Daemon, DaemonOptions, NewSession};
use crate::core::history::shorten;
use crate::core::log::{Durability, EventSink, LoggedEvent};
use crate::vocab::bridge::NoClient;
use crate::vocab::event::{Event, StopReason, ToolStatus, UserContent};

/// What to run.
pub struct ExecTask {
    pub task: String,
    pub file: Option<PathBuf>,
    /// 1-based inclusive line range of `file` to attach.
    pub range: Option<(usize, usize)>,
    /// `read-only`, `review` or `auto`; `None` keeps the configured mode.
    pub mode: Option<String>,
    pub home: PathBuf,
    pub workspace: PathBuf,
    pub durability: Durability,
}

/// Prints a session's events for a terminal.
struct TerminalSink {
    /// On a terminal the answer streams chunk by chunk; into a pipe or a
    /// file it is written per completed model answer, so a stream that is
    /// retried never leaves its partial text behind.
    streaming: bool,
}

impl TerminalSink {
    fn write(text: &str) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }
}

impl EventSink for TerminalSink {
    fn on_event(&self, _session_id: &str, event: &LoggedEvent) {
        match &event.event {
            Event::AssistantChunk { text, .. } if self.streaming => Self::write(text),
            Event::AssistantMessage { text, .. } if !self.streaming => Self::write(text),
            Event::AttemptFailed {
                message,
                retry: true,
                streamed,
                ..
            } => {
                if *streamed && self.streaming {
                    eprintln!("\n[retrying: {message}; the answer above restarts]");
                } else {
                    eprintln!("\n[retrying: {message}]");
                }
            }
            Event::ToolCall { title, .. } => eprintln!("\n→ {title}"),
            Event::ToolResult { status, output, .. } => match status {
                // The first line of the output, shortened.
                ToolStatus::Completed => eprintln!("  ✓ {}", shorten(output, 120)),
                other => eprintln!("  ✗ {other:?}: {}", shorten(output, 120)),
            },
            Event::ToolWaiting { waiting_for, .. } => {
                eprintln!("  (needs {waiting_for}; no editor to ask)")
            }
            Event::Compacted { removed, .. } => eprintln!("[compacted {removed} old messages]"),
            Event::Instructions { files, cut, .. } if !files.is_empty() => {
                let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
                eprintln!("[instructions: {}]", paths.join(", "));
                if let Some(cut) = cut {
                    eprintln!("{cut}");
                }
            }
            _ => {}
        }
    }
}

/// The exit status for a stop reason: 0 when the model finished, 1 for an
/// error, 130 when cancelled (as for SIGINT), 2 for every other stop.
pub fn exit_status(reason: StopReason) -> u8 {
    match reason {
        StopReason::EndTurn => 0,
        StopReason::Error => 1,
        StopReason::Cancelled => 130,
        _ => 2,
    }
}

/// Parses `L1:L2` (1-based, inclusive).
pub fn parse_range(text: &str) -> Result<(usize, usize), String> {
    let (a, b) = text
        .split_once(':')
        .ok_or_else(|| format!("--range `{text}`: expected L1:L2"))?;
    let parse = |s: &str| {
        s.trim()
            .parse::<usize>()
            .map_err(|_| format!("--range `{text}`: `{s}` is not a line number"))
    };
    let (a, b) = (parse(a)?, parse(b)?);
    if a == 0 || b < a {
        return Err(format!(
            "--range `{text}`: lines start at 1 and the end is not before the start"
        ));
    }
    Ok((a, b))
}

fn attachment(file: &Path, range: Option<(usize, usize)>) -> Result<UserContent, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let (text, label) = match range {
        Some((a, b)) => {
            let lines: Vec<&str> = text.lines().collect();
            if a > lines.len() {
                return Err(format!(
                    "{} has {} lines; --range starts at {a}",
                    file.display(),
                    lines.len()
                ));
            }
            let end = b.min(lines.len());
            (lines[a - 1..end].join("\n"), format!("#L{a}-L{end}"))
        }
        None => (text, String::new()),
    };
    let path = file.canonicalize().unwrap_or_else(|_| file.to_path_buf());
    Ok(UserContent::Resource {
        uri: format!("{}{label}", crate::workspace::file_uri(&path)),
        text: Some(text),
    })
}

/// Runs one task to its end; returns the process exit status.
pub async fn run(task: ExecTask) -> u8 {
    let daemon = Daemon::new(DaemonOptions {
        home: task.home,
        durability: task.durability,
        sink: Arc::new(TerminalSink {
            streaming: std::io::IsTerminal::is_terminal(&std::io::stdout()),
        }),
    });
    // No editor: a client that cannot be asked, on the task's folder.
    let client = daemon.connect(Arc::new(OneBridge(Arc::new(NoClient))));
    client.workspace().set_roots(vec![task.workspace.clone()]);
    let mut content = vec![UserContent::Text { text: task.task }];
    if let Some(file) = &task.file {
        match attachment(file, task.range) {
            Ok(block) => content.push(block),
            Err(e) => {
                eprintln!("tandem: {e}");
                return 2;
            }
        }
    }
    let config = task.mode.map(|mode| json!({"approval": {"mode": mode}}));
    let session = match daemon.new_session(
        &client,
        NewSession {
            workspace_folder: None,
            title: None,
            config,
        },
    ) {
        Ok(session) => session,
        Err(e) => {
            eprintln!("tandem: {e}");
            return 2;
        }
    };
    let (_, receipt) = match daemon.prompt(&client, &session.id, content) {
        Ok(receipt) => receipt,
        Err(e) => {
            eprintln!("tandem: {e}");
            return 2;
        }
    };
    let mut receipt = receipt;
    let receipt = tokio::select! {
        receipt = &mut receipt => receipt,
        _ = tokio::signal::ctrl_c() => {
            eprintln!("\n[cancelling]");
            session.cancel(false);
            receipt.await
        }
    };
    println!();
    let code = match receipt {
        Ok(receipt) => {
            if receipt.stop_reason != StopReason::EndTurn {
                let message = receipt.message.unwrap_or_default();
                eprintln!(
                    "tandem: stopped ({}): {message}",
                    receipt.stop_reason.as_str()
                );
            }
            exit_status(receipt.stop_reason)
        }
        Err(_) => {
            eprintln!("tandem: the session stopped before the turn ended");
            1
        }
    };
    eprintln!("[session {}]", session.id);
    daemon.shutdown().await;
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_one_based_and_checked() {
        assert_eq!(parse_range("3:7"), Ok((3, 7)));
        assert!(parse_range("0:2").is_err());
        assert!(parse_range("5:2").is_err());
        assert!(parse_range("x:2").unwrap_err().contains("`x`"));
    }

    #[test]
    fn exit_status_follows_the_stop_reason() {
        assert_eq!(exit_status(StopReason::EndTurn), 0);
        assert_eq!(exit_status(StopReason::Error), 1);
        assert_eq!(exit_status(StopReason::Cancelled), 130);
        assert_eq!(exit_status(StopReason::MaxIterations), 2);
    }
}
