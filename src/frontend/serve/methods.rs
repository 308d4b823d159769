//! The serve's JSON-RPC methods: `initialize`, document sync, the same
//! `tandem/*` methods as over stdio, `tandem/respond`, and the
//! `tandem/attachSession` subscription.
//!
//! Invariant: handlers only translate, as in the LSP frontend. A
//! connection that closes takes nothing with it but its buffers: its
//! prompts' turns run on (jsonrpsee drops the handler, not the turn).

use std::path::PathBuf;
use std::sync::Arc;

use jsonrpsee::core::SubscriptionResult;
use jsonrpsee::types::{ErrorObjectOwned, Params};
use jsonrpsee::{ConnectionId, Extensions, PendingSubscriptionSink, RpcModule};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use tower_lsp::lsp_types::{
    DidChangeTextDocumentParams, DidChangeWorkspaceFoldersParams, DidCloseTextDocumentParams,
    DidOpenTextDocumentParams, DidSaveTextDocumentParams, InitializeParams,
};

use super::clients::DocOp;
use super::connection::RequestCancel;
use super::hub::{item_message, update_message, Hub, Item};
use super::progress;
use crate::core::client::ClientCapabilities;
use crate::core::daemon::{Daemon, DaemonError, NewSession};
use crate::core::session::RunState;
use crate::frontend::lsp::language::{diagnostics_changed, DIAGNOSTICS_CHANGED};
use crate::frontend::lsp::server::{
    client_abilities, encoding_kind, folder_path, negotiate_encoding, text_change, uri_path,
};
use crate::frontend::lsp::tasks::code_action_kinds;
use crate::frontend::updates::{
    daemon_error_parts, instruction_files, prompt_result, session_update, user_content,
};
use crate::protocol::{
    AttachSessionParams, AttachedParams, CancelParams, ListSessionsParams, LoadSessionParams,
    LoadSessionResult, NewSessionParams, NewSessionResult, PromptParams, PromptResult,
    RespondParams, SetModeParams, SetModeResult, SteerParams, SteerResult, PROTOCOL_VERSION,
    RUN_TASK_COMMAND,
};
use crate::vocab::approval::ApprovalMode;
use crate::vocab::bridge::{ClientAbilities, ClientFacilities};

/// What every handler reaches.
pub struct Ctx {
    pub daemon: Arc<Daemon>,
    pub hub: Arc<Hub>,
    pub port: u16,
    /// Asks the serve to stop (`serve/stop`).
    pub stop: tokio_util::sync::CancellationToken,
}

/// The `tandem/*` methods a serve answers, announced in `initialize`.
pub const TANDEM_METHODS: [&str; 21] = [
    "tandem/newSession",
    "tandem/prompt",
    "tandem/steer",
    "tandem/cancel",
    "tandem/setMode",
    "tandem/setModel",
    "tandem/listSessions",
    "tandem/loadSession",
    "tandem/attachSession",
    "tandem/respond",
    "tandem/runTask",
    "tandem/taskSession",
    "tandem/listTasks",
    "tandem/renameSession",
    "tandem/closeSession",
    "tandem/deleteSession",
    "tandem/forkSession",
    "tandem/listMcpServers",
    "tandem/diagnosticsChanged",
    "tandem/addMcpServers",
    "tandem/rewind",
];

pub(super) type RpcResult<T> = Result<T, ErrorObjectOwned>;

/// `tandem/setModel`: the state after the switch; durable when answered.
async fn set_model(
    params: Params<'static>,
    ctx: Arc<Ctx>,
    _: Extensions,
) -> RpcResult<crate::protocol::ModelState> {
    let params: crate::protocol::SetModelParams = parse(&params)?;
    let session = ctx
        .daemon
        .session(&params.session_id)
        .map_err(daemon_error)?;
    let state =
        crate::frontend::models::set_model(&session, &params.model, params.effort.as_deref())
            .map_err(invalid_params)?;
    session.log.durable().await;
    Ok(state)
}

fn invalid_params(message: impl Into<String>) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(-32602, message.into(), None::<()>)
}

fn daemon_error(error: DaemonError) -> ErrorObjectOwned {
    let (code, message, data) = daemon_error_parts(error);
    ErrorObjectOwned::owned(code as i32, message, data)
}

pub(super) fn parse<T: DeserializeOwned>(params: &Params<'_>) -> RpcResult<T> {
    // A missing `params` is `{}` (every field of the tandem methods is
    // optional or named in the error).
    let raw = params.as_str().unwrap_or("{}");
    serde_json::from_str(raw).map_err(|e| invalid_params(e.to_string()))
}

