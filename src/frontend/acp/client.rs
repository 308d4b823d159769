//! The [`ClientBridge`] of an ACP client: permission through
//! `session/request_permission`, questions through `elicitation/create`,
//! files through `fs/*`, commands through `terminal/*`, each only when the
//! client advertised it in `initialize`; and [`typed_answer`], which reads
//! each of the client's answers as ACP's response type.

use std::sync::Arc;

use agent_client_protocol_schema::v1 as acp;
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::elicitation;
use super::facilities::Facilities;
use crate::frontend::lsp::outgoing::Outgoing;
use crate::frontend::lsp::OutboundQueue;
use crate::vocab::bridge::{
    ApplyEditRequest, ApplyEditResponse, BridgeOutcome, ClientAbilities, ClientBridge,
    ClientFacilities, ClientFile, PermissionAnswer, PermissionChoice, PermissionRequest,
    TerminalCommand, TerminalRun, UserInputRequest,
};

/// The client's answer to `method` read as the schema's response type `T`,
/// then `take`n: as lenient as ACP itself (optional fields, `_meta`,
/// unknown fields ignored), no more. A malformed answer is logged and
/// becomes the specific error the tool that asked reports; a JSON-RPC
/// error answer, a cancel and a missing capability pass through as they
/// were.
pub(crate) fn typed_answer<T: DeserializeOwned, U>(
    method: &str,
    outcome: BridgeOutcome<Value>,
    take: impl FnOnce(T) -> U,
) -> BridgeOutcome<U> {
    match outcome {
        BridgeOutcome::Answered(result) => match T::deserialize(&result) {
            Ok(answer) => BridgeOutcome::Answered(take(answer)),
            Err(e) => {
                let why = malformed(method, &e);
                tracing::warn!("{why}: {result}");
                BridgeOutcome::Unavailable(why)
            }
        },
        BridgeOutcome::Cancelled => BridgeOutcome::Cancelled,
        BridgeOutcome::Unavailable(why) => BridgeOutcome::Unavailable(why),
    }
}

/// What the model reads about a malformed answer to `method`. serde names
/// the Rust struct it expected (the schema crate's are internal: `Wire`);
/// the editor sent JSON, where that is an object.
pub(crate) fn malformed(method: &str, why: impl std::fmt::Display) -> String {
    let mut why = why.to_string();
    if let Some(at) = why.find(", expected struct ") {
        why.truncate(at);
        why.push_str(", expected an object");
    }
    format!("the editor's answer to {method} was malformed: {why}")
}

/// `session/request_permission`'s answer as ACP's
/// `RequestPermissionResponse`; `outcome.reason` is tandem's extension
/// (the user's comment on a rejection), read when it is a string.
fn permission_answer(outcome: BridgeOutcome<Value>) -> BridgeOutcome<PermissionAnswer> {
    const METHOD: &str = "session/request_permission";
    let reason = match &outcome {
        BridgeOutcome::Answered(result) => result["outcome"]["reason"]
            .as_str()
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(str::to_string),
        _ => None,
    };
    let answer: acp::RequestPermissionResponse = match typed_answer(METHOD, outcome, |a| a) {
        BridgeOutcome::Answered(answer) => answer,
        BridgeOutcome::Cancelled => return BridgeOutcome::Cancelled,
        BridgeOutcome::Unavailable(why) => return BridgeOutcome::Unavailable(why),
    };
    let option_id = match answer.outcome {
        acp::RequestPermissionOutcome::Selected(selected) => selected.option_id,
        // The prompt turn was cancelled before the user chose.
        _ => return BridgeOutcome::Cancelled,
    };
    match PermissionChoice::from_option_id(&option_id.0) {
        Some(choice) => BridgeOutcome::Answered(PermissionAnswer { choice, reason }),
        None => {
            let why = malformed(
                METHOD,
                format!("`{option_id}` is none of the options offered"),
            );
            tracing::warn!("{why}");
            BridgeOutcome::Unavailable(why)
        }
    }
}

/// What the client's `clientCapabilities` offer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct AcpCapabilities {
    pub(crate) read_text_file: bool,
    pub(crate) write_text_file: bool,
    pub(crate) elicitation_form: bool,
    pub(crate) terminal: bool,
}

impl AcpCapabilities {
    pub(crate) fn from_initialize(params: &Value) -> AcpCapabilities {
        let caps = &params["clientCapabilities"];
        AcpCapabilities {
            read_text_file: caps["fs"]["readTextFile"] == true,
            write_text_file: caps["fs"]["writeTextFile"] == true,
            elicitation_form: caps["elicitation"]["form"].is_object(),
            terminal: caps["terminal"] == true,
        }
    }
}

pub(super) struct AcpClient {
    pub(super) outgoing: Arc<Outgoing>,
    out: OutboundQueue,
    capabilities: Mutex<AcpCapabilities>,
}

impl AcpClient {
    pub(super) fn new(out: OutboundQueue) -> Arc<AcpClient> {
        Arc::new(AcpClient {
            outgoing: Outgoing::with_methods(
                out.clone(),
                "session/request_permission",
                "elicitation/create",
                "$/cancel_request",
            ),
            capabilities: Mutex::new(AcpCapabilities::default()),
            out,
        })
    }

