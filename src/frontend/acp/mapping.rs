//! tandem's session events and stop reasons in ACP's terms: which updates
//! an ACP client gets, with every tandem-only field under `_meta.tandem`,
//! and which of ACP's five stop reasons stands for each of tandem's.
//!
//! Invariant: nothing leaves here that ACP's schema does not have, except
//! under `_meta` (a strict client may reject unknown fields).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};

use super::modes::config_options;
use crate::core::log::{EventSink, LoggedEvent};
use crate::core::output_budget::OutputBudget;
use crate::frontend::coalesce::is_chunk;
use crate::frontend::lsp::OutboundQueue;
use crate::frontend::updates::session_update;
use crate::vocab::approval::ApprovalMode;
use crate::vocab::event::{Event, StopReason};

/// Fields of tandem's `tool_call_update` that ACP does not have.
const TANDEM_ONLY_FIELDS: [&str; 3] = ["waitingFor", "outputDelta", "mcp"];

/// Turns session events into ACP `session/update` notifications.
pub(super) struct AcpSink {
    pub(super) out: OutboundQueue,
    /// Sessions being resumed: their history is not replayed.
    muted: Mutex<HashSet<String>>,
}

impl AcpSink {
    pub(super) fn new(out: OutboundQueue) -> AcpSink {
        AcpSink {
            out,
            muted: Mutex::new(HashSet::new()),
        }
    }

    /// Runs `f` with the replay of `session_id` muted (`session/resume`).
    pub(super) fn muted<T>(&self, session_id: &str, f: impl FnOnce() -> T) -> T {
        self.lock_muted().insert(session_id.to_string());
        let result = f();
        self.lock_muted().remove(session_id);
        result
    }

    fn lock_muted(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.muted.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn send(&self, session_id: &str, update: Value) {
        self.out.send_json(&update_message(session_id, update));
    }
}

/// A `session/update` notification.
pub(crate) fn update_message(session_id: &str, update: Value) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": session_id, "update": update},
    })
}

/// The `session/update` body of a streamed chunk, made when the stdout
/// writer writes it (so the chunks queued behind a slow client merge).
pub(super) fn chunk_notification(session_id: &str, event: &LoggedEvent) -> Option<Vec<u8>> {
    let update = acp_updates(&event.event).into_iter().next()?;
    serde_json::to_vec(&update_message(session_id, update)).ok()
}

impl AcpSink {
    /// Sends an event's updates; the user's own messages only in a replay
    /// (`session/load`): echoed live, clients show the prompt (with every
    /// attached file's text) as if the agent had said it.
    fn deliver(&self, session_id: &str, event: &LoggedEvent, replay: bool) {
        if !replay && matches!(event.event, Event::UserMessage { .. }) {
            return;
        }
        if matches!(event.event, Event::TurnEnd { .. }) {
            // The turn's request bodies are freed: the writer gives them
            // back once the prompt's answer is written, as in `tandem lsp`.
            crate::frontend::memory::trim_when_idle();
        }
        if is_chunk(&event.event) {
            self.out.send_chunk(session_id, event);
            return;
        }
        for update in acp_updates(&event.event) {
            self.send(session_id, update);
        }
    }
}

impl EventSink for AcpSink {
    fn on_event(&self, session_id: &str, event: &LoggedEvent) {
        self.deliver(session_id, event, false);
    }

    fn output_budget(&self, _session_id: &str) -> Option<Arc<OutputBudget>> {
        self.out.output_budget()
    }

    fn on_replay(&self, session_id: &str, event: &LoggedEvent) {
        if !self.lock_muted().contains(session_id) {
            self.deliver(session_id, event, true);
        }
    }
}

/// The ACP updates of one event (none for tandem-only ones).
pub(super) fn acp_updates(event: &Event) -> Vec<Value> {
    let Some(update) = session_update(event) else {
        return Vec::new();
    };
    match serde_json::to_value(&update) {
        Ok(update) => acp_updates_of(update),
        Err(e) => {
            tracing::error!("cannot serialize an ACP update: {e}");
            Vec::new()
        }
    }
}

/// The ACP updates of one `tandem/update`'s `update` (none for tandem-only
/// kinds): what `tandem acp` sends for an event, and `tandem acp --attach`
/// for the serve's update of it.
pub(crate) fn acp_updates_of(mut update: Value) -> Vec<Value> {
    match update["sessionUpdate"].as_str().unwrap_or_default() {
        // ACP streams the user's message as chunks, each with its id.
        "user_message" => {
            let id = update["messageId"].clone();
            return update["content"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|block| {
                    json!({"sessionUpdate": "user_message_chunk", "content": block, "messageId": id})
                })
                .collect();
        }
        // ACP's name for it.
        "session_info" => {
            update["sessionUpdate"] = json!("session_info_update");
            return vec![update];
        }
        "input_status"
        | "usage"
        | "turn_end"
        | "agent_message_reset"
        | "context_compacted"
        | "rewound"
        | "" => return Vec::new(),
        _ => {}
    }
    if let Some(kind) = update.get_mut("kind") {
        acp_tool_kind(kind);
    }
    move_to_meta(&mut update, &TANDEM_ONLY_FIELDS);
    // A client that shows the mode as a config option hears of it too.
    let mode = (update["sessionUpdate"] == "current_mode_update")
        .then(|| {
            update["currentModeId"]
                .as_str()?
                .parse::<ApprovalMode>()
                .ok()
        })
        .flatten();
    let mut updates = vec![update];
    if let Some(mode) = mode {
        updates.push(json!({
            "sessionUpdate": "config_option_update",
            "configOptions": config_options(mode),
        }));
    }
    updates
}