pub(super) fn conn(extensions: &Extensions) -> usize {
    extensions
        .get::<ConnectionId>()
        .map(|c| c.0)
        .unwrap_or_default()
}

fn abilities(params: &InitializeParams) -> RpcResult<ClientAbilities> {
    client_abilities(params).map_err(invalid_params)
}

async fn initialize(params: Params<'static>, ctx: Arc<Ctx>, ext: Extensions) -> RpcResult<Value> {
    let params: InitializeParams = parse(&params)?;
    let abilities = abilities(&params)?;
    let encoding = negotiate_encoding(&params);
    let mut roots: Vec<PathBuf> = params
        .workspace_folders
        .iter()
        .flatten()
        .filter_map(|f| uri_path(&f.uri))
        .collect();
    #[allow(deprecated)]
    if roots.is_empty() {
        roots.extend(params.root_uri.as_ref().and_then(uri_path));
    }
    let options = params.initialization_options.unwrap_or(Value::Null);
    if !options.is_null() {
        crate::config::ConfigBuilder::check("initializationOptions", &options)
            .map_err(|e| invalid_params(format!("initializationOptions: {e}")))?;
    }
    let conn = conn(&ext);
    let work_done_progress = params
        .capabilities
        .window
        .as_ref()
        .and_then(|w| w.work_done_progress)
        .unwrap_or(false);
    // An ACP client's own files and terminal (`tandem acp --attach`).
    let tandem = params
        .capabilities
        .experimental
        .as_ref()
        .map(|e| e["tandem"].clone())
        .unwrap_or_default();
    let facilities = ClientFacilities {
        read_text_file: tandem["readTextFile"] == true,
        write_text_file: tandem["writeTextFile"] == true,
        terminal: tandem["terminal"] == true,
    };
    let client = ctx.hub.client(conn);
    ctx.hub.clients.initialize(
        &client,
        ClientCapabilities {
            abilities,
            facilities,
            work_done_progress,
        },
        roots,
        options,
        encoding,
    );
    Ok(json!({
        "serverInfo": {"name": "tandem", "version": env!("CARGO_PKG_VERSION")},
        "capabilities": {
            "positionEncoding": encoding_kind(encoding),
            "textDocumentSync": {"openClose": true, "change": 2, "save": {"includeText": true}},
            "workspace": {"workspaceFolders": {"supported": true, "changeNotifications": true}},
            "codeActionProvider": {"codeActionKinds": code_action_kinds(), "resolveProvider": false},
            "executeCommandProvider": {"commands": [RUN_TASK_COMMAND]},
            "experimental": {"tandem": {
                "protocolVersion": PROTOCOL_VERSION,
                "methods": TANDEM_METHODS,
                "notifications": ["tandem/update"],
                "serve": {"port": ctx.port, "pid": std::process::id()},
                "sandbox": crate::frontend::sandbox_info::sandbox_capability(),
            }},
        },
    }))
}

fn document(ctx: &Ctx, ext: &Extensions, op: DocOp<'_>) {
    if let Err(e) = ctx.hub.clients.document(conn(ext), op) {
        tracing::error!("document change not applied: {e}");
    }
}

