//! tandem's session events and stop reasons in ACP's terms: which updates
//! an ACP client gets, with every tandem-only field under `_meta.tandem`,
//! and which of ACP's five stop reasons stands for each of tandem's.
//!
//! Invariant: nothing leaves here that ACP's schema does not have, except
//! under `_meta` (a strict client may reject unknown fields).

use std::sync::Arc;

use agent_client_protocol_schema::v1 as acp;
use serde::Serialize;
use serde_json::Value;

use super::model_options::ConfigStates;
use super::session_updates;
use super::wire::to_wire;
use crate::core::log::{EventSink, LoggedEvent};
use crate::core::output_budget::OutputBudget;
use crate::frontend::coalesce::is_chunk;
use crate::frontend::lsp::OutboundQueue;
use crate::frontend::updates::session_update;
use crate::protocol;
use crate::vocab::event::{Event, StopReason};

/// Turns session events into ACP `session/update` notifications.
pub(super) struct AcpSink {
    pub(super) out: OutboundQueue,
    /// Each session's mode and model: the full set of config options.
    pub(super) states: ConfigStates,
}

impl AcpSink {
    pub(super) fn new(out: OutboundQueue) -> AcpSink {
        AcpSink {
            out,
            states: ConfigStates::default(),
        }
    }

    pub(super) fn send(&self, session_id: &str, update: Value) {
        self.out.send_json(&update_message(session_id, update));
    }
}

/// A `session/update` notification of an update's JSON.
pub(crate) fn update_message(session_id: &str, update: Value) -> Value {
    to_wire(UpdateNotification {
        jsonrpc: "2.0",
        method: "session/update",
        params: UpdateParams { session_id, update },
    })
}

/// [`session_updates::UpdateMessage`] around an update already made JSON
/// (the mode's config options, a slash command's reply, the serve's).
#[derive(Serialize)]
struct UpdateNotification<'a> {
    jsonrpc: &'static str,
    method: &'static str,
    params: UpdateParams<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct UpdateParams<'a> {
    session_id: &'a str,
    update: Value,
}

/// The `session/update` body of a streamed chunk, made when the stdout
/// writer writes it (so the chunks queued behind a slow client merge).
pub(super) fn chunk_notification(session_id: &str, event: &LoggedEvent) -> Option<Vec<u8>> {
    let update = session_updates::acp_updates(session_update(&event.event)?)
        .into_iter()
        .next()?;
    serde_json::to_vec(&session_updates::UpdateMessage::new(session_id, update)).ok()
}

