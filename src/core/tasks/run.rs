//! Running a task: check the request against the buffer cache, render the
//! message, queue it as a prompt of the workspace's task session (or of the
//! session the request names), and, for inline edits, propose the answer
//! as an edit of the range once the turn has ended.
//!
//! Invariant: nothing runs unless the request fits the document the daemon
//! has (the task exists, the range is inside the document, the version is
//! the cache's); a task's prompt gets exactly one receipt, and a task whose
//! request goes away before its turn ends withdraws its prompt.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::catalog::{intersects, target};
use super::inline_edit::{
    fit_indent, fit_line_break, outcome_message, propose, strip_fence, EditContext, EditOutcome,
    Selection,
};
use super::prompt::{language_of, render, TaskContext, CONTEXT_LINES};
use super::{root_of, TaskDiagnostic, TaskOrigin};
use crate::buffers::{BufferCache, Position, Range, Snapshot};
use crate::config::tasks::{parse_template, EditScope, TaskDef, TemplatePart};
use crate::core::client::Client;
use crate::core::daemon::{Daemon, DaemonError, NewSession};
use crate::core::log::read_log;
use crate::core::session::{Session, TurnReceipt};
use crate::vocab::bridge::{BridgeOutcome, ClientBridge, Question, UserInputRequest};
use crate::vocab::event::{Event, StopReason, TurnId, Usage, UserContent};

/// How long a request for a newer version than the cache's waits for the
/// editor's `didChange` to arrive.
const VERSION_WAIT: Duration = Duration::from_secs(1);

/// A task to run on a range of a document.
#[derive(Debug, Clone)]
pub struct TaskRequest {
    pub task: String,
    pub path: PathBuf,
    /// The document version the range refers to; `None`: the cache's.
    pub version: Option<i32>,
    pub range: Range,
    pub instruction: Option<String>,
    pub diagnostics: Vec<TaskDiagnostic>,
    /// Run in this session instead of the workspace's task session.
    pub session_id: Option<String>,
}

/// Why a task was not run.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error("unknown task `{task}`; the tasks are: {known}")]
    UnknownTask { task: String, known: String },
    #[error("task `{task}` is not available: its definition was refused: {reason}")]
    InvalidTask { task: String, reason: String },
    /// A bad range, an unreadable document, a missing instruction.
    #[error("{0}")]
    BadRequest(String),
    /// The request's version is not the document the daemon has.
    #[error("{0}")]
    ContentModified(String),
    #[error("the session stopped before the turn ended")]
    SessionStopped,
    #[error(transparent)]
    Daemon(#[from] DaemonError),
}

/// How a task ended.
#[derive(Debug, Clone)]
pub struct TaskResult {
    pub session_id: String,
    pub receipt: TurnReceipt,
    /// For inline edits whose turn ended normally: the outcome, and what
    /// the model is told about it.
    pub edit: Option<(EditOutcome, String)>,
}

/// A task that was started, or one that ended before it got a turn (the
/// user dismissed the question for its instruction).
pub enum Started {
    Running(RunningTask),
    Ended(TaskResult),
}

/// A task whose prompt is queued.
pub struct RunningTask {
    session: Arc<Session>,
    /// The asking client (its documents, the inline edit's) and its bridge.
    client: Arc<Client>,
    bridge: Arc<dyn ClientBridge>,
    task: TaskDef,
    message_id: String,
    receipt: Option<oneshot::Receiver<TurnReceipt>>,
    started: Option<oneshot::Receiver<TurnId>>,
    turn_id: Option<TurnId>,
    inline: Option<InlinePlan>,
    /// Withdraw the prompt when dropped before its receipt came.
    armed: bool,
}

struct InlinePlan {
    selection: Selection,
    file: String,
    lines: String,
}

impl Drop for RunningTask {
    fn drop(&mut self) {
        if self.armed {
            self.session.withdraw_prompt(&self.message_id);
        }
    }
}

impl RunningTask {
    pub fn session_id(&self) -> &str {
        &self.session.id
    }

    /// The id of the task's queued prompt (a frontend serving several
    /// windows notes whose turn it opens).
    pub fn message_id(&self) -> &str {
        &self.message_id
    }

