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
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::{mpsc, oneshot};

use super::shim::{lock, receive, Link, Ours, Relay};
use crate::frontend::acp::ACP_PROTOCOL_VERSION;
use crate::frontend::lsp::{stdout_writer, OutboundQueue};

fn line(body: &[u8]) -> Vec<u8> {
    let mut line = Vec::with_capacity(body.len() + 1);
    line.extend_from_slice(body);
    line.push(b'\n');
    line
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
    let Some(link) = Link::open(&home, "tandem acp --attach").await else {
        return 1;
    };
    let out = stdout_writer(line);
    let relay = Arc::new(Mutex::new(Relay::default()));
    // The serve must know this client answers permission requests.
    let ours = lock(&relay).id(Ours::Ignore);
    let _ = link.to_ws.send(
        json!({"jsonrpc": "2.0", "id": ours, "method": "initialize", "params": {"capabilities":
            {"experimental": {"tandem": {"requestPermission": true}}}}})
        .to_string(),
    );
    let mut reader = tokio::spawn(from_serve(
        link.rx,
        out.clone(),
        link.to_ws.clone(),
        relay.clone(),
    ));
    let mut lines = BufReader::new(stdin).lines();
    let code = loop {
        let next = tokio::select! {
            next = lines.next_line() => next,
            _ = &mut reader => break 1,
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
            Ok(message) => from_editor(message, &out, &link.to_ws, &relay).await,
            Err(e) => out.send_json(&json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": -32700, "message": format!("parse error: {e}")}})),
        }
    };
    drop(link.to_ws);
    let _ = tokio::time::timeout(Duration::from_secs(2), link.writer).await;
    out.close().await;
    code
}

async fn from_editor(
    message: Value,
    out: &OutboundQueue,
    to_ws: &mpsc::UnboundedSender<String>,
    relay: &Mutex<Relay>,
) {
    let id = message.get("id").cloned();
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        if let Some(id) = id {
            // The editor's answer to one of the daemon's requests.
            let ours = lock(relay).id(Ours::Ignore);
            let mut answer = json!({"id": id});
            match message.get("error") {
                Some(error) => answer["error"] = error.clone(),
                None => answer["result"] = message.get("result").cloned().unwrap_or(Value::Null),
            }
            let respond =
                json!({"jsonrpc": "2.0", "id": ours, "method": "tandem/respond", "params": answer});
            let _ = to_ws.send(respond.to_string());
        }
        return;
    };
    let reply = |result: Value| {
        if let Some(id) = &id {
            out.send_json(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
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
            let Some(id) = id else { return };
            let ours = lock(relay).id(Ours::Attach { load: Some(id) });
            let attach = json!({"jsonrpc": "2.0", "id": ours, "method": "tandem/attachSession",
                "params": {"sessionId": params["sessionId"]}});
            let _ = to_ws.send(attach.to_string());
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
            let (done_tx, done_rx) = oneshot::channel();
            let ours = lock(relay).id(Ours::Ack(done_tx));
            let cancel = json!({"jsonrpc": "2.0", "id": ours, "method": "tandem/cancel",
                "params": {"sessionId": params["sessionId"]}});
            let _ = to_ws.send(cancel.to_string());
            let _ = tokio::time::timeout(Duration::from_secs(10), done_rx).await;
            return;
        }
        other => {
            if let Some(id) = id {
                out.send_json(&json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": format!("method not found: {other}")}}));
            }
            return;
        }
    };
    let Some(id) = id else { return };
    let what = if tandem_method == "tandem/newSession" {
        Ours::NewSession { id }
    } else {
        Ours::Reply { id, rewrite }
    };
    let ours = lock(relay).id(what);
    let request =
        json!({"jsonrpc": "2.0", "id": ours, "method": tandem_method, "params": tandem_params});
    let _ = to_ws.send(request.to_string());
}

async fn from_serve(
    mut rx: super::client::WsReceiver,
    out: OutboundQueue,
    to_ws: mpsc::UnboundedSender<String>,
    relay: Arc<Mutex<Relay>>,
) {
    while let Some(message) = receive(&mut rx).await {
        if message["method"] == "tandem/sessionMessage" {
            let params = &message["params"];
            let inner = &params["result"];
            if inner["method"] == "tandem/attached" {
                if let Some(load) = lock(&relay)
                    .loads
                    .remove(&params["subscription"].to_string())
                {
                    out.send_json(&json!({"jsonrpc": "2.0", "id": load, "result": null}));
                }
                continue;
            }
            for message in to_acp(inner) {
                out.send_json(&message);
            }
            continue;
        }
        let ours = message["id"]
            .as_str()
            .and_then(|id| lock(&relay).ours.remove(id));
        match ours {
            Some(Ours::Ack(done)) => {
                let _ = done.send(());
            }
            Some(Ours::Ignore) | None => {}
            Some(Ours::Reply { id, rewrite }) => {
                let mut answer = rewrite(message);
                answer["id"] = id;
                out.send_json(&answer);
            }
            Some(Ours::NewSession { id }) => {
                if let Some(session_id) = message["result"]["sessionId"].as_str() {
                    // Attached before the editor hears of the session.
                    let ours = lock(&relay).id(Ours::Attach { load: None });
                    let attach = json!({"jsonrpc": "2.0", "id": ours,
                        "method": "tandem/attachSession", "params": {"sessionId": session_id}});
                    let _ = to_ws.send(attach.to_string());
                }
                let mut answer = message.clone();
                answer["id"] = id;
                out.send_json(&answer);
            }
            Some(Ours::Attach { load }) => match (message.get("result"), load) {
                (Some(subscription), Some(load)) => {
                    lock(&relay).loads.insert(subscription.to_string(), load);
                }
                (None, Some(load)) => {
                    let mut answer = message.clone();
                    answer["id"] = load;
                    out.send_json(&answer);
                }
                _ => {}
            },
        }
    }
}
