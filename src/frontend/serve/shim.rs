//! `tandem lsp --attach`: what an editor spawns when it should share the
//! user's serve. It speaks LSP on stdio exactly like `tandem lsp` and
//! relays to the serve over one WebSocket (see `relay`); closing it (a
//! window reload) ends only the relay — the serve's turns run on.
//!
//! What it changes on the way:
//! - editor → serve: a notification becomes a request with an id of ours
//!   (jsonrpsee handles each message on its own task, so order is kept by
//!   waiting for its answer before relaying the next message); an answer
//!   to one of the daemon's requests becomes `tandem/respond`;
//!   `tandem/loadSession` becomes `tandem/attachSession`, answered when
//!   the replay ends; after a `tandem/newSession` answer the shim attaches
//!   to the new session; before a task (`tandem/runTask`, `tandem.runTask`)
//!   it follows the session the task will run in (`tandem/taskSession`,
//!   then an attach without replay), so the task's updates, progress,
//!   question and inline edit reach this editor; `shutdown` is answered
//!   here, `exit` ends the shim.
//! - serve → editor: the messages inside the attach subscriptions are
//!   written out unwrapped, as the bytes they came in (`tandem/update`,
//!   `tandem/requestPermission`, `$/progress`, `$/cancelRequest`, ...);
//!   answers to our own requests are dropped.
//!
//! Invariant: the serve's messages reach stdout in the order it sent them,
//! so a turn's updates still precede its `tandem/prompt` answer.

use std::path::PathBuf;

use serde_json::{json, Value};
use tokio::io::AsyncRead;

use super::relay::{Dialect, Relay};
use crate::frontend::lsp::framing::{encode, Frame, FrameReader};
use crate::protocol::RUN_TASK_COMMAND;

/// LSP framing; a session's messages pass through untouched.
struct Lsp;

impl Dialect for Lsp {
    fn frame(&self, body: &[u8]) -> Vec<u8> {
        encode(body)
    }

    fn session_message(&self, raw: &str) -> Vec<Vec<u8>> {
        vec![raw.as_bytes().to_vec()]
    }

    /// `tandem/loadSession`'s answer: `{sessionId, replayed, mode}`.
    fn loaded(&self, id: Value, attached: &Value) -> Vec<Value> {
        vec![json!({"jsonrpc": "2.0", "id": id, "result": attached})]
    }
}

/// How the shim ended (like `tandem lsp`: `exit` without `shutdown` is 1).
pub async fn run<R>(stdin: R, home: PathBuf) -> u8
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let Some(relay) = Relay::open(&home, "tandem lsp --attach", Lsp).await else {
        return 1;
    };
    let code = from_editor(stdin, &relay).await;
    relay.close().await;
    code
}

async fn from_editor<R>(stdin: R, relay: &Relay) -> u8
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let mut frames = FrameReader::new(stdin);
    let mut shutdown = false;
    loop {
        let frame = tokio::select! {
            frame = frames.next() => frame,
            _ = relay.serve_gone.cancelled() => {
                tracing::error!("the serve closed the connection");
                return 1;
            }
        };
        let Some(frame) = frame else { return 0 };
        let message = match frame {
            Frame::Message { value, .. } => value,
            Frame::Invalid(error) => {
                relay.to_editor(&error.to_response());
                continue;
            }
        };
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_string);
        let id = message.get("id").cloned();
        match (method.as_deref(), id) {
            (Some("exit"), _) => return if shutdown { 0 } else { 1 },
            (Some("shutdown"), Some(id)) => {
                shutdown = true;
                relay.to_editor(&json!({"jsonrpc": "2.0", "id": id, "result": null}));
            }
            (Some("tandem/loadSession"), Some(id)) => {
                if let Err(mut answer) = add_load_servers(relay, &message["params"]).await {
                    answer["id"] = id;
                    relay.to_editor(&answer);
                    continue;
                }
                relay.attach_load(&message["params"], id);
            }
            (Some("tandem/newSession"), Some(id)) => {
                relay.new_session(id, message).await;
            }
            (Some("tandem/runTask"), Some(_)) => {
                let params = &message["params"];
                relay
                    .follow_task_session(
                        &params["task"],
                        &params["textDocument"]["uri"],
                        &params["sessionId"],
                    )
                    .await;
                relay.send(&message);
            }
            (Some("workspace/executeCommand"), Some(_))
                if message["params"]["command"] == RUN_TASK_COMMAND =>
            {
                let args = &message["params"]["arguments"][0];
                relay
                    .follow_task_session(&args["task"], &args["uri"], &args["sessionId"])
                    .await;
                relay.send(&message);
            }
            (Some(_), Some(_)) => relay.send(&message),
            // A notification: nothing after it until it has been handled.
            (Some(_), None) => relay.notify_in_order(message).await,
            (None, Some(_)) => relay.respond(&message),
            (None, None) => tracing::warn!("ignoring a message with neither method nor id"),
        }
    }
}

/// `tandem/loadSession`'s `config.mcpServers`, checked as `tandem lsp`
/// checks it and added to the session before the attach; the error
/// answer (without its id) when that fails.
async fn add_load_servers(relay: &Relay, params: &Value) -> Result<(), Value> {
    let config = params.get("config").cloned();
    let invalid =
        |message: String| json!({"jsonrpc": "2.0", "error": {"code": -32602, "message": message}});
    let servers =
        crate::frontend::mcp_servers::load_config_mcp_servers(config.clone()).map_err(invalid)?;
    if servers.is_empty() {
        return Ok(());
    }
    let params = json!({"sessionId": params["sessionId"], "mcpServers": config.map(|c| c["mcpServers"].clone())});
    match relay.call("tandem/addMcpServers", params).await {
        Some(answer) if answer.get("error").is_some() => Err(answer),
        Some(_) => Ok(()),
        None => Err(
            json!({"jsonrpc": "2.0", "error": {"code": -32603, "message": "the serve did not answer"}}),
        ),
    }
}
