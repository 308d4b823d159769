//! `Daemon::rewind`: undoing what the turns from a user message on did to
//! the files, and (with `conversation`) to the model's context.
//!
//! Invariant: refused while the session works; never overwrites a file the
//! user changed since the agent did unless forced for it; a dry run
//! changes nothing and logs nothing.

use std::sync::Arc;

use super::{Daemon, DaemonError};
use crate::core::checkpoints::{
    is_conversation_rewind, messages_to_drop, plan_rewind, redo_effect, rewind_start, run_rewind,
    Force, RewindFileReport, RewindRun, RewindStatus,
};
use crate::core::client::Client;
use crate::core::log::read_log;
use crate::core::session::RunState;
use crate::vocab::event::Event;

/// What to rewind.
#[derive(Debug, Clone, Default)]
pub struct RewindRequest {
    pub session_id: String,
    /// A user message's id, or a rewind's (undoing that rewind).
    pub to_message_id: String,
    pub files: bool,
    pub conversation: bool,
    pub force: Force,
    /// Only say what would happen.
    pub dry_run: bool,
}

/// What a rewind did (or, dry, would do).
#[derive(Debug, Clone)]
pub struct RewindOutcome {
    /// The rewind's id (itself a point to rewind to: a redo); `None` for a
    /// dry run.
    pub rewind_id: Option<String>,
    pub files: Vec<RewindFileReport>,
    pub conversation: bool,
}

impl Daemon {
    /// The user messages of a loaded session, oldest first: id and first
    /// line (what a rewind can go back to).
    pub fn user_messages(&self, session_id: &str) -> Result<Vec<(String, String)>, DaemonError> {
        let session = self.session(session_id)?;
        session.log.sync();
        let (_, events) =
            read_log(session.log.path()).map_err(|e| DaemonError::Storage(e.to_string()))?;
        Ok(events
            .iter()
            .filter_map(|e| match &e.event {
                Event::UserMessage {
                    message_id,
                    content,
                    ..
                } => Some((message_id.clone(), first_line(content))),
                _ => None,
            })
            .collect())
    }

    /// Rewinds a loaded session for `client`: conflicts are judged against
    /// its documents, and its open buffers are restored through it.
    pub async fn rewind(
        &self,
        client: &Arc<Client>,
        request: RewindRequest,
    ) -> Result<RewindOutcome, DaemonError> {
        let session = self.session(&request.session_id)?;
        let busy = || {
            DaemonError::Busy(format!(
                "session `{}` is working: wait for its turn to end (or cancel it) before rewinding",
                request.session_id
            ))
        };
        if matches!(session.run_state(), RunState::Running { .. }) || session.queued_prompts() > 0 {
            return Err(busy());
        }
        let Some(_rewinding) = session.checkpoints.rewinding() else {
            return Err(busy());
        };
        session.log.sync();
        let (header, events) =
            read_log(session.log.path()).map_err(|e| DaemonError::Storage(e.to_string()))?;
        let start = rewind_start(&events, &request.to_message_id).ok_or_else(|| {
            DaemonError::InvalidParams(format!(
                "toMessageId: session `{}` has no user message or rewind `{}`",
                request.session_id, request.to_message_id
            ))
        })?;
        let all: Vec<&Event> = events.iter().map(|e| &e.event).collect();
        let is_message = events.iter().any(|e| {
            matches!(&e.event, Event::UserMessage { message_id, .. } if *message_id == request.to_message_id)
        });
        if request.conversation
            && !is_message
            && !is_conversation_rewind(&all, &request.to_message_id)
        {
            return Err(DaemonError::InvalidParams(format!(
                "toMessageId: `{}` is a rewind of the files only: only files can be rewound to it (conversation: false)",
                request.to_message_id
            )));
        }
        let buffers = client.buffers().clone();
        let from = if request.files { start } else { events.len() };
        let plan = plan_rewind(
            &events,
            from,
            session.checkpoints.store(),
            &buffers,
            &request.force,
        );
        if request.dry_run {
            return Ok(RewindOutcome {
                rewind_id: None,
                files: plan.reports(),
                conversation: request.conversation,
            });
        }
        let rewind_id = format!(
            "rw{}",
            1 + events
                .iter()
                .filter(|e| matches!(e.event, Event::RewindStarted { .. }))
                .count()
        );
        let (dropped_messages, restored_messages) = match (request.conversation, is_message) {
            (false, _) => (Vec::new(), Vec::new()),
            (true, true) => (messages_to_drop(&all, &request.to_message_id), Vec::new()),
            (true, false) => redo_effect(&all, &request.to_message_id),
        };
        let bridge = client.turn_bridge(&session.id);
        let files = run_rewind(
            plan,
            RewindRun {
                checkpoints: &session.checkpoints,
                log: &session.log,
                buffers: &buffers,
                bridge: &bridge,
                roots: &header.workspace,
                config: &session.config.checkpoints,
                rewind_id: &rewind_id,
                to_message_id: &request.to_message_id,
                conversation: request.conversation,
                dropped_messages,
                restored_messages,
            },
        )
        .await;
        session.log.durable().await;
        if request.conversation {
            session.checkpoints.mark_conversation_rewound();
        }
        debug_assert!(files.iter().all(|f| f.status != RewindStatus::Restore));
        Ok(RewindOutcome {
            rewind_id: Some(rewind_id),
            files,
            conversation: request.conversation,
        })
    }
}

fn first_line(content: &[crate::vocab::event::UserContent]) -> String {
    use crate::vocab::event::UserContent;
    content
        .iter()
        .find_map(|c| match c {
            UserContent::Text { text } => text.lines().find(|l| !l.trim().is_empty()),
            UserContent::Resource { .. } | UserContent::Image { .. } => None,
        })
        .map(|l| l.chars().take(80).collect())
        .unwrap_or_default()
}
