//! A session: its identity, its log, its inbox and its run state.
//!
//! Frontends put prompts into the inbox and get a receipt channel back; the
//! session's own task (see [`crate::core::driver::run_session`]) takes them
//! one turn at a time.
//!
//! Invariant: every input that enters the inbox ends as exactly one of
//! `user_message` (entered) or `input_discarded`, and every prompt gets
//! exactly one receipt — from the turn it opened, or a `cancelled` receipt
//! when it is discarded. Its `input_queued` event is on disk before
//! `enqueue_*` returns.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{oneshot, Notify};
use tokio_util::sync::CancellationToken;

use super::client::Client;
use super::instructions::{InstructionSources, SessionInstructions};
use super::log::SessionLog;
use super::session_model::{ModelChoice, ModelError};
use crate::config::Config;
use crate::vocab::approval::ApprovalMode;
use crate::vocab::event::{Event, InputQueue, StopReason, TurnId, Usage, UserContent};

/// What a prompt's sender gets back when its turn is over.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnReceipt {
    /// The turn the prompt opened; `None` when the prompt was discarded
    /// before a turn started.
    pub turn_id: Option<TurnId>,
    pub stop_reason: StopReason,
    pub message: Option<String>,
    pub usage: Usage,
    /// The turn's cost in US dollars, when the model's price is known.
    pub cost_usd: Option<f64>,
}

/// User input waiting in the inbox.
pub struct PendingInput {
    pub message_id: String,
    pub content: Vec<UserContent>,
    /// Where the receipt of the turn goes (`prompt`s only).
    pub receipt: Option<oneshot::Sender<TurnReceipt>>,
    /// Whether this input asks for work (`steer` with `wake: true`, and
    /// every prompt) or only rides along with work that happens anyway.
    pub wake: bool,
    /// Told the turn's id when a turn starts for this prompt (tasks).
    pub started: Option<oneshot::Sender<TurnId>>,
    /// A title for the turn this prompt opens (a task's title), shown as
    /// its progress title.
    pub title: Option<String>,
    /// The client it came from: a turn this input opens reads that
    /// client's documents and asks through that client.
    pub client: Arc<Client>,
    /// The file the turn this input opens is about (a task's file), for
    /// its instruction files; else its attached file, if any.
    pub about: Option<std::path::PathBuf>,
}

/// What the session task should do next.
pub enum Work {
    /// Run a turn for this prompt.
    Prompt(PendingInput),
    /// Run a turn for the waking next-step inputs; the client of the last
    /// waking one, should a cancel take them all before the turn claims them.
    Wake(Arc<Client>),
}

/// A turn about to start: the session is already marked running, so a
/// cancel that arrives from here on reaches it.
pub struct StartedWork {
    pub work: Work,
    pub turn_id: TurnId,
    pub cancel: CancellationToken,
}

#[derive(Default)]
struct Inbox {
    next_turn: VecDeque<PendingInput>,
    next_step: VecDeque<PendingInput>,
}

/// Whether a turn is running, and how to stop it.
#[derive(Debug, Clone)]
pub enum RunState {
    Idle,
    Running {
        turn_id: TurnId,
        cancel: CancellationToken,
        /// The prompt that opened the turn, if a prompt did.
        prompt_id: Option<String>,
    },
}

/// One agent session.
/// Its title, creation time and folders live in the log's header, where
/// `listSessions` reads them.
pub struct Session {
    pub id: String,
    pub config: Config,
    pub log: Arc<SessionLog>,
    inbox: Mutex<Inbox>,
    wake: Notify,
    run_state: Mutex<RunState>,
    /// Cancelled when the daemon shuts down.
    pub shutdown: CancellationToken,
    next_message: AtomicU64,
    next_turn: AtomicU64,
    approvals: Mutex<Approvals>,
    /// Usage of the turns before this daemon loaded the session.
    restored_usage: Mutex<Usage>,
    /// The session's cost before this daemon loaded it (its last
    /// `usage_update`'s), when a call had a price.
    restored_cost: Mutex<Option<f64>>,
    /// The running turn's title, when the prompt that opened it had one.
    turn_title: Mutex<Option<(TurnId, String)>>,
    /// The session's title (`title_changed`, else the log header's).
    title: Mutex<Option<String>>,
    /// The instruction files in force and their reader.
    instructions: Mutex<SessionInstructions>,
    /// The model the next request uses (`model_changed`).
    model: Mutex<ModelChoice>,
    /// The prior content of the files its turns change (rewind).
    pub checkpoints: Arc<crate::core::checkpoints::SessionCheckpoints>,
}

