//! The agent's methods: `initialize`, `authenticate`, `session/new`,
//! `session/load` (replay), `session/resume` (no replay), `session/list`,
//! `session/close`, `session/delete`,
//! `session/prompt`, `session/set_mode`, `session/set_config_option`, and
//! the `session/cancel` notification. Each turns params into a daemon call
//! and its outcome into a result or a JSON-RPC error.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_client_protocol_schema::v1 as acp;
use parking_lot::Mutex;
use serde_json::{Map, Value};

use super::client::{AcpCapabilities, AcpClient};
use super::commands;
use super::mapping::{prompt_result, AcpSink};
use super::model_options::{model_switch, session_setup};
use super::modes::MODE_OPTION;
use super::wire::to_wire;
use super::wire::{daemon_error, error_response, string_param};
use super::ACP_PROTOCOL_VERSION;
use crate::core::client::Client;
use crate::core::daemon::{Daemon, NewSession};
use crate::core::history::{SessionState, SessionSummary};
use crate::core::tasks::run::TaskError;
use crate::frontend::additional_roots::{acp_additional_directories, additional_roots};
use crate::frontend::models::model_state;
use crate::frontend::updates::user_content;
use crate::protocol::ContentBlock;
use crate::vocab::approval::ApprovalMode;
use crate::vocab::event::StopReason;

/// Sessions per page of `session/list`.
pub(super) const LIST_PAGE: usize = 20;

/// What a method handler reaches.
#[path = "rewind_prompt.rs"]
mod rewind_prompt;
use super::rewind_command::{rewind_command, rewind_command_entry};
use super::session_updates::tandem_meta;

pub(super) struct Agent {
    pub(super) daemon: Arc<Daemon>,
    pub(super) client: Arc<AcpClient>,
    /// The editor as the core knows it: its folders and documents.
    pub(super) editor: Arc<Client>,
    pub(super) sink: Arc<AcpSink>,
    /// Each session's `cwd`, where its slash commands come from.
    pub(super) cwds: Mutex<HashMap<String, PathBuf>>,
}

type Reply = Result<Value, Value>;

impl Agent {
    /// One request or notification; `None` for notifications.
    pub(super) async fn handle(
        &self,
        method: &str,
        params: &Value,
        id: Option<&Value>,
    ) -> Option<Reply> {
        let no_id = Value::Null;
        let rid = id.unwrap_or(&no_id);
        let result = match method {
            "initialize" => Ok(self.initialize(params)),
            "authenticate" => super::auth::authenticate(self.daemon.home(), params)
                .map_err(|(code, message)| error_response(rid, code, &message)),
            "session/new" => self.new_session(params, rid),
            "session/load" => self.load(params, rid, false),
            "session/resume" => self.load(params, rid, true),
            "session/list" => self.list(params, rid).await,
            "session/close" => self.close(params, rid).await,
            "session/delete" => self.delete(params, rid).await,
            "session/fork" => self.fork(params, rid),
            "session/prompt" => self.prompt(params, rid).await,
            "session/set_mode" => self.set_mode(params, rid, "modeId"),
            "session/set_config_option" => self.set_config_option(params, rid),
            // Notifications; a client that sends one with an id still gets
            // an answer (`{}`), or it would wait forever.
            "session/cancel" => {
                if let Ok(session_id) = string_param(params, "sessionId") {
                    if let Err(e) = self.daemon.cancel(session_id, false) {
                        tracing::warn!("session/cancel: {e}");
                    }
                }
                Ok(empty())
            }
            // ACP's withdrawal of a request of the client's: every request
            // of the client's is answered promptly or is a prompt, which
            // `session/cancel` ends.
            "$/cancel_request" => Ok(empty()),
            other => Err(error_response(
                rid,
                -32601,
                &format!("method not found: {other}"),
            )),
        };
        id.map(|_| result)
    }

    fn initialize(&self, params: &Value) -> Value {
        self.client
            .set_capabilities(AcpCapabilities::from_initialize(params));
        initialize_result(self.daemon.home())
    }