/// Registers the document-sync methods (answered `null` when sent as
/// requests; see `connection` for notifications).
fn register_documents(
    module: &mut RpcModule<Ctx>,
) -> Result<(), jsonrpsee::core::RegisterMethodError> {
    module.register_method("textDocument/didOpen", |params, ctx, ext| {
        let p: DidOpenTextDocumentParams = parse(&params)?;
        if let Some(path) = uri_path(&p.text_document.uri) {
            let text = &p.text_document.text;
            document(
                ctx,
                ext,
                DocOp::Open {
                    path,
                    version: p.text_document.version,
                    text,
                },
            );
        }
        RpcResult::Ok(Value::Null)
    })?;
    module.register_method("textDocument/didChange", |params, ctx, ext| {
        let p: DidChangeTextDocumentParams = parse(&params)?;
        if let Some(path) = uri_path(&p.text_document.uri) {
            let changes: Vec<_> = p.content_changes.into_iter().map(text_change).collect();
            let version = p.text_document.version;
            document(
                ctx,
                ext,
                DocOp::Change {
                    path: &path,
                    version,
                    changes: &changes,
                },
            );
        }
        RpcResult::Ok(Value::Null)
    })?;
    module.register_method("textDocument/didClose", |params, ctx, ext| {
        let p: DidCloseTextDocumentParams = parse(&params)?;
        if let Some(path) = uri_path(&p.text_document.uri) {
            document(ctx, ext, DocOp::Close(&path));
        }
        RpcResult::Ok(Value::Null)
    })?;
    module.register_method("textDocument/didSave", |params, ctx, ext| {
        let p: DidSaveTextDocumentParams = parse(&params)?;
        if let Some(path) = uri_path(&p.text_document.uri) {
            document(
                ctx,
                ext,
                DocOp::Saved {
                    path: &path,
                    text: p.text.as_deref(),
                },
            );
        }
        RpcResult::Ok(Value::Null)
    })?;
    module.register_method(DIAGNOSTICS_CHANGED, |params, ctx, ext| {
        let params = params.as_str().and_then(|p| serde_json::from_str(p).ok());
        diagnostics_changed(ctx.hub.client(conn(ext)).buffers(), params);
        RpcResult::Ok(Value::Null)
    })?;
    module.register_method("workspace/didChangeWorkspaceFolders", |params, ctx, ext| {
        let p: DidChangeWorkspaceFoldersParams = parse(&params)?;
        let removed: Vec<PathBuf> = p
            .event
            .removed
            .iter()
            .filter_map(|f| uri_path(&f.uri))
            .collect();
        let added: Vec<PathBuf> = p
            .event
            .added
            .iter()
            .filter_map(|f| uri_path(&f.uri))
            .collect();
        ctx.hub.clients.change_roots(conn(ext), &removed, added);
        RpcResult::Ok(Value::Null)
    })?;
    // The LSP lifecycle of one client: it ends the connection's use, never
    // the serve or its turns.
    for method in ["initialized", "shutdown", "exit"] {
        module.register_method(method, |_, _, _| RpcResult::Ok(Value::Null))?;
    }
    Ok(())
}

async fn new_session(
    params: Params<'static>,
    ctx: Arc<Ctx>,
    ext: Extensions,
) -> RpcResult<NewSessionResult> {
    let params: NewSessionParams = parse(&params)?;
    let conn = conn(&ext);
    let client = ctx.hub.client(conn);
    let workspace_folder = match &params.workspace_folder {
        Some(folder) => Some(folder_path(folder).ok_or_else(|| {
            invalid_params(format!(
                "workspaceFolder: `{folder}` is neither a file:// URI nor an absolute path"
            ))
        })?),
        // A serve has no editor-wide folders: the client's first one.
        None => client.roots().into_iter().next(),
    };
    let config = match (client.init_options(), params.config) {
        (_, Some(config)) if !config.is_object() => {
            return Err(invalid_params("config: expected an object"))
        }
        (Value::Null, config) => config,
        (mut base, Some(config)) => {
            merge(&mut base, config);
            Some(base)
        }
        (base, None) => Some(base),
    };
    let mut config = config;
    let mcp_servers = crate::frontend::mcp_servers::take_config_mcp_servers(&mut config)
        .map_err(invalid_params)?;
    let more = crate::frontend::additional_roots::additional_roots(&params.additional_directories)
        .map_err(invalid_params)?;
    let session = ctx
        .daemon
        .new_session_in(
            &client,
            NewSession {
                workspace_folder,
                title: params.title,
                config,
            },
            None,
            more,
        )
        .map_err(daemon_error)?;
    ctx.daemon
        .add_mcp_servers(&session.id, &mcp_servers)
        .map_err(daemon_error)?;
    Ok(NewSessionResult {
        session_id: session.id.clone(),
        mode: session.mode().as_str().to_string(),
        instructions: instruction_files(&session.instructions()),
        model_state: crate::frontend::models::model_state(&session),
    })
}

fn merge(base: &mut Value, layer: Value) {
    match (base, layer) {
        (Value::Object(base), Value::Object(layer)) => {
            for (key, value) in layer {
                merge(base.entry(key).or_insert(Value::Null), value);
            }
        }
        (base, layer) => *base = layer,
    }
}

