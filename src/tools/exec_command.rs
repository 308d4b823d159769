//! `exec_command {cmd, workdir?, timeout_ms?}`: runs a command through the
//! user's shell in the workspace, streaming its output to the editor.
//!
//! Approval (review mode asks first) happens in the driver before `run`;
//! this tool confines the working directory and runs the command: in the
//! sandbox (`[sandbox]`) with the local runner, or, when it runs unconfined
//! (sandbox off, or an unsandboxed run the user allowed), in the client's
//! terminal when it has one (ACP `terminal/*`), else with the local runner.
//! A client's terminal cannot be confined, so a sandboxed command never
//! runs there. In review mode, a command the sandbox refused (a `[sandbox]`
//! note) is offered again outside it, as a second permission request that
//! says what was refused.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::exec::sandbox::{denial, Confinement, SandboxPolicy};
use super::exec::{
    run_command, CommandEnd, CommandSpec, DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TIMEOUT,
};
use super::{parse_args, ApprovalClass, ExecMode, Tool, ToolContext, ToolError, ToolEvent};
use crate::vocab::approval::ApprovalMode;
use crate::vocab::bridge::{BridgeOutcome, PermissionRequest, TerminalCommand, TerminalEnd};
use crate::vocab::tool_call::{ToolKind, WaitingFor};

/// Longest timeout a call may ask for.
const MAX_TIMEOUT: Duration = Duration::from_secs(600);

/// Most output of one call streamed to the editor. Every streamed piece is
/// a session event (a log line and a `tandem/update`), so without a bound
/// `yes` would grow the log and the editor's queue by megabytes a second
/// until its timeout. The model's result keeps head and tail either way.
const MAX_STREAMED_BYTES: usize = 1 << 20;

pub struct ExecCommand;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    cmd: String,
    #[serde(default)]
    workdir: Option<String>,
    #[serde(default)]
    timeout_ms: Option<u64>,
    /// Asks the user to run this command outside the sandbox (the driver's
    /// approval gate asks; Codex's name and shape).
    #[serde(default, rename = "with_escalated_permissions")]
    _with_escalated_permissions: Option<bool>,
    /// Why, shown to the user with the request (by the approval gate).
    #[serde(default, rename = "justification")]
    _justification: Option<String>,
}

#[async_trait::async_trait]
impl Tool for ExecCommand {
    fn name(&self) -> &'static str {
        "exec_command"
    }

    fn description(&self) -> &'static str {
        "Run a shell command in the workspace and return its exit code and output (stdout and \
         stderr interleaved, long output shortened in the middle). Use for builds, tests, git and \
         other tools; prefer read_file/grep/list_files for looking at code."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "cmd": {"type": "string", "description": "The command line, run with the user's shell (`$SHELL -c`)."},
                "workdir": {"type": "string", "description": "Directory to run in, relative to the workspace root (default: the root)."},
                "timeout_ms": {"type": "integer", "minimum": 1, "description": "Kill the command after this many milliseconds (default 10000, at most 600000)."},
                "with_escalated_permissions": {"type": "boolean", "description": "Run outside the sandbox (which allows writes only inside the workspace and the temp dir, and no network). Only after a command failed because of the sandbox; the user is asked first."},
                "justification": {"type": "string", "description": "With with_escalated_permissions: one sentence telling the user why the command needs to run outside the sandbox."}
            },
            "required": ["cmd"],
            "additionalProperties": false
        })
    }

    fn mode(&self) -> ExecMode {
        ExecMode::Exclusive
    }

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::Execute
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Execute
    }

    fn title(&self, args: &Value) -> String {
        let cmd = args.get("cmd").and_then(Value::as_str).unwrap_or("?");
        format!("Run `{cmd}`")
    }

    async fn run(&self, raw_args: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let args: Args = parse_args(self.name(), &raw_args)?;
        if args.cmd.trim().is_empty() {
            return Err(ToolError::new("`cmd` is empty"));
        }
        let workdir = ctx
            .workspace
            .resolve(args.workdir.as_deref().unwrap_or("."))
            .map_err(|e| ToolError::new(e.to_string()))?;
        if !workdir.is_dir() {
            return Err(ToolError::new(format!(
                "workdir `{}` is not a directory",
                args.workdir.unwrap_or_default()
            )));
        }
        let timeout = args
            .timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_TIMEOUT)
            .min(MAX_TIMEOUT);
        let confinement = if ctx.unsandboxed {
            Confinement::Off
        } else {
            Confinement::plan(&ctx.sandbox, &ctx.workspace.roots())
        };
        let policy = match confinement {
            Confinement::Sandboxed(policy) => Some(policy),
            Confinement::Off => None,
            // The driver asks the user (and sets `unsandboxed`) before an
            // unconfined run where the sandbox is missing; a caller that
            // did not must not get one silently.
            Confinement::Unavailable(why) => {
                return Err(ToolError::new(format!(
                    "the command was not run: the sandbox is unavailable ({why}) and the user has not allowed an unsandboxed run"
                )));
            }
        };
        let Some(policy) = policy else {
            return run_unconfined(args.cmd, workdir, timeout, ctx).await;
        };
        let (text, refused) = run_local(args.cmd.clone(), &workdir, timeout, Some(&policy), ctx)
            .await
            .map(|(text, output)| {
                let notes = denial::explain(&output, &policy, &workdir);
                (with_notes(text, &notes), notes)
            })?;
        if refused.is_empty() || ctx.mode != ApprovalMode::Review {
            return Ok(text);
        }
        // In review mode the user allowed this command; the sandbox refused
        // it. Running it outside is a second, separate request that says
        // why, never an option beside the sandboxed run.
        match ask_to_leave_the_sandbox(&args.cmd, raw_args, &refused, ctx).await {
            Some(true) => {
                let again = run_unconfined(args.cmd, workdir, timeout, ctx).await?;
                Ok(format!(
                    "[sandbox] the sandbox refused the first run ({}); the user allowed running it again outside the sandbox\n{again}",
                    refused[0]
                ))
            }
            Some(false) => Ok(with_notes(
                text,
                &["the user declined to run it outside the sandbox".to_string()],
            )),
            None => Ok(text),
        }
    }
}

