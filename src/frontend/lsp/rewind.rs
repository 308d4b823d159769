//! `tandem/rewind` over LSP: translates, the core decides.

use tower_lsp::jsonrpc::Result;

use super::{daemon_error, guarded, Backend};
use crate::frontend::rewind::{rewind_request, rewind_result};
use crate::protocol::{RewindParams, RewindResult};

impl Backend {
    /// `tandem/rewind`: files and/or the conversation back to before a
    /// user message (or a rewind undone).
    pub(super) async fn rewind(&self, params: RewindParams) -> Result<RewindResult> {
        guarded("tandem/rewind", async move {
            self.daemon
                .rewind(&self.client, rewind_request(params))
                .await
                .map(rewind_result)
                .map_err(daemon_error)
        })
        .await
    }
}
