//! An ACP client's own facilities as tools use them: its files (`fs/*`)
//! and its terminal (`terminal/*`), each only when the client offers it.
//! Shared by `tandem acp`'s bridge and the serve's bridge for a session
//! whose turn belongs to a `tandem acp --attach` client.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{client_fs, terminal};
use crate::frontend::lsp::outgoing::Outgoing;
use crate::frontend::lsp::OutboundQueue;
use crate::vocab::bridge::{
    BridgeOutcome, ClientFacilities, ClientFile, TerminalCommand, TerminalRun,
};

/// The facilities `offered` by the client behind `outgoing`; a terminal's
/// output goes to `queue` as `update_method` notifications.
pub(crate) struct Facilities<'a> {
    pub(crate) offered: ClientFacilities,
    pub(crate) outgoing: &'a Arc<Outgoing>,
    pub(crate) queue: &'a OutboundQueue,
    pub(crate) update_method: &'static str,
}

impl Facilities<'_> {
    pub(crate) async fn read(
        self,
        file: ClientFile,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<String> {
        if !self.offered.read_text_file {
            return BridgeOutcome::Unavailable("the client cannot read files".to_string());
        }
        client_fs::read(self.outgoing, file, cancel).await
    }

    pub(crate) async fn write(
        self,
        file: ClientFile,
        text: String,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<()> {
        if !self.offered.write_text_file {
            return BridgeOutcome::Unavailable("the client cannot write files".to_string());
        }
        client_fs::write(self.outgoing, file, text, cancel).await
    }

    pub(crate) async fn run(
        self,
        command: TerminalCommand,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<TerminalRun> {
        if !self.offered.terminal {
            return BridgeOutcome::Unavailable("the client has no terminal".to_string());
        }
        terminal::run(
            self.outgoing.clone(),
            self.queue.clone(),
            self.update_method,
            command,
            cancel,
        )
        .await
    }
}
