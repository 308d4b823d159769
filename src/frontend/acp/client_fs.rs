//! The client's files: `fs/read_text_file` and `fs/write_text_file`.

use agent_client_protocol_schema::v1 as acp;
use tokio_util::sync::CancellationToken;

use crate::frontend::answers::typed_answer;
use crate::frontend::lsp::outgoing::Outgoing;
use crate::vocab::bridge::{BridgeOutcome, ClientFile};

/// The whole text of `file` as the client has it (its buffer when open).
pub(crate) async fn read(
    outgoing: &Outgoing,
    file: ClientFile,
    cancel: &CancellationToken,
) -> BridgeOutcome<String> {
    let params = super::wire::to_wire(acp::ReadTextFileRequest::new(file.session_id, file.path));
    const METHOD: &str = "fs/read_text_file";
    let answer = outgoing.request(METHOD, params, cancel).await;
    typed_answer(METHOD, answer, |read: acp::ReadTextFileResponse| {
        read.content
    })
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
    const METHOD: &str = "fs/write_text_file";
    let answer = outgoing.request(METHOD, params, cancel).await;
    typed_answer(METHOD, answer, |_: acp::WriteTextFileResponse| ())
}