/// The session's approval state: its mode and what the user said to
/// remember. Rebuilt from `mode_changed` and `approval_decided` events.
#[derive(Debug, Clone, Default)]
pub struct Approvals {
    pub mode: ApprovalMode,
    pub always_allow: Vec<String>,
    pub always_reject: Vec<String>,
}

impl Session {
    pub fn new(
        id: String,
        config: Config,
        log: Arc<SessionLog>,
        shutdown: CancellationToken,
    ) -> Self {
        Session {
            checkpoints: Arc::new(crate::core::checkpoints::SessionCheckpoints::for_log(
                &id,
                log.path(),
            )),
            id,
            log,
            inbox: Mutex::new(Inbox::default()),
            wake: Notify::new(),
            run_state: Mutex::new(RunState::Idle),
            shutdown,
            next_message: AtomicU64::new(1),
            next_turn: AtomicU64::new(1),
            approvals: Mutex::new(Approvals {
                mode: config.approval.mode,
                ..Approvals::default()
            }),
            restored_usage: Mutex::new(Usage::default()),
            restored_cost: Mutex::new(None),
            turn_title: Mutex::new(None),
            title: Mutex::new(None),
            instructions: Mutex::new(SessionInstructions::default()),
            model: Mutex::new(ModelChoice::initial(&config)),
            config,
        }
    }

    /// Queues a prompt from `client` for its own turn and returns where
    /// its receipt will arrive.
    pub fn enqueue_prompt(
        &self,
        client: &Arc<Client>,
        content: Vec<UserContent>,
    ) -> (String, oneshot::Receiver<TurnReceipt>) {
        let (tx, rx) = oneshot::channel();
        let message_id = self.enqueue(InputQueue::NextTurn, content, Some(tx), true, None, client);
        (message_id, rx)
    }

    /// Queues a task's prompt: like [`Session::enqueue_prompt`], and also
    /// returns where the id of its turn arrives the moment the turn
    /// starts; `title` is the turn's title until it ends. The turn is
    /// `client`'s (the asking window); `about` is the task's
    /// file, whose directories' instruction files the turn gets.
    pub fn enqueue_titled_prompt(
        &self,
        client: &Arc<Client>,
        content: Vec<UserContent>,
        title: String,
        about: Option<std::path::PathBuf>,
    ) -> (
        String,
        oneshot::Receiver<TurnReceipt>,
        oneshot::Receiver<TurnId>,
    ) {
        let (tx, rx) = oneshot::channel();
        let (started_tx, started_rx) = oneshot::channel();
        let message_id = self.enqueue(
            InputQueue::NextTurn,
            content,
            Some(tx),
            true,
            Some((started_tx, title, about)),
            client,
        );
        (message_id, rx, started_rx)
    }

    /// The title of turn `turn_id` while it runs, if its prompt gave one.
    pub fn turn_title(&self, turn_id: &str) -> Option<String> {
        self.turn_title
            .lock()
            .as_ref()
            .filter(|(id, _)| id == turn_id)
            .map(|(_, title)| title.clone())
    }

    /// Queues next-step input (`steer`): claimed by the running turn at its
    /// next step boundary; on an idle session, `wake` opens a turn for it
    /// and `!wake` leaves it for the next turn to carry. Returns its id.
    /// A turn it opens is `client`'s.
    pub fn enqueue_steer(
        &self,
        client: &Arc<Client>,
        content: Vec<UserContent>,
        wake: bool,
    ) -> String {
        self.enqueue(InputQueue::NextStep, content, None, wake, None, client)
    }

