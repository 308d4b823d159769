//! The serve's `tandem/rewind`: the same as over stdio
//! (`frontend::lsp::rewind`), reading the asking window's buffers.

use std::sync::Arc;

use jsonrpsee::types::{ErrorObjectOwned, Params};
use jsonrpsee::{Extensions, RpcModule};

use super::methods::{conn, parse, Ctx, RpcResult};
use crate::frontend::rewind::{rewind_request, rewind_result};
use crate::frontend::updates::daemon_error_parts;
use crate::protocol::{RewindParams, RewindResult};

async fn rewind(
    params: Params<'static>,
    ctx: Arc<Ctx>,
    ext: Extensions,
) -> RpcResult<RewindResult> {
    let params: RewindParams = parse(&params)?;
    let client = ctx.hub.client(conn(&ext));
    ctx.daemon
        .rewind(&client, rewind_request(params))
        .await
        .map(rewind_result)
        .map_err(|error| {
            let (code, message, data) = daemon_error_parts(error);
            ErrorObjectOwned::owned(code as i32, message, data)
        })
}

pub fn register(module: &mut RpcModule<Ctx>) -> Result<(), jsonrpsee::core::RegisterMethodError> {
    module.register_async_method("tandem/rewind", rewind)?;
    Ok(())
}
