//! `tandem acp --attach`: ACP (newline-delimited JSON-RPC) on stdio, as
//! `tandem acp` speaks it, relayed to the user's serve.
//!
//! ACP's methods become tandem's on the way: `session/new` →
//! `tandem/newSession` (then an attach), `session/load` →
//! `tandem/attachSession` (answered `null` when the replay ends),
//! `session/prompt` → `tandem/prompt` (its stop reason mapped onto ACP's),
//! `session/set_mode` → `tandem/setMode`, `session/cancel` →
//! `tandem/cancel`. Back, `tandem/update` becomes `session/update` with only
//! the variants ACP has, and `tandem/requestPermission` becomes
//! `session/request_permission`.
//!
//! Invariant: as in `tandem acp`, a turn's `session/update`s precede its
//! `session/prompt` answer (the serve sends them in that order and the shim
//! keeps it).

use std::path::PathBuf;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

use super::relay::{Dialect, Ours, Relay};
use crate::frontend::acp::ACP_PROTOCOL_VERSION;

/// Newline-delimited JSON; a session's messages mapped onto ACP's.
struct Acp;

impl Dialect for Acp {
    fn frame(&self, body: &[u8]) -> Vec<u8> {
        let mut line = Vec::with_capacity(body.len() + 1);
        line.extend_from_slice(body);
        line.push(b'\n');
        line
    }

    fn session_message(&self, raw: &str) -> Vec<Vec<u8>> {
        let Ok(message) = serde_json::from_str::<Value>(raw) else {
            return Vec::new();
        };
        to_acp(&message)
            .iter()
            .filter_map(|m| serde_json::to_vec(m).ok())
            .collect()
    }

    /// `session/load`'s result.
    fn loaded(&self, _attached: &Value) -> Value {
        Value::Null
    }
}

/// ACP's stop reasons are fewer than tandem's; an `error` turn is a
/// JSON-RPC error, as in `tandem acp`.
fn acp_prompt_answer(answer: Value) -> Value {
    let Some(result) = answer.get("result") else {
        return answer;
    };
    let reason = match result["stopReason"].as_str().unwrap_or_default() {
        "error" => {
            let message = result["message"].as_str().unwrap_or("the turn failed");
            return json!({"jsonrpc": "2.0", "error": {"code": -32603, "message": message}});
        }
        "max_tokens" | "token_budget" => "max_tokens",
        "max_iterations" => "max_turn_requests",
        "refusal" => "refusal",
        "cancelled" => "cancelled",
        _ => "end_turn",
    };
    json!({"jsonrpc": "2.0", "result": {"stopReason": reason}})
}

fn empty_object(answer: Value) -> Value {
    match answer.get("error") {
        Some(_) => answer,
        None => json!({"jsonrpc": "2.0", "result": {}}),
    }
}

/// A serve message for the editor, in ACP's terms (`None`: not for ACP).
fn to_acp(message: &Value) -> Vec<Value> {
    match message.get("method").and_then(Value::as_str) {
        Some("tandem/update") => {
            let params = &message["params"];
            let update = &params["update"];
            let session = &params["sessionId"];
            let send = |update: Value| {
                json!({"jsonrpc": "2.0", "method": "session/update",
                       "params": {"sessionId": session, "update": update}})
            };
            match update["sessionUpdate"].as_str().unwrap_or_default() {
                "user_message" => update["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|block| {
                        send(json!({"sessionUpdate": "user_message_chunk", "content": block}))
                    })
                    .collect(),
                "input_status"
                | "usage"
                | "turn_end"
                | "agent_message_reset"
                | "context_compacted" => Vec::new(),
                _ => vec![send(update.clone())],
            }
        }
        Some("tandem/requestPermission") => {
            let mut request = message.clone();
            request["method"] = json!("session/request_permission");
            vec![request]
        }
        Some("workspace/applyEdit") => Vec::new(),
        _ => vec![message.clone()],
    }
}

/// Runs until EOF on stdin or the serve going away.
pub async fn run<R>(stdin: R, home: PathBuf) -> u8
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let Some(relay) = Relay::open(&home, "tandem acp --attach", Acp).await else {
        return 1;
    };
    // The serve must know this client answers permission requests.
    relay.request(
        Ours::Ignore,
        json!({"jsonrpc": "2.0", "method": "initialize", "params": {"capabilities":
            {"experimental": {"tandem": {"requestPermission": true}}}}}),
    );
    let mut lines = BufReader::new(stdin).lines();
    let code = loop {
        let next = tokio::select! {
            next = lines.next_line() => next,
            _ = relay.serve_gone.cancelled() => break 1,
        };
        let text = match next {
            Ok(Some(text)) => text,
            Ok(None) => break 0,
            Err(e) => {
                tracing::warn!("cannot read stdin: {e}");
                break 0;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(&text) {
            Ok(message) => from_editor(message, &relay).await,
            Err(e) => relay.to_editor(&json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": -32700, "message": format!("parse error: {e}")}})),
        }
    };
    relay.close().await;
    code
}

async fn from_editor(message: Value, relay: &Relay) {
    let id = message.get("id").cloned();
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        if id.is_some() {
            // The editor's answer to one of the daemon's requests.
            relay.respond(&message);
        }
        return;
    };
    let reply = |result: Value| {
        if let Some(id) = &id {
            relay.to_editor(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
        }
    };
    let (tandem_method, tandem_params, rewrite): (&str, Value, fn(Value) -> Value) = match method {
        "initialize" => {
            return reply(json!({
                "protocolVersion": ACP_PROTOCOL_VERSION,
                "agentCapabilities": {
                    "loadSession": true,
                    "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
                },
                "authMethods": [],
                "agentInfo": {"name": "tandem", "version": env!("CARGO_PKG_VERSION")},
            }))
        }
        "authenticate" => return reply(json!({})),
        "session/new" => (
            "tandem/newSession",
            json!({"workspaceFolder": params["cwd"]}),
            |a| a,
        ),
        "session/load" => {
            if let Some(id) = id {
                relay.attach(&params["sessionId"], Some(id));
            }
            return;
        }
        "session/prompt" => ("tandem/prompt", params.clone(), acp_prompt_answer),
        "session/set_mode" => (
            "tandem/setMode",
            json!({"sessionId": params["sessionId"], "mode": params["modeId"]}),
            empty_object,
        ),
        "session/cancel" => {
            // In order: nothing else is relayed until it has been handled.
            relay
                .notify_in_order(json!({"jsonrpc": "2.0", "method": "tandem/cancel",
                    "params": {"sessionId": params["sessionId"]}}))
                .await;
            return;
        }
        other => {
            if let Some(id) = id {
                relay.to_editor(&json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": format!("method not found: {other}")}}));
            }
            return;
        }
    };
    let Some(id) = id else { return };
    let message = json!({"jsonrpc": "2.0", "method": tandem_method, "params": tandem_params});
    if tandem_method == "tandem/newSession" {
        relay.new_session(id, message).await;
    } else {
        relay.request(Ours::Reply { id, rewrite }, message);
    }
}