async fn prompt(
    params: Params<'static>,
    ctx: Arc<Ctx>,
    ext: Extensions,
) -> RpcResult<PromptResult> {
    let params: PromptParams = parse(&params)?;
    if params.prompt.is_empty() {
        return Err(invalid_params(
            "prompt: expected at least one content block",
        ));
    }
    let conn = conn(&ext);
    ctx.daemon
        .session(&params.session_id)
        .map_err(daemon_error)?;
    let client = ctx.hub.client(conn);
    let (message_id, receipt) = ctx
        .daemon
        .prompt(&client, &params.session_id, user_content(params.prompt))
        .map_err(daemon_error)?;
    // `$/cancelRequest` for this request withdraws the prompt (see
    // `connection`); the answer still waits for the turn's end.
    let receipt = match ext.get::<RequestCancel>().cloned() {
        Some(RequestCancel(token)) => {
            tokio::pin!(receipt);
            tokio::select! {
                receipt = &mut receipt => receipt,
                _ = token.cancelled() => {
                    if let Ok(session) = ctx.daemon.session(&params.session_id) {
                        session.withdraw_prompt(&message_id);
                    }
                    receipt.await
                }
            }
        }
        None => receipt.await,
    };
    // If this connection closes now, jsonrpsee drops this future and the
    // turn runs on: other clients may be watching it.
    let receipt = receipt.map_err(|_| {
        ErrorObjectOwned::owned(
            -32603,
            "the session stopped before the turn ended",
            None::<()>,
        )
    })?;
    // A discarded prompt's `input_discarded` is on disk and told first.
    if let Ok(session) = ctx.daemon.session(&params.session_id) {
        session.log.durable().await;
    }
    ctx.hub.flushed(&params.session_id, conn).await;
    Ok(PromptResult {
        message_id: Some(message_id),
        ..prompt_result(receipt)
    })
}

async fn steer(params: Params<'static>, ctx: Arc<Ctx>, ext: Extensions) -> RpcResult<SteerResult> {
    let params: SteerParams = parse(&params)?;
    if params.prompt.is_empty() {
        return Err(invalid_params(
            "prompt: expected at least one content block",
        ));
    }
    ctx.daemon
        .session(&params.session_id)
        .map_err(daemon_error)?;
    let conn = conn(&ext);
    let client = ctx.hub.client(conn);
    let message_id = ctx
        .daemon
        .steer(
            &client,
            &params.session_id,
            user_content(params.prompt),
            params.wake,
        )
        .map_err(daemon_error)?;
    // Acknowledged means durable: the log fsyncs off this thread.
    if let Ok(session) = ctx.daemon.session(&params.session_id) {
        session.log.durable().await;
    }
    Ok(SteerResult { message_id })
}

