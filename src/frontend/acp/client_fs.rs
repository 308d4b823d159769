//! The client's files: `fs/read_text_file` and `fs/write_text_file`.

use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::frontend::lsp::outgoing::Outgoing;
use crate::vocab::bridge::{BridgeOutcome, ClientFile};

/// The whole text of `file` as the client has it (its buffer when open).
pub(crate) async fn read(
    outgoing: &Outgoing,
    file: ClientFile,
    cancel: &CancellationToken,
) -> BridgeOutcome<String> {
    let params = super::wire::to_wire(acp::ReadTextFileRequest::new(file.session_id, file.path));
    match outgoing.request("fs/read_text_file", params, cancel).await {
        BridgeOutcome::Answered(result) => match result.get("content").and_then(Value::as_str) {
            Some(content) => BridgeOutcome::Answered(content.to_string()),
            None => BridgeOutcome::Unavailable(format!(
                "the client's answer to fs/read_text_file has no string `content`: {result}"
            )),
        },
        BridgeOutcome::Cancelled => BridgeOutcome::Cancelled,
        BridgeOutcome::Unavailable(why) => BridgeOutcome::Unavailable(why),
    }
}

/// Replaces the text of `file` in the client.
pub(crate) async fn write(
    outgoing: &Outgoing,
    file: ClientFile,
    text: String,
    cancel: &CancellationToken,
) -> BridgeOutcome<()> {
    let params = super::wire::to_wire(acp::WriteTextFileRequest::new(
        file.session_id,
        file.path,
        text,
    ));
    match outgoing.request("fs/write_text_file", params, cancel).await {
        BridgeOutcome::Answered(_) => BridgeOutcome::Answered(()),
        BridgeOutcome::Cancelled => BridgeOutcome::Cancelled,
        BridgeOutcome::Unavailable(why) => BridgeOutcome::Unavailable(why),
    }
}
