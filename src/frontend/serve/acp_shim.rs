//! `tandem acp --attach`: ACP (newline-delimited JSON-RPC) on stdio, as
//! `tandem acp` speaks it, relayed to the user's serve. An ACP client sees
//! no difference between the two, except that turns survive the shim.
//!
//! ACP's methods become tandem's on the way (what comes back is mapped in
//! `acp_dialect`): `initialize` → the serve's `initialize` with what the
//! client can answer, answered as `tandem acp` answers; `session/new` →
//! `tandem/newSession`, its folder added to the connection's, its tasks
//! fetched (`tandem/listTasks`), then an attach whose `tandem/attached`
//! answers it; `session/load` and `session/resume` → `tandem/attachSession`
//! with and without replay, answered when the replay is out;
//! `session/list` → `tandem/listSessions`, paged here; `session/prompt` →
//! `tandem/prompt`, or `tandem/runTask` for a slash command;
//! `session/set_mode` and `session/set_config_option` → `tandem/setMode`,
//! or `tandem/setModel` for the model and effort options;
//! `session/cancel` → `tandem/cancel`.
//!
//! Invariant: as in `tandem acp`, a turn's `session/update`s precede its
//! `session/prompt` answer (the serve sends them in that order and the shim
//! keeps it), and a session's answer precedes its updates.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tower_lsp::lsp_types::Url;

use super::acp_dialect::{prompt_answer, Acp, AcpState};
use super::relay::{Ours, Relay};
use crate::core::history::SessionSummary;
use crate::frontend::acp::auth::authenticate;
use crate::frontend::acp::client::AcpCapabilities;
use crate::frontend::acp::commands::{carries_file, fileless_task_prompt, slash_command, target};
use crate::frontend::acp::fork::fork_message_id;
use crate::frontend::acp::model_options::model_switch;
use crate::frontend::acp::modes::MODE_OPTION;
use crate::frontend::acp::session::{absolute_cwd, initialize_result, list_page};
use crate::frontend::acp::wire::error_response;
use crate::frontend::additional_roots::{acp_additional_directories, additional_roots};
use crate::frontend::jsonrpc_body::{self, Body};
use crate::protocol::ContentBlock;
use crate::vocab::approval::ApprovalMode;

/// The editor side of the shim.
struct Shim {
    relay: Relay,
    state: AcpState,
    /// Folders already added to this connection's (a session's `cwd`).
    folders: Mutex<HashSet<PathBuf>>,
    /// `$TANDEM_HOME`: the configuration `authMethods` names the key of.
    home: PathBuf,
}