    fn enqueue(
        &self,
        queue: InputQueue,
        content: Vec<UserContent>,
        receipt: Option<oneshot::Sender<TurnReceipt>>,
        wake: bool,
        titled: Option<(oneshot::Sender<TurnId>, String, Option<std::path::PathBuf>)>,
        client: &Arc<Client>,
    ) -> String {
        let (started, title, about) = match titled {
            Some((started, title, about)) => (Some(started), Some(title), about),
            None => (None, None, None),
        };
        // A prompt (or a steer that opens a turn) names an untitled
        // session; context injected without waking does not.
        if queue == InputQueue::NextTurn || wake {
            self.title_from_prompt(&content);
        }
        // Whoever gives a session input sees what it does.
        self.log.follow(client.id());
        let message_id = format!("m{}", self.next_message.fetch_add(1, Ordering::Relaxed));
        // The log line and the queue entry are made under the inbox lock so
        // the log's order of queued inputs is the order they are taken in.
        {
            let mut inbox = self.inbox.lock();
            self.log.append(Event::InputQueued {
                message_id: message_id.clone(),
                queue,
                content: content.clone(),
            });
            let input = PendingInput {
                message_id: message_id.clone(),
                content,
                receipt,
                wake,
                started,
                title,
                client: client.clone(),
                about,
            };
            match queue {
                InputQueue::NextTurn => inbox.next_turn.push_back(input),
                InputQueue::NextStep => inbox.next_step.push_back(input),
            }
        }
        if wake {
            self.wake.notify_one();
        }
        message_id
    }

