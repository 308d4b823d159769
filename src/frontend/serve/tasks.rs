//! The keybinding-task methods through the serve: `textDocument/codeAction`,
//! `workspace/executeCommand` `tandem.runTask`, `tandem/runTask`, and the
//! serve-only `tandem/taskSession` and `tandem/listTasks`.
//!
//! The LSP frontend's handlers do the work (`frontend::lsp::tasks`); this
//! module gives them the asking connection as the task's origin: its
//! documents (unsaved text included), its folders and
//! `initializationOptions`, and a bridge to that window alone for the
//! instruction question and the inline edit. The task's prompt is noted as
//! that connection's, so its turn's tools read that window's documents and
//! its workspace edits go to that window.
//!
//! Invariant: a task never reads another window's documents and its
//! inline edit is never proposed to another window.

use std::sync::Arc;

use jsonrpsee::types::{ErrorObjectOwned, Params};
use jsonrpsee::{Extensions, RpcModule};
use serde::Deserialize;
use serde_json::{json, Value};
use tower_lsp::lsp_types::{CodeActionParams, ExecuteCommandParams, Url};

use super::connection::RequestCancel;
use super::methods::{conn, parse, Ctx, RpcResult};
use crate::config::tasks::takes_instruction;
use crate::core::tasks::run::session_for;
use crate::core::tasks::TaskOrigin;
use crate::frontend::lsp::server::{folder_path, uri_path};
use crate::frontend::lsp::tasks::{code_actions, execute_command, run_task, task_error};
use crate::protocol::RunTaskParams;

fn rpc_error(error: tower_lsp::jsonrpc::Error) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(
        error.code.code() as i32,
        error.message.into_owned(),
        error.data,
    )
}

/// Connection `conn` as the origin of its tasks (a task session it makes
/// takes its `initializationOptions` as its `config`).
fn origin(ctx: &Ctx, conn: usize) -> TaskOrigin {
    let client = ctx.hub.client(conn);
    let init_options = client.init_options();
    TaskOrigin {
        client,
        session_config: (!init_options.is_null()).then_some(init_options),
    }
}

async fn code_action(params: Params<'static>, ctx: Arc<Ctx>, ext: Extensions) -> RpcResult<Value> {
    let params: CodeActionParams = parse(&params)?;
    let origin = origin(&ctx, conn(&ext));
    let actions = code_actions(&ctx.daemon, &origin, params).map_err(rpc_error)?;
    Ok(json!(actions))
}

async fn command(params: Params<'static>, ctx: Arc<Ctx>, ext: Extensions) -> RpcResult<Value> {
    let params: ExecuteCommandParams = parse(&params)?;
    let conn = conn(&ext);
    let origin = origin(&ctx, conn);
    let started = execute_command(&ctx.daemon, &origin, params)
        .await
        .map_err(rpc_error)?;
    Ok(started.unwrap_or(Value::Null))
}

async fn task(params: Params<'static>, ctx: Arc<Ctx>, ext: Extensions) -> RpcResult<Value> {
    let params: RunTaskParams = parse(&params)?;
    let conn = conn(&ext);
    let origin = origin(&ctx, conn);
    let cancelled = ext.get::<RequestCancel>().map(|c| c.0.clone());
    let result = run_task(&ctx.daemon, &origin, params, cancelled)
        .await
        .map_err(rpc_error)?;
    // The answer follows the turn's updates on this connection's
    // subscriptions, as a prompt's does.
    ctx.hub.flushed(&result.session_id, conn).await;
    Ok(json!(result))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TaskSessionParams {
    uri: String,
    session_id: Option<String>,
    /// When given, a task the catalog does not have makes no session.
    task: Option<String>,
}

/// `tandem/taskSession`: the session a task on `uri` would run in, made if
/// needed, so a client can attach to it before it runs the task.
fn task_session(params: Params<'_>, ctx: &Ctx, ext: &Extensions) -> RpcResult<Value> {
    let params: TaskSessionParams = parse(&params)?;
    let path = Url::parse(&params.uri)
        .ok()
        .and_then(|u| uri_path(&u))
        .ok_or_else(|| {
            ErrorObjectOwned::owned(
                -32602,
                format!("uri: `{}` is not a file:// URI", params.uri),
                None::<()>,
            )
        })?;
    let conn = conn(ext);
    let origin = origin(ctx, conn);
    if let Some(task) = &params.task {
        let known = ctx
            .daemon
            .task_catalog_for(&path, &origin)
            .is_ok_and(|catalog| catalog.get(task).is_some());
        if !known {
            return Err(ErrorObjectOwned::owned(
                -32602,
                format!("task: `{task}` is not a task of this workspace"),
                None::<()>,
            ));
        }
    }
    let session = session_for(&ctx.daemon, &origin, &path, params.session_id.as_deref())
        .map_err(|e| rpc_error(task_error(e)))?;
    Ok(json!({"sessionId": session.id}))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListTasksParams {
    workspace_folder: String,
}

/// `tandem/listTasks`: the tasks of a folder (built-in and configured), for
/// a client that offers them itself (`tandem acp --attach`'s slash
/// commands): `{tasks: [{id, title, instruction}]}`, `instruction` saying
/// whether the task's prompt takes one.
fn list_tasks(params: Params<'_>, ctx: &Ctx, ext: &Extensions) -> RpcResult<Value> {
    let params: ListTasksParams = parse(&params)?;
    let folder = folder_path(&params.workspace_folder).ok_or_else(|| {
        ErrorObjectOwned::owned(
            -32602,
            format!(
                "workspaceFolder: `{}` is neither a file:// URI nor an absolute path",
                params.workspace_folder
            ),
            None::<()>,
        )
    })?;
    let origin = origin(ctx, conn(ext));
    let catalog = ctx
        .daemon
        .task_catalog_for(&folder, &origin)
        .map_err(|e| ErrorObjectOwned::owned(-32602, e.to_string(), None::<()>))?;
    let tasks: Vec<Value> = catalog
        .tasks()
        .iter()
        .map(|task| {
            json!({"id": task.id, "title": task.title,
                   "instruction": takes_instruction(&task.prompt), "prompt": task.prompt})
        })
        .collect();
    Ok(json!({ "tasks": tasks }))
}

/// Registers the task methods.
pub fn register(module: &mut RpcModule<Ctx>) -> Result<(), jsonrpsee::core::RegisterMethodError> {
    module.register_async_method("textDocument/codeAction", code_action)?;
    module.register_async_method("workspace/executeCommand", command)?;
    module.register_async_method("tandem/runTask", task)?;
    module.register_method("tandem/taskSession", |params, ctx, ext| {
        task_session(params, ctx, ext)
    })?;
    module.register_method("tandem/listTasks", |params, ctx, ext| {
        list_tasks(params, ctx, ext)
    })?;
    Ok(())
}