/// Asks the user to run `cmd` again outside the sandbox, saying what the
/// sandbox refused; `None` when nobody could be asked or they dismissed
/// it. The decision is logged as the call's `approval_decided`.
async fn ask_to_leave_the_sandbox(
    cmd: &str,
    raw_input: Value,
    refused: &[String],
    ctx: &ToolContext,
) -> Option<bool> {
    if !ctx.bridge.abilities().request_permission || ctx.cancel.is_cancelled() {
        return None;
    }
    (ctx.emit)(ToolEvent::Waiting(WaitingFor::Permission));
    let request = PermissionRequest {
        session_id: ctx.session_id.clone(),
        tool_call_id: ctx.call_id.clone(),
        title: format!("Run `{cmd}` outside the sandbox? The sandbox refused it"),
        kind: ToolKind::Execute,
        raw_input,
        always_scope: None,
        text: Some(format!(
            "$ {cmd}\n\nThe sandbox refused it: {}\n\nOutside the sandbox it runs with your full rights and the network.",
            refused.join("; ")
        )),
        diffs: Vec::new(),
    };
    match ctx.bridge.request_permission(request, &ctx.cancel).await {
        BridgeOutcome::Answered(answer) => {
            let allows = answer.choice.allows();
            (ctx.emit)(ToolEvent::Decided {
                decision: answer.choice.option_id(),
                unsandboxed: allows,
            });
            Some(allows)
        }
        BridgeOutcome::Cancelled => {
            if !ctx.cancel.is_cancelled() {
                (ctx.emit)(ToolEvent::Decided {
                    decision: "dismissed",
                    unsandboxed: false,
                });
            }
            None
        }
        BridgeOutcome::Unavailable(_) => None,
    }
}

/// An unconfined run: in the client's terminal when it has one (the user
/// watches it there), else with the local runner.
async fn run_unconfined(
    cmd: String,
    workdir: std::path::PathBuf,
    timeout: Duration,
    ctx: &ToolContext,
) -> Result<String, ToolError> {
    if ctx.bridge.facilities().terminal {
        return in_client_terminal(cmd, workdir, timeout, ctx).await;
    }
    run_local(cmd, &workdir, timeout, None, ctx)
        .await
        .map(|(text, _)| text)
}

/// Runs `cmd` with the local runner (in the sandbox when `policy` says
/// so), streaming its output: the model's text and the whole output.
async fn run_local(
    cmd: String,
    workdir: &std::path::Path,
    timeout: Duration,
    policy: Option<&SandboxPolicy>,
    ctx: &ToolContext,
) -> Result<(String, String), ToolError> {
    let mut spec = CommandSpec::new(cmd, workdir.to_path_buf());
    spec.env_allow = ctx.env_allow.clone();
    spec.timeout = timeout;
    spec.sandbox = policy.cloned();
    // The runner gets a task of its own. The driver drops this future
    // as soon as the turn is cancelled; dropped mid-run, the runner
    // would leave the killed shell to tokio's best-effort orphan
    // reaping, which can miss it and leave a zombie. In its own task it
    // sees the cancel, kills the group and reaps the shell itself.
    let cancel = ctx.cancel.child_token();
    let stream_open = Arc::new(Mutex::new(true));
    let _stop = StopOnDrop {
        cancel: cancel.clone(),
        stream_open: stream_open.clone(),
    };
    let emit = ctx.emit.clone();
    let mut stream = StreamBudget::new(MAX_STREAMED_BYTES);
    let runner = tokio::spawn(run_command(spec, cancel, move |piece| {
        // Held while emitting, so no output is recorded after the call
        // has been given up on (and so, maybe, after its result).
        let open = stream_open.lock();
        if *open {
            if let Some(piece) = stream.take(piece) {
                emit(ToolEvent::Output(piece))
            }
        }
    }));
    let outcome = runner
        .await
        .map_err(|e| ToolError::new(format!("the command runner failed: {e}")))?
        .map_err(|e| ToolError::new(e.to_string()))?;
    let text = outcome.to_model_text();
    match outcome.end {
        // The driver reports a cancelled call as aborted; say the same.
        CommandEnd::Cancelled => Err(ToolError::new(text)),
        _ => Ok((text, outcome.output)),
    }
}

