//! `tandem acp`'s answer to a `/rewind` prompt: the list of messages, or
//! the rewind and what it did, said as the agent's text.

use serde_json::Value;

use super::super::rewind_command::{list_text, outcome_text, rewind_params, said, RewindCommand};
use super::{bad, Agent, Reply};
use crate::frontend::acp::mapping::prompt_result;
use crate::frontend::acp::wire::daemon_error;
use crate::frontend::rewind::{rewind_request, rewind_result};
use crate::vocab::event::StopReason;

impl Agent {
    pub(super) async fn rewind_command(
        &self,
        session_id: &str,
        command: Result<RewindCommand, String>,
        rid: &Value,
    ) -> Reply {
        let command = command.map_err(|e| bad(rid, e))?;
        let messages = self
            .daemon
            .user_messages(session_id)
            .map_err(|e| daemon_error(rid, e))?;
        let text = match command {
            RewindCommand::List => list_text(&messages),
            run => {
                let params = rewind_params(session_id, &run, &messages).map_err(|e| bad(rid, e))?;
                let outcome = self
                    .daemon
                    .rewind(&self.editor, rewind_request(params))
                    .await
                    .map_err(|e| daemon_error(rid, e))?;
                let result = serde_json::to_value(rewind_result(outcome)).unwrap_or_default();
                outcome_text(&result)
            }
        };
        self.sink.send(session_id, said(text));
        Ok(prompt_result(StopReason::EndTurn))
    }
}
