//! `exec_command` in the client's terminal: `terminal/create`, the tool
//! call's content pointed at the terminal (so the client shows it live),
//! `terminal/wait_for_exit` raced against the timeout and the cancel,
//! `terminal/kill` when either wins, `terminal/output`, `terminal/release`.
//!
//! Invariant: a created terminal is always released, and killed first
//! unless it exited, even when the caller stops waiting: the run is a task
//! of its own that watches the cancel token. Every answer is read as ACP's
//! response type ([`typed_answer`](crate::frontend::answers::typed_answer)).

use std::sync::Arc;

use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::session_updates::UpdateMessage;
use super::wire::to_wire;
use crate::frontend::answers::typed_answer;
use crate::frontend::lsp::outgoing::Outgoing;
use crate::frontend::lsp::OutboundQueue;
use crate::vocab::bridge::{BridgeOutcome, TerminalCommand, TerminalEnd, TerminalRun};

/// Runs `command` on its own task and waits for it; the tool call's
/// terminal is shown with an `update_method` notification (`tandem acp`:
/// `session/update`; the serve: `tandem/update`, to the owning client).
pub(crate) async fn run(
    outgoing: Arc<Outgoing>,
    out: OutboundQueue,
    update_method: &'static str,
    command: TerminalCommand,
    cancel: &CancellationToken,
) -> BridgeOutcome<TerminalRun> {
    let cancel = cancel.clone();
    match tokio::spawn(run_task(outgoing, out, update_method, command, cancel)).await {
        Ok(outcome) => outcome,
        Err(e) => BridgeOutcome::Unavailable(format!("the terminal task failed: {e}")),
    }
}

async fn run_task(
    outgoing: Arc<Outgoing>,
    out: OutboundQueue,
    update_method: &'static str,
    command: TerminalCommand,
    cancel: CancellationToken,
) -> BridgeOutcome<TerminalRun> {
    let session_id = command.session_id.clone();
    let params = to_wire(
        acp::CreateTerminalRequest::new(session_id.clone(), "sh")
            .args(vec!["-c".to_string(), command.command])
            .cwd(command.cwd)
            .output_byte_limit(command.output_byte_limit as u64),
    );
    let created = outgoing.request("terminal/create", params, &cancel).await;
    let terminal_id = match typed_answer(
        "terminal/create",
        created,
        |created: acp::CreateTerminalResponse| created.terminal_id.to_string(),
    ) {
        BridgeOutcome::Answered(id) => id,
        BridgeOutcome::Cancelled => return BridgeOutcome::Cancelled,
        BridgeOutcome::Unavailable(why) => return BridgeOutcome::Unavailable(why),
    };
    let shown = acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(
        command.tool_call_id,
        acp::ToolCallUpdateFields::new().content(vec![acp::ToolCallContent::Terminal(
            acp::Terminal::new(terminal_id.clone()),
        )]),
    ));
    match serde_json::to_vec(&UpdateMessage::on(update_method, &session_id, shown)) {
        Ok(body) => out.send_body(body),
        Err(e) => tracing::error!("cannot serialize the terminal's update: {e}"),
    }
    let terminal = Terminal {
        session_id,
        terminal_id,
    };
    // Requests after the run are not tied to the (maybe cancelled) turn.
    let cleanup = CancellationToken::new();
    let waited = tokio::select! {
        exit = outgoing.request("terminal/wait_for_exit", terminal.wait_for_exit(), &cleanup) => Waited::Exit(exit),
        _ = tokio::time::sleep(command.timeout) => Waited::TimedOut,
        _ = cancel.cancelled() => Waited::Cancelled,
    };
    // What the model reads besides the output: a cleanup answer that was
    // malformed (the command may still run, or its terminal stay open).
    let mut notes = Vec::new();
    let end = match waited {
        Waited::Exit(exit) => match typed_answer("terminal/wait_for_exit", exit, exit_end) {
            BridgeOutcome::Answered(end) => end,
            other => {
                // The client could not say; make sure nothing keeps running.
                let _ = outgoing
                    .request("terminal/kill", terminal.kill(), &cleanup)
                    .await;
                let _ = outgoing
                    .request("terminal/release", terminal.release(), &cleanup)
                    .await;
                return match other {
                    BridgeOutcome::Unavailable(why) => BridgeOutcome::Unavailable(why),
                    _ => BridgeOutcome::Cancelled,
                };
            }
        },
        Waited::TimedOut | Waited::Cancelled => {
            let killed = outgoing
                .request("terminal/kill", terminal.kill(), &cleanup)
                .await;
            cleanup_answer::<acp::KillTerminalResponse>("terminal/kill", killed, &mut notes);
            if matches!(waited, Waited::TimedOut) {
                TerminalEnd::TimedOut
            } else {
                TerminalEnd::Cancelled
            }
        }
    };
    let output = outgoing
        .request("terminal/output", terminal.output(), &cleanup)
        .await;
    let released = outgoing
        .request("terminal/release", terminal.release(), &cleanup)
        .await;
    cleanup_answer::<acp::ReleaseTerminalResponse>("terminal/release", released, &mut notes);
    typed_answer(
        "terminal/output",
        output,
        |output: acp::TerminalOutputResponse| {
            let mut text = output.output;
            for note in notes {
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(&format!("[{note}]"));
            }
            TerminalRun {
                end,
                output: text,
                truncated: output.truncated,
            }
        },
    )
}

/// The answer to a cleanup request (`terminal/kill`, `terminal/release`):
/// an error answer is logged; a malformed one also becomes a note the
/// model reads with the output.
fn cleanup_answer<T: serde::de::DeserializeOwned>(
    method: &str,
    answer: BridgeOutcome<Value>,
    notes: &mut Vec<String>,
) {
    let answered = matches!(answer, BridgeOutcome::Answered(_));
    if let BridgeOutcome::Unavailable(why) = typed_answer(method, answer, |_: T| ()) {
        if answered {
            notes.push(why);
        } else {
            tracing::warn!("{method}: {why}");
        }
    }
}

/// A created terminal: the params of the requests that follow.
struct Terminal {
    session_id: String,
    terminal_id: String,
}

impl Terminal {
    fn wait_for_exit(&self) -> Value {
        to_wire(acp::WaitForTerminalExitRequest::new(
            self.session_id.clone(),
            self.terminal_id.clone(),
        ))
    }

    fn kill(&self) -> Value {
        to_wire(acp::KillTerminalRequest::new(
            self.session_id.clone(),
            self.terminal_id.clone(),
        ))
    }

    fn output(&self) -> Value {
        to_wire(acp::TerminalOutputRequest::new(
            self.session_id.clone(),
            self.terminal_id.clone(),
        ))
    }

    fn release(&self) -> Value {
        to_wire(acp::ReleaseTerminalRequest::new(
            self.session_id.clone(),
            self.terminal_id.clone(),
        ))
    }
}

enum Waited {
    Exit(BridgeOutcome<Value>),
    TimedOut,
    Cancelled,
}

/// `{exitCode, signal}` of `terminal/wait_for_exit`.
fn exit_end(exit: acp::WaitForTerminalExitResponse) -> TerminalEnd {
    let status = exit.exit_status;
    match (status.exit_code, status.signal) {
        (_, Some(signal)) => TerminalEnd::Signalled(signal),
        (Some(code), None) => TerminalEnd::Exited(i32::try_from(code).unwrap_or(-1)),
        (None, None) => TerminalEnd::Exited(-1),
    }
}