    fn new_session(&self, params: &Value, rid: &Value) -> Reply {
        let cwd = absolute_cwd(params).map_err(|e| bad(rid, e))?;
        let mcp_servers = mcp_servers_param(params).map_err(|e| bad(rid, e))?;
        let more = more_roots(params).map_err(|e| bad(rid, e))?;
        let session = self
            .daemon
            .new_session_in(
                &self.editor,
                NewSession {
                    workspace_folder: Some(cwd),
                    title: None,
                    config: None,
                },
                None,
                more,
            )
            .map_err(|e| daemon_error(rid, e))?;
        self.daemon
            .add_mcp_servers(&session.id, &mcp_servers)
            .map_err(|e| daemon_error(rid, e))?;
        let setup = self.session_state(&session);
        Ok(to_wire(
            acp::NewSessionResponse::new(session.id.clone())
                .modes(setup.modes)
                .config_options(setup.config_options)
                .meta(instructions_meta(&session)),
        ))
    }

    /// `session/load` replays the history as `session/update`s before its
    /// result; `session/resume` reattaches without replay. The session
    /// keeps the folder it was created in (`cwd` is checked, not used);
    /// `additionalDirectories` are roots after its logged ones.
    fn load(&self, params: &Value, rid: &Value, resume: bool) -> Reply {
        let session_id = string_param(params, "sessionId").map_err(|e| bad(rid, e))?;
        if params.get("cwd").is_some() {
            absolute_cwd(params).map_err(|e| bad(rid, e))?;
        }
        let mcp_servers = mcp_servers_param(params).map_err(|e| bad(rid, e))?;
        let more = more_roots(params).map_err(|e| bad(rid, e))?;
        // `session/resume`: followed from now on, without the history.
        let loaded = self
            .daemon
            .attach_session(&self.editor, session_id, !resume, more);
        let (session, events) = loaded.map_err(|e| daemon_error(rid, e))?;
        self.daemon
            .add_mcp_servers(&session.id, &mcp_servers)
            .map_err(|e| daemon_error(rid, e))?;
        // The log's events are freed here, the replay's frames once
        // written: give that memory back after them.
        drop(events);
        self.sink.out.trim_when_idle();
        let setup = self.session_state(&session);
        let meta = instructions_meta(&session);
        Ok(if resume {
            to_wire(
                acp::ResumeSessionResponse::new()
                    .modes(setup.modes)
                    .config_options(setup.config_options)
                    .meta(meta),
            )
        } else {
            to_wire(setup.meta(meta))
        })
    }

    /// A session's modes and config options, which its later
    /// `config_option_update`s start from.
    fn session_state(&self, session: &crate::core::session::Session) -> acp::LoadSessionResponse {
        let (mode, models) = (session.mode(), model_state(session));
        self.sink.states.set(&session.id, mode, models.clone());
        session_setup(mode, &models)
    }

    /// Newest first, those whose workspace holds `cwd` when it is given;
    /// the cursor is the index of the next session.
    async fn list(&self, params: &Value, rid: &Value) -> Reply {
        list_page(self.daemon.list_sessions().await, params).map_err(|e| bad(rid, e))
    }

    /// `session/close`: the session's work cancelled, its memory freed,
    /// its log kept (unless no prompt reached it); an unknown session is
    /// already closed.
    async fn close(&self, params: &Value, rid: &Value) -> Reply {
        let session_id = string_param(params, "sessionId").map_err(|e| bad(rid, e))?;
        self.daemon.close_session(session_id).await;
        self.cwds.lock().remove(session_id);
        Ok(empty())
    }

    /// `session/delete`: the session's log removed (refused while a turn
    /// runs); an unknown session is already deleted.
    async fn delete(&self, params: &Value, rid: &Value) -> Reply {
        let session_id = string_param(params, "sessionId").map_err(|e| bad(rid, e))?;
        self.daemon
            .delete_session(session_id)
            .await
            .map_err(|e| daemon_error(rid, e))?;
        self.cwds.lock().remove(session_id);
        Ok(empty())
    }

