//! The [`ClientBridge`] of an ACP client: permission through
//! `session/request_permission`, questions through `elicitation/create`,
//! files through `fs/*`, commands through `terminal/*`, each only when the
//! client advertised it in `initialize`. Each answer is read as ACP's
//! response type ([`crate::frontend::answers::typed_answer`]).

use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::elicitation;
use super::facilities::Facilities;
use crate::frontend::lsp::outgoing::Outgoing;
use crate::frontend::lsp::OutboundQueue;
use crate::vocab::bridge::{
    ApplyEditRequest, ApplyEditResponse, BridgeOutcome, ClientAbilities, ClientBridge,
    ClientFacilities, ClientFile, PermissionAnswer, PermissionRequest, TerminalCommand,
    TerminalRun, UserInputRequest,
};

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
        crate::frontend::answers::permission_answer("session/request_permission", answer)
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
