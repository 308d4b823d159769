//! Where the driver hands the checkpoints their moments: before a call
//! that changes files, after a command, at a turn's end, and before a turn
//! that follows a conversation rewind.

use std::sync::Arc;

use serde_json::Value;

use crate::buffers::BufferCache;
use crate::core::checkpoints::CommandWatch;
use crate::core::log::read_log;
use crate::core::projection::Projection;
use crate::core::session::Session;
use crate::tools::ToolContext;

/// Before a call runs: a patch's files are stored; a command's workspace
/// is scanned (the watch goes to [`after_call`]).
pub(super) async fn before_call(
    tool: &str,
    args: &Value,
    ctx: &ToolContext,
    session: &Arc<Session>,
    turn_id: &str,
) -> Option<CommandWatch> {
    match tool {
        "apply_patch" => {
            session
                .checkpoints
                .before_patch(turn_id, args, ctx, &session.log)
                .await;
            None
        }
        "exec_command" => {
            session
                .checkpoints
                .before_command(&session.config.checkpoints, ctx, turn_id)
                .await
        }
        _ => None,
    }
}

/// After a command ended (or was stopped): the files it changed.
pub(super) async fn after_call(watch: Option<CommandWatch>, session: &Arc<Session>, turn_id: &str) {
    if let Some(watch) = watch {
        session
            .checkpoints
            .after_command(watch, turn_id, &session.log)
            .await;
    }
}

/// At a turn's end: what it left of the files it changed.
pub(super) async fn end_turn(session: &Arc<Session>, turn_id: &str, buffers: &Arc<BufferCache>) {
    session
        .checkpoints
        .end_turn(turn_id, buffers, &session.log, &session.config.checkpoints)
        .await;
}

/// Folds the log again into the model's context.
pub(super) fn refold(session: &Arc<Session>, projection: &mut Projection) {
    session.log.sync();
    match read_log(session.log.path()) {
        Ok((_, events)) => *projection = projection.refolded(events.iter().map(|e| &e.event)),
        Err(e) => tracing::warn!("cannot read the log after a rewind: {e}"),
    }
}
