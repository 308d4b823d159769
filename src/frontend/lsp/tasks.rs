//! The keybinding-task methods: `textDocument/codeAction`,
//! `workspace/executeCommand` `tandem.runTask`, and `tandem/runTask`.
//!
//! Invariant: handlers only translate. Which tasks a range offers, what the
//! model is asked and how an inline edit lands are `core::tasks`'s; a code
//! action reads the buffer cache and the cached task catalog and never
//! waits on a session.

use std::sync::Arc;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tower_lsp::jsonrpc::{Error, ErrorCode, Result};
use tower_lsp::lsp_types::{
    CodeAction, CodeActionKind, CodeActionOrCommand, CodeActionParams, CodeActionResponse, Command,
    ExecuteCommandParams, Url,
};

use super::server::{daemon_error, uri_path};
use crate::buffers::{Position, Range};
use crate::core::daemon::Daemon;
use crate::core::tasks::catalog::{intersects, offers, target};
use crate::core::tasks::run::{start_task, Started, TaskError, TaskRequest, TaskResult};
use crate::core::tasks::{TaskDiagnostic, TaskOrigin};
use crate::frontend::updates::prompt_result;
use crate::protocol::{
    error_code, RunTaskArgs, RunTaskParams, RunTaskResult, StartedTaskResult, TaskEditResult,
    WireDiagnostic, WirePosition, WireRange, RUN_TASK_COMMAND,
};

/// The code action kinds tandem's tasks use, announced in `initialize`.
pub fn code_action_kinds() -> Vec<CodeActionKind> {
    vec![
        CodeActionKind::QUICKFIX,
        CodeActionKind::REFACTOR_REWRITE,
        CodeActionKind::SOURCE,
    ]
}

fn core_range(range: &tower_lsp::lsp_types::Range) -> Range {
    Range {
        start: Position {
            line: range.start.line,
            character: range.start.character,
        },
        end: Position {
            line: range.end.line,
            character: range.end.character,
        },
    }
}

fn wire_range(range: &Range) -> Value {
    json!({
        "start": {"line": range.start.line, "character": range.start.character},
        "end": {"line": range.end.line, "character": range.end.character},
    })
}

fn from_wire(range: &WireRange) -> Range {
    let position = |p: &WirePosition| Position {
        line: p.line,
        character: p.character,
    };
    Range {
        start: position(&range.start),
        end: position(&range.end),
    }
}

/// One code action per task the range offers, in catalog order, from
/// `origin`'s documents and configuration.
pub fn code_actions(
    daemon: &Daemon,
    origin: &TaskOrigin,
    params: CodeActionParams,
) -> Result<Option<CodeActionResponse>> {
    let uri = &params.text_document.uri;
    let Some(path) = uri_path(uri) else {
        return Ok(Some(Vec::new()));
    };
    let catalog = match daemon.task_catalog_for(&path, origin) {
        Ok(catalog) => catalog,
        Err(e) => {
            // A broken configuration file: no tasks, and say why in the log
            // (a task request would answer the error itself).
            tracing::warn!("no code actions for {uri}: {e}");
            return Ok(Some(Vec::new()));
        }
    };
    let snapshot = origin.buffers().snapshot(&path);
    let encoding = origin.buffers().encoding();
    let Ok(target) = target(snapshot.as_ref(), core_range(&params.range), encoding) else {
        // A range the buffer does not have (a request that raced a
        // didChange): nothing to offer.
        return Ok(Some(Vec::new()));
    };
    let diagnostics: Vec<Value> = params
        .context
        .diagnostics
        .iter()
        .filter(|d| intersects(&core_range(&d.range), &target.range))
        .filter_map(|d| serde_json::to_value(d).ok())
        .collect();
    let only = params.context.only.as_deref().unwrap_or_default();
    let wanted = |kind: &str| {
        only.is_empty()
            || only.iter().any(|k| {
                let k = k.as_str();
                kind == k
                    || kind
                        .strip_prefix(k)
                        .is_some_and(|rest| rest.starts_with('.'))
            })
    };
    let version = snapshot.as_ref().map(|s| s.version);
    let actions = offers(&catalog, &target, diagnostics.len())
        .into_iter()
        .filter(|offer| wanted(&offer.task.kind))
        .map(|offer| {
            let title = format!("tandem: {}", offer.task.title);
            let arguments = json!({
                "task": offer.task.id,
                "uri": uri.as_str(),
                "range": wire_range(&target.range),
                "version": version,
                "diagnostics": diagnostics,
            });
            CodeActionOrCommand::CodeAction(CodeAction {
                title: title.clone(),
                kind: Some(CodeActionKind::from(offer.task.kind.clone())),
                diagnostics: offer.preferred.then(|| {
                    params
                        .context
                        .diagnostics
                        .iter()
                        .filter(|d| intersects(&core_range(&d.range), &target.range))
                        .cloned()
                        .collect()
                }),
                command: Some(Command {
                    title,
                    command: RUN_TASK_COMMAND.to_string(),
                    arguments: Some(vec![arguments]),
                }),
                is_preferred: offer.preferred.then_some(true),
                ..CodeAction::default()
            })
        })
        .collect();
    Ok(Some(actions))
}

