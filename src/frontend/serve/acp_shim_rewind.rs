//! `/rewind` in `tandem acp --attach`: as in `tandem acp`
//! (`frontend::acp::rewind_prompt`), the list from the user messages this
//! shim saw go by, the rewind through the serve's `tandem/rewind`.

use serde_json::{json, Value};

use super::Shim;
use crate::frontend::acp::rewind_command::{
    list_text, outcome_text, rewind_command, rewind_params, said, RewindCommand,
};
use crate::protocol::ContentBlock;

impl Shim {
    /// A prompt; `/rewind` is answered here.
    pub(super) async fn prompt_or_rewind(&self, id: Option<Value>, params: Value) {
        let blocks: Vec<ContentBlock> =
            serde_json::from_value(params["prompt"].clone()).unwrap_or_default();
        match rewind_command(&blocks) {
            Some(command) => self.rewind(id, &params, command).await,
            None => self.prompt(id, params),
        }
    }

    async fn rewind(
        &self,
        id: Option<Value>,
        params: &Value,
        command: Result<RewindCommand, String>,
    ) {
        let session_id = params["sessionId"].as_str().unwrap_or_default();
        let command = match command {
            Ok(command) => command,
            Err(e) => return self.fail(&id, -32602, &e),
        };
        let messages = self.state.user_messages(session_id);
        let text = match command {
            RewindCommand::List => list_text(&messages),
            run => {
                let params = match rewind_params(session_id, &run, &messages) {
                    Ok(params) => params,
                    Err(e) => return self.fail(&id, -32602, &e),
                };
                let params = serde_json::to_value(params).unwrap_or_default();
                let Some(answer) = self.relay.call("tandem/rewind", params).await else {
                    return self.fail(&id, -32603, "the serve did not answer");
                };
                if let Some(error) = answer.get("error") {
                    let code = error["code"].as_i64().unwrap_or(-32603);
                    return self.fail(
                        &id,
                        code,
                        error["message"].as_str().unwrap_or("rewind failed"),
                    );
                }
                outcome_text(&answer["result"])
            }
        };
        self.relay
            .to_editor(&json!({"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": session_id, "update": said(text)}}));
        self.reply(&id, json!({"stopReason": "end_turn"}));
    }
}