    pub(super) fn set_capabilities(&self, capabilities: AcpCapabilities) {
        *self.capabilities.lock() = capabilities;
        self.outgoing.set_abilities(ClientAbilities {
            request_permission: true,
            request_user_input: capabilities.elicitation_form,
            ..ClientAbilities::default()
        });
    }

    fn capabilities(&self) -> AcpCapabilities {
        *self.capabilities.lock()
    }

    fn own(&self) -> Facilities<'_> {
        Facilities {
            offered: self.facilities(),
            outgoing: &self.outgoing,
            queue: &self.out,
            update_method: "session/update",
        }
    }
}

#[async_trait::async_trait]
impl ClientBridge for AcpClient {
    fn abilities(&self) -> ClientAbilities {
        self.outgoing.abilities()
    }

    fn facilities(&self) -> ClientFacilities {
        let caps = self.capabilities();
        ClientFacilities {
            read_text_file: caps.read_text_file,
            write_text_file: caps.write_text_file,
            terminal: caps.terminal,
        }
    }

    async fn request_permission(
        &self,
        request: PermissionRequest,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<PermissionAnswer> {
        let params = serde_json::to_value(super::permission::request_params(&request))
            .unwrap_or(Value::Null);
        let answer = self
            .outgoing
            .request("session/request_permission", params, cancel)
            .await;
        permission_answer(answer)
    }

    async fn request_user_input(
        &self,
        request: UserInputRequest,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<Value> {
        if !self.capabilities().elicitation_form {
            return BridgeOutcome::Unavailable("the client cannot answer questions".to_string());
        }
        elicitation::ask(&self.outgoing, request, cancel).await
    }

    async fn apply_edit(
        &self,
        _: ApplyEditRequest,
        _: &CancellationToken,
    ) -> BridgeOutcome<ApplyEditResponse> {
        BridgeOutcome::Unavailable("ACP has no workspace edits".to_string())
    }

    async fn read_text_file(
        &self,
        file: ClientFile,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<String> {
        self.own().read(file, cancel).await
    }

    async fn write_text_file(
        &self,
        file: ClientFile,
        text: String,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<()> {
        self.own().write(file, text, cancel).await
    }

    async fn run_in_terminal(
        &self,
        command: TerminalCommand,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<TerminalRun> {
        self.own().run(command, cancel).await
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(result: Value) -> BridgeOutcome<String> {
        typed_answer(
            "fs/read_text_file",
            BridgeOutcome::Answered(result),
            |read: acp::ReadTextFileResponse| read.content,
        )
    }

    fn unavailable<T: std::fmt::Debug>(outcome: BridgeOutcome<T>) -> String {
        match outcome {
            BridgeOutcome::Unavailable(why) => why,
            other => panic!("not unavailable: {other:?}"),
        }
    }

    #[test]
    fn a_malformed_answer_names_the_method_and_what_is_wrong() {
        assert_eq!(
            unavailable(read(json!({}))),
            "the editor's answer to fs/read_text_file was malformed: missing field `content`"
        );
        assert_eq!(
            unavailable(read(json!("text"))),
            "the editor's answer to fs/read_text_file was malformed: \
             invalid type: string \"text\", expected an object"
        );
        assert_eq!(
            unavailable(read(json!({"content": 5}))),
            "the editor's answer to fs/read_text_file was malformed: \
             invalid type: integer `5`, expected a string"
        );
        // As lenient as ACP: unknown fields and a bad `_meta` are ignored.
        assert_eq!(
            read(json!({"content": "x", "extra": 1, "_meta": 5})),
            BridgeOutcome::Answered("x".to_string())
        );
    }

    #[test]
    fn an_error_answer_or_a_cancel_passes_through() {
        let typed = |outcome| {
            typed_answer(
                "fs/read_text_file",
                outcome,
                |r: acp::ReadTextFileResponse| r.content,
            )
        };
        assert_eq!(
            typed(BridgeOutcome::Unavailable("the editor failed: no".into())),
            BridgeOutcome::Unavailable("the editor failed: no".into())
        );
        assert_eq!(typed(BridgeOutcome::Cancelled), BridgeOutcome::Cancelled);
    }

    #[test]
    fn a_permission_answer_is_acps_with_tandems_reason() {
        let answer = |result| permission_answer(BridgeOutcome::Answered(result));
        assert_eq!(
            answer(
                json!({"outcome": {"outcome": "selected", "optionId": "reject_once",
                                      "reason": " use make "}})
            ),
            BridgeOutcome::Answered(PermissionAnswer {
                choice: PermissionChoice::RejectOnce,
                reason: Some("use make".into()),
            })
        );
        assert_eq!(
            answer(json!({"outcome": {"outcome": "cancelled"}})),
            BridgeOutcome::Cancelled
        );
        assert_eq!(
            unavailable(answer(json!({"outcome": {"outcome": "selected"}}))),
            "the editor's answer to session/request_permission was malformed: \
             missing field `optionId`"
        );
        assert_eq!(
            unavailable(answer(
                json!({"outcome": {"outcome": "selected", "optionId": "yes"}})
            )),
            "the editor's answer to session/request_permission was malformed: \
             `yes` is none of the options offered"
        );
    }
}
