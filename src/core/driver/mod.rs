//! The driver: runs a session's turns, one at a time, step by step.
//!
//! A step is one provider call plus the tools it asks for; a turn is steps
//! until the model stops asking for tools. Before every step the budget
//! gates run (shutdown, cancellation, iterations, idle progress, activity,
//! token budget); every
//! provider call streams with adaptive timeouts and is retried per the typed
//! recovery policy; tool calls of one response run in a bounded pool, with
//! exclusive tools as barriers, and their results are recorded in model
//! order.
//!
//! Invariant: every fact is recorded as an event before it is acted on, and
//! every turn that starts ends with exactly one `turn_end`; every tool call
//! that is recorded gets exactly one `tool_result`, whatever happens.
//!
//! The pieces: [`turn`] is a turn's state and its start and end,
//! [`gates`] the budget checks before each step, [`step`] the step loop,
//! [`recovery`] the retry policy around a provider call, [`stream`] one
//! streamed attempt, [`scheduler`] the tool calls of a response, [`approval`]
//! the permission gate of a command, [`compaction`] the summarizing and
//! repair of the history, [`overflow`] what follows a context overflow,
//! [`loops`] the repetition detector and [`admission`] the hooks that see
//! inputs before they enter, [`budget`] the spending caps before each model
//! call.

mod admission;
mod approval;
mod budget;
mod checkpoint_hooks;
mod compaction;
mod gates;
mod instructions;
mod loops;
mod mcp_approval;
mod model;
mod overflow;
mod recovery;
mod scheduler;
mod step;
mod stream;
mod turn;
mod usage;

use std::sync::Arc;

use tokio::time::Instant;

use self::turn::Turn;
use super::projection::Projection;
use super::session::{Session, StartedWork, TurnReceipt, Work};
use super::spend::SpendBook;
use crate::tools::ToolRegistry;
use crate::vocab::event::Usage;
use crate::workspace::Workspace;

pub use self::admission::{Admission, AdmissionHook, ClaimedInput, MaxInputChars};
pub use self::approval::command_scope;
pub use self::loops::LoopDetector;
pub use self::model::ProviderSlot;
pub use self::recovery::{recovery_policy, Recovery};

/// What a session's turns run with.
pub struct SessionEnv {
    /// The provider of the session's model in force.
    pub providers: ProviderSlot,
    pub tools: ToolRegistry,
    pub workspace: Arc<Workspace>,
    /// Run in order on every claimed batch.
    pub admission: Vec<Arc<dyn AdmissionHook>>,
    /// Today's spending of every workspace, for the day caps.
    pub spend: Arc<SpendBook>,
    /// Where the session's instruction files are looked for each turn.
    pub instructions: crate::core::instructions::InstructionSources,
}

/// The session's task: takes work from the inbox and runs a turn for
/// each, answering the prompt's receipt when its turn has ended.
pub async fn run_session(session: Arc<Session>, env: SessionEnv, mut projection: Projection) {
    let mut session_usage = session.restored_usage();
    let mut session_cost = session.restored_cost();
    let mut loops = LoopDetector::default();
    while let Some(StartedWork {
        work,
        turn_id,
        cancel,
    }) = session.next_work().await
    {
        // Inputs injected without waking ride along, ahead of the prompt
        // that was sent after them.
        let mut inputs = session.claim_next_step();
        // The turn is the client's whose input opened it (the prompt,
        // entered last; for a waking steer's turn, the last steer it
        // enters): its tools read that client's documents and ask through it.
        let client = match &work {
            Work::Prompt(prompt) => prompt.client.clone(),
            Work::Wake(waking) => inputs.last().map_or(waking, |i| &i.client).clone(),
        };
        let bridge = client.turn_bridge(&session.id);
        let buffers = client.buffers().clone();
        let receipt = match work {
            Work::Prompt(mut prompt) => {
                // A new prompt from the user ends the previous burst.
                loops.reset();
                let receipt = prompt.receipt.take();
                inputs.push(prompt);
                receipt
            }
            Work::Wake(_) => None,
        };
        // A conversation rewind since the last turn: the context is the
        // log's fold again, without what it undid.
        if session.checkpoints.take_conversation_rewound() {
            checkpoint_hooks::refold(&session, &mut projection);
        }
        let model = session.model();
        let mut turn = Turn {
            session: &session,
            env: &env,
            provider: env.providers.provider(&model),
            model,
            cost: None,
            session_cost: &mut session_cost,
            tool_specs: Vec::new(),
            limits: &session.config.limits,
            projection: &mut projection,
            turn_id: turn_id.clone(),
            cancel,
            buffers,
            bridge,
            usage: Usage::default(),
            session_usage: &mut session_usage,
            loops: &mut loops,
            started: Instant::now(),
            last_progress: Instant::now(),
            retries: 0,
            failures: Default::default(),
            compactions_without_progress: 0,
            progress_at_compaction: None,
        };
        let end = turn.run(inputs).await;
        let usage = turn.usage;
        session.set_idle();
        if let Some(receipt) = receipt {
            let _ = receipt.send(TurnReceipt {
                turn_id: Some(turn_id),
                stop_reason: end.reason,
                message: end.message,
                usage,
                cost_usd: end.cost_usd,
            });
        }
    }
    session.discard_inbox("the daemon is shutting down");
    session.log.synced().await;
}
