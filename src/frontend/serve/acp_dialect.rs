//! What `tandem acp --attach` makes of the serve's messages for its ACP
//! client, and of the client's answers for the serve: the same mapping as
//! `tandem acp` (`frontend::acp`), applied to the serve's wire instead of
//! to session events.
//!
//! - `tandem/update` → `session/update`s (`acp_updates_of`: tandem-only
//!   kinds dropped, tandem-only fields under `_meta.tandem`, a
//!   `config_option_update` after a `current_mode_update`; the user's own
//!   messages only in a `session/load` replay);
//! - `tandem/requestPermission` → `session/request_permission`;
//! - `tandem/requestUserInput` → `elicitation/create` (form), its answer
//!   back to `{answers}`;
//! - `$/cancelRequest {id}` → `$/cancel_request {requestId}`;
//! - a load's (or new session's) `tandem/attached` → its answer with the
//!   session's modes and config options, then its slash commands.
//!
//! Invariant: as in `tandem acp`, nothing reaches the client that ACP's
//! schema does not have, except under `_meta`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::relay::Dialect;
use crate::frontend::acp::elicitation;
use crate::frontend::acp::mapping::{acp_updates_of, prompt_result, update_message};
use crate::frontend::acp::model_options::{session_state, ConfigStates};
use crate::protocol::ModelState;
use crate::vocab::approval::ApprovalMode;
use crate::vocab::bridge::BridgeOutcome;
use crate::vocab::event::StopReason;

/// What the two directions of the shim share.
#[derive(Default)]
pub struct AcpShared {
    /// Ids of the serve's questions relayed as `elicitation/create`.
    questions: HashSet<String>,
    /// Sessions made by this client whose `session/new` is not answered
    /// yet (the answer carries the `sessionId`).
    fresh: HashSet<String>,
    /// Each session's tasks (`tandem/listTasks`): the slash commands.
    tasks: HashMap<String, Vec<Value>>,
    /// Sessions whose replay (`session/load`) is on its way: only there do
    /// the user's own messages reach the client.
    replaying: HashSet<String>,
    /// Each session's mode and model: the full set of config options.
    pub(crate) configs: ConfigStates,
    /// Each session's user messages seen go by (id, first line): what
    /// `/rewind` lists.
    messages: HashMap<String, Vec<(String, String)>>,
}

/// Shared by the shim's two directions.
#[derive(Clone, Default)]
pub struct AcpState(Arc<Mutex<AcpShared>>);

impl AcpState {
    /// Each session's mode and model (shared, not locked with the rest).
    pub(crate) fn configs(&self) -> ConfigStates {
        self.lock().configs.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, AcpShared> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A session this client just made: its load answers `session/new`.
    pub fn made(&self, session_id: &str) {
        self.lock().fresh.insert(session_id.to_string());
    }

    /// A load of `session_id` with its replay: the user's messages pass
    /// until its `tandem/attached`.
    pub fn replaying(&self, session_id: &str) {
        self.lock().replaying.insert(session_id.to_string());
    }

    /// The tasks of a session's folder (`tandem/listTasks`' `tasks`).
    pub fn set_tasks(&self, session_id: &str, tasks: Vec<Value>) {
        self.lock().tasks.insert(session_id.to_string(), tasks);
    }

    /// The prompt template of task `name` of the session (a slash
    /// command), if it is one.
    pub fn task_template(&self, session_id: &str, name: &str) -> Option<String> {
        let shared = self.lock();
        let task = shared
            .tasks
            .get(session_id)?
            .iter()
            .find(|t| t["id"] == name)?;
        Some(task["prompt"].as_str().unwrap_or_default().to_string())
    }

    /// The user messages of a session seen so far (`/rewind`).
    pub fn user_messages(&self, session_id: &str) -> Vec<(String, String)> {
        self.lock()
            .messages
            .get(session_id)
            .cloned()
            .unwrap_or_default()
    }

    /// The client's answer to a request of the serve's, in the serve's
    /// terms (a question's answer becomes `{answers}`).
    pub fn answer_for_serve(&self, mut answer: Value) -> Value {
        let id = answer["id"].as_str().unwrap_or_default().to_string();
        if !self.lock().questions.remove(&id) || answer.get("error").is_some() {
            return answer;
        }
        answer["result"] = match elicitation::outcome(&answer["result"]) {
            BridgeOutcome::Answered(answers) => json!({ "answers": answers }),
            BridgeOutcome::Cancelled => json!({"outcome": "cancelled"}),
            BridgeOutcome::Unavailable(why) => {
                answer.as_object_mut().map(|a| a.remove("result"));
                answer["error"] = json!({"code": -32602, "message": why});
                return answer;
            }
        };
        answer
    }
}

/// Newline-delimited JSON; the serve's messages in ACP's terms.
pub struct Acp(pub AcpState);

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
        self.to_acp(message)
            .iter()
            .filter_map(|m| serde_json::to_vec(m).ok())
            .collect()
    }

    /// `session/load`'s, `session/resume`'s or `session/new`'s answer,
    /// then the session's slash commands.
    fn loaded(&self, id: Value, attached: &Value) -> Vec<Value> {
        let session_id = attached["sessionId"].as_str().unwrap_or_default();
        let mode = attached["mode"]
            .as_str()
            .and_then(|m| m.parse::<ApprovalMode>().ok())
            .unwrap_or_default();
        let models: ModelState = serde_json::from_value(attached.clone()).unwrap_or_default();
        self.0.configs().set(session_id, mode, models.clone());
        let mut result = session_state(mode, &models);
        result["_meta"]["tandem"]["instructions"] = match &attached["instructions"] {
            Value::Array(files) => Value::Array(files.clone()),
            _ => json!([]),
        };
        let mut shared = self.0.lock();
        shared.replaying.remove(session_id);
        if shared.fresh.remove(session_id) {
            result["sessionId"] = json!(session_id);
        }
        let mut messages = vec![json!({"jsonrpc": "2.0", "id": id, "result": result})];
        if let Some(tasks) = shared.tasks.get(session_id) {
            let commands: Vec<Value> = tasks
                .iter()
                .map(|t| {
                    crate::frontend::acp::commands::command_of(
                        t["id"].as_str().unwrap_or_default(),
                        t["title"].as_str().unwrap_or_default(),
                        t["instruction"] == true,
                    )
                })
                .collect();
            let mut commands = commands;
            commands.push(crate::frontend::acp::rewind_command::rewind_available_command());
            messages.push(update_message(
                session_id,
                json!({"sessionUpdate": "available_commands_update", "availableCommands": commands}),
            ));
        }
        messages
    }
}