    /// A handle that withdraws the task's prompt (discarded while queued,
    /// its turn cancelled while running) without giving up the wait for
    /// its receipt, so the answer still comes after the turn's updates.
    pub fn withdrawer(&self) -> impl Fn() + Send + 'static {
        let session = self.session.clone();
        let message_id = self.message_id.clone();
        move || session.withdraw_prompt(&message_id)
    }

    /// Waits until the task's turn starts and returns its id; `None` when
    /// the prompt was discarded before a turn started.
    pub async fn started(&mut self) -> Option<TurnId> {
        if let Some(started) = self.started.take() {
            self.turn_id = started.await.ok();
        }
        self.turn_id.clone()
    }

    /// Waits for the turn to end, then proposes an inline edit's answer.
    pub async fn finish(mut self) -> Result<TaskResult, TaskError> {
        let receipt = match self.receipt.take() {
            Some(receipt) => receipt.await,
            None => return Err(TaskError::SessionStopped),
        };
        self.armed = false;
        let receipt = receipt.map_err(|_| TaskError::SessionStopped)?;
        let edit = match (&self.inline, &receipt.turn_id) {
            (Some(plan), Some(turn_id)) if receipt.stop_reason == StopReason::EndTurn => {
                Some(self.inline_edit(plan, turn_id).await)
            }
            _ => None,
        };
        Ok(TaskResult {
            session_id: self.session.id.clone(),
            receipt,
            edit,
        })
    }

    async fn inline_edit(&self, plan: &InlinePlan, turn_id: &str) -> (EditOutcome, String) {
        let answer = last_answer(&self.session, turn_id).unwrap_or_default();
        let original = &plan.selection.base[plan.selection.bytes.clone()];
        let replacement = fit_line_break(
            &fit_indent(
                &strip_fence(&answer),
                &plan.selection.base,
                plan.selection.bytes.start,
            ),
            original,
        );
        let outcome = if replacement.trim().is_empty() && !original.trim().is_empty() {
            EditOutcome::Refused {
                reason: "the answer was empty".to_string(),
            }
        } else {
            let cancel = self.session.shutdown.child_token();
            let cx = EditContext {
                bridge: self.bridge.as_ref(),
                buffers: self.client.buffers(),
                mode: self.session.mode(),
                task_id: &self.task.id,
                task_title: &self.task.title,
                // Turn ids restart in every session, so the session's id keeps two
                // task sessions' proposals apart.
                annotation_id: format!("tandem-task-{}-{turn_id}", self.session.id),
                cancel: &cancel,
            };
            propose(&cx, &plan.selection, &replacement).await
        };
        let message = outcome_message(&outcome, &self.task.title, &plan.file, &plan.lines, turn_id);
        // Logged now, read by the model with the session's next input.
        self.session.enqueue_steer(
            &self.client,
            vec![UserContent::Text {
                text: message.clone(),
            }],
            false,
        );
        (outcome, message)
    }
}

/// The text of the last model answer of a turn, from the session's log.
fn last_answer(session: &Session, turn_id: &str) -> Option<String> {
    let (_, events) = read_log(session.log.path()).ok()?;
    events
        .into_iter()
        .rev()
        .find_map(|logged| match logged.event {
            Event::AssistantMessage {
                turn_id: t, text, ..
            } if t == turn_id => Some(text),
            _ => None,
        })
}

