//! The command runner behind `exec_command`: runs one shell command in the
//! workspace and returns what the model should read.
//!
//! Guarantees:
//! - The child inherits the daemon's environment minus secret-looking names
//!   (the wire invariant "command children do not inherit secrets").
//! - The command and everything it starts run in their own process group;
//!   on timeout, on cancel and when the future is dropped the whole group is
//!   SIGKILLed, and the call returns within [`KILL_GRACE`] of the kill even
//!   if some process outside the group still holds the pipes.
//! - Output is stdout and stderr interleaved in arrival order, streamed to a
//!   callback as it arrives and kept, capped, as head + tail for the model.
//!
//! - With a [`SandboxPolicy`] the command and everything it starts run
//!   confined (see [`sandbox`]).
//!
//! Unix only: process groups and signals are the mechanism.

mod environment;
mod output;
mod process_group;
pub mod sandbox;
#[cfg(test)]
mod tests;

use std::ffi::OsString;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::process::Command;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use environment::child_environment;
use output::{CappedOutput, OutputSink, Pipe};
use process_group::ProcessGroup;
use sandbox::SandboxPolicy;

/// Output kept for the model when the caller has no opinion.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 32 * 1024;

/// A text capped like a command's output for the model: the head and the
/// tail within [`DEFAULT_MAX_OUTPUT_BYTES`], the cut said (MCP results).
pub fn cap_like_command_output(text: &str) -> String {
    output::cap_text(text, DEFAULT_MAX_OUTPUT_BYTES)
}

/// Timeout when the model gives none (Codex's default for `exec_command`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long to keep reading after the shell exited while something it left
/// behind still holds the pipes open (`server &`). Local pipes drain in
/// microseconds; anything still attached after this is a background job.
const EXIT_DRAIN: Duration = Duration::from_millis(250);

/// After the group is killed: how long to wait for the reap and for the
/// pipes to hit EOF. Bounded because a process that left the group
/// (`setsid`) may hold the pipes forever, and a process in uninterruptible
/// sleep may not die at once.
const KILL_GRACE: Duration = Duration::from_millis(50);

/// What to run, where, and under which limits.
#[derive(Debug, Clone)]
pub struct CommandSpec {
    /// Shell source, passed to `$SHELL -c`.
    pub cmd: String,
    pub workdir: PathBuf,
    pub timeout: Duration,
    /// Secret-looking variable names (exact, case-sensitive) to pass through anyway.
    pub env_allow: Vec<String>,
    /// Output kept for the model: the first half and the last half of this.
    pub max_output_bytes: usize,
    /// The sandbox to run in; `None` runs unconfined.
    pub sandbox: Option<SandboxPolicy>,
}

impl CommandSpec {
    /// A spec with [`DEFAULT_TIMEOUT`], [`DEFAULT_MAX_OUTPUT_BYTES`], no
    /// allow-list and no sandbox.
    pub fn new(cmd: impl Into<String>, workdir: impl Into<PathBuf>) -> Self {
        CommandSpec {
            cmd: cmd.into(),
            workdir: workdir.into(),
            timeout: DEFAULT_TIMEOUT,
            env_allow: Vec::new(),
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            sandbox: None,
        }
    }
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandEnd {
    /// The shell exited with this code.
    Exited(i32),
    /// The shell died of this signal, not sent by us.
    Signalled(i32),
    /// We killed it when the timeout ran out.
    TimedOut,
    /// We killed it because the cancel token fired.
    Cancelled,
}

/// The result of [`run_command`].
#[derive(Debug, Clone)]
pub struct CommandOutcome {
    pub end: CommandEnd,
    /// Interleaved stdout and stderr; when over the cap, head and tail around
    /// an `[... N bytes elided ...]` marker.
    pub output: String,
    /// Bytes of decoded output the command produced (what it wrote, when that
    /// was valid UTF-8).
    pub total_bytes: u64,
    /// Of `total_bytes`, how many were dropped from the middle of `output`.
    pub elided_bytes: u64,
    pub duration: Duration,
    /// The limit the command ran under, for the timeout message.
    pub timeout: Duration,
}

impl CommandOutcome {
    /// The tool result as the model reads it: a status line, then the output.
    ///
    /// A killed command reads as killed or aborted, never as failed or
    /// rejected, so the model does not retry blindly.
    pub fn to_model_text(&self) -> String {
        let status = match self.end {
            CommandEnd::Exited(code) => format!("exit code {code}"),
            CommandEnd::Signalled(signal) => format!("killed by signal {signal}"),
            CommandEnd::TimedOut => {
                format!("killed after timeout of {}", format_duration(self.timeout))
            }
            CommandEnd::Cancelled => "aborted: cancelled by the user".to_string(),
        };
        if self.output.is_empty() {
            status
        } else {
            format!("{status}\n{}", self.output)
        }
    }
}

/// Runs `spec.cmd` with `$SHELL -c` (or `/bin/sh`) in `spec.workdir`, stdin
/// null, until it exits, times out or `cancel` fires.
///
/// `on_output` receives every non-empty decoded piece of output as it
/// arrives, uncapped. An `Err` means the command could not be started (or,
/// rarely, waited for); everything the command itself does is an `Ok`.
pub async fn run_command(
    spec: CommandSpec,
    cancel: CancellationToken,
    on_output: impl FnMut(&str) + Send,
) -> io::Result<CommandOutcome> {
    let started = Instant::now();
    let sink = OutputSink {
        buffer: CappedOutput::new(spec.max_output_bytes),
        on_output,
    };
    // A command the user already cancelled must not get to run, not even for
    // the moment before we kill it: it may have side effects.
    if cancel.is_cancelled() {
        return Ok(sink.into_outcome(CommandEnd::Cancelled, started, spec.timeout));
    }

    let shell = shell_program();
    let mut command = Command::new(&shell);
    // Plain `-c`, not `-lc`: a login shell re-reads the user's profile on
    // every call, which is slow, may print into the output or change
    // directory, and may re-export the very secrets scrubbed below. The
    // daemon's environment already is the user's login environment, passed
    // down by the editor.
    command
        .arg("-c")
        .arg(&spec.cmd)
        .current_dir(&spec.workdir)
        .env_clear()
        .envs(child_environment(std::env::vars_os(), &spec.env_allow))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(policy) = &spec.sandbox {
        let mut confinement = policy.prepare()?;
        // SAFETY: `enter` makes system calls only (no allocation, no
        // locks), as the hook between fork and exec must.
        unsafe {
            command.pre_exec(move || confinement.enter());
        }
    }
    let mut child = command.spawn().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "failed to start `{} -c` in {}{}: {e}",
                shell.to_string_lossy(),
                spec.workdir.display(),
                if spec.sandbox.is_some() {
                    " in the sandbox"
                } else {
                    ""
                }
            ),
        )
    })?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(io::Error::other("command started without its output pipes"));
    };
    let group = ProcessGroup::new(child)?;
    tracing::debug!(cmd = %spec.cmd, workdir = %spec.workdir.display(), pgid = group.pgid, "command started");

    let mut run = Run {
        group,
        stdout: Pipe::new(stdout),
        stderr: Pipe::new(stderr),
        exit: None,
        exited_at: None,
        sink,
    };
    let deadline = started.checked_add(spec.timeout);
    let interruption = run.pump(Some(&cancel), deadline, Some(EXIT_DRAIN)).await?;
    let exit_before_interruption = run.exit;
    if let Some(interruption) = interruption {
        // Either the shell is still running, or it exited and something it
        // left behind still holds the pipes. In the second case the leader is
        // reaped, so its pgid could in principle be reused — but an open pipe
        // means a live holder, almost always in the group, which keeps the
        // pgid ours.
        tracing::debug!(pgid = run.group.pgid, ?interruption, "killing command");
        run.group.kill();
        run.pump(None, Some(Instant::now() + KILL_GRACE), None)
            .await?;
    }
    run.stdout.flush_decoder(&mut run.sink);
    run.stderr.flush_decoder(&mut run.sink);

    let end = match (exit_before_interruption, interruption) {
        // The shell's own result stands, even if what it left behind then
        // had to be killed.
        (Some(status), _) => end_from_status(status),
        (None, Some(Interruption::TimedOut)) => CommandEnd::TimedOut,
        (None, Some(Interruption::Cancelled)) => CommandEnd::Cancelled,
        // pump only returns without an interruption once the shell exited,
        // and the exit drain only starts after it.
        (None, Some(Interruption::ExitDrainExpired)) | (None, None) => {
            return Err(io::Error::other("command ended without an exit status"));
        }
    };
    Ok(run.sink.into_outcome(end, started, spec.timeout))
}

