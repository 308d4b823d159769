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
//! Unix only: process groups and signals are the mechanism.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Output kept for the model when the caller has no opinion.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 32 * 1024;

/// Timeout when the model gives none (Codex's default for `exec_command`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Substrings (upper case) that mark an environment variable's name as a secret.
const SECRET_NAME_MARKERS: [&str; 5] = ["KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL"];

/// How long to keep reading after the shell exited while something it left
/// behind still holds the pipes open (`server &`). Local pipes drain in
/// microseconds; anything still attached after this is a background job.
const EXIT_DRAIN: Duration = Duration::from_millis(250);

/// After the group is killed: how long to wait for the reap and for the
/// pipes to hit EOF. Bounded because a process that left the group
/// (`setsid`) may hold the pipes forever, and a process in uninterruptible
/// sleep may not die at once.
const KILL_GRACE: Duration = Duration::from_millis(50);

const READ_CHUNK: usize = 8 * 1024;

const SIGKILL: i32 = 9;

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
}

impl CommandSpec {
    /// A spec with [`DEFAULT_TIMEOUT`], [`DEFAULT_MAX_OUTPUT_BYTES`] and no allow-list.
    pub fn new(cmd: impl Into<String>, workdir: impl Into<PathBuf>) -> Self {
        CommandSpec {
            cmd: cmd.into(),
            workdir: workdir.into(),
            timeout: DEFAULT_TIMEOUT,
            env_allow: Vec::new(),
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
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
    let mut child = command.spawn().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "failed to start `{} -c` in {}: {e}",
                shell.to_string_lossy(),
                spec.workdir.display()
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

/// The child's environment: `inherited` minus secret-looking names (unless
/// allowed), plus the variables that make tools behave for a non-interactive
/// reader.
fn child_environment(
    inherited: impl Iterator<Item = (OsString, OsString)>,
    allow: &[String],
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = inherited
        .filter(|(name, _)| !is_secret_name(name) || allow.iter().any(|a| OsStr::new(a) == name))
        .collect();
    let overrides = [
        // Lets scripts and git hooks tell that an agent runs them.
        ("TANDEM", "1"),
        // Nobody can page: stdin is null and the reader is a model.
        ("PAGER", "cat"),
        ("GIT_PAGER", "cat"),
        // Escape codes cost the model tokens and read as noise; most tools
        // drop colour on a pipe already, this catches the ones that do not.
        ("NO_COLOR", "1"),
        // git asks for credentials on /dev/tty, which stdin null does not
        // stop; failing at once beats hanging until the timeout.
        ("GIT_TERMINAL_PROMPT", "0"),
    ];
    env.retain(|(name, _)| !overrides.iter().any(|(o, _)| OsStr::new(o) == name));
    env.extend(overrides.iter().map(|(n, v)| (n.into(), v.into())));
    env
}

fn is_secret_name(name: &OsStr) -> bool {
    let upper = name.to_string_lossy().to_ascii_uppercase();
    SECRET_NAME_MARKERS
        .iter()
        .any(|marker| upper.contains(marker))
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

/// The child, owned so that the group is killed before the `Child` is
/// dropped (and possibly reaped): while the leader is unreaped its pid, and
/// so the pgid, cannot be reused.
struct ProcessGroup {
    child: Child,
    pgid: i32,
    reaped: bool,
}

impl ProcessGroup {
    fn new(child: Child) -> io::Result<Self> {
        let pid = child
            .id()
            .ok_or_else(|| io::Error::other("command exited before its pid was known"))?;
        let pgid = i32::try_from(pid)
            .map_err(|_| io::Error::other(format!("pid {pid} does not fit a pid_t")))?;
        Ok(ProcessGroup {
            child,
            pgid,
            reaped: false,
        })
    }

    /// SIGKILLs every process in the group. Failure (the group is already
    /// gone) needs no handling.
    fn kill(&self) {
        extern "C" {
            fn kill(pid: i32, sig: i32) -> i32;
        }
        // SAFETY: kill(2) takes two integers and touches no memory of ours.
        // The negative pid addresses the group we created with
        // process_group(0), whose id is the leader's pid (always > 0).
        let _ = unsafe { kill(-self.pgid, SIGKILL) };
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        // The future was dropped mid-run, or the kill's grace ran out before
        // the reap. tokio's kill_on_drop then reaps the leader in the
        // background.
        if !self.reaped {
            self.kill();
        }
    }
}

/// One output pipe with its own UTF-8 decoder: a character split across two
/// reads of stdout must not be broken by a read of stderr in between.
struct Pipe<R> {
    reader: Option<R>,
    decoder: Utf8Decoder,
    buf: Vec<u8>,
}

impl<R: AsyncRead + Unpin> Pipe<R> {
    fn new(reader: R) -> Self {
        Pipe {
            reader: Some(reader),
            decoder: Utf8Decoder::default(),
            buf: vec![0; READ_CHUNK],
        }
    }

    fn is_closed(&self) -> bool {
        self.reader.is_none()
    }

    /// The next read; pending forever once closed, so it can sit in a select.
    async fn read(&mut self) -> io::Result<usize> {
        match &mut self.reader {
            Some(reader) => reader.read(&mut self.buf).await,
            None => std::future::pending().await,
        }
    }

    fn accept<F: FnMut(&str)>(&mut self, read: io::Result<usize>, sink: &mut OutputSink<F>) {
        match read {
            Ok(0) => self.close(sink),
            Ok(n) => sink.emit(self.decoder.decode(&self.buf[..n])),
            Err(error) => {
                tracing::warn!(%error, "reading command output failed; treating as end of output");
                self.close(sink);
            }
        }
    }

    fn close<F: FnMut(&str)>(&mut self, sink: &mut OutputSink<F>) {
        self.reader = None;
        self.flush_decoder(sink);
    }

    fn flush_decoder<F: FnMut(&str)>(&mut self, sink: &mut OutputSink<F>) {
        sink.emit(self.decoder.finish());
    }
}

/// Decodes a byte stream read in arbitrary pieces. Invalid bytes become
/// U+FFFD; an incomplete sequence at the end of a piece waits for the next
/// one and is replaced only if the stream ends inside it.
#[derive(Debug, Default)]
struct Utf8Decoder {
    pending: Vec<u8>,
}

impl Utf8Decoder {
    fn decode(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut text = String::with_capacity(self.pending.len());
        let mut start = 0;
        loop {
            match std::str::from_utf8(&self.pending[start..]) {
                Ok(valid) => {
                    text.push_str(valid);
                    start = self.pending.len();
                    break;
                }
                Err(error) => {
                    let valid_end = start + error.valid_up_to();
                    // Already validated: this borrows, it does not replace.
                    text.push_str(&String::from_utf8_lossy(&self.pending[start..valid_end]));
                    match error.error_len() {
                        Some(invalid) => {
                            text.push(char::REPLACEMENT_CHARACTER);
                            start = valid_end + invalid;
                        }
                        None => {
                            start = valid_end;
                            break;
                        }
                    }
                }
            }
        }
        self.pending.drain(..start);
        text
    }

    fn finish(&mut self) -> String {
        let rest = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        rest
    }
}

/// Where decoded output goes: the streaming callback and the capped buffer.
struct OutputSink<F> {
    buffer: CappedOutput,
    on_output: F,
}

impl<F: FnMut(&str)> OutputSink<F> {
    fn emit(&mut self, piece: String) {
        if !piece.is_empty() {
            (self.on_output)(&piece);
            self.buffer.push(&piece);
        }
    }

    fn into_outcome(self, end: CommandEnd, started: Instant, timeout: Duration) -> CommandOutcome {
        let (output, elided_bytes) = self.buffer.render();
        CommandOutcome {
            end,
            output,
            total_bytes: self.buffer.total,
            elided_bytes,
            duration: started.elapsed(),
            timeout,
        }
    }
}

/// Keeps the first `max / 2` and the last `max - max / 2` bytes of a text
/// stream, cutting only at character boundaries (the tail gets whatever
/// such a cut leaves unused in the head, so output within `max` is kept
/// whole).
#[derive(Debug)]
struct CappedOutput {
    max_bytes: usize,
    head: String,
    head_cap: usize,
    /// Once a piece overflowed the head, everything goes to the tail, even
    /// if a char-boundary cut left a few bytes of room in the head.
    head_full: bool,
    /// The last bytes seen, up to twice `tail_cap` so that trimming is
    /// amortised; [`Self::tail_window`] is the part that is kept.
    tail: String,
    tail_cap: usize,
    total: u64,
}

impl CappedOutput {
    fn new(max_bytes: usize) -> Self {
        let head_cap = max_bytes / 2;
        CappedOutput {
            max_bytes,
            head: String::new(),
            head_cap,
            head_full: false,
            tail: String::new(),
            tail_cap: max_bytes - head_cap,
            total: 0,
        }
    }

    fn push(&mut self, mut piece: &str) {
        self.total += piece.len() as u64;
        if !self.head_full {
            let room = self.head_cap - self.head.len();
            if piece.len() <= room {
                self.head.push_str(piece);
                return;
            }
            let cut = piece.floor_char_boundary(room);
            self.head.push_str(&piece[..cut]);
            self.head_full = true;
            self.tail_cap = self.max_bytes - self.head.len();
            piece = &piece[cut..];
        }
        if piece.len() >= self.tail_cap {
            let start = piece.ceil_char_boundary(piece.len() - self.tail_cap);
            self.tail.clear();
            self.tail.push_str(&piece[start..]);
        } else {
            self.tail.push_str(piece);
            if self.tail.len() > 2 * self.tail_cap {
                let start = self
                    .tail
                    .ceil_char_boundary(self.tail.len() - self.tail_cap);
                self.tail.drain(..start);
            }
        }
    }

    fn tail_window(&self) -> &str {
        let excess = self.tail.len().saturating_sub(self.tail_cap);
        &self.tail[self.tail.ceil_char_boundary(excess)..]
    }

    /// The kept text, with the elision marker if anything was dropped, and
    /// the number of bytes dropped.
    fn render(&self) -> (String, u64) {
        let tail = self.tail_window();
        let elided = self.total - (self.head.len() + tail.len()) as u64;
        let text = if elided == 0 {
            format!("{}{tail}", self.head)
        } else {
            format!("{}\n[... {elided} bytes elided ...]\n{tail}", self.head)
        };
        (text, elided)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::io::AsyncReadExt;

    use super::*;

    fn spec(cmd: &str) -> CommandSpec {
        CommandSpec::new(cmd, std::env::temp_dir())
    }

    async fn run(spec: CommandSpec) -> CommandOutcome {
        run_command(spec, CancellationToken::new(), |_| {})
            .await
            .expect("command starts")
    }

    /// A callback that cancels `token` once the output so far contains
    /// `marker`, recording everything it saw.
    fn cancel_on(
        marker: &'static str,
        token: &CancellationToken,
    ) -> (impl FnMut(&str) + Send, Arc<Mutex<String>>) {
        let seen = Arc::new(Mutex::new(String::new()));
        let (token, record) = (token.clone(), seen.clone());
        let callback = move |piece: &str| {
            let mut seen = record.lock().unwrap();
            seen.push_str(piece);
            if seen.contains(marker) {
                token.cancel();
            }
        };
        (callback, seen)
    }

    /// Whether `pid` still runs user code. A zombie is not alive (its parent
    /// may be an init that never reaps), nor is a process already inside the
    /// kernel's exit path: the last field of `stat`, the exit code, is set
    /// there before the process closes its files, so it is how one sees that
    /// a process which just released our pipes is past the point of return.
    #[cfg(target_os = "linux")]
    fn process_is_alive(pid: u32) -> bool {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        let after_name = stat.rsplit(')').next().unwrap_or_default();
        let mut fields = after_name.split_whitespace();
        let state = fields.next();
        let exit_code = fields.last();
        !matches!(state, Some("Z") | Some("X")) && exit_code == Some("0")
    }

    #[tokio::test]
    async fn stdout_and_stderr_are_both_captured() {
        let outcome = run(spec("echo to-stdout; echo to-stderr >&2")).await;
        assert_eq!(outcome.end, CommandEnd::Exited(0));
        assert!(
            outcome.output.contains("to-stdout\n"),
            "{:?}",
            outcome.output
        );
        assert!(
            outcome.output.contains("to-stderr\n"),
            "{:?}",
            outcome.output
        );
        assert_eq!(outcome.total_bytes, outcome.output.len() as u64);
        assert_eq!(outcome.elided_bytes, 0);
    }

    #[tokio::test]
    async fn nonzero_exit_code_is_reported_to_the_model() {
        let outcome = run(spec("echo failing; exit 3")).await;
        assert_eq!(outcome.end, CommandEnd::Exited(3));
        assert_eq!(outcome.to_model_text(), "exit code 3\nfailing\n");
    }

    #[tokio::test]
    async fn death_by_a_foreign_signal_is_reported_as_signalled() {
        let outcome = run(spec("kill -TERM $$")).await;
        assert_eq!(outcome.end, CommandEnd::Signalled(15));
        assert_eq!(outcome.to_model_text(), "killed by signal 15");
    }

    #[tokio::test]
    async fn output_over_the_cap_keeps_head_and_tail_and_counts_the_elided_bytes() {
        let mut spec = spec("printf BEGIN; head -c 1000 /dev/zero | tr '\\0' x; printf END");
        spec.max_output_bytes = 100;
        let outcome = run(spec).await;

        assert_eq!(outcome.total_bytes, 1008);
        assert_eq!(outcome.elided_bytes, 908);
        let expected = format!(
            "BEGIN{}\n[... 908 bytes elided ...]\n{}END",
            "x".repeat(45),
            "x".repeat(47)
        );
        assert_eq!(outcome.output, expected);
    }

    #[test]
    fn capped_output_cuts_only_at_char_boundaries() {
        let mut capped = CappedOutput::new(10);
        for _ in 0..10 {
            // 3 bytes each: the head (5) fits one, the tail (5 + the
            // head's spare 2) fits two.
            capped.push("€");
        }
        let (text, elided) = capped.render();
        assert_eq!(text, "€\n[... 21 bytes elided ...]\n€€");
        assert_eq!(elided, 21);
    }

    #[test]
    fn capped_output_under_the_cap_is_kept_whole_across_head_and_tail() {
        let mut capped = CappedOutput::new(10);
        capped.push("abc€"); // the head (5) takes "abc", the tail gets its 2 spare bytes
        capped.push("d€");
        let (text, elided) = capped.render();
        assert_eq!((text.as_str(), elided), ("abc€d€", 0));
    }

    #[tokio::test]
    async fn output_streams_to_the_callback_while_the_command_still_runs() {
        let cancel = CancellationToken::new();
        let (callback, seen) = cancel_on("first", &cancel);

        let outcome = run_command(spec("echo first; sleep 30; echo never"), cancel, callback)
            .await
            .unwrap();

        // Cancelled rather than exited: "first" reached the callback while
        // the shell was still in `sleep 30`.
        assert_eq!(outcome.end, CommandEnd::Cancelled);
        assert_eq!(seen.lock().unwrap().as_str(), "first\n");
        assert_eq!(outcome.output, "first\n");
    }

    #[tokio::test]
    async fn timeout_kills_the_command_and_reports_timed_out_promptly() {
        let mut spec = spec("sleep 30");
        spec.timeout = Duration::from_millis(200);
        // Spawned: the future must be Send to run on the daemon's runtime.
        let outcome = tokio::spawn(run_command(spec, CancellationToken::new(), |_| {}))
            .await
            .unwrap()
            .unwrap();

        assert_eq!(outcome.end, CommandEnd::TimedOut);
        assert!(
            outcome.duration < Duration::from_secs(2),
            "{:?}",
            outcome.duration
        );
        assert_eq!(outcome.to_model_text(), "killed after timeout of 200ms");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn cancel_kills_the_command_and_its_grandchildren_promptly() {
        let cancel = CancellationToken::new();
        let (callback, seen) = cancel_on("\n", &cancel);

        let outcome = run_command(spec("sleep 30 & echo $!; wait"), cancel.clone(), callback)
            .await
            .unwrap();

        assert_eq!(outcome.end, CommandEnd::Cancelled);
        assert_eq!(
            outcome.to_model_text(),
            format!("aborted: cancelled by the user\n{}", outcome.output)
        );
        let grandchild: u32 = seen.lock().unwrap().trim().parse().unwrap();
        assert!(
            !process_is_alive(grandchild),
            "background sleep {grandchild} survived"
        );
        assert!(
            outcome.duration < Duration::from_secs(2),
            "{:?}",
            outcome.duration
        );
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn background_job_holding_the_pipes_is_killed_once_the_shell_exits() {
        let mut pid = String::new();
        let outcome = run_command(spec("sleep 30 & echo $!"), CancellationToken::new(), |p| {
            pid.push_str(p)
        })
        .await
        .unwrap();

        assert_eq!(outcome.end, CommandEnd::Exited(0));
        let grandchild: u32 = pid.trim().parse().unwrap();
        assert!(
            !process_is_alive(grandchild),
            "background sleep {grandchild} survived"
        );
        assert!(
            outcome.duration < Duration::from_secs(5),
            "{:?}",
            outcome.duration
        );
    }

    #[tokio::test]
    async fn dropping_the_future_kills_the_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("alive");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // Every process of the command holds the FIFO's write end (fd 3), so
        // EOF on our read end means they are all gone.
        let mut alive = tokio::net::unix::pipe::OpenOptions::new()
            .open_receiver(&fifo)
            .unwrap();
        let cmd = format!("exec 3>'{}'; sleep 30 & echo started; wait", fifo.display());
        let started = CancellationToken::new();
        let (callback, _) = cancel_on("started", &started);

        tokio::select! {
            outcome = run_command(spec(&cmd), CancellationToken::new(), callback) => {
                panic!("command ended on its own: {outcome:?}")
            }
            _ = started.cancelled() => {} // the run_command future is dropped here
        }

        let mut rest = Vec::new();
        let eof = tokio::time::timeout(Duration::from_secs(5), alive.read_to_end(&mut rest)).await;
        assert!(
            eof.is_ok(),
            "a process of the dropped command still holds the FIFO"
        );
    }

    #[tokio::test]
    async fn already_cancelled_token_never_starts_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let cancel = CancellationToken::new();
        cancel.cancel();

        let outcome = run_command(CommandSpec::new("touch ran", dir.path()), cancel, |_| {})
            .await
            .unwrap();

        assert_eq!(outcome.end, CommandEnd::Cancelled);
        assert!(!dir.path().join("ran").exists());
    }

    #[tokio::test]
    async fn secret_looking_variables_are_scrubbed_unless_allowed() {
        std::env::set_var("TANDEM_EXEC_TEST_FOO_API_KEY", "leaked-key");
        std::env::set_var("tandem_exec_test_lowercase_secret", "leaked-secret");
        std::env::set_var("TANDEM_EXEC_TEST_ALLOWED_TOKEN", "allowed-token");
        std::env::set_var("TANDEM_EXEC_TEST_PLAIN", "plain-value");
        let mut spec = spec("env");
        spec.env_allow = vec!["TANDEM_EXEC_TEST_ALLOWED_TOKEN".to_string()];

        let outcome = run(spec).await;

        let env = outcome.output;
        assert!(!env.contains("leaked"), "{env}");
        assert!(env.contains("TANDEM_EXEC_TEST_ALLOWED_TOKEN=allowed-token\n"));
        assert!(env.contains("TANDEM_EXEC_TEST_PLAIN=plain-value\n"));
        assert!(env.lines().any(|l| l.starts_with("PATH=")), "{env}");
        for set in ["TANDEM=1", "PAGER=cat", "GIT_PAGER=cat", "NO_COLOR=1"] {
            assert!(env.lines().any(|l| l == set), "{set} missing: {env}");
        }
    }

    #[test]
    fn secret_names_match_case_insensitively_and_allow_list_exactly() {
        let inherited = [
            ("GITHUB_TOKEN", "t"),
            ("aws_secret_access_key", "s"),
            ("DB_Password", "p"),
            ("GOOGLE_APPLICATION_CREDENTIALS", "c"),
            ("MY_KEY", "allowed"),
            ("HOME", "/home/u"),
            ("PAGER", "less"),
        ]
        .map(|(n, v)| (OsString::from(n), OsString::from(v)));

        let env = child_environment(inherited.into_iter(), &["MY_KEY".to_string()]);

        let names: Vec<_> = env.iter().map(|(n, _)| n.to_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "MY_KEY",
                "HOME",
                "TANDEM",
                "PAGER",
                "GIT_PAGER",
                "NO_COLOR",
                "GIT_TERMINAL_PROMPT"
            ]
        );
        let pager = env.iter().find(|(n, _)| n == "PAGER").unwrap();
        assert_eq!(pager.1, "cat");
    }

    #[tokio::test]
    async fn command_runs_in_the_given_workdir() {
        let dir = tempfile::tempdir().unwrap();
        let outcome = run(CommandSpec::new("pwd", dir.path())).await;
        let printed = PathBuf::from(outcome.output.trim_end());
        assert_eq!(
            printed.canonicalize().unwrap(),
            dir.path().canonicalize().unwrap()
        );
    }

    #[tokio::test]
    async fn missing_workdir_is_an_error_naming_it() {
        let error = run_command(
            CommandSpec::new("true", "/nonexistent/tandem-exec-test"),
            CancellationToken::new(),
            |_| {},
        )
        .await
        .unwrap_err();
        assert!(
            error.to_string().contains("/nonexistent/tandem-exec-test"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn multibyte_output_split_across_reads_stays_valid_utf8() {
        // An odd prefix and mixed 2/3/4-byte characters, far beyond one read
        // chunk: chunk boundaries are bound to fall inside characters.
        let mut spec = spec("printf a; yes 'é€😀' | head -n 20000");
        spec.max_output_bytes = 1 << 20;
        let mut streamed = String::new();

        let outcome = run_command(spec, CancellationToken::new(), |p| streamed.push_str(p))
            .await
            .unwrap();

        let expected = format!("a{}", "é€😀\n".repeat(20000));
        assert_eq!(outcome.output, expected);
        assert_eq!(streamed, expected);
    }

    #[test]
    fn decoder_carries_a_split_character_to_the_next_read() {
        let bytes = "a€😀".as_bytes();
        for split in 0..=bytes.len() {
            let mut decoder = Utf8Decoder::default();
            let mut text = decoder.decode(&bytes[..split]);
            text += &decoder.decode(&bytes[split..]);
            text += &decoder.finish();
            assert_eq!(text, "a€😀", "split at {split}");
        }
    }

    #[test]
    fn decoder_replaces_invalid_bytes_and_a_truncated_end() {
        let mut decoder = Utf8Decoder::default();
        assert_eq!(decoder.decode(b"a\xffb\xe2\x82"), "a\u{FFFD}b");
        assert_eq!(decoder.finish(), "\u{FFFD}");
    }

    #[test]
    fn model_text_formats_timeouts_readably() {
        assert_eq!(format_duration(Duration::from_secs(10)), "10s");
        assert_eq!(format_duration(Duration::from_millis(200)), "200ms");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
    }
}
