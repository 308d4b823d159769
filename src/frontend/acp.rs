//! The Agent Client Protocol frontend: `tandem acp` (or `tandem` with input
//! starting with `{`), newline-delimited JSON-RPC on stdio, for Zed and other
//! ACP clients.
//!
//! Methods: `initialize`, `authenticate`, `session/new`, `session/load`,
//! `session/prompt`, `session/set_mode`, and the `session/cancel`
//! notification; the agent sends `session/update` and asks
//! `session/request_permission`. The updates are tandem's own (`tandem/update`
//! reuses ACP's variant shapes); the tandem-only variants (`input_status`,
//! `usage`, `turn_end`, `agent_message_reset`, `context_compacted`) are not
//! sent, and `user_message` becomes ACP's `user_message_chunk`.
//!
//! Invariant: like the LSP frontend, one writer owns stdout and a turn's
//! updates are queued before its `session/prompt` response.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

use super::lsp::outgoing::Outgoing;
use super::lsp::{stdout_writer, OutboundQueue};
use super::updates::{daemon_error_parts, session_update, user_content};
use crate::core::daemon::{Daemon, DaemonError, DaemonOptions, NewSession};
use crate::core::log::{Durability, EventSink, LoggedEvent};
use crate::protocol::{ContentBlock, SessionUpdate};
use crate::vocab::bridge::ClientAbilities;
use crate::vocab::event::StopReason;

/// The ACP protocol version this frontend speaks.
pub const ACP_PROTOCOL_VERSION: u32 = 1;

/// Turns session events into ACP `session/update` notifications.
struct AcpSink {
    out: OutboundQueue,
}

impl EventSink for AcpSink {
    fn on_event(&self, session_id: &str, event: &LoggedEvent) {
        let update = match session_update(&event.event) {
            // ACP streams the user's message as chunks.
            Some(SessionUpdate::UserMessage { content, .. }) => {
                for block in content {
                    self.send(
                        session_id,
                        json!({"sessionUpdate": "user_message_chunk", "content": block}),
                    );
                }
                return;
            }
            Some(
                SessionUpdate::InputStatus { .. }
                | SessionUpdate::Usage { .. }
                | SessionUpdate::TurnEnd { .. }
                | SessionUpdate::AgentMessageReset {}
                | SessionUpdate::ContextCompacted { .. },
            )
            | None => return,
            Some(update) => update,
        };
        match serde_json::to_value(&update) {
            Ok(update) => self.send(session_id, update),
            Err(e) => tracing::error!("cannot serialize an ACP update: {e}"),
        }
    }
}

impl AcpSink {
    fn send(&self, session_id: &str, update: Value) {
        self.out.send_json(&json!({
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": session_id, "update": update},
        }));
    }
}

/// ACP's stop reasons are fewer than tandem's; an `error` turn becomes a
/// JSON-RPC error instead.
fn acp_stop_reason(reason: StopReason) -> &'static str {
    match reason {
        // A spent money or token budget is closest to ACP's token limit.
        StopReason::MaxTokens | StopReason::TokenBudget | StopReason::BudgetExceeded => {
            "max_tokens"
        }
        StopReason::MaxIterations => "max_turn_requests",
        StopReason::Refusal => "refusal",
        StopReason::Cancelled => "cancelled",
        _ => "end_turn",
    }
}

/// ACP frames a message as one line.
fn line(body: &[u8]) -> Vec<u8> {
    let mut line = Vec::with_capacity(body.len() + 1);
    line.extend_from_slice(body);
    line.push(b'\n');
    line
}

fn error_response(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn daemon_error(id: &Value, error: DaemonError) -> Value {
    let (code, message, data) = daemon_error_parts(error);
    let mut response = error_response(id, code, &message);
    if let Some(data) = data {
        response["error"]["data"] = data;
    }
    response
}

fn string_param<'a>(params: &'a Value, field: &str) -> Result<&'a str, String> {
    params
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("invalid params: missing string field `{field}`"))
}

/// Serves ACP on stdin/stdout until EOF.
pub async fn serve<R>(stdin: R, home: PathBuf, durability: Durability)
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let out = stdout_writer(line);
    let outgoing = Outgoing::with_methods(
        out.clone(),
        "session/request_permission",
        "tandem/requestUserInput",
    );
    let daemon = Daemon::new(DaemonOptions {
        home,
        durability,
        sink: Arc::new(AcpSink { out: out.clone() }),
        bridge: outgoing.clone(),
    });
    let mut lines = BufReader::new(stdin).lines();
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!("cannot read stdin: {e}");
                break;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let message: Value = match serde_json::from_str(&line) {
            Ok(message) => message,
            Err(e) => {
                out.send_json(&error_response(
                    &Value::Null,
                    -32700,
                    &format!("parse error: {e}"),
                ));
                continue;
            }
        };
        if Outgoing::is_ours(&message) {
            outgoing.complete(&message);
            continue;
        }
        let Some(method) = message
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            let id = message.get("id").cloned().unwrap_or(Value::Null);
            out.send_json(&error_response(&id, -32600, "invalid request: no `method`"));
            continue;
        };
        let id = message.get("id").cloned();
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        let daemon = daemon.clone();
        let out = out.clone();
        let outgoing = outgoing.clone();
        // Every request runs on its own task: a prompt is answered when its
        // turn ends, and must not hold up cancel or other sessions.
        tokio::spawn(async move {
            let reply = handle(&daemon, &outgoing, &method, &params, id.as_ref()).await;
            if let (Some(id), Some(reply)) = (id, reply) {
                let message = match reply {
                    Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                    Err(error) => {
                        let mut error = error;
                        error["id"] = id;
                        error
                    }
                };
                out.send_json(&message);
            }
        });
    }
    outgoing.fail_all();
    daemon.shutdown().await;
    out.close().await;
}

