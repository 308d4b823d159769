//! ACP's `session/fork` (unstable in ACP's schema, advertised as
//! `sessionCapabilities.fork`): a new session with the original's history,
//! up to the user message `_meta.tandem.messageId` names when given (ACP's
//! request has no field for it), ready for prompts without a replay.
//!
//! `additionalDirectories` are roots after the original's (kept in the
//! fork's log). Invariant: the original session is untouched; the answer is
//! `session/new`'s shape for the fork.

use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;

use super::modes::session_state;
use super::session::{absolute_cwd, bad, instructions_meta, mcp_servers_param, more_roots, Agent};
use super::wire::to_wire;
use super::wire::{daemon_error, string_param};

/// The user message a fork starts before (`_meta.tandem.messageId`), if
/// any; `Err` names the field (also the check of `tandem acp --attach`).
pub(crate) fn fork_message_id(params: &Value) -> Result<Option<String>, String> {
    match &params["_meta"]["tandem"]["messageId"] {
        Value::Null => Ok(None),
        Value::String(id) => Ok(Some(id.clone())),
        other => Err(format!(
            "invalid params: `_meta.tandem.messageId` must be a string, got {other}"
        )),
    }
}

impl Agent {
    /// `session/fork` → `{sessionId, modes, configOptions, _meta}`.
    pub(super) fn fork(&self, params: &Value, rid: &Value) -> Result<Value, Value> {
        let session_id = string_param(params, "sessionId").map_err(|e| bad(rid, e))?;
        absolute_cwd(params).map_err(|e| bad(rid, e))?;
        let mcp_servers = mcp_servers_param(params).map_err(|e| bad(rid, e))?;
        let message_id = fork_message_id(params).map_err(|e| bad(rid, e))?;
        let more = more_roots(params).map_err(|e| bad(rid, e))?;
        let fork = self
            .daemon
            .fork_session_in(&self.editor, session_id, message_id.as_deref(), more)
            .map_err(|e| daemon_error(rid, e))?;
        self.daemon
            .add_mcp_servers(&fork.id, &mcp_servers)
            .map_err(|e| daemon_error(rid, e))?;
        let setup = session_state(fork.mode());
        Ok(to_wire(
            acp::ForkSessionResponse::new(fork.id.clone())
                .modes(setup.modes)
                .config_options(setup.config_options)
                .meta(instructions_meta(&fork)),
        ))
    }
}