    async fn prompt(&self, params: &Value, rid: &Value) -> Reply {
        let session_id = string_param(params, "sessionId").map_err(|e| bad(rid, e))?;
        let prompt: Vec<ContentBlock> = serde_json::from_value(params["prompt"].clone())
            .map_err(|e| bad(rid, format!("invalid params: `prompt`: {e}")))?;
        if prompt.is_empty() {
            return Err(bad(rid, "invalid params: `prompt` is empty".to_string()));
        }
        let mut prompt = prompt;
        if let Some(command) = rewind_command(&prompt) {
            return self.rewind_command(session_id, command, rid).await;
        }
        if let Some((name, instruction)) = commands::slash_command(&prompt) {
            let cwd = self.cwd(session_id).await;
            if let Some(template) = commands::task_template(&self.daemon, &self.editor, &cwd, &name)
            {
                if commands::carries_file(&prompt) {
                    return self
                        .run_task(session_id, name, instruction, &prompt, rid)
                        .await;
                }
                // No file: the task's turn works on the text and paths
                // the prompt carries.
                prompt = commands::fileless_task_prompt(&template, &instruction, &prompt);
            }
        }
        let (message_id, receipt) = self
            .daemon
            .prompt(&self.editor, session_id, user_content(prompt))
            .map_err(|e| daemon_error(rid, e))?;
        match receipt.await {
            Ok(receipt) if receipt.stop_reason == StopReason::Error => Err(error_response(
                rid,
                -32603,
                receipt.message.as_deref().unwrap_or("the turn failed"),
            )),
            Ok(receipt) => {
                let mut reply = prompt_result(receipt.stop_reason);
                reply["_meta"]["tandem"]["userMessageId"] = Value::String(message_id);
                Ok(reply)
            }
            Err(_) => Err(error_response(
                rid,
                -32603,
                "the session stopped before the turn ended",
            )),
        }
    }

    /// A slash command: the task's turn runs in this session; its inline
    /// edit outcome, if any, is under `_meta.tandem.edit`.
    async fn run_task(
        &self,
        session_id: &str,
        name: String,
        instruction: String,
        prompt: &[ContentBlock],
        rid: &Value,
    ) -> Reply {
        let result = commands::run(
            &self.daemon,
            &self.editor,
            session_id,
            name,
            instruction,
            prompt,
        )
        .await
        .map_err(|e| match e {
            TaskError::Daemon(e) => daemon_error(rid, e),
            TaskError::SessionStopped => error_response(rid, -32603, &e.to_string()),
            other => bad(rid, other.to_string()),
        })?;
        let receipt = result.receipt;
        if receipt.stop_reason == StopReason::Error {
            return Err(error_response(
                rid,
                -32603,
                receipt.message.as_deref().unwrap_or("the turn failed"),
            ));
        }
        let mut reply = prompt_result(receipt.stop_reason);
        if let Some((outcome, message)) = result.edit {
            reply["_meta"]["tandem"]["edit"] = to_wire(TaskEdit {
                outcome: outcome.as_str(),
                message,
            });
        }
        Ok(reply)
    }

    /// After a session/new, load or resume result: the slash commands.
    pub(super) async fn after_reply(&self, method: &str, params: &Value, result: &Value) {
        let session_id = match method {
            "session/new" | "session/fork" => result["sessionId"].as_str(),
            "session/load" | "session/resume" => params["sessionId"].as_str(),
            _ => None,
        };
        let Some(session_id) = session_id else {
            return;
        };
        if let Some(cwd) = params["cwd"].as_str() {
            // Every ACP session names its folder, so the client's folders
            // serve the task catalog (with the session's `cwd` among them,
            // its `.tandem/config.toml` tasks are offered) and, besides,
            // only the load of a session logged without a folder (made by
            // an LSP client without one), which then works in these.
            self.editor.workspace().add_root(PathBuf::from(cwd));
            self.cwds
                .lock()
                .insert(session_id.to_string(), PathBuf::from(cwd));
        }
        let cwd = self.cwd(session_id).await;
        let mut commands = commands::available_commands(&self.daemon, &self.editor, &cwd);
        commands.push(rewind_command_entry());
        self.sink.send(
            session_id,
            to_wire(acp::SessionUpdate::AvailableCommandsUpdate(
                acp::AvailableCommandsUpdate::new(commands),
            )),
        );
    }