/// Checks a request against `origin`'s documents, renders its message and
/// queues it. Asks `origin`'s editor for the instruction when the task
/// needs one and the request has none.
pub async fn start_task(
    daemon: &Arc<Daemon>,
    origin: &TaskOrigin,
    request: TaskRequest,
) -> Result<Started, TaskError> {
    let catalog = daemon.task_catalog_for(&request.path, origin)?;
    let roots = origin.roots();
    let task = match catalog.get(&request.task) {
        Some(task) => task.clone(),
        None => {
            return Err(match catalog.error_of(&request.task) {
                Some(error) => TaskError::InvalidTask {
                    task: request.task.clone(),
                    reason: error.to_string(),
                },
                None => TaskError::UnknownTask {
                    task: request.task.clone(),
                    known: catalog.ids().join(", "),
                },
            })
        }
    };
    let root = root_of(&request.path, &roots);
    let file = match &root {
        Some(root) => request
            .path
            .strip_prefix(root)
            .unwrap_or(&request.path)
            .display()
            .to_string(),
        None => request.path.display().to_string(),
    };
    let (snapshot, open) = document(origin.buffers(), &request, &file).await?;
    let encoding = origin.buffers().encoding();
    let total_lines = snapshot.rope.len_lines();
    let t = target(Some(&snapshot), request.range, encoding).map_err(|e| {
        TaskError::BadRequest(format!(
            "range: line {} is past the end of `{file}` ({} lines)",
            e.line, e.lines
        ))
    })?;
    let char_at = |p: Position| {
        snapshot
            .position_to_char(p, encoding)
            .unwrap_or(snapshot.rope.len_chars())
    };
    let (start, end) = (char_at(t.range.start), char_at(t.range.end));
    if start > end {
        return Err(TaskError::BadRequest(
            "range: `start` is after `end`".to_string(),
        ));
    }
    let text = snapshot.rope.to_string();
    let bytes = snapshot.rope.char_to_byte(start)..snapshot.rope.char_to_byte(end);
    let first = t.range.start.line as usize;
    let last = if t.range.end.character == 0 && t.range.end.line > t.range.start.line {
        t.range.end.line as usize - 1
    } else {
        t.range.end.line as usize
    };
    let line_start = |line: usize| {
        snapshot
            .position_to_char(
                Position {
                    line: line.min(total_lines) as u32,
                    character: 0,
                },
                encoding,
            )
            .unwrap_or(snapshot.rope.len_chars())
    };
    let before_first = first.saturating_sub(CONTEXT_LINES);
    let before: String = snapshot
        .rope
        .slice(line_start(before_first)..line_start(first))
        .into();
    let after: String = snapshot
        .rope
        .slice(line_start(last + 1)..line_start(last + 1 + CONTEXT_LINES))
        .into();
    let diagnostics: Vec<TaskDiagnostic> = request
        .diagnostics
        .iter()
        .filter(|d| intersects(&d.range, &t.range))
        .cloned()
        .collect();
    let session = session_for(daemon, origin, &request.path, request.session_id.as_deref())?;
    let bridge = origin.bridge(&session.id);
    let lines = if first == last {
        format!("line {}", first + 1)
    } else {
        format!("lines {}-{}", first + 1, last + 1)
    };
    let needs_instruction = parse_template(&task.prompt)
        .map(|parts| parts.contains(&TemplatePart::Placeholder("instruction")))
        .unwrap_or(false);
    let instruction = match request.instruction.clone() {
        Some(instruction) => Some(instruction),
        None if needs_instruction => {
            match ask_instruction(bridge.as_ref(), &session, &task, &file, &lines).await? {
                Some(instruction) => Some(instruction),
                None => {
                    return Ok(Started::Ended(TaskResult {
                        session_id: session.id.clone(),
                        receipt: TurnReceipt {
                            turn_id: None,
                            stop_reason: StopReason::Cancelled,
                            message: Some(format!(
                                "the task `{}` did not run: no instruction was given",
                                task.id
                            )),
                            usage: Usage::default(),
                            cost_usd: None,
                        },
                        edit: None,
                    }))
                }
            }
        }
        None => None,
    };
    let language = language_of(&request.path);
    let message = render(&TaskContext {
        task: &task,
        file: &file,
        language,
        selection: &text[bytes.clone()],
        first_line: first + 1,
        last_line: last + 1,
        total_lines,
        diagnostics: &diagnostics,
        instruction: instruction.as_deref(),
        before: (&before, before_first + 1),
        after: (&after, last + 2),
    });
    let inline = (task.edit == EditScope::Selection).then(|| InlinePlan {
        selection: Selection {
            path: request.path.clone(),
            base: text.clone(),
            bytes,
            open,
        },
        file: file.clone(),
        lines: lines.clone(),
    });
    let (message_id, receipt, started) = session.enqueue_titled_prompt(
        &origin.client,
        vec![UserContent::Text { text: message }],
        task.title.clone(),
        Some(request.path.clone()),
    );
    Ok(Started::Running(RunningTask {
        session,
        client: origin.client.clone(),
        bridge,
        task,
        message_id,
        receipt: Some(receipt),
        started: Some(started),
        turn_id: None,
        inline,
        armed: true,
    }))
}