impl Acp {
    /// A message of the serve's for the client (none: not for ACP).
    fn to_acp(&self, mut message: Value) -> Vec<Value> {
        match message.get("method").and_then(Value::as_str) {
            Some("tandem/update") => {
                let params = &mut message["params"];
                let session_id = params["sessionId"].as_str().unwrap_or_default().to_string();
                if params["update"]["sessionUpdate"] == "user_message" {
                    remember_message(&self.0, &session_id, &params["update"]);
                }
                // As in `tandem acp`: the user's messages only in a replay.
                if params["update"]["sessionUpdate"] == "user_message"
                    && !self.0.lock().replaying.contains(&session_id)
                {
                    return Vec::new();
                }
                let options = self.0.configs().follow(&session_id, &params["update"]);
                acp_updates_of(params["update"].take())
                    .into_iter()
                    .chain(options)
                    .map(|u| update_message(&session_id, u))
                    .collect()
            }
            Some("tandem/requestPermission") => {
                message["method"] = json!("session/request_permission");
                crate::frontend::acp::permission::from_tandem(&mut message["params"]);
                vec![message]
            }
            Some("tandem/requestUserInput") => {
                let Some(id) = message["id"].as_str() else {
                    return Vec::new();
                };
                self.0.lock().questions.insert(id.to_string());
                let params = &message["params"];
                let params = elicitation::create_params(
                    params["sessionId"].as_str().unwrap_or_default(),
                    params["toolCallId"].as_str().unwrap_or_default(),
                    &params["questions"],
                );
                vec![
                    json!({"jsonrpc": "2.0", "id": id, "method": "elicitation/create",
                            "params": params}),
                ]
            }
            Some("$/cancelRequest") => {
                let id = message["params"]["id"].clone();
                if let Some(id) = id.as_str() {
                    self.0.lock().questions.remove(id);
                }
                vec![json!({"jsonrpc": "2.0", "method": "$/cancel_request",
                            "params": {"requestId": id}})]
            }
            // LSP-only: ACP has neither workspace edits nor progress.
            Some("workspace/applyEdit" | "$/progress" | "window/workDoneProgress/create") => {
                Vec::new()
            }
            _ => vec![message],
        }
    }
}

