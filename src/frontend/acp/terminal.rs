//! `exec_command` in the client's terminal: `terminal/create`, the tool
//! call's content pointed at the terminal (so the client shows it live),
//! `terminal/wait_for_exit` raced against the timeout and the cancel,
//! `terminal/kill` when either wins, `terminal/output`, `terminal/release`.
//!
//! Invariant: a created terminal is always released, and killed first
//! unless it exited, even when the caller stops waiting: the run is a task
//! of its own that watches the cancel token.

use std::sync::Arc;

use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::session_updates::UpdateMessage;
use super::wire::to_wire;
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
    let created = match outgoing.request("terminal/create", params, &cancel).await {
        BridgeOutcome::Answered(result) => result,
        BridgeOutcome::Cancelled => return BridgeOutcome::Cancelled,
        BridgeOutcome::Unavailable(why) => return BridgeOutcome::Unavailable(why),
    };
    let Some(terminal_id) = created["terminalId"].as_str().map(str::to_string) else {
        return BridgeOutcome::Unavailable(format!(
            "the client's answer to terminal/create has no `terminalId`: {created}"
        ));
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
    let end = match waited {
        Waited::Exit(BridgeOutcome::Answered(status)) => exit_end(&status),
        Waited::Exit(other) => {
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
        Waited::TimedOut | Waited::Cancelled => {
            if let BridgeOutcome::Unavailable(why) = outgoing
                .request("terminal/kill", terminal.kill(), &cleanup)
                .await
            {
                tracing::warn!("terminal/kill: {why}");
            }
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
    if let BridgeOutcome::Unavailable(why) = outgoing
        .request("terminal/release", terminal.release(), &cleanup)
        .await
    {
        tracing::warn!("terminal/release: {why}");
    }
    match output {
        BridgeOutcome::Answered(output) => BridgeOutcome::Answered(TerminalRun {
            end,
            output: output["output"].as_str().unwrap_or_default().to_string(),
            truncated: output["truncated"] == true,
        }),
        BridgeOutcome::Cancelled => BridgeOutcome::Cancelled,
        BridgeOutcome::Unavailable(why) => BridgeOutcome::Unavailable(why),
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
fn exit_end(status: &Value) -> TerminalEnd {
    match (status["exitCode"].as_i64(), status["signal"].as_str()) {
        (_, Some(signal)) => TerminalEnd::Signalled(signal.to_string()),
        (Some(code), None) => TerminalEnd::Exited(code as i32),
        (None, None) => TerminalEnd::Exited(-1),
    }
}