impl AcpSink {
    /// Sends an event's updates; the user's own messages only in a replay
    /// (`session/load`): echoed live, clients show the prompt (with every
    /// attached file's text) as if the agent had said it.
    fn deliver(&self, session_id: &str, event: &LoggedEvent, replay: bool) {
        if !replay && matches!(event.event, Event::UserMessage { .. }) {
            return;
        }
        if !replay && matches!(event.event, Event::TurnEnd { .. }) {
            // The turn's request bodies are freed: the writer gives them
            // back once the prompt's answer is written, as in `tandem lsp`.
            // (A replayed turn end frees nothing: `session/load` asks once
            // its whole replay is queued.)
            self.out.trim_when_idle();
        }
        if is_chunk(&event.event) {
            self.out.send_chunk(session_id, event);
            return;
        }
        for update in acp_updates(&event.event) {
            self.send(session_id, update);
        }
        if matches!(
            event.event,
            Event::ModeChanged { .. } | Event::ModelChanged { .. }
        ) {
            let update = session_update(&event.event).and_then(|u| serde_json::to_value(u).ok());
            if let Some(options) = update.and_then(|u| self.states.follow(session_id, &u)) {
                self.send(session_id, options);
            }
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
        self.deliver(session_id, event, true);
    }

    /// A closed or deleted session's mode and model are forgotten, whoever
    /// closed it (this window, or another through the serve).
    fn closed(&self, session_id: &str) {
        self.states.forget(session_id);
    }
}

/// The ACP updates of one event (none for tandem-only ones).
pub(super) fn acp_updates(event: &Event) -> Vec<Value> {
    session_update(event).map(typed_updates).unwrap_or_default()
}

/// One tandem update as ACP's: `usage` as the `usage_update` built beside
/// the model's config options (with the context in use), every other kind
/// through the schema's types.
fn typed_updates(update: protocol::SessionUpdate) -> Vec<Value> {
    let updates = match update {
        protocol::SessionUpdate::Usage {
            call,
            turn,
            session,
            context,
        } => super::model_options::usage_update(call, turn, session, context)
            .into_iter()
            .collect(),
        update => session_updates::acp_updates(update),
    };
    updates
        .iter()
        .filter_map(session_updates::update_value)
        .collect()
}

/// ACP's stop reasons are fewer than tandem's: the closest one, and
/// tandem's own when it says more (for `_meta.tandem.stopReason`). An
/// `error` turn becomes a JSON-RPC error instead.
pub(super) fn acp_stop_reason(reason: StopReason) -> (acp::StopReason, Option<&'static str>) {
    use acp::StopReason as Acp;
    let acp = match reason {
        StopReason::EndTurn => return (Acp::EndTurn, None),
        StopReason::MaxTokens => return (Acp::MaxTokens, None),
        StopReason::Refusal => return (Acp::Refusal, None),
        StopReason::Cancelled => return (Acp::Cancelled, None),
        StopReason::MaxIterations => return (Acp::MaxTurnRequests, None),
        // The session's token budget ran out: no more tokens.
        StopReason::TokenBudget => Acp::MaxTokens,
        // A money or token cap of `[budget]` stopped the next call.
        StopReason::BudgetExceeded => Acp::MaxTokens,
        // The request outgrew the model's context: a token limit.
        StopReason::ContextOverflow => Acp::MaxTokens,
        // Compactions that went nowhere, like a loop: a runaway turn.
        StopReason::CompactionSpiral => Acp::MaxTurnRequests,
        // The loop detector stopped a model repeating its tool calls: too
        // many requests that went nowhere.
        StopReason::LoopDetected => Acp::MaxTurnRequests,
        // A hook or the mode refused to go on.
        StopReason::Blocked => Acp::Refusal,
        StopReason::Timeout | StopReason::Interrupted | StopReason::Error => Acp::EndTurn,
    };
    (acp, Some(reason.as_str()))
}

/// The `session/prompt` result of a turn that ended with `reason`.
pub(crate) fn prompt_result(reason: StopReason) -> Value {
    let (acp, tandem) = acp_stop_reason(reason);
    let meta = session_updates::tandem_meta(tandem.map(|t| ("stopReason", Value::from(t))));
    to_wire(acp::PromptResponse::new(acp).meta(meta))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use acp::StopReason as Acp;

    #[test]
    fn stop_reasons_map_onto_acps_five_with_tandems_in_meta() {
        assert_eq!(acp_stop_reason(StopReason::EndTurn), (Acp::EndTurn, None));
        assert_eq!(
            acp_stop_reason(StopReason::MaxIterations),
            (Acp::MaxTurnRequests, None)
        );
        assert_eq!(
            acp_stop_reason(StopReason::TokenBudget),
            (Acp::MaxTokens, Some("token_budget"))
        );
        assert_eq!(
            acp_stop_reason(StopReason::Cancelled),
            (Acp::Cancelled, None)
        );
        assert_eq!(
            acp_stop_reason(StopReason::BudgetExceeded),
            (Acp::MaxTokens, Some("budget_exceeded"))
        );
        assert_eq!(
            acp_stop_reason(StopReason::ContextOverflow),
            (Acp::MaxTokens, Some("context_overflow"))
        );
        assert_eq!(
            acp_stop_reason(StopReason::CompactionSpiral),
            (Acp::MaxTurnRequests, Some("compaction_spiral"))
        );
        assert_eq!(
            acp_stop_reason(StopReason::LoopDetected),
            (Acp::MaxTurnRequests, Some("loop_detected"))
        );
        assert_eq!(
            acp_stop_reason(StopReason::Blocked),
            (Acp::Refusal, Some("blocked"))
        );
        assert_eq!(
            prompt_result(StopReason::Timeout),
            json!({"stopReason": "end_turn", "_meta": {"tandem": {"stopReason": "timeout"}}})
        );
    }

    #[test]
    fn tandem_only_fields_move_under_meta() {
        let update = json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1",
                            "waitingFor": "permission"});
        assert_eq!(
            typed_updates(serde_json::from_value(update).expect("a tandem update")),
            vec![
                json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1",
                        "_meta": {"tandem": {"waitingFor": "permission"}}})
            ]
        );
    }
}