/// A `tandem/prompt` or `tandem/runTask` answer as `session/prompt`'s:
/// ACP's stop reason with tandem's under `_meta.tandem` (and a task's
/// inline edit outcome under `_meta.tandem.edit`); an `error` turn is a
/// JSON-RPC error, as in `tandem acp`.
pub fn prompt_answer(answer: Value) -> Value {
    let Some(result) = answer.get("result") else {
        return answer;
    };
    let reason = serde_json::from_value::<StopReason>(result["stopReason"].clone())
        .unwrap_or(StopReason::EndTurn);
    if reason == StopReason::Error {
        let message = result["message"].as_str().unwrap_or("the turn failed");
        return json!({"jsonrpc": "2.0", "error": {"code": -32603, "message": message}});
    }
    let mut reply = prompt_result(reason);
    if let Some(edit) = result.get("edit").filter(|e| !e.is_null()) {
        reply["_meta"]["tandem"]["edit"] = edit.clone();
    }
    if let Some(id) = result.get("messageId").filter(|id| id.is_string()) {
        reply["_meta"]["tandem"]["userMessageId"] = id.clone();
    }
    json!({"jsonrpc": "2.0", "result": reply})
}

/// Notes a `user_message` update for `/rewind`'s list (once per id).
fn remember_message(state: &AcpState, session_id: &str, update: &Value) {
    let Some(id) = update["messageId"].as_str() else {
        return;
    };
    let said = update["content"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|b| b["text"].as_str())
        .and_then(|t| t.lines().find(|l| !l.trim().is_empty()))
        .map(|l| l.chars().take(80).collect())
        .unwrap_or_default();
    let mut shared = state.lock();
    let list = shared.messages.entry(session_id.to_string()).or_default();
    if !list.iter().any(|(known, _)| known == id) {
        list.push((id.to_string(), said));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_goes_out_as_a_form_and_its_answers_come_back_in_the_serves_terms() {
        let state = AcpState::default();
        let acp = Acp(state.clone());
        let asked = acp.to_acp(json!({"jsonrpc": "2.0", "id": "tandem-1-2",
            "method": "tandem/requestUserInput", "params": {"sessionId": "s",
            "toolCallId": "q1", "questions": [{"id": "db", "question": "Which?"}]}}));
        assert_eq!(asked[0]["method"], "elicitation/create");
        assert_eq!(
            asked[0]["params"]["requestedSchema"]["required"],
            json!(["db"])
        );

        let accepted = state.answer_for_serve(json!({"jsonrpc": "2.0", "id": "tandem-1-2",
            "result": {"action": "accept", "content": {"db": "pg"}}}));
        assert_eq!(accepted["result"], json!({"answers": {"db": "pg"}}));
        // Answered once: a later answer with that id passes as it is.
        let again = json!({"jsonrpc": "2.0", "id": "tandem-1-2", "result": {"action": "cancel"}});
        assert_eq!(state.answer_for_serve(again.clone()), again);

        acp.to_acp(json!({"jsonrpc": "2.0", "id": "tandem-1-3",
            "method": "tandem/requestUserInput", "params": {"questions": []}}));
        let cancelled = state.answer_for_serve(json!({"jsonrpc": "2.0", "id": "tandem-1-3",
            "result": {"action": "cancel"}}));
        assert_eq!(cancelled["result"], json!({"outcome": "cancelled"}));
    }

    #[test]
    fn withdrawals_use_acps_spelling_and_lsp_only_requests_are_dropped() {
        let acp = Acp(AcpState::default());
        let withdrawn = acp.to_acp(json!({"jsonrpc": "2.0", "method": "$/cancelRequest",
            "params": {"id": "tandem-1-4"}}));
        assert_eq!(
            withdrawn,
            vec![json!({"jsonrpc": "2.0", "method": "$/cancel_request",
                        "params": {"requestId": "tandem-1-4"}})]
        );
        assert!(acp
            .to_acp(json!({"jsonrpc": "2.0", "id": "tandem-1-5",
                "method": "workspace/applyEdit", "params": {}}))
            .is_empty());
    }

    #[test]
    fn a_prompt_answer_carries_acps_stop_reason_with_tandems_in_meta() {
        let answer = prompt_answer(json!({"jsonrpc": "2.0", "id": "x",
            "result": {"stopReason": "loop_detected", "turnId": "t1"}}));
        assert_eq!(
            answer["result"],
            json!({"stopReason": "max_turn_requests",
                   "_meta": {"tandem": {"stopReason": "loop_detected"}}})
        );
        let failed = prompt_answer(json!({"jsonrpc": "2.0", "id": "x",
            "result": {"stopReason": "error", "message": "bad key"}}));
        assert_eq!(failed["error"]["code"], -32603);
        assert_eq!(failed["error"]["message"], "bad key");
    }
}