    /// `session/set_mode`; the `current_mode_update` (and
    /// `config_option_update`) follow from the session's event.
    fn set_mode(&self, params: &Value, rid: &Value, field: &str) -> Reply {
        let session_id = string_param(params, "sessionId").map_err(|e| bad(rid, e))?;
        let mode = string_param(params, field).map_err(|e| bad(rid, e))?;
        let mode: ApprovalMode = mode
            .parse()
            .map_err(|e| bad(rid, format!("invalid params: {field}: {e}")))?;
        let session = self
            .daemon
            .session(session_id)
            .map_err(|e| daemon_error(rid, e))?;
        if session.mode() != mode {
            session.set_mode(mode);
        }
        Ok(empty())
    }

    /// The mode, model or effort option; the answer is the full set.
    fn set_config_option(&self, params: &Value, rid: &Value) -> Reply {
        let config_id = string_param(params, "configId").map_err(|e| bad(rid, e))?;
        let session_id = string_param(params, "sessionId").map_err(|e| bad(rid, e))?;
        let session = self
            .daemon
            .session(session_id)
            .map_err(|e| daemon_error(rid, e))?;
        if config_id == MODE_OPTION {
            self.set_mode(params, rid, "value")?;
        } else {
            let value = string_param(params, "value").map_err(|e| bad(rid, e))?;
            let Some((model, effort)) = model_switch(config_id, value, &model_state(&session))
            else {
                return Err(bad(
                    rid,
                    format!("invalid params: unknown config option `{config_id}`"),
                ));
            };
            let state = crate::frontend::models::set_model(&session, &model, effort.as_deref())
                .map_err(|e| bad(rid, format!("invalid params: {e}")))?;
            self.sink.states.set_models(session_id, state);
        }
        let options = self.session_state(&session).config_options;
        Ok(to_wire(acp::SetSessionConfigOptionResponse::new(
            options.unwrap_or_default(),
        )))
    }
}

impl Agent {
    /// The session's `cwd` as the client gave it, else its first workspace
    /// root on disk, else an empty path.
    async fn cwd(&self, session_id: &str) -> PathBuf {
        if let Some(cwd) = self.cwds.lock().get(session_id) {
            return cwd.clone();
        }
        self.daemon
            .list_sessions()
            .await
            .into_iter()
            .find(|s| s.session_id == session_id)
            .and_then(|s| s.workspace.first().map(PathBuf::from))
            .unwrap_or_default()
    }
}

/// One page of `session/list` from every session that a prompt reached:
/// newest first, those whose workspace holds `cwd` when it is given; the
/// cursor is the index of the next session.
pub(crate) fn list_page(sessions: Vec<SessionSummary>, params: &Value) -> Result<Value, String> {
    let cwd = params.get("cwd").and_then(Value::as_str).map(PathBuf::from);
    let start = match params.get("cursor").and_then(Value::as_str) {
        None => 0,
        Some(cursor) => cursor
            .parse::<usize>()
            .map_err(|_| format!("invalid params: unknown cursor `{cursor}`"))?,
    };
    let matching: Vec<_> = sessions
        .into_iter()
        // A chat opened and never used is not one to go back to.
        .filter(|s| s.state != SessionState::Unreadable && !s.workspace.is_empty() && !s.empty)
        .filter(|s| {
            cwd.as_deref().is_none_or(|cwd| {
                s.workspace
                    .iter()
                    .any(|root| cwd.starts_with(Path::new(root)))
            })
        })
        .collect();
    let sessions: Vec<acp::SessionInfo> = matching
        .iter()
        .skip(start)
        .take(LIST_PAGE)
        .map(|s| {
            acp::SessionInfo::new(s.session_id.clone(), s.workspace[0].clone())
                .additional_directories(s.workspace[1..].iter().map(PathBuf::from).collect())
                .title(s.title.clone())
                .updated_at(s.updated.clone())
                .meta(tandem_meta([
                    ("state", to_wire(s.state)),
                    ("turnCount", Value::from(s.turn_count)),
                ]))
        })
        .collect();
    let next = (start + LIST_PAGE < matching.len()).then(|| (start + LIST_PAGE).to_string());
    let mut page = to_wire(acp::ListSessionsResponse::new(sessions).next_cursor(next));
    // The schema leaves out an empty `additionalDirectories`; tandem has
    // always sent it.
    for session in page["sessions"].as_array_mut().into_iter().flatten() {
        if let Some(session) = session.as_object_mut() {
            session
                .entry("additionalDirectories")
                .or_insert_with(|| Value::Array(Vec::new()));
        }
    }
    Ok(page)
}

