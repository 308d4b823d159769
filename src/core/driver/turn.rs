//! A turn: its state, its start and its end. Every turn that starts
//! records `turn_start`, enters its claimed inputs through the admission
//! hooks and ends with exactly one `turn_end`, priced when the model's price
//! is known.

use std::sync::Arc;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::admission::{Admission, ClaimedInput};
use super::loops::LoopDetector;
use super::SessionEnv;
use crate::buffers::BufferCache;
use crate::config::LimitsConfig;
use crate::core::projection::Projection;
use crate::core::session::{PendingInput, Session};
use crate::core::session_model::ModelChoice;
use crate::provider::{Provider, ToolSpec};
use crate::vocab::event::{Event, StopReason, TurnId, Usage};
use crate::vocab::pricing::{price_of, Price};

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct TurnEnd {
    pub(super) reason: StopReason,
    pub(super) message: Option<String>,
    /// Filled in when the turn's end is recorded.
    pub(super) cost_usd: Option<f64>,
}

impl TurnEnd {
    pub(super) fn new(reason: StopReason, message: impl Into<String>) -> Self {
        TurnEnd {
            reason,
            message: Some(message.into()),
            cost_usd: None,
        }
    }

    pub(super) fn cancelled() -> Self {
        TurnEnd::new(StopReason::Cancelled, "cancelled by the user")
    }
}

/// One running turn: what it runs with and what it has used so far.
pub(super) struct Turn<'a> {
    pub(super) session: &'a Arc<Session>,
    pub(super) env: &'a SessionEnv,
    /// The model of the current step and its provider (`pick_model`).
    pub(super) provider: Arc<dyn Provider>,
    pub(super) model: ModelChoice,
    /// What the turn's calls cost, summed at each call's own price; `None`
    /// until a call with a known price.
    pub(super) cost: Option<f64>,
    /// The same for the whole session.
    pub(super) session_cost: &'a mut Option<f64>,
    /// The tools offered in the current step (mode and client decide).
    pub(super) tool_specs: Vec<ToolSpec>,
    pub(super) limits: &'a LimitsConfig,
    pub(super) projection: &'a mut Projection,
    pub(super) turn_id: TurnId,
    pub(super) cancel: CancellationToken,
    /// The documents this turn's tools read (see [`PendingInput::buffers`]).
    pub(super) buffers: Arc<BufferCache>,
    /// How this turn asks the editor: its opener's bridge.
    pub(super) bridge: Arc<dyn crate::vocab::bridge::ClientBridge>,
    pub(super) usage: Usage,
    pub(super) session_usage: &'a mut Usage,
    pub(super) loops: &'a mut LoopDetector,
    pub(super) started: Instant,
    /// Last time the work moved on: the model streamed text, or a tool
    /// call completed. Retries, failed or refused calls, reasoning alone
    /// and empty answers are not progress.
    pub(super) last_progress: Instant,
    /// Retries made in this turn, across steps and error kinds, and the
    /// failures seen by kind (`limits.max_retries_per_turn`).
    pub(super) retries: u32,
    pub(super) failures: std::collections::BTreeMap<String, u32>,
    /// Compactions since the work last moved on, and `last_progress` as it
    /// was at the latest of them (`limits.max_compactions_without_progress`).
    pub(super) compactions_without_progress: u32,
    pub(super) progress_at_compaction: Option<Instant>,
}

impl Turn<'_> {
    /// Records an event and folds it into the model's context.
    pub(super) fn record(&mut self, event: Event) {
        let logged = self.session.log.append(event);
        self.projection.apply(&logged.event);
    }

    pub(super) async fn run(&mut self, inputs: Vec<PendingInput>) -> TurnEnd {
        self.record(Event::TurnStart {
            turn_id: self.turn_id.clone(),
        });
        let about = super::instructions::about(&inputs);
        let end = match self.enter_inputs(inputs) {
            Ok(()) => {
                self.refresh_instructions(about.as_deref());
                self.steps().await
            }
            Err(reason) => TurnEnd::new(StopReason::Blocked, reason),
        };
        let mut end = end;
        end.cost_usd = self.cost;
        super::checkpoint_hooks::end_turn(self.session, &self.turn_id, &self.buffers).await;
        // Off the model's path (nothing to send until the next prompt):
        // old results and calls keep one copy, and the turn's end then gives the
        // freed memory back (the frontend trims on `turn_end`).
        let started = Instant::now();
        let kept = self.projection.keep_old_results_serialized();
        if kept > 0 {
            tracing::debug!(kept, took = ?started.elapsed(), "old messages kept serialized only");
        }
        // Idle before the end is told: an editor that acts on `turn_end`
        // at once (a rewind, a listing) finds the session idle.
        self.session.set_idle();
        self.record(Event::TurnEnd {
            turn_id: self.turn_id.clone(),
            stop_reason: end.reason,
            message: end.message.clone(),
            usage: self.usage,
            cost_usd: end.cost_usd,
        });
        // The receipt (the prompt's answer) follows the turn's end: on disk
        // and told to the client first.
        self.session.log.durable().await;
        end
    }

    /// The price of the step's model, when known.
    pub(super) fn price(&self) -> Option<Price> {
        price_of(&self.model.config.name, &self.session.config.pricing)
    }

    /// Claims a batch, runs it past the admission hooks and enters what
    /// they let through as user messages. `Err` carries the rejection.
    pub(super) fn enter_inputs(&mut self, inputs: Vec<PendingInput>) -> Result<(), String> {
        if inputs.is_empty() {
            return Ok(());
        }
        self.record(Event::InputClaimed {
            turn_id: self.turn_id.clone(),
            message_ids: inputs.iter().map(|i| i.message_id.clone()).collect(),
        });
        let mut batch: Vec<ClaimedInput> = inputs
            .iter()
            .map(|i| ClaimedInput {
                message_id: i.message_id.clone(),
                content: i.content.clone(),
            })
            .collect();
        let mut rejection = None;
        for hook in &self.env.admission {
            match hook.admit(&self.session.id, batch) {
                Admission::Enter(next) => batch = next,
                Admission::Reject { reason } => {
                    rejection = Some(reason);
                    batch = Vec::new();
                    break;
                }
            }
        }
        for input in inputs {
            if !batch.iter().any(|b| b.message_id == input.message_id) {
                let reason = rejection
                    .clone()
                    .unwrap_or_else(|| "left out by an admission hook".to_string());
                self.session
                    .discard(input, &format!("rejected at admission: {reason}"));
            }
        }
        for entered in batch {
            self.record(Event::UserMessage {
                turn_id: self.turn_id.clone(),
                message_id: entered.message_id,
                content: entered.content,
            });
        }
        match rejection {
            Some(reason) => Err(format!("the input was rejected at admission: {reason}")),
            None => Ok(()),
        }
    }

    pub(super) fn end_step(&mut self, step: u32) {
        self.record(Event::StepEnd {
            turn_id: self.turn_id.clone(),
            step,
        });
    }
}