fn register_tandem(
    module: &mut RpcModule<Ctx>,
) -> Result<(), jsonrpsee::core::RegisterMethodError> {
    module.register_async_method("initialize", initialize)?;
    module.register_async_method("tandem/newSession", new_session)?;
    module.register_async_method("tandem/prompt", prompt)?;
    module.register_async_method("tandem/steer", steer)?;
    module.register_async_method("tandem/setMode", |params, ctx, _| async move {
        let params: SetModeParams = parse(&params)?;
        let mode: ApprovalMode = params
            .mode
            .parse()
            .map_err(|e| invalid_params(format!("mode: {e}")))?;
        let session = ctx
            .daemon
            .session(&params.session_id)
            .map_err(daemon_error)?;
        session.set_mode(mode);
        session.log.durable().await;
        RpcResult::Ok(SetModeResult { mode: params.mode })
    })?;
    module.register_async_method("tandem/setModel", set_model)?;
    // Cancels the turn a progress token names, if it still runs (as
    // `tandem/cancel` with `keepInbox`); other tokens are ignored.
    module.register_method("window/workDoneProgress/cancel", |params, ctx, _| {
        let params: Value = parse(&params)?;
        let token = params["token"].as_str().unwrap_or_default();
        if let Some((session_id, turn_id)) = progress::parse_token(token) {
            let running = ctx.daemon.session(session_id).ok().filter(
                |s| matches!(s.run_state(), RunState::Running { turn_id: t, .. } if t == turn_id),
            );
            if running.is_some() {
                ctx.daemon.cancel(session_id, true).map_err(daemon_error)?;
            }
        }
        RpcResult::Ok(Value::Null)
    })?;
    module.register_method("tandem/cancel", |params, ctx, _| {
        let params: CancelParams = parse(&params)?;
        ctx.daemon
            .cancel(&params.session_id, params.keep_inbox)
            .map_err(daemon_error)?;
        RpcResult::Ok(Value::Null)
    })?;
    module.register_method("tandem/listMcpServers", |params, ctx, _| {
        let params: Value = params.parse().unwrap_or(Value::Null);
        let session = params.get("sessionId").and_then(Value::as_str);
        let servers = ctx.daemon.mcp_servers(session).map_err(daemon_error)?;
        RpcResult::Ok(crate::frontend::mcp_servers::list_result(&servers))
    })?;
    // `{sessionId, mcpServers}` (ACP's list): what the ACP shim sends
    // before attaching for `session/load` and `session/resume`.
    module.register_method("tandem/addMcpServers", |params, ctx, _| {
        let params: Value = params.parse().unwrap_or(Value::Null);
        let session = params["sessionId"]
            .as_str()
            .ok_or_else(|| invalid_params("missing string field `sessionId`"))?;
        let servers = crate::frontend::mcp_servers::acp_mcp_servers(&params["mcpServers"])
            .map_err(invalid_params)?;
        ctx.daemon
            .add_mcp_servers(session, &servers)
            .map_err(daemon_error)?;
        RpcResult::Ok(json!({}))
    })?;
    module.register_blocking_method("tandem/listSessions", |params, ctx, _| {
        let params: ListSessionsParams = parse(&params)?;
        let folder = match params.workspace_folder.as_deref() {
            Some(folder) => Some(
                folder_path(folder)
                    .map(|p| p.canonicalize().unwrap_or(p))
                    .ok_or_else(|| {
                        invalid_params(format!(
                            "workspaceFolder: `{folder}` is neither a file:// URI nor an absolute path"
                        ))
                    })?,
            ),
            None => None,
        };
        let sessions: Vec<_> = ctx
            .daemon
            .list_sessions()
            .into_iter()
            .filter(|s| {
                folder
                    .as_ref()
                    .is_none_or(|f| s.workspace.iter().any(|w| std::path::Path::new(w) == f))
            })
            .collect();
        RpcResult::Ok(json!({ "sessions": sessions }))
    })?;
    module.register_blocking_method("tandem/loadSession", |params, ctx, ext| {
        let params: LoadSessionParams = parse(&params)?;
        let more =
            crate::frontend::additional_roots::additional_roots(&params.additional_directories)
                .map_err(invalid_params)?;
        let mcp_servers = crate::frontend::mcp_servers::load_config_mcp_servers(params.config)
            .map_err(invalid_params)?;
        let (session, events) = ctx
            .daemon
            .load_session_in(&ctx.hub.client(conn(&ext)), &params.session_id, more)
            .map_err(daemon_error)?;
        ctx.daemon
            .add_mcp_servers(&session.id, &mcp_servers)
            .map_err(daemon_error)?;
        let replayed = events
            .iter()
            .filter(|e| session_update(&e.event).is_some())
            .count();
        // On the blocking pool already.
        drop(events);
        crate::frontend::memory::return_freed_memory();
        RpcResult::Ok(LoadSessionResult {
            session_id: session.id.clone(),
            replayed,
            mode: session.mode().as_str().to_string(),
            instructions: instruction_files(&session.instructions()),
            model_state: crate::frontend::models::model_state(&session),
        })
    })?;
    module.register_method("tandem/respond", |params, ctx, ext| {
        let params: RespondParams = parse(&params)?;
        let delivered = ctx
            .hub
            .respond(conn(ext), &params.id, params.result, params.error);
        RpcResult::Ok(json!({ "delivered": delivered }))
    })?;
    module.register_method("serve/status", |_, ctx, _| {
        RpcResult::Ok(json!({
            "pid": std::process::id(),
            "port": ctx.port,
            "version": env!("CARGO_PKG_VERSION"),
            "clients": ctx.daemon.client_count(),
            "turnRunning": ctx.daemon.any_turn_running(),
        }))
    })?;
    module.register_method("serve/stop", |_, ctx, _| {
        tracing::info!("stop requested by a client");
        ctx.stop.cancel();
        RpcResult::Ok(Value::Null)
    })?;
    module.register_subscription(
        "tandem/attachSession",
        "tandem/sessionMessage",
        "tandem/detachSession",
        attach_session,
    )?;
    Ok(())
}

fn message(value: &impl serde::Serialize) -> Option<Box<serde_json::value::RawValue>> {
    serde_json::value::to_raw_value(value).ok()
}