/// `initialize`'s result (the same through `tandem acp --attach`).
pub(crate) fn initialize_result(home: &Path) -> Value {
    let sessions = acp::SessionCapabilities::new()
        .list(acp::SessionListCapabilities::new())
        .resume(acp::SessionResumeCapabilities::new())
        .close(acp::SessionCloseCapabilities::new())
        .delete(acp::SessionDeleteCapabilities::new())
        // `fork` is unstable in ACP's schema: advertised as it defines.
        .fork(acp::SessionForkCapabilities::new())
        .additional_directories(acp::SessionAdditionalDirectoriesCapabilities::new());
    let capabilities = acp::AgentCapabilities::new()
        .load_session(true)
        .prompt_capabilities(
            acp::PromptCapabilities::new()
                .image(true)
                .audio(false)
                .embedded_context(true),
        )
        .session_capabilities(sessions)
        // stdio and streamable HTTP; not the old HTTP+SSE transport.
        .mcp_capabilities(acp::McpCapabilities::new().http(true).sse(false))
        .meta(tandem_meta([(
            "sandbox",
            crate::frontend::sandbox_info::sandbox_capability(),
        )]));
    let result = acp::InitializeResponse::new(agent_client_protocol_schema::ProtocolVersion::from(
        ACP_PROTOCOL_VERSION,
    ))
    .agent_capabilities(capabilities)
    .auth_methods(super::auth::auth_methods(home))
    .agent_info(acp::Implementation::new(
        "tandem",
        env!("CARGO_PKG_VERSION"),
    ));
    let mut result = to_wire(result);
    // The schema always writes `auth` (empty: no logout); tandem never
    // sent it.
    if let Some(capabilities) = result["agentCapabilities"].as_object_mut() {
        if capabilities
            .get("auth")
            .is_some_and(|a| a == &Value::Object(Map::new()))
        {
            capabilities.remove("auth");
        }
    }
    result
}

/// ACP's `mcpServers` of `session/new`, `load` and `resume` (absent: none).
pub(super) fn mcp_servers_param(
    params: &Value,
) -> Result<std::collections::BTreeMap<String, crate::config::mcp_servers::McpServerConfig>, String>
{
    match params.get("mcpServers") {
        None | Some(Value::Null) => Ok(Default::default()),
        Some(list) => crate::frontend::mcp_servers::acp_mcp_servers(list),
    }
}

/// ACP's `additionalDirectories` of `session/new`, `load`, `resume` and
/// `fork` as roots, or the `-32602` message naming the first bad one.
pub(super) fn more_roots(params: &Value) -> Result<Vec<PathBuf>, String> {
    acp_additional_directories(params).and_then(|dirs| additional_roots(&dirs))
}

pub(super) fn bad(rid: &Value, message: String) -> Value {
    error_response(rid, -32602, &message)
}

/// An absolute `cwd` param, or the `-32602` message naming what is wrong
/// (also the check of `tandem acp --attach`).
pub(crate) fn absolute_cwd(params: &Value) -> Result<PathBuf, String> {
    let cwd = PathBuf::from(string_param(params, "cwd")?);
    if !cwd.is_absolute() {
        return Err(format!(
            "invalid params: `cwd` must be absolute, got `{}`",
            cwd.display()
        ));
    }
    Ok(cwd)
}

/// `_meta.tandem.instructions` of a session/new, load or resume result:
/// the instruction files the model is given.
pub(super) fn instructions_meta(session: &crate::core::session::Session) -> Option<acp::Meta> {
    tandem_meta([(
        "instructions",
        to_wire(crate::frontend::updates::instruction_files(
            &session.instructions(),
        )),
    )])
}

/// The `{}` answer of a request that returns nothing.
fn empty() -> Value {
    Value::Object(Map::new())
}

/// `_meta.tandem.edit` of a slash command's answer.
#[derive(serde::Serialize)]
struct TaskEdit {
    outcome: &'static str,
    message: String,
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