/// `$SHELL`, or `/bin/sh` when it is unset or empty.
fn shell_program() -> OsString {
    match std::env::var_os("SHELL") {
        Some(shell) if !shell.is_empty() => shell,
        _ => OsString::from("/bin/sh"),
    }
}

fn end_from_status(status: ExitStatus) -> CommandEnd {
    match (status.code(), status.signal()) {
        (Some(code), _) => CommandEnd::Exited(code),
        (None, Some(signal)) => CommandEnd::Signalled(signal),
        // wait() reports neither only for stopped/continued children, which
        // it does not return; keep a value rather than panic.
        (None, None) => CommandEnd::Exited(-1),
    }
}

fn format_duration(d: Duration) -> String {
    if d.as_secs() > 0 && d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interruption {
    Cancelled,
    TimedOut,
    /// The shell exited but the pipes stayed open past [`EXIT_DRAIN`].
    ExitDrainExpired,
}

/// One running command: its group, its two pipes and where output goes.
struct Run<F> {
    group: ProcessGroup,
    stdout: Pipe<tokio::process::ChildStdout>,
    stderr: Pipe<tokio::process::ChildStderr>,
    exit: Option<ExitStatus>,
    exited_at: Option<Instant>,
    sink: OutputSink<F>,
}

impl<F: FnMut(&str)> Run<F> {
    /// Reads both pipes and waits for the shell until it has exited and both
    /// pipes are at EOF (`None`), or until interrupted by `cancel`,
    /// `deadline` or, when given, `exit_drain` after the shell's exit.
    async fn pump(
        &mut self,
        cancel: Option<&CancellationToken>,
        deadline: Option<Instant>,
        exit_drain: Option<Duration>,
    ) -> io::Result<Option<Interruption>> {
        loop {
            if self.exit.is_some() && self.stdout.is_closed() && self.stderr.is_closed() {
                return Ok(None);
            }
            let drain_deadline = self.exited_at.zip(exit_drain).map(|(at, d)| at + d);
            tokio::select! {
                biased;
                _ = cancelled(cancel) => return Ok(Some(Interruption::Cancelled)),
                _ = sleep_until(deadline) => return Ok(Some(Interruption::TimedOut)),
                _ = sleep_until(drain_deadline) => return Ok(Some(Interruption::ExitDrainExpired)),
                status = self.group.child.wait(), if self.exit.is_none() => {
                    self.exit = Some(status?);
                    self.exited_at = Some(Instant::now());
                    self.group.reaped = true;
                }
                read = self.stdout.read() => self.stdout.accept(read, &mut self.sink),
                read = self.stderr.read() => self.stderr.accept(read, &mut self.sink),
            }
        }
    }
}

async fn cancelled(cancel: Option<&CancellationToken>) {
    match cancel {
        Some(token) => token.cancelled().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