/// `tandem/attachSession`: loads the session if this serve has not, then
/// sends its whole log as `tandem/update`s, a `tandem/attached`, and from
/// then on its live updates and the daemon's requests to the editor — each
/// wrapped as a whole JSON-RPC message in the subscription's `result`.
async fn attach_session(
    params: Params<'static>,
    pending: PendingSubscriptionSink,
    ctx: Arc<Ctx>,
    ext: Extensions,
) -> SubscriptionResult {
    let params: AttachSessionParams = match parse(&params) {
        Ok(params) => params,
        Err(e) => {
            pending.reject(e).await;
            return Ok(());
        }
    };
    let session_id = params.session_id.clone();
    let more =
        match crate::frontend::additional_roots::additional_roots(&params.additional_directories) {
            Ok(more) => more,
            Err(e) => {
                pending.reject(invalid_params(e)).await;
                return Ok(());
            }
        };
    let conn = conn(&ext);
    // Registered before the log is read: whatever is logged from now on
    // reaches the channel, whatever was logged before is in the read.
    let (sub, mut rx) = ctx.hub.subscribe(&session_id, conn);
    let client = ctx.hub.client(conn);
    if client.capabilities().work_done_progress {
        let daemon = Arc::downgrade(&ctx.daemon);
        let titles = Box::new(move |session_id: &str, turn_id: &str| {
            daemon
                .upgrade()?
                .session(session_id)
                .ok()?
                .turn_title(turn_id)
        });
        let _ = sub.progress.set(progress::for_subscriber(&sub, titles));
    }
    let daemon = ctx.daemon.clone();
    let id = session_id.clone();
    let loaded = tokio::task::spawn_blocking(move || daemon.load_session_in(&client, &id, more))
        .await
        .unwrap_or_else(|e| Err(DaemonError::Storage(format!("loading panicked: {e}"))));
    let (mode, instructions, model_state, events) = match loaded {
        Ok((session, events)) => (
            session.mode().as_str().to_string(),
            instruction_files(&session.instructions()),
            crate::frontend::models::model_state(&session),
            events,
        ),
        Err(e) => {
            ctx.hub.unsubscribe(&session_id, sub.id);
            pending.reject(daemon_error(e)).await;
            return Ok(());
        }
    };
    let sink = match pending.accept().await {
        Ok(sink) => sink,
        Err(_) => {
            ctx.hub.unsubscribe(&session_id, sub.id);
            return Ok(());
        }
    };
    let result = async {
        let mut replayed = 0;
        let mut last = 0;
        for event in &events {
            if !params.replay {
                last = event.seq;
                continue;
            }
            if let Some(update) = update_message(&session_id, event) {
                sink.send(update).await.map_err(|_| "closed")?;
                replayed += 1;
            }
            last = event.seq;
        }
        sub.mark_processed(last);
        // The log's events go now, not when the client detaches: give
        // what they and the replay's frames took back.
        drop(events);
        crate::frontend::memory::return_freed_memory_soon();
        let attached = json!({"jsonrpc": "2.0", "method": "tandem/attached",
            "params": AttachedParams { session_id: session_id.clone(), replayed, mode, instructions,
                model_state }});
        sink.send(message(&attached).ok_or("serialize")?)
            .await
            .map_err(|_| "closed")?;
        loop {
            // Live messages skip this task once nothing is queued.
            sub.go_direct(&sink, &rx, last);
            let item = tokio::select! {
                item = rx.recv() => item,
                _ = sink.closed() => None,
            };
            let Some(item) = item else {
                return Ok::<(), &str>(());
            };
            let seq = match &item {
                Item::Event(event) if event.seq <= last => continue,
                Item::Event(event) => Some(event.seq),
                Item::Message(_) => None,
            };
            if let Some(message) = item_message(&session_id, &item) {
                sink.send(message).await.map_err(|_| "closed")?;
            }
            if let Some(seq) = seq {
                last = seq;
                sub.mark_processed(seq);
            }
        }
    }
    .await;
    if let Err(why) = result {
        tracing::debug!(session = %session_id, "attach ended: {why}");
    }
    ctx.hub.unsubscribe(&session_id, sub.id);
    Ok(())
}

/// Every method of the serve.
pub fn module(ctx: Ctx) -> RpcModule<Ctx> {
    let mut module = RpcModule::new(ctx);
    // The names are constants, so registering cannot clash.
    register_documents(&mut module).expect("document methods register");
    register_tandem(&mut module).expect("tandem methods register");
    super::tasks::register(&mut module).expect("task methods register");
    super::session_methods::register(&mut module).expect("session methods register");
    super::rewind_method::register(&mut module).expect("rewind registers");
    module
}
