//! `tandem/rewind` between the wire and the core, for every frontend.

use crate::core::checkpoints::Force;
use crate::core::daemon::{RewindOutcome, RewindRequest};
use crate::protocol::{RewindFileResult, RewindForce, RewindParams, RewindResult};

pub fn rewind_request(params: RewindParams) -> RewindRequest {
    RewindRequest {
        session_id: params.session_id,
        to_message_id: params.to_message_id,
        files: params.files,
        conversation: params.conversation,
        force: match params.force {
            None | Some(RewindForce::All(false)) => Force::None,
            Some(RewindForce::All(true)) => Force::All,
            Some(RewindForce::Paths(paths)) => Force::Paths(paths),
        },
        dry_run: params.dry_run,
    }
}

pub fn rewind_result(outcome: RewindOutcome) -> RewindResult {
    RewindResult {
        rewind_id: outcome.rewind_id,
        files: outcome
            .files
            .into_iter()
            .map(|f| RewindFileResult {
                path: f.path,
                status: f.status,
                diff: f.diff,
                reason: f.reason,
            })
            .collect(),
        conversation: outcome.conversation,
    }
}