/// ACP's tool kinds have no `mcp`: an MCP tool's call is `other` there
/// (its server and tool go under `_meta.tandem.mcp`).
pub(crate) fn acp_tool_kind(kind: &mut Value) {
    if kind == "mcp" {
        *kind = json!("other");
    }
}

/// Moves `fields` of `object` under `_meta.tandem`.
pub(super) fn move_to_meta(object: &mut Value, fields: &[&str]) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let mut tandem = Map::new();
    for field in fields {
        if let Some(value) = map.remove(*field) {
            tandem.insert((*field).to_string(), value);
        }
    }
    if !tandem.is_empty() {
        map.insert("_meta".to_string(), json!({"tandem": tandem}));
    }
}

/// ACP's stop reasons are fewer than tandem's: the closest one, and
/// tandem's own when it says more (for `_meta.tandem.stopReason`). An
/// `error` turn becomes a JSON-RPC error instead.
pub(super) fn acp_stop_reason(reason: StopReason) -> (&'static str, Option<&'static str>) {
    let acp = match reason {
        StopReason::EndTurn => return ("end_turn", None),
        StopReason::MaxTokens => return ("max_tokens", None),
        StopReason::Refusal => return ("refusal", None),
        StopReason::Cancelled => return ("cancelled", None),
        StopReason::MaxIterations => return ("max_turn_requests", None),
        // The session's token budget ran out: no more tokens.
        StopReason::TokenBudget => "max_tokens",
        // A money or token cap of `[budget]` stopped the next call.
        StopReason::BudgetExceeded => "max_tokens",
        // The request outgrew the model's context: a token limit.
        StopReason::ContextOverflow => "max_tokens",
        // Compactions that went nowhere, like a loop: a runaway turn.
        StopReason::CompactionSpiral => "max_turn_requests",
        // The loop detector stopped a model repeating its tool calls: too
        // many requests that went nowhere.
        StopReason::LoopDetected => "max_turn_requests",
        // A hook or the mode refused to go on.
        StopReason::Blocked => "refusal",
        StopReason::Timeout | StopReason::Interrupted | StopReason::Error => "end_turn",
    };
    (acp, Some(reason.as_str()))
}

/// The `session/prompt` result of a turn that ended with `reason`.
pub(crate) fn prompt_result(reason: StopReason) -> Value {
    let (acp, tandem) = acp_stop_reason(reason);
    match tandem {
        Some(tandem) => json!({"stopReason": acp, "_meta": {"tandem": {"stopReason": tandem}}}),
        None => json!({"stopReason": acp}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_reasons_map_onto_acps_five_with_tandems_in_meta() {
        assert_eq!(acp_stop_reason(StopReason::EndTurn), ("end_turn", None));
        assert_eq!(
            acp_stop_reason(StopReason::MaxIterations),
            ("max_turn_requests", None)
        );
        assert_eq!(
            acp_stop_reason(StopReason::TokenBudget),
            ("max_tokens", Some("token_budget"))
        );
        assert_eq!(acp_stop_reason(StopReason::Cancelled), ("cancelled", None));
        assert_eq!(
            acp_stop_reason(StopReason::BudgetExceeded),
            ("max_tokens", Some("budget_exceeded"))
        );
        assert_eq!(
            acp_stop_reason(StopReason::ContextOverflow),
            ("max_tokens", Some("context_overflow"))
        );
        assert_eq!(
            acp_stop_reason(StopReason::CompactionSpiral),
            ("max_turn_requests", Some("compaction_spiral"))
        );
        assert_eq!(
            acp_stop_reason(StopReason::LoopDetected),
            ("max_turn_requests", Some("loop_detected"))
        );
        assert_eq!(
            acp_stop_reason(StopReason::Blocked),
            ("refusal", Some("blocked"))
        );
        assert_eq!(
            prompt_result(StopReason::Timeout),
            json!({"stopReason": "end_turn", "_meta": {"tandem": {"stopReason": "timeout"}}})
        );
    }

    #[test]
    fn tandem_only_fields_move_under_meta() {
        let mut update = json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1",
                                "waitingFor": "permission"});
        move_to_meta(&mut update, &TANDEM_ONLY_FIELDS);
        assert_eq!(
            update,
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1",
                   "_meta": {"tandem": {"waitingFor": "permission"}}})
        );
    }
}
