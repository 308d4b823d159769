//! `exec_command` in the client's terminal: `terminal/create`, the tool
//! call's content pointed at the terminal (so the client shows it live),
//! `terminal/wait_for_exit` raced against the timeout and the cancel,
//! `terminal/kill` when either wins, `terminal/output`, `terminal/release`.
//!
//! Invariant: a created terminal is always released, and killed first
//! unless it exited, even when the caller stops waiting: the run is a task
//! of its own that watches the cancel token.

use std::sync::Arc;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

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
    let params = json!({
        "sessionId": session_id,
        "command": "sh",
        "args": ["-c", command.command],
        "cwd": command.cwd,
        "outputByteLimit": command.output_byte_limit,
    });
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
    out.send_json(&json!({
        "jsonrpc": "2.0",
        "method": update_method,
        "params": {"sessionId": session_id, "update": {
            "sessionUpdate": "tool_call_update",
            "toolCallId": command.tool_call_id,
            "content": [{"type": "terminal", "terminalId": terminal_id}],
        }},
    }));
    let terminal = json!({"sessionId": session_id, "terminalId": terminal_id});
    // Requests after the run are not tied to the (maybe cancelled) turn.
    let cleanup = CancellationToken::new();
    let waited = tokio::select! {
        exit = outgoing.request("terminal/wait_for_exit", terminal.clone(), &cleanup) => Waited::Exit(exit),
        _ = tokio::time::sleep(command.timeout) => Waited::TimedOut,
        _ = cancel.cancelled() => Waited::Cancelled,
    };
    let end = match waited {
        Waited::Exit(BridgeOutcome::Answered(status)) => exit_end(&status),
        Waited::Exit(other) => {
            // The client could not say; make sure nothing keeps running.
            let _ = outgoing
                .request("terminal/kill", terminal.clone(), &cleanup)
                .await;
            let _ = outgoing
                .request("terminal/release", terminal, &cleanup)
                .await;
            return match other {
                BridgeOutcome::Unavailable(why) => BridgeOutcome::Unavailable(why),
                _ => BridgeOutcome::Cancelled,
            };
        }
        Waited::TimedOut | Waited::Cancelled => {
            if let BridgeOutcome::Unavailable(why) = outgoing
                .request("terminal/kill", terminal.clone(), &cleanup)
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
        .request("terminal/output", terminal.clone(), &cleanup)
        .await;
    if let BridgeOutcome::Unavailable(why) = outgoing
        .request("terminal/release", terminal, &cleanup)
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