fn task_diagnostic(d: &WireDiagnostic) -> TaskDiagnostic {
    TaskDiagnostic {
        range: from_wire(&d.range),
        message: d.message.clone(),
        severity: d.severity,
        source: d.source.clone(),
        code: d.code.as_ref().map(|c| match c {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }),
    }
}

pub fn task_error(error: TaskError) -> Error {
    match error {
        TaskError::Daemon(e) => daemon_error(e),
        TaskError::ContentModified(message) => Error {
            code: ErrorCode::ServerError(error_code::CONTENT_MODIFIED),
            message: message.into(),
            data: None,
        },
        TaskError::SessionStopped => Error {
            code: ErrorCode::InternalError,
            message: error.to_string().into(),
            data: None,
        },
        TaskError::UnknownTask { .. }
        | TaskError::InvalidTask { .. }
        | TaskError::BadRequest(_) => Error::invalid_params(error.to_string()),
    }
}

fn request_of(
    task: String,
    uri: &str,
    version: Option<i32>,
    range: &WireRange,
    diagnostics: &[WireDiagnostic],
    instruction: Option<String>,
    session_id: Option<String>,
) -> Result<TaskRequest> {
    let path = Url::parse(uri)
        .ok()
        .and_then(|u| uri_path(&u))
        .ok_or_else(|| Error::invalid_params(format!("uri: `{uri}` is not a file:// URI")))?;
    Ok(TaskRequest {
        task,
        path,
        version,
        range: from_wire(range),
        instruction,
        diagnostics: diagnostics.iter().map(task_diagnostic).collect(),
        session_id,
    })
}

/// `workspace/executeCommand`: starts `tandem.runTask` and answers once
/// its turn has started, with `{sessionId, turnId}`.
pub async fn execute_command(
    daemon: &Arc<Daemon>,
    origin: &TaskOrigin,
    params: ExecuteCommandParams,
) -> Result<Option<Value>> {
    if params.command != RUN_TASK_COMMAND {
        return Err(Error::invalid_params(format!(
            "command: unknown command `{}`; tandem serves `{RUN_TASK_COMMAND}`",
            params.command
        )));
    }
    let [argument] = <[Value; 1]>::try_from(params.arguments).map_err(|arguments| {
        Error::invalid_params(format!(
            "arguments: `{RUN_TASK_COMMAND}` takes one argument, {{task, uri, range, version?, diagnostics?}}; got {}",
            arguments.len()
        ))
    })?;
    let args: RunTaskArgs = serde_json::from_value(argument)
        .map_err(|e| Error::invalid_params(format!("arguments[0]: {e}")))?;
    let request = request_of(
        args.task,
        &args.uri,
        args.version,
        &args.range,
        &args.diagnostics,
        args.instruction,
        args.session_id,
    )?;
    let started = match start_task(daemon, origin, request)
        .await
        .map_err(task_error)?
    {
        Started::Running(mut running) => {
            let turn_id = running.started().await;
            let session_id = running.session_id().to_string();
            // The rest of the task (the turn, an inline edit) goes on
            // without this request.
            tokio::spawn(async move {
                if let Err(e) = running.finish().await {
                    tracing::warn!("task ended without a receipt: {e}");
                }
            });
            StartedTaskResult {
                session_id,
                turn_id,
            }
        }
        Started::Ended(result) => StartedTaskResult {
            session_id: result.session_id,
            turn_id: None,
        },
    };
    Ok(Some(json!(started)))
}

/// `tandem/runTask`: runs a task and answers when its turn (and inline
/// edit) is over.
/// `cancelled` fires on `$/cancelRequest` for this request (see
/// `cancel_request`): the task's prompt is withdrawn and the answer still
/// waits for its turn to end.
pub async fn run_task(
    daemon: &Arc<Daemon>,
    origin: &TaskOrigin,
    params: RunTaskParams,
    cancelled: Option<CancellationToken>,
) -> Result<RunTaskResult> {
    let request = request_of(
        params.task,
        &params.text_document.uri,
        params.text_document.version,
        &params.range,
        &params.diagnostics,
        params.instruction,
        params.session_id,
    )?;
    let result = match start_task(daemon, origin, request)
        .await
        .map_err(task_error)?
    {
        Started::Running(running) => {
            let withdraw = running.withdrawer();
            let finish = running.finish();
            tokio::pin!(finish);
            let cancelled = cancelled.unwrap_or_default();
            let ended = tokio::select! {
                ended = &mut finish => ended,
                _ = cancelled.cancelled() => {
                    withdraw();
                    finish.await
                }
            };
            ended.map_err(task_error)?
        }
        Started::Ended(result) => result,
    };
    Ok(run_task_result(result))
}

fn run_task_result(result: TaskResult) -> RunTaskResult {
    let receipt = prompt_result(result.receipt);
    RunTaskResult {
        session_id: result.session_id,
        turn_id: receipt.turn_id,
        stop_reason: receipt.stop_reason,
        message: receipt.message,
        usage: receipt.usage,
        edit: result.edit.map(|(outcome, message)| TaskEditResult {
            outcome: outcome.as_str().to_string(),
            message,
        }),
    }
}