/// The document as the request means it: the open buffer at the request's
/// version, else the file on disk. Returns whether it was open.
async fn document(
    buffers: &BufferCache,
    request: &TaskRequest,
    file: &str,
) -> Result<(Snapshot, bool), TaskError> {
    let mut changes = buffers.subscribe();
    let deadline = tokio::time::Instant::now() + VERSION_WAIT;
    loop {
        let Some(snapshot) = buffers.snapshot(&request.path) else {
            let text = std::fs::read_to_string(&request.path).map_err(|e| {
                TaskError::BadRequest(format!(
                    "`{file}` is not open in the editor and cannot be read from disk: {e}"
                ))
            })?;
            return Ok((Snapshot::from_text(&text, 0), false));
        };
        let Some(wanted) = request.version else {
            return Ok((snapshot, true));
        };
        if wanted == snapshot.version {
            return Ok((snapshot, true));
        }
        if wanted < snapshot.version {
            return Err(TaskError::ContentModified(format!(
                "`{file}` changed: the request is for version {wanted}, and the editor has sent version {} since",
                snapshot.version
            )));
        }
        // The editor's didChange for this version may still be on its way.
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    return Err(version_not_seen(file, wanted, snapshot.version));
                }
            }
            _ = tokio::time::sleep_until(deadline) => {
                return Err(version_not_seen(file, wanted, snapshot.version));
            }
        }
    }
}

fn version_not_seen(file: &str, wanted: i32, have: i32) -> TaskError {
    TaskError::ContentModified(format!(
        "`{file}`: the request is for version {wanted}, but the editor has only sent version {have}"
    ))
}

/// The session a task on `path` runs in: `session_id`'s, else the task
/// session of the folder holding it (made on first use). A frontend that
/// routes a session's updates only to the windows following it asks this
/// first.
pub fn session_for(
    daemon: &Daemon,
    origin: &TaskOrigin,
    path: &Path,
    session_id: Option<&str>,
) -> Result<Arc<Session>, TaskError> {
    match session_id {
        Some(id) => Ok(daemon.session(id)?),
        None => task_session(
            daemon,
            origin,
            root_of(path, &origin.roots()),
            origin.session_config.clone(),
        ),
    }
}

/// The workspace root's task session, created on first use (with
/// `config` as its session layer).
fn task_session(
    daemon: &Daemon,
    origin: &TaskOrigin,
    root: Option<PathBuf>,
    config: Option<Value>,
) -> Result<Arc<Session>, TaskError> {
    let mut sessions = daemon.tasks_state().sessions.lock();
    if let Some(session) = sessions.get(&root).and_then(|id| daemon.session(id).ok()) {
        return Ok(session);
    }
    let title = match root.as_deref().and_then(Path::file_name) {
        Some(name) => format!("tasks in {}", name.to_string_lossy()),
        None => "tasks".to_string(),
    };
    let session = daemon.new_session_of_kind(
        &origin.client,
        NewSession {
            workspace_folder: root.clone(),
            title: Some(title),
            config,
        },
        Some("task"),
    )?;
    sessions.insert(root, session.id.clone());
    Ok(session)
}

/// Asks the user what the task should do (`tandem/requestUserInput`);
/// `None` when they dismissed the question or answered nothing.
async fn ask_instruction(
    bridge: &dyn ClientBridge,
    session: &Session,
    task: &TaskDef,
    file: &str,
    lines: &str,
) -> Result<Option<String>, TaskError> {
    if !bridge.abilities().request_user_input {
        return Err(TaskError::BadRequest(format!(
            "instruction: the task `{}` needs an instruction; send `instruction`, or declare \
             capabilities.experimental.tandem.requestUserInput so that tandem can ask the user",
            task.id
        )));
    }
    let request = UserInputRequest {
        session_id: session.id.clone(),
        tool_call_id: format!("task-{}", uuid::Uuid::new_v4().simple()),
        questions: vec![Question {
            id: "instruction".to_string(),
            question: format!("{}: what should change in {lines} of {file}?", task.title),
            options: None,
        }],
    };
    match bridge.request_user_input(request, &CancellationToken::new()).await {
        BridgeOutcome::Answered(answers) => Ok(instruction_of(&answers)),
        BridgeOutcome::Cancelled => Ok(None),
        BridgeOutcome::Unavailable(why) => Err(TaskError::BadRequest(format!(
            "instruction: the task `{}` needs an instruction and the user could not be asked: {why}",
            task.id
        ))),
    }
}

/// The instruction in an answer: a string, or `{"instruction": "..."}`.
fn instruction_of(answers: &Value) -> Option<String> {
    let text = match answers {
        Value::String(text) => text.as_str(),
        Value::Object(map) => map.get("instruction")?.as_str()?,
        _ => return None,
    };
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}
