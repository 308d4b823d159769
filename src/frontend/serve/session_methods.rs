//! The serve's `tandem/renameSession`, `tandem/closeSession`,
//! `tandem/deleteSession` and `tandem/forkSession`: the same as over stdio (`frontend::lsp::server`),
//! for every window sharing the serve's sessions.
//!
//! Invariant: handlers only translate; closing or deleting a session any
//! window follows is that window's to see (its updates stop).

use std::sync::Arc;

use jsonrpsee::types::{ErrorObjectOwned, Params};
use jsonrpsee::RpcModule;
use serde_json::{json, Value};

use super::methods::{conn, parse, Ctx, RpcResult};
use crate::core::title::renamed_title;
use crate::frontend::updates::daemon_error_parts;
use crate::protocol::{ForkSessionParams, ForkSessionResult, RenameSessionParams, SessionIdParams};

fn daemon_error(error: crate::core::daemon::DaemonError) -> ErrorObjectOwned {
    let (code, message, data) = daemon_error_parts(error);
    ErrorObjectOwned::owned(code as i32, message, data)
}

async fn close_session(
    params: Params<'static>,
    ctx: Arc<Ctx>,
    _: jsonrpsee::Extensions,
) -> RpcResult<Value> {
    let params: SessionIdParams = parse(&params)?;
    ctx.daemon.close_session(&params.session_id).await;
    Ok(json!({}))
}

async fn delete_session(
    params: Params<'static>,
    ctx: Arc<Ctx>,
    _: jsonrpsee::Extensions,
) -> RpcResult<Value> {
    let params: SessionIdParams = parse(&params)?;
    ctx.daemon
        .delete_session(&params.session_id)
        .await
        .map_err(daemon_error)?;
    Ok(json!({}))
}

/// A fork is loaded without a replay; a window follows it with
/// `tandem/loadSession` (or `tandem/attachSession`).
async fn fork_session(
    params: Params<'static>,
    ctx: Arc<Ctx>,
    ext: jsonrpsee::Extensions,
) -> RpcResult<ForkSessionResult> {
    let params: ForkSessionParams = parse(&params)?;
    let more = crate::frontend::additional_roots::additional_roots(&params.additional_directories)
        .map_err(|e| ErrorObjectOwned::owned(-32602, e, None::<()>))?;
    let daemon = ctx.daemon.clone();
    let client = ctx.hub.client(conn(&ext));
    // Reading and writing whole logs: off the serve's one thread.
    let fork = tokio::task::spawn_blocking(move || {
        daemon.fork_session_in(
            &client,
            &params.session_id,
            params.message_id.as_deref(),
            more,
        )
    })
    .await
    .map_err(|e| ErrorObjectOwned::owned(-32603, format!("fork panicked: {e}"), None::<()>))?
    .map_err(daemon_error)?;
    Ok(ForkSessionResult {
        session_id: fork.id.clone(),
        mode: fork.mode().as_str().to_string(),
    })
}

/// Registers the four methods.
pub fn register(module: &mut RpcModule<Ctx>) -> Result<(), jsonrpsee::core::RegisterMethodError> {
    module.register_method("tandem/renameSession", |params, ctx, _| {
        let params: RenameSessionParams = parse(&params)?;
        let title = renamed_title(&params.title)
            .map_err(|e| ErrorObjectOwned::owned(-32602, e, None::<()>))?;
        ctx.daemon
            .rename_session(&params.session_id, title.clone())
            .map_err(daemon_error)?;
        RpcResult::Ok(json!({ "title": title }))
    })?;
    module.register_async_method("tandem/closeSession", close_session)?;
    module.register_async_method("tandem/deleteSession", delete_session)?;
    module.register_async_method("tandem/forkSession", fork_session)?;
    Ok(())
}