/// One request or notification; `None` for notifications.
async fn handle(
    daemon: &Arc<Daemon>,
    outgoing: &Arc<Outgoing>,
    method: &str,
    params: &Value,
    id: Option<&Value>,
) -> Option<Result<Value, Value>> {
    let no_id = Value::Null;
    let rid = id.unwrap_or(&no_id);
    let bad = |message: String| Some(Err(error_response(rid, -32602, &message)));
    let result = match method {
        "initialize" => {
            outgoing.set_abilities(ClientAbilities {
                request_permission: true,
                ..ClientAbilities::default()
            });
            Ok(json!({
                "protocolVersion": ACP_PROTOCOL_VERSION,
                "agentCapabilities": {
                    "loadSession": true,
                    "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
                },
                "authMethods": [],
                "agentInfo": {"name": "tandem", "version": env!("CARGO_PKG_VERSION")},
            }))
        }
        "authenticate" => Ok(json!({})),
        "session/new" => {
            let cwd = match string_param(params, "cwd") {
                Ok(cwd) => PathBuf::from(cwd),
                Err(e) => return bad(e),
            };
            if !cwd.is_absolute() {
                return bad(format!(
                    "invalid params: `cwd` must be absolute, got `{}`",
                    cwd.display()
                ));
            }
            match daemon.new_session(NewSession {
                workspace_folder: Some(cwd),
                title: None,
                config: None,
            }) {
                Ok(session) => Ok(json!({"sessionId": session.id})),
                Err(e) => Err(daemon_error(rid, e)),
            }
        }
        "session/load" => {
            let session_id = match string_param(params, "sessionId") {
                Ok(id) => id,
                Err(e) => return bad(e),
            };
            match daemon.load_session(session_id) {
                Ok(_) => Ok(Value::Null),
                Err(e) => Err(daemon_error(rid, e)),
            }
        }
        "session/prompt" => {
            let session_id = match string_param(params, "sessionId") {
                Ok(id) => id.to_string(),
                Err(e) => return bad(e),
            };
            let prompt: Vec<ContentBlock> = match serde_json::from_value(params["prompt"].clone()) {
                Ok(prompt) => prompt,
                Err(e) => return bad(format!("invalid params: `prompt`: {e}")),
            };
            if prompt.is_empty() {
                return bad("invalid params: `prompt` is empty".to_string());
            }
            let receipt = match daemon.prompt(&session_id, user_content(prompt)) {
                Ok((_, receipt)) => receipt,
                Err(e) => return Some(Err(daemon_error(rid, e))),
            };
            match receipt.await {
                Ok(receipt) if receipt.stop_reason == StopReason::Error => Err(error_response(
                    rid,
                    -32603,
                    receipt.message.as_deref().unwrap_or("the turn failed"),
                )),
                Ok(receipt) => Ok(json!({"stopReason": acp_stop_reason(receipt.stop_reason)})),
                Err(_) => Err(error_response(
                    rid,
                    -32603,
                    "the session stopped before the turn ended",
                )),
            }
        }
        "session/set_mode" => {
            let (session_id, mode) = match (
                string_param(params, "sessionId"),
                string_param(params, "modeId"),
            ) {
                (Ok(s), Ok(m)) => (s, m),
                (Err(e), _) | (_, Err(e)) => return bad(e),
            };
            let mode: crate::vocab::approval::ApprovalMode = match mode.parse() {
                Ok(mode) => mode,
                Err(e) => return bad(format!("invalid params: modeId: {e}")),
            };
            match daemon.session(session_id) {
                Ok(session) => {
                    session.set_mode(mode);
                    Ok(json!({}))
                }
                Err(e) => Err(daemon_error(rid, e)),
            }
        }
        "session/cancel" => {
            if let Ok(session_id) = string_param(params, "sessionId") {
                if let Err(e) = daemon.cancel(session_id, false) {
                    tracing::warn!("session/cancel: {e}");
                }
            }
            return None;
        }
        other => Err(error_response(
            rid,
            -32601,
            &format!("method not found: {other}"),
        )),
    };
    id.map(|_| result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_reasons_map_onto_acps_five() {
        assert_eq!(acp_stop_reason(StopReason::EndTurn), "end_turn");
        assert_eq!(
            acp_stop_reason(StopReason::MaxIterations),
            "max_turn_requests"
        );
        assert_eq!(acp_stop_reason(StopReason::TokenBudget), "max_tokens");
        assert_eq!(acp_stop_reason(StopReason::BudgetExceeded), "max_tokens");
        assert_eq!(acp_stop_reason(StopReason::CompactionSpiral), "end_turn");
        assert_eq!(acp_stop_reason(StopReason::Cancelled), "cancelled");
        assert_eq!(acp_stop_reason(StopReason::LoopDetected), "end_turn");
    }
}