/// Runs until EOF on stdin or the serve going away.
pub async fn run<R>(stdin: R, home: PathBuf) -> u8
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let state = AcpState::default();
    let Some(relay) = Relay::open(&home, "tandem acp --attach", Acp(state.clone())).await else {
        return 1;
    };
    let shim = Shim {
        relay,
        state,
        folders: Mutex::new(HashSet::new()),
        home,
    };
    let mut lines = BufReader::new(stdin).lines();
    let code = loop {
        let next = tokio::select! {
            next = lines.next_line() => next,
            _ = shim.relay.serve_gone.cancelled() => break 1,
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
        // Parsed as `tandem acp` parses a line: a repeated top-level key
        // is refused, not read as its last value.
        match jsonrpc_body::parse(&text) {
            Ok(Body::Object(message)) => shim.on_editor_message(Value::Object(message)).await,
            Ok(Body::RepeatedKey { key, id }) => shim.relay.to_editor(&json!({"jsonrpc": "2.0",
                "id": id, "error": {"code": -32600,
                "message": format!("invalid request: {}", jsonrpc_body::repeated_key_message(&key))}})),
            Ok(Body::Array | Body::Scalar(_)) => shim.relay.to_editor(&json!({"jsonrpc": "2.0",
                "id": null, "error": {"code": -32600,
                "message": "invalid request: a JSON-RPC message must be one object"}})),
            Err(e) => shim.relay.to_editor(&json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": -32700, "message": format!("parse error: {e}")}})),
        }
    };
    shim.relay.close().await;
    code
}

fn empty_object(answer: Value) -> Value {
    match answer.get("error") {
        Some(_) => answer,
        None => json!({"jsonrpc": "2.0", "result": {}}),
    }
}

#[path = "acp_shim_rewind.rs"]
mod rewind;

impl Shim {
    fn reply(&self, id: &Option<Value>, result: Value) {
        if let Some(id) = id {
            self.relay
                .to_editor(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
        }
    }

    fn fail(&self, id: &Option<Value>, code: i64, message: &str) {
        if let Some(id) = id {
            self.relay.to_editor(&error_response(id, code, message));
        }
    }

    /// Relays a request of the editor's, its answer rewritten.
    fn relay_request(
        &self,
        id: Option<Value>,
        method: &str,
        params: Value,
        rewrite: fn(Value) -> Value,
    ) {
        let Some(id) = id else { return };
        self.relay.request(
            Ours::Reply { id, rewrite },
            json!({"jsonrpc": "2.0", "method": method, "params": params}),
        );
    }

    async fn on_editor_message(&self, message: Value) {
        let id = message.get("id").cloned();
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            if id.is_some() {
                // The editor's answer to one of the daemon's requests.
                self.relay.respond(&self.state.answer_for_serve(message));
            }
            return;
        };
        match method {
            "initialize" => {
                // What this client can answer, before any session exists.
                let caps = AcpCapabilities::from_initialize(&params);
                let tandem = json!({
                    "requestPermission": true,
                    "requestUserInput": caps.elicitation_form,
                    "readTextFile": caps.read_text_file,
                    "writeTextFile": caps.write_text_file,
                    "terminal": caps.terminal,
                });
                self.relay
                    .call(
                        "initialize",
                        json!({"capabilities": {"experimental": {"tandem": tandem}}}),
                    )
                    .await;
                self.reply(&id, initialize_result(&self.home));
            }
            "authenticate" => match authenticate(&self.home, &params) {
                Ok(result) => self.reply(&id, result),
                Err((code, message)) => self.fail(&id, code, &message),
            },
            "session/new" => self.new_session(id, &params).await,
            "session/load" => self.load(id, &params, true).await,
            "session/resume" => self.load(id, &params, false).await,
            "session/list" => self.list(id, &params).await,
            "session/close" => self.relay_request(
                id,
                "tandem/closeSession",
                json!({"sessionId": params["sessionId"]}),
                empty_object,
            ),
            "session/delete" => self.relay_request(
                id,
                "tandem/deleteSession",
                json!({"sessionId": params["sessionId"]}),
                empty_object,
            ),
            "session/fork" => self.fork(id, &params).await,
            "session/prompt" => self.prompt_or_rewind(id, params).await,
            "session/set_mode" => self.relay_request(
                id,
                "tandem/setMode",
                json!({"sessionId": params["sessionId"], "mode": params["modeId"]}),
                empty_object,
            ),
            "session/set_config_option" => self.set_config_option(id, &params).await,
            "session/cancel" => {
                // In order: nothing else is relayed until it has been handled.
                self.relay
                    .notify_in_order(json!({"jsonrpc": "2.0", "method": "tandem/cancel",
                        "params": {"sessionId": params["sessionId"]}}))
                    .await;
                self.reply(&id, json!({}));
            }
            // Every request of the client's is answered promptly or is a
            // prompt, which `session/cancel` ends.
            "$/cancel_request" => self.reply(&id, json!({})),
            other => self.fail(&id, -32601, &format!("method not found: {other}")),
        }
    }

    /// The mode (`tandem/setMode`), model or effort (`tandem/setModel`);
    /// answered with the full set of options, as `tandem acp` answers.
    async fn set_config_option(&self, id: Option<Value>, params: &Value) {
        let session_id = params["sessionId"].as_str().unwrap_or_default();
        let config = params["configId"].as_str().unwrap_or_default();
        let value = params["value"].as_str().unwrap_or_default();
        let configs = self.state.configs();
        let (method, call) = if config == MODE_OPTION {
            (
                "tandem/setMode",
                json!({"sessionId": session_id, "mode": params["value"]}),
            )
        } else if let Some((model, effort)) =
            model_switch(config, value, &configs.models(session_id))
        {
            (
                "tandem/setModel",
                json!({"sessionId": session_id, "model": model, "effort": effort}),
            )
        } else {
            return self.fail(
                &id,
                -32602,
                &format!("invalid params: unknown config option `{config}`"),
            );
        };
        let Some(answer) = self.relay.call(method, call).await else {
            return self.fail(&id, -32603, "the serve did not answer");
        };
        if let Some(error) = answer.get("error") {
            if let Some(id) = id {
                self.relay
                    .to_editor(&json!({"jsonrpc": "2.0", "id": id, "error": error}));
            }
            return;
        }
        let mode = answer["result"]["mode"]
            .as_str()
            .and_then(|m| m.parse::<ApprovalMode>().ok());
        if mode.is_none() {
            if let Ok(models) = serde_json::from_value(answer["result"].clone()) {
                configs.set_models(session_id, models);
            }
        }
        self.reply(
            &id,
            json!({"configOptions": configs.options(session_id, mode)}),
        );
    }

    /// Adds a session's folder to this connection's (once): its
    /// `.tandem/config.toml` tasks are offered, and a task's file in it
    /// resolves, as with `tandem acp`.
    async fn add_folder(&self, cwd: &Path) {
        let added = self
            .folders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(cwd.to_path_buf());
        if !added {
            return;
        }
        let uri = Url::from_file_path(cwd)
            .map(|u| u.to_string())
            .unwrap_or_default();
        self.relay
            .notify_in_order(json!({"jsonrpc": "2.0",
                "method": "workspace/didChangeWorkspaceFolders",
                "params": {"event": {"added": [{"uri": uri, "name": cwd.display().to_string()}],
                                     "removed": []}}}))
            .await;
    }

    /// Fetches the tasks of `cwd` as the session's slash commands.
    async fn fetch_tasks(&self, session_id: &str, cwd: &Path) {
        let answer = self
            .relay
            .call("tandem/listTasks", json!({"workspaceFolder": cwd}))
            .await;
        let tasks = answer
            .and_then(|a| a["result"]["tasks"].as_array().cloned())
            .unwrap_or_default();
        self.state.set_tasks(session_id, tasks);
    }

    /// Attaches to `session_id`; the load (or new session) request `id` is
    /// answered once the replay is out.
    /// `dirs`: the roots `session/load` or `session/resume` adds.
    fn attach(&self, id: Value, session_id: &str, replay: bool, dirs: &[String]) {
        let mut params = json!({"sessionId": session_id, "replay": replay});
        if !dirs.is_empty() {
            params["additionalDirectories"] = json!(dirs);
        }
        self.relay.request(
            Ours::Attach {
                load: Some(id),
                done: None,
            },
            json!({"jsonrpc": "2.0", "method": "tandem/attachSession", "params": params}),
        );
    }

    async fn new_session(&self, id: Option<Value>, params: &Value) {
        let Some(id) = id else { return };
        let checked = absolute_cwd(params).and_then(|cwd| Ok((cwd, checked_directories(params)?)));
        let (cwd, dirs) = match checked {
            Ok(checked) => checked,
            Err(e) => return self.fail(&Some(id), -32602, &e),
        };
        let mut new = new_session_params(&cwd, params);
        if !dirs.is_empty() {
            new["additionalDirectories"] = json!(dirs);
        }
        let Some(answer) = self.relay.call("tandem/newSession", new).await else {
            return self.fail(&Some(id), -32603, "the serve did not answer");
        };
        let Some(session_id) = answer["result"]["sessionId"].as_str() else {
            let mut answer = answer;
            answer["id"] = id;
            return self.relay.to_editor(&answer);
        };
        self.add_folder(&cwd).await;
        self.fetch_tasks(session_id, &cwd).await;
        self.state.made(session_id);
        // No replay (there is nothing yet); `tandem/attached` answers.
        self.attach(id, session_id, false, &[]);
    }

    /// The client's `mcpServers` for `session_id` (`tandem/addMcpServers`);
    /// `None` when that failed and request `id` was answered with why.
    async fn add_mcp_servers(&self, id: Value, session_id: &str, params: &Value) -> Option<Value> {
        let Some(list) = params.get("mcpServers").filter(|l| {
            l.as_array().is_some_and(|a| !a.is_empty()) || !l.is_array() && !l.is_null()
        }) else {
            return Some(id);
        };
        let params = json!({"sessionId": session_id, "mcpServers": list});
        match self.relay.call("tandem/addMcpServers", params).await {
            Some(answer) if answer.get("error").is_some() => {
                let mut answer = answer;
                answer["id"] = id;
                self.relay.to_editor(&answer);
                None
            }
            Some(_) => Some(id),
            None => {
                self.fail(&Some(id), -32603, "the serve did not answer");
                None
            }
        }
    }

    /// `session/fork`: `tandem/forkSession`, then, as for a new session,
    /// the folder, its tasks and an attach without replay, whose
    /// `tandem/attached` answers with the fork's id.
    async fn fork(&self, id: Option<Value>, params: &Value) {
        let Some(id) = id else { return };
        let checked = absolute_cwd(params)
            .and_then(|cwd| Ok((cwd, fork_message_id(params)?, checked_directories(params)?)));
        let (cwd, message_id, dirs) = match checked {
            Ok(checked) => checked,
            Err(e) => return self.fail(&Some(id), -32602, &e),
        };
        let mut fork = json!({"sessionId": params["sessionId"]});
        if let Some(message_id) = message_id {
            fork["messageId"] = json!(message_id);
        }
        if !dirs.is_empty() {
            fork["additionalDirectories"] = json!(dirs);
        }
        let Some(answer) = self.relay.call("tandem/forkSession", fork).await else {
            return self.fail(&Some(id), -32603, "the serve did not answer");
        };
        let Some(session_id) = answer["result"]["sessionId"].as_str() else {
            let mut answer = answer;
            answer["id"] = id;
            return self.relay.to_editor(&answer);
        };
        let Some(id) = self.add_mcp_servers(id, session_id, params).await else {
            return;
        };
        self.add_folder(&cwd).await;
        self.fetch_tasks(session_id, &cwd).await;
        self.state.made(session_id);
        self.attach(id, session_id, false, &[]);
    }

    async fn load(&self, id: Option<Value>, params: &Value, replay: bool) {
        let Some(id) = id else { return };
        let Some(session_id) = params["sessionId"].as_str() else {
            return self.fail(
                &Some(id),
                -32602,
                "invalid params: missing string field `sessionId`",
            );
        };
        if params.get("cwd").is_some() {
            match absolute_cwd(params) {
                Ok(cwd) => {
                    self.add_folder(&cwd).await;
                    self.fetch_tasks(session_id, &cwd).await;
                }
                Err(e) => return self.fail(&Some(id), -32602, &e),
            }
        }
        let dirs = match checked_directories(params) {
            Ok(dirs) => dirs,
            Err(e) => return self.fail(&Some(id), -32602, &e),
        };
        let Some(id) = self.add_mcp_servers(id, session_id, params).await else {
            return;
        };
        if replay {
            self.state.replaying(session_id);
        }
        self.attach(id, session_id, replay, &dirs);
    }

    async fn list(&self, id: Option<Value>, params: &Value) {
        let Some(answer) = self.relay.call("tandem/listSessions", json!({})).await else {
            return self.fail(&id, -32603, "the serve did not answer");
        };
        let sessions: Vec<SessionSummary> =
            serde_json::from_value(answer["result"]["sessions"].clone()).unwrap_or_default();
        match list_page(sessions, params) {
            Ok(result) => self.reply(&id, result),
            Err(e) => self.fail(&id, -32602, &e),
        }
    }

    /// A prompt, or a slash command: the task runs in this session on the
    /// file the prompt carries.
    fn prompt(&self, id: Option<Value>, params: Value) {
        let session_id = params["sessionId"].as_str().unwrap_or_default();
        let blocks: Vec<ContentBlock> =
            serde_json::from_value(params["prompt"].clone()).unwrap_or_default();
        let command = slash_command(&blocks).and_then(|(name, instruction)| {
            let template = self.state.task_template(session_id, &name)?;
            Some((name, instruction, template))
        });
        let Some((name, instruction, template)) = command else {
            return self.relay_request(id, "tandem/prompt", params, prompt_answer);
        };
        if !carries_file(&blocks) {
            // As in `tandem acp`: an ordinary turn on what the prompt carries.
            let prompt = fileless_task_prompt(&template, &instruction, &blocks);
            let params = json!({"sessionId": session_id, "prompt": prompt});
            return self.relay_request(id, "tandem/prompt", params, prompt_answer);
        }
        let (path, range) = match target(&name, &blocks) {
            Ok(target) => target,
            Err(e) => return self.fail(&id, -32602, &format!("invalid params: {e}")),
        };
        let uri = Url::from_file_path(&path)
            .map(|u| u.to_string())
            .unwrap_or_default();
        let mut task = json!({"task": name, "sessionId": session_id,
            "textDocument": {"uri": uri},
            "range": {"start": {"line": range.start.line, "character": range.start.character},
                      "end": {"line": range.end.line, "character": range.end.character}}});
        if !instruction.is_empty() {
            task["instruction"] = json!(instruction);
        }
        self.relay_request(id, "tandem/runTask", task, prompt_answer);
    }
}

/// ACP's `additionalDirectories`, each checked to be a directory here
/// too, so a bad one is refused before anything reaches the serve.
fn checked_directories(params: &Value) -> Result<Vec<String>, String> {
    let dirs = acp_additional_directories(params)?;
    additional_roots(&dirs)?;
    Ok(dirs)
}

/// `tandem/newSession` for ACP's `session/new`: the folder, and the
/// client's MCP servers in `config.mcpServers` (the serve adds them to the
/// session without logging them).
fn new_session_params(cwd: &std::path::Path, params: &Value) -> Value {
    match params.get("mcpServers") {
        Some(list) if !list.is_null() => {
            json!({"workspaceFolder": cwd, "config": {"mcpServers": list}})
        }
        _ => json!({"workspaceFolder": cwd}),
    }
}
