//! The Agent Client Protocol frontend: `tandem acp` (or `tandem` with input
//! starting with `{`), newline-delimited JSON-RPC on stdio, for Zed,
//! JetBrains, CodeCompanion, agent-shell and other ACP clients.
//!
//! - [`wire`]: framing (one message per line, bytes until parsed) and
//!   JSON-RPC envelopes;
//! - [`session`]: the agent's methods;
//! - [`client`]: the [`ClientBridge`](crate::vocab::bridge::ClientBridge)
//!   over the client's methods, with [`client_fs`] (`fs/*`) and
//!   [`elicitation`] (`elicitation/create`) and [`terminal`]
//!   (`terminal/*`);
//! - [`auth`]: `authMethods` and `authenticate` (the model's key variable);
//! - [`modes`]: approval modes as session modes and config options;
//! - [`model_options`]: the model and effort as config options, usage;
//! - [`commands`]: the keybinding tasks as slash commands;
//! - [`mapping`]: session events as `session/update`s, stop reasons.
//!
//! Invariant: like the LSP frontend, one writer owns stdout and a turn's
//! updates are queued before its `session/prompt` response; no input line
//! ends the connection, only the end of input.

pub(crate) mod auth;
pub(crate) mod client;
pub(crate) mod client_fs;
pub(crate) mod commands;
pub(crate) mod elicitation;
pub(crate) mod facilities;
pub(crate) mod fork;
pub(crate) mod mapping;
pub(crate) mod model_options;
pub(crate) mod modes;
pub(crate) mod permission;
pub(crate) mod rewind_command;
pub(crate) mod session;
pub(crate) mod session_updates;
pub(crate) mod terminal;
pub(crate) mod wire;

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use tokio::io::{AsyncRead, BufReader};

use self::client::AcpClient;
use self::mapping::AcpSink;
use self::session::Agent;
use self::wire::{error_response, next_line, Incoming};
use super::lsp::outgoing::Outgoing;
use super::lsp::Ending;
use super::stdout::stdout_writer_with;
use super::stdout::{ChunkBody, Framer, OutboundQueue};
use crate::core::client::Client as CoreClient;
use crate::core::client::OneBridge;
use crate::core::daemon::{Daemon, DaemonOptions};
use crate::core::log::Durability;
use crate::core::log::EventSink;
use crate::vocab::bridge::ClientBridge;

/// The ACP protocol version this frontend speaks.
pub const ACP_PROTOCOL_VERSION: u16 = 1;

/// Serves ACP on stdin/stdout until EOF.
pub async fn serve<R>(stdin: R, home: PathBuf, durability: Durability)
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let connection = Connection::new(stdout_writer_with(wire::line, mapping::chunk_notification));
    let daemon = Daemon::new(DaemonOptions {
        home,
        durability,
        sink: connection.sink.clone(),
    });
    let editor = daemon.connect(Arc::new(OneBridge(connection.client.clone())));
    connection.run(daemon, editor, stdin, Ending::Daemon).await
}

/// One ACP client's connection: its writer, its requests to the client
/// and its `session/update` mapping, made before the daemon (stdio) or
/// for a daemon already serving others (`tandem serve`).
pub struct Connection {
    out: OutboundQueue,
    client: Arc<AcpClient>,
    sink: Arc<AcpSink>,
}

impl Connection {
    /// A connection writing through `out` (framed by [`wire::line`],
    /// chunks by [`mapping::chunk_notification`]).
    pub fn new(out: OutboundQueue) -> Connection {
        Connection {
            client: AcpClient::new(out.clone()),
            sink: Arc::new(AcpSink::new(out.clone())),
            out,
        }
    }

    /// The queue of a connection over a stream of the serve's: its writer
    /// frames and maps as over stdio.
    pub fn framing() -> (Framer, ChunkBody) {
        (wire::line, mapping::chunk_notification)
    }

    /// Where this connection hears the sessions it follows.
    pub fn sink(&self) -> Arc<dyn EventSink> {
        self.sink.clone()
    }

    /// How this connection's client is asked.
    pub fn bridge(&self) -> Arc<dyn ClientBridge> {
        self.client.clone()
    }

    /// Reads `input` until its end, as `editor` of `daemon`.
    pub async fn run<R>(
        self,
        daemon: Arc<Daemon>,
        editor: Arc<CoreClient>,
        input: R,
        ending: Ending,
    ) where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let Connection { out, client, sink } = self;
        let agent = Arc::new(Agent {
            daemon: daemon.clone(),
            editor: editor.clone(),
            client: client.clone(),
            sink,
            cwds: Default::default(),
        });
        read_messages(&agent, &client, &out, input).await;
        client.outgoing.fail_all();
        match ending {
            Ending::Daemon => {
                daemon.shutdown().await;
                // The client is gone: its chats that never got a prompt go too.
                daemon.drop_empty_sessions();
            }
            // Its turns run on for the other clients.
            Ending::Connection { .. } => daemon.disconnect(&editor),
        }
        out.close().await;
    }
}

/// Takes in the client's messages until the end of input.
async fn read_messages<R>(
    agent: &Arc<Agent>,
    client: &Arc<AcpClient>,
    out: &OutboundQueue,
    input: R,
) where
    R: AsyncRead + Unpin + Send + 'static,
{
    let mut reader = BufReader::new(input);
    let mut buf = Vec::new();
    loop {
        let message = match next_line(&mut reader, &mut buf).await {
            Incoming::Message(message) => message,
            Incoming::Malformed(error) => {
                out.send_json(&error);
                continue;
            }
            Incoming::Blank => continue,
            Incoming::End => break,
        };
        if Outgoing::is_ours(&message) {
            client.outgoing.complete(&message);
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
        let agent = agent.clone();
        let out = out.clone();
        // Every request runs on its own task: a prompt is answered when its
        // turn ends, and must not hold up cancel or other sessions.
        tokio::spawn(async move {
            let reply = agent.handle(&method, &params, id.as_ref()).await;
            if let (Some(id), Some(reply)) = (id, reply) {
                let message = match reply {
                    Ok(result) => {
                        out.send_json(&wire::result_response(&id, &result));
                        agent.after_reply(&method, &params, &result).await;
                        return;
                    }
                    Err(mut error) => {
                        error["id"] = id;
                        error
                    }
                };
                out.send_json(&message);
            }
        });
    }
}
