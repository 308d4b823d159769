//! A session's [`ClientBridge`] in the serve: permission, questions and
//! edits through the session's [`Outgoing`] (the hub routes each request
//! to the clients that should see it), and, for an ACP client that owns
//! the turn (`tandem acp --attach`), its files (`fs/*`) and its terminal
//! (`terminal/*`) as `tandem acp` uses them.
//!
//! Invariant: the client facilities are those of the connection that owns
//! the session's turn, while it is attached; without one, tools use the
//! disk and run commands in the serve, and a request still waiting for
//! the owner fails when it goes (see `Hub::refresh`).

use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::frontend::acp::facilities::Facilities;
use crate::frontend::lsp::outgoing::Outgoing;
use crate::frontend::lsp::OutboundQueue;
use crate::vocab::bridge::{
    ApplyEditRequest, ApplyEditResponse, BridgeOutcome, ClientAbilities, ClientBridge,
    ClientFacilities, ClientFile, PermissionAnswer, PermissionRequest, TerminalCommand,
    TerminalRun, UserInputRequest,
};
use crate::vocab::language::{FileDiagnostics, LanguageAnswer, Location, Symbol, TextPoint};

/// Whether a request to the editor is for the turn's owner's files or
/// terminal.
pub fn is_owner_facility(method: &str) -> bool {
    method.starts_with("fs/") || method.starts_with("terminal/")
}

/// Whether `facilities` let a client answer `method`.
pub fn offers(facilities: ClientFacilities, method: &str) -> bool {
    match method {
        "fs/read_text_file" => facilities.read_text_file,
        "fs/write_text_file" => facilities.write_text_file,
        m if m.starts_with("terminal/") => facilities.terminal,
        _ => false,
    }
}

pub struct SessionClient {
    pub outgoing: Arc<Outgoing>,
    /// Where `outgoing` writes: the terminal's `tandem/update` goes there.
    queue: OutboundQueue,
    facilities: Mutex<ClientFacilities>,
}

impl SessionClient {
    pub fn new(outgoing: Arc<Outgoing>, queue: OutboundQueue) -> Arc<SessionClient> {
        Arc::new(SessionClient {
            outgoing,
            queue,
            facilities: Mutex::new(ClientFacilities::default()),
        })
    }

    /// The owning client's facilities (none when no owner is attached).
    pub fn set_facilities(&self, facilities: ClientFacilities) {
        *self.facilities.lock().unwrap_or_else(|e| e.into_inner()) = facilities;
    }

    /// The facilities of the client that owns the turn.
    fn owners(&self) -> Facilities<'_> {
        Facilities {
            offered: self.facilities(),
            outgoing: &self.outgoing,
            queue: &self.queue,
            update_method: "tandem/update",
        }
    }
}

#[async_trait::async_trait]
impl ClientBridge for SessionClient {
    fn abilities(&self) -> ClientAbilities {
        self.outgoing.abilities()
    }

    fn facilities(&self) -> ClientFacilities {
        *self.facilities.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn read_text_file(
        &self,
        file: ClientFile,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<String> {
        self.owners().read(file, cancel).await
    }

    async fn write_text_file(
        &self,
        file: ClientFile,
        text: String,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<()> {
        self.owners().write(file, text, cancel).await
    }

    async fn run_in_terminal(
        &self,
        command: TerminalCommand,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<TerminalRun> {
        self.owners().run(command, cancel).await
    }

    async fn request_permission(
        &self,
        request: PermissionRequest,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<PermissionAnswer> {
        self.outgoing.request_permission(request, cancel).await
    }

    async fn request_user_input(
        &self,
        request: UserInputRequest,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<Value> {
        self.outgoing.request_user_input(request, cancel).await
    }

    async fn apply_edit(
        &self,
        request: ApplyEditRequest,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<ApplyEditResponse> {
        self.outgoing.apply_edit(request, cancel).await
    }

    async fn diagnostics(
        &self,
        paths: Option<Vec<std::path::PathBuf>>,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<LanguageAnswer<FileDiagnostics>> {
        self.outgoing.diagnostics(paths, cancel).await
    }

    async fn definition(
        &self,
        at: TextPoint,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<LanguageAnswer<Location>> {
        self.outgoing.definition(at, cancel).await
    }

    async fn references(
        &self,
        at: TextPoint,
        include_declaration: bool,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<LanguageAnswer<Location>> {
        self.outgoing
            .references(at, include_declaration, cancel)
            .await
    }

    async fn workspace_symbols(
        &self,
        query: String,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<LanguageAnswer<Symbol>> {
        self.outgoing.workspace_symbols(query, cancel).await
    }
}