/// `text` (a status line, then the output) with the sandbox's notes, each
/// on a line of its own, between the status and the output: read first.
fn with_notes(text: String, notes: &[String]) -> String {
    if notes.is_empty() {
        return text;
    }
    let (status, output) = text.split_once('\n').unwrap_or((&text, ""));
    let mut noted = status.to_string();
    for note in notes {
        noted.push_str("\n[sandbox] ");
        noted.push_str(note);
    }
    if !output.is_empty() {
        noted.push('\n');
        noted.push_str(output);
    }
    noted
}

/// Stops a call's runner when the call is given up on: closes its output
/// stream and cancels it (a no-op once the runner has finished).
/// Runs the command in the client's terminal (ACP `terminal/*`), where the
/// user watches it; the same output cap and timeout hold, and a cancel (or
/// the driver dropping the call) kills it there.
async fn in_client_terminal(
    cmd: String,
    cwd: std::path::PathBuf,
    timeout: Duration,
    ctx: &ToolContext,
) -> Result<String, ToolError> {
    let cancel = ctx.cancel.child_token();
    let _stop = StopOnDrop {
        cancel: cancel.clone(),
        stream_open: Arc::new(Mutex::new(false)),
    };
    let command = TerminalCommand {
        session_id: ctx.session_id.clone(),
        tool_call_id: ctx.call_id.clone(),
        command: cmd,
        cwd,
        output_byte_limit: DEFAULT_MAX_OUTPUT_BYTES,
        timeout,
    };
    let run = match ctx.bridge.run_in_terminal(command, &cancel).await {
        BridgeOutcome::Answered(run) => run,
        BridgeOutcome::Cancelled => {
            return Err(ToolError::new("aborted: cancelled by the user"));
        }
        BridgeOutcome::Unavailable(why) => {
            return Err(ToolError::new(format!(
                "the command could not run in the editor's terminal: {why}"
            )));
        }
    };
    let status = match &run.end {
        TerminalEnd::Exited(code) => format!("exit code {code}"),
        TerminalEnd::Signalled(signal) => format!("killed by signal {signal}"),
        TerminalEnd::TimedOut => format!("killed after timeout of {}ms", timeout.as_millis()),
        TerminalEnd::Cancelled => return Err(ToolError::new("aborted: cancelled by the user")),
    };
    let mut text = status;
    if run.truncated {
        text.push_str(&format!(
            "\n[... the start of the output was dropped; the last {} KiB follow ...]",
            DEFAULT_MAX_OUTPUT_BYTES / 1024
        ));
    }
    if !run.output.is_empty() {
        text.push('\n');
        text.push_str(&run.output);
    }
    Ok(text)
}

struct StopOnDrop {
    cancel: CancellationToken,
    stream_open: Arc<Mutex<bool>>,
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        *self.stream_open.lock() = false;
        self.cancel.cancel();
    }
}

/// What is left of a call's streaming allowance.
struct StreamBudget {
    left: usize,
    max: usize,
    stopped: bool,
}

impl StreamBudget {
    fn new(max: usize) -> Self {
        StreamBudget {
            left: max,
            max,
            stopped: false,
        }
    }

    /// The part of `piece` to stream: all of it while the budget lasts,
    /// then, once output goes past it, a cut with a note, then nothing.
    fn take(&mut self, piece: &str) -> Option<String> {
        if self.stopped {
            return None;
        }
        if piece.len() <= self.left {
            self.left -= piece.len();
            return Some(piece.to_string());
        }
        let cut = piece.floor_char_boundary(self.left);
        self.left = 0;
        self.stopped = true;
        Some(format!(
            "{}\n[... streaming stopped after {} KiB; the command goes on, and its result keeps the head and tail of the output ...]\n",
            &piece[..cut],
            self.max / 1024
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_stops_at_the_budget_with_one_note_and_a_char_boundary_cut() {
        let mut budget = StreamBudget::new(10);
        assert_eq!(budget.take("12345").as_deref(), Some("12345"));
        let cut = budget.take("abcd😀xyz").unwrap();
        assert!(
            cut.starts_with("abcd\n[... streaming stopped after"),
            "{cut}"
        );
        assert_eq!(budget.take("more"), None);
    }

    #[test]
    fn output_that_ends_exactly_at_the_budget_gets_no_note_until_more_comes() {
        let mut budget = StreamBudget::new(4);
        assert_eq!(budget.take("abcd").as_deref(), Some("abcd"));
        let note = budget.take("e").unwrap();
        assert!(note.starts_with("\n[... streaming stopped after"), "{note}");
        assert_eq!(budget.take("f"), None);
    }
}