    /// Waits for the next piece of work; `None` once the daemon shuts down.
    pub async fn next_work(&self) -> Option<StartedWork> {
        loop {
            if self.shutdown.is_cancelled() {
                return None;
            }
            {
                let mut inbox = self.inbox.lock();
                let work = match inbox.next_turn.pop_front() {
                    Some(prompt) => Some(Work::Prompt(prompt)),
                    None => inbox
                        .next_step
                        .iter()
                        .rev()
                        .find(|i| i.wake)
                        .map(|i| Work::Wake(i.client.clone())),
                };
                if let Some(mut work) = work {
                    // Marked running before the inbox lock is released: a
                    // cancel or withdraw never finds the prompt gone from
                    // the inbox and the session still idle.
                    let turn_id = self.next_turn_id();
                    let cancel = self.shutdown.child_token();
                    let prompt_id = match &mut work {
                        Work::Prompt(p) => {
                            // Before the driver logs `turn_start`: whoever
                            // shows the turn finds its title already set.
                            *self.turn_title.lock() = p.title.take().map(|t| (turn_id.clone(), t));
                            if let Some(started) = p.started.take() {
                                let _ = started.send(turn_id.clone());
                            }
                            Some(p.message_id.clone())
                        }
                        Work::Wake(_) => {
                            *self.turn_title.lock() = None;
                            None
                        }
                    };
                    self.set_running(turn_id.clone(), cancel.clone(), prompt_id);
                    return Some(StartedWork {
                        work,
                        turn_id,
                        cancel,
                    });
                }
            }
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = self.shutdown.cancelled() => return None,
            }
        }
    }

    /// Takes every pending next-step input, in order.
    pub fn claim_next_step(&self) -> Vec<PendingInput> {
        self.inbox.lock().next_step.drain(..).collect()
    }

    /// Whether next-step input that asks for work is waiting.
    pub fn has_waking_input(&self) -> bool {
        self.inbox.lock().next_step.iter().any(|i| i.wake)
    }

    /// The instruction files the model is given now (those of the
    /// session's last `instructions` event).
    pub fn instructions(&self) -> Vec<crate::vocab::instructions::InstructionFile> {
        self.instructions.lock().in_force().to_vec()
    }

    /// Looks for the instruction files again; the `instructions` event to
    /// record when they changed since the last one.
    pub(crate) fn refresh_instructions(
        &self,
        sources: &InstructionSources,
        roots: &[std::path::PathBuf],
        about: Option<&std::path::Path>,
        turn_id: Option<TurnId>,
    ) -> Option<Event> {
        self.instructions
            .lock()
            .refresh(sources, roots, about, turn_id)
    }

    /// Restores what a loaded session's log says: the turn and message
    /// counters, the approval mode and remembered answers, the usage.
    pub fn restore(&self, events: &[super::log::LoggedEvent]) {
        let mut turns = 0u64;
        let mut max_message = 0u64;
        let mut usage = Usage::default();
        let mut approvals = self.approvals.lock();
        let mut instructions = self.instructions.lock();
        for logged in events {
            instructions.restore(&logged.event);
            match &logged.event {
                Event::TurnStart { .. } => turns += 1,
                Event::InputQueued { message_id, .. } => {
                    if let Some(n) = message_id
                        .strip_prefix('m')
                        .and_then(|n| n.parse::<u64>().ok())
                    {
                        max_message = max_message.max(n);
                    }
                }
                Event::AssistantMessage { usage: u, .. } | Event::Compacted { usage: u, .. } => {
                    usage.add(u)
                }
                Event::ModeChanged { mode } => approvals.mode = *mode,
                Event::ModelChanged { .. } => self.restore_model(&logged.event),
                Event::UsageUpdate { cost: Some(c), .. } => {
                    *self.restored_cost.lock() = Some(c.session)
                }
                Event::TitleChanged { title, .. } => *self.title.lock() = Some(title.clone()),
                Event::ApprovalDecided {
                    decision,
                    scope: Some(scope),
                    ..
                } => {
                    let list = match decision.as_str() {
                        "allow_always" => &mut approvals.always_allow,
                        "reject_always" => &mut approvals.always_reject,
                        _ => continue,
                    };
                    if !list.contains(scope) {
                        list.push(scope.clone());
                    }
                }
                _ => {}
            }
        }
        self.next_turn.store(turns + 1, Ordering::Relaxed);
        self.next_message.store(max_message + 1, Ordering::Relaxed);
        *self.restored_usage.lock() = usage;
    }

    /// The cost of the session's calls before this daemon loaded it.
    pub fn restored_cost(&self) -> Option<f64> {
        *self.restored_cost.lock()
    }

    /// Usage of the session's turns before this daemon loaded it.
    pub fn restored_usage(&self) -> Usage {
        *self.restored_usage.lock()
    }

    pub fn approvals(&self) -> Approvals {
        self.approvals.lock().clone()
    }

    pub fn mode(&self) -> ApprovalMode {
        self.approvals.lock().mode
    }

    /// Changes the approval mode; takes effect at the next step.
    pub fn set_mode(&self, mode: ApprovalMode) {
        self.approvals.lock().mode = mode;
        self.log.append(Event::ModeChanged { mode });
    }

    /// The model (and effort) the session's next request uses.
    pub fn model(&self) -> ModelChoice {
        self.model.lock().clone()
    }

    /// Switches the model of the next request (a running turn finishes
    /// its step on the one it has); logged. Refused, changing nothing,
    /// when the configuration has no such model or effort.
    pub fn set_model(&self, id: &str, effort: Option<&str>) -> Result<ModelChoice, ModelError> {
        let mut current = self.model.lock();
        let choice = ModelChoice::resolve(&self.config, &current, id, effort)?;
        self.log.append(choice.event());
        *current = choice.clone();
        Ok(choice)
    }

    fn restore_model(&self, event: &Event) {
        let mut current = self.model.lock();
        if let Some(choice) = ModelChoice::restored(&self.config, &current, event) {
            *current = choice;
        }
    }

    /// Remembers an `allow_always` or `reject_always` answer.
    pub fn remember(&self, scope: &str, allow: bool) {
        let mut approvals = self.approvals.lock();
        let list = if allow {
            &mut approvals.always_allow
        } else {
            &mut approvals.always_reject
        };
        if !list.iter().any(|s| s == scope) {
            list.push(scope.to_string());
        }
    }

    /// Allocates the id of the next turn.
    fn next_turn_id(&self) -> TurnId {
        format!("t{}", self.next_turn.fetch_add(1, Ordering::Relaxed))
    }

    /// Marks a turn as running; its token is what `cancel` trips.
    fn set_running(&self, turn_id: TurnId, cancel: CancellationToken, prompt_id: Option<String>) {
        *self.run_state.lock() = RunState::Running {
            turn_id,
            cancel,
            prompt_id,
        };
    }

    /// Withdraws one prompt (its request was cancelled by the editor): a
    /// queued prompt is discarded, a running one has its turn cancelled.
    pub fn withdraw_prompt(&self, message_id: &str) {
        let queued = {
            let mut inbox = self.inbox.lock();
            inbox
                .next_turn
                .iter()
                .position(|p| p.message_id == message_id)
                .and_then(|i| inbox.next_turn.remove(i))
        };
        if let Some(input) = queued {
            self.discard(input, "its request was cancelled");
            return;
        }
        if let RunState::Running {
            cancel,
            prompt_id: Some(id),
            ..
        } = &*self.run_state.lock()
        {
            if id == message_id {
                cancel.cancel();
            }
        }
    }

    pub fn set_idle(&self) {
        *self.run_state.lock() = RunState::Idle;
    }

    pub fn run_state(&self) -> RunState {
        self.run_state.lock().clone()
    }

    /// Cancels the running turn, if any, and — unless `keep_inbox` — every
    /// queued prompt, each of which gets a `cancelled` receipt. On an idle
    /// session with an empty inbox this does nothing at all.
    pub fn cancel(&self, keep_inbox: bool) {
        // Empty the inbox before tripping the token: once the token is
        // cancelled the session task may end the turn and take the next
        // queued prompt before we get to discard it.
        if !keep_inbox {
            self.discard_inbox("cancelled by the user");
        }
        if let RunState::Running { cancel, .. } = &*self.run_state.lock() {
            cancel.cancel();
        }
    }

    /// Drops every queued input; prompts get a `cancelled` receipt.
    pub fn discard_inbox(&self, reason: &str) {
        let drained: Vec<PendingInput> = {
            let mut inbox = self.inbox.lock();
            let mut all: Vec<PendingInput> = inbox.next_turn.drain(..).collect();
            all.extend(inbox.next_step.drain(..));
            all
        };
        for input in drained {
            self.discard(input, reason);
        }
    }

    /// Drops one input with a reason, answering its receipt.
    pub fn discard(&self, input: PendingInput, reason: &str) {
        self.log.append(Event::InputDiscarded {
            message_id: input.message_id,
            reason: reason.to_string(),
        });
        if let Some(receipt) = input.receipt {
            let _ = receipt.send(TurnReceipt {
                turn_id: None,
                stop_reason: StopReason::Cancelled,
                message: Some(format!(
                    "prompt discarded before its turn started: {reason}"
                )),
                usage: Usage::default(),
                cost_usd: None,
            });
        }
    }

    /// The session's title, if it has one yet.
    pub fn title(&self) -> Option<String> {
        self.title.lock().clone()
    }

    /// The title the log header gives (not an event: the header has it).
    pub fn set_header_title(&self, title: Option<String>) {
        let mut current = self.title.lock();
        if current.is_none() {
            *current = title;
        }
    }

    /// Names an untitled session after the first line of `content` (its
    /// first prompt), logging the title.
    pub fn title_from_prompt(&self, content: &[UserContent]) {
        let mut current = self.title.lock();
        if current.is_some() {
            return;
        }
        if let Some(title) = crate::core::title::title_of_prompt(content) {
            self.log.append(Event::TitleChanged {
                title: title.clone(),
                renamed: false,
            });
            *current = Some(title);
        }
    }

    /// The user's name for the session, logged; it replaces any title.
    pub fn rename(&self, title: String) {
        let mut current = self.title.lock();
        self.log.append(Event::TitleChanged {
            title: title.clone(),
            renamed: true,
        });
        *current = Some(title);
    }

    /// No input (prompt or steer) ever reached the session.
    pub fn is_empty(&self) -> bool {
        self.next_message.load(Ordering::Relaxed) == 1
    }

    pub fn queued_prompts(&self) -> usize {
        self.inbox.lock().next_turn.len()
    }
}
