//! The tower-lsp service: the standard lifecycle, document sync into the
//! buffer cache, and the `tandem/*` extension methods.
//!
//! Invariant: handlers only translate — wire params to core calls, core
//! results and errors to wire results and JSON-RPC errors. Session updates do
//! not pass through here (see `LspSink`), and neither do the daemon's own
//! requests to the editor (see `outgoing`): tower-lsp's `Client` is unused.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use tower_lsp::jsonrpc::{Error, ErrorCode, Result};
use tower_lsp::lsp_types::*;
use tower_lsp::{Client, ClientSocket, LanguageServer, LspService};

use super::outgoing::Outgoing;
use super::progress::Progress;
use crate::buffers::{self, PositionEncoding, TextChange};
use crate::core::client::{Client as CoreClient, ClientCapabilities};
use crate::core::daemon::{Daemon, DaemonError, NewSession};
use crate::core::tasks::TaskOrigin;
use crate::core::title::renamed_title;
use crate::frontend::additional_roots::additional_roots;
use crate::frontend::mcp_servers::{list_result, take_config_mcp_servers};
use crate::frontend::updates::{daemon_error_parts, prompt_result, user_content};
use crate::protocol::{
    CancelParams, ClientTandemCapabilities, ForkSessionParams, ForkSessionResult,
    ListSessionsParams, LoadSessionParams, LoadSessionResult, NewSessionParams, NewSessionResult,
    PromptParams, PromptResult, RenameSessionParams, RunTaskParams, RunTaskResult, SessionIdParams,
    SetModeParams, SetModeResult, SteerParams, SteerResult, PROTOCOL_VERSION, RUN_TASK_COMMAND,
};
use crate::vocab::approval::ApprovalMode;
use crate::vocab::bridge::ClientAbilities;
use crate::vocab::language::LanguageFeatures;
use crate::workspace::file_uri_to_path;

/// The `tandem/*` requests this server answers, announced in `initialize`.
const TANDEM_METHODS: [&str; 17] = [
    "tandem/newSession",
    "tandem/prompt",
    "tandem/steer",
    "tandem/cancel",
    "tandem/setMode",
    "tandem/setModel",
    "tandem/listSessions",
    "tandem/loadSession",
    "tandem/attachSession",
    "tandem/runTask",
    "tandem/renameSession",
    "tandem/closeSession",
    "tandem/deleteSession",
    "tandem/forkSession",
    "tandem/listMcpServers",
    "tandem/diagnosticsChanged",
    "tandem/rewind",
];

#[path = "rewind.rs"]
mod rewind;

pub struct Backend {
    daemon: Arc<Daemon>,
    /// The editor on the other end of this connection.
    client: Arc<CoreClient>,
    shutdown_requested: Arc<AtomicBool>,
    outgoing: Arc<Outgoing>,
    progress: Arc<Progress>,
    /// Whether `shutdown` ends the daemon (stdio) or only this editor's
    /// part in it (`tandem serve`).
    ending: super::Ending,
}

/// Builds the service with tandem's extension methods.
pub fn build_service(
    daemon: Arc<Daemon>,
    client: Arc<CoreClient>,
    shutdown_requested: Arc<AtomicBool>,
    outgoing: Arc<Outgoing>,
    progress: Arc<Progress>,
    ending: super::Ending,
) -> (LspService<Backend>, ClientSocket) {
    LspService::build(move |_client: Client| Backend {
        daemon,
        client,
        shutdown_requested,
        outgoing,
        progress,
        ending,
    })
    .custom_method("tandem/newSession", Backend::new_session)
    .custom_method("tandem/prompt", Backend::prompt)
    .custom_method("tandem/steer", Backend::steer)
    .custom_method("tandem/setMode", Backend::set_mode)
    .custom_method("tandem/setModel", Backend::set_model)
    .custom_method("tandem/listSessions", Backend::list_sessions)
    .custom_method("tandem/loadSession", Backend::load_session)
    .custom_method("tandem/attachSession", Backend::attach_session)
    .custom_method("tandem/cancel", Backend::cancel)
    .custom_method("tandem/runTask", Backend::run_task)
    .custom_method("tandem/renameSession", Backend::rename_session)
    .custom_method("tandem/closeSession", Backend::close_session)
    .custom_method("tandem/deleteSession", Backend::delete_session)
    .custom_method("tandem/forkSession", Backend::fork_session)
    .custom_method("tandem/listMcpServers", Backend::list_mcp_servers)
    .custom_method("tandem/rewind", Backend::rewind)
    .finish()
}

/// What the client can do for the daemon, from its `initialize` params:
/// `experimental.tandem` (answering permission and question requests) and
/// the workspace-edit abilities apply_patch chooses its route by. `Err`
/// names the bad field.
pub(crate) fn client_abilities(
    params: &InitializeParams,
) -> std::result::Result<ClientAbilities, String> {
    let tandem: ClientTandemCapabilities = match params
        .capabilities
        .experimental
        .as_ref()
        .and_then(|e| e.get("tandem"))
    {
        Some(tandem) => serde_json::from_value(tandem.clone())
            .map_err(|e| format!("capabilities.experimental.tandem: {e}"))?,
        None => ClientTandemCapabilities::default(),
    };
    let workspace = params.capabilities.workspace.as_ref();
    let edits = workspace.and_then(|w| w.workspace_edit.as_ref());
    let ops = edits.and_then(|e| e.resource_operations.as_ref());
    Ok(ClientAbilities {
        request_permission: tandem.request_permission,
        request_user_input: tandem.request_user_input,
        language: LanguageFeatures::from_names(tandem.language_features.iter().map(String::as_str)),
        apply_edit: workspace.and_then(|w| w.apply_edit).unwrap_or(false)
            && edits.and_then(|e| e.document_changes).unwrap_or(false),
        change_annotations: edits.is_some_and(|e| e.change_annotation_support.is_some()),
        resource_operations: ops.is_some_and(|ops| {
            [
                ResourceOperationKind::Create,
                ResourceOperationKind::Rename,
                ResourceOperationKind::Delete,
            ]
            .iter()
            .all(|k| ops.contains(k))
        }),
    })
}

pub(super) fn daemon_error(error: DaemonError) -> Error {
    let (code, message, data) = daemon_error_parts(error);
    Error {
        code: ErrorCode::ServerError(code),
        message: message.into(),
        data,
    }
}

/// Runs a handler body so that a panic becomes a `-32603` answer instead of
/// taking down tower-lsp's serve loop (and with it every session).
async fn guarded<T>(what: &str, body: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(body).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => {
            let detail = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::error!("{what} panicked: {detail}");
            Err(Error {
                code: ErrorCode::InternalError,
                message: format!("internal error in {what}: {detail}").into(),
                data: None,
            })
        }
    }
}

/// [`guarded`] for notifications, which have no answer to carry the error.
async fn guarded_notification(what: &str, body: impl std::future::Future<Output = ()>) {
    let _ = guarded(what, async {
        body.await;
        Ok(())
    })
    .await;
}

pub(crate) fn uri_path(uri: &Url) -> Option<PathBuf> {
    file_uri_to_path(uri.as_str())
}

/// A folder given as a `file://` URI or an absolute path.
pub(crate) fn folder_path(folder: &str) -> Option<PathBuf> {
    if folder.starts_with("file://") {
        return file_uri_to_path(folder);
    }
    let path = PathBuf::from(folder);
    path.is_absolute().then_some(path)
}

pub(crate) fn negotiate_encoding(params: &InitializeParams) -> PositionEncoding {
    let offered = params
        .capabilities
        .general
        .as_ref()
        .and_then(|g| g.position_encodings.as_ref());
    // The client lists encodings in order of preference; take the first we
    // support. Without a list, LSP says UTF-16.
    for kind in offered.into_iter().flatten() {
        match kind.as_str() {
            "utf-8" => return PositionEncoding::Utf8,
            "utf-16" => return PositionEncoding::Utf16,
            "utf-32" => return PositionEncoding::Utf32,
            _ => {}
        }
    }
    PositionEncoding::Utf16
}

pub(crate) fn encoding_kind(encoding: PositionEncoding) -> PositionEncodingKind {
    match encoding {
        PositionEncoding::Utf8 => PositionEncodingKind::UTF8,
        PositionEncoding::Utf16 => PositionEncodingKind::UTF16,
        PositionEncoding::Utf32 => PositionEncodingKind::UTF32,
    }
}

pub(crate) fn text_change(change: TextDocumentContentChangeEvent) -> TextChange {
    TextChange {
        range: change.range.map(|r| buffers::Range {
            start: buffers::Position {
                line: r.start.line,
                character: r.start.character,
            },
            end: buffers::Position {
                line: r.end.line,
                character: r.end.character,
            },
        }),
        text: change.text,
    }
}

impl Backend {
    /// `capabilities.experimental` of the `initialize` answer; through
    /// `tandem serve`, with the serve's `{port, pid}`.
    fn experimental(&self) -> Value {
        let mut tandem = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "methods": TANDEM_METHODS,
            "notifications": ["tandem/update"],
            "sandbox": crate::frontend::sandbox_info::sandbox_capability(),
        });
        if let super::Ending::Connection { port } = self.ending {
            tandem["serve"] = json!({"port": port, "pid": std::process::id()});
        }
        json!({ "tandem": tandem })
    }
}

#[tower_lsp::async_trait]
impl LanguageServer for Backend {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult> {
        guarded("initialize", async move {
            let encoding = negotiate_encoding(&params);
            self.client.buffers().set_encoding(encoding);

            let mut roots: Vec<PathBuf> = params
                .workspace_folders
                .iter()
                .flatten()
                .filter_map(|f| uri_path(&f.uri))
                .collect();
            #[allow(deprecated)]
            if roots.is_empty() {
                if let Some(root) = params.root_uri.as_ref().and_then(uri_path) {
                    roots.push(root);
                }
            }
            self.client.workspace().set_roots(roots);

            let abilities = client_abilities(&params).map_err(Error::invalid_params)?;
            let work_done_progress = params
                .capabilities
                .window
                .as_ref()
                .and_then(|w| w.work_done_progress)
                .unwrap_or(false);
            self.progress.set_enabled(work_done_progress);
            self.outgoing.set_abilities(abilities);
            self.client.set_capabilities(ClientCapabilities {
                abilities,
                work_done_progress,
                ..ClientCapabilities::default()
            });
            if let Some(options) = params.initialization_options {
                self.client
                    .set_init_options(options)
                    .map_err(|e| Error::invalid_params(format!("initializationOptions: {e}")))?;
            }

            Ok(InitializeResult {
                server_info: Some(ServerInfo {
                    name: "tandem".to_string(),
                    version: Some(env!("CARGO_PKG_VERSION").to_string()),
                }),
                capabilities: ServerCapabilities {
                    position_encoding: Some(encoding_kind(encoding)),
                    text_document_sync: Some(TextDocumentSyncCapability::Options(
                        TextDocumentSyncOptions {
                            open_close: Some(true),
                            change: Some(TextDocumentSyncKind::INCREMENTAL),
                            will_save: None,
                            will_save_wait_until: None,
                            save: Some(TextDocumentSyncSaveOptions::SaveOptions(SaveOptions {
                                include_text: Some(true),
                            })),
                        },
                    )),
                    workspace: Some(WorkspaceServerCapabilities {
                        workspace_folders: Some(WorkspaceFoldersServerCapabilities {
                            supported: Some(true),
                            change_notifications: Some(OneOf::Left(true)),
                        }),
                        file_operations: None,
                    }),
                    code_action_provider: Some(CodeActionProviderCapability::Options(
                        CodeActionOptions {
                            code_action_kinds: Some(super::tasks::code_action_kinds()),
                            resolve_provider: Some(false),
                            work_done_progress_options: WorkDoneProgressOptions::default(),
                        },
                    )),
                    execute_command_provider: Some(ExecuteCommandOptions {
                        commands: vec![RUN_TASK_COMMAND.to_string()],
                        work_done_progress_options: WorkDoneProgressOptions::default(),
                    }),
                    experimental: Some(self.experimental()),
                    ..ServerCapabilities::default()
                },
            })
        })
        .await
    }

    async fn initialized(&self, _: InitializedParams) {
        tracing::info!("client initialized");
    }

    async fn shutdown(&self) -> Result<()> {
        self.shutdown_requested.store(true, Ordering::SeqCst);
        // LSP: after `shutdown` the server stops working and only `exit`
        // follows, so running turns end (cancelled) and the logs are
        // flushed now; through `tandem serve`, they run on for the other
        // windows.
        if self.ending == super::Ending::Daemon {
            self.daemon.shutdown().await;
        }
        Ok(())
    }

    // didOpen, didChange, didClose and didSave never reach tower-lsp: the
    // input loop applies them in wire order (`documents.rs`).

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        guarded("textDocument/codeAction", async move {
            super::tasks::code_actions(&self.daemon, &TaskOrigin::of(&self.client), params)
        })
        .await
    }

    async fn execute_command(&self, params: ExecuteCommandParams) -> Result<Option<Value>> {
        guarded("workspace/executeCommand", async move {
            super::tasks::execute_command(&self.daemon, &TaskOrigin::of(&self.client), params).await
        })
        .await
    }

    async fn did_change_workspace_folders(&self, params: DidChangeWorkspaceFoldersParams) {
        guarded_notification("workspace/didChangeWorkspaceFolders", async move {
            let workspace = self.client.workspace();
            for removed in params.event.removed {
                if let Some(path) = uri_path(&removed.uri) {
                    workspace.remove_root(&path);
                }
            }
            for added in params.event.added {
                if let Some(path) = uri_path(&added.uri) {
                    workspace.add_root(path);
                }
            }
        })
        .await
    }
}

struct WithdrawOnDrop {
    daemon: Arc<Daemon>,
    session_id: String,
    message_id: String,
    armed: bool,
}

impl Drop for WithdrawOnDrop {
    fn drop(&mut self) {
        if self.armed {
            if let Ok(session) = self.daemon.session(&self.session_id) {
                session.withdraw_prompt(&self.message_id);
            }
        }
    }
}

impl Backend {
    async fn new_session(&self, params: NewSessionParams) -> Result<NewSessionResult> {
        guarded("tandem/newSession", async move {
            let workspace_folder = match &params.workspace_folder {
                Some(folder) => Some(folder_path(folder).ok_or_else(|| {
                    Error::invalid_params(format!(
                        "workspaceFolder: `{folder}` is neither a file:// URI nor an absolute path"
                    ))
                })?),
                None => None,
            };
            if let Some(config) = &params.config {
                if !config.is_object() {
                    return Err(Error::invalid_params("config: expected an object"));
                }
            }
            let mut config = params.config;
            let mcp_servers =
                take_config_mcp_servers(&mut config).map_err(Error::invalid_params)?;
            let more =
                additional_roots(&params.additional_directories).map_err(Error::invalid_params)?;
            let session = self
                .daemon
                .new_session_in(
                    &self.client,
                    NewSession {
                        workspace_folder,
                        title: params.title,
                        config,
                    },
                    None,
                    more,
                )
                .map_err(daemon_error)?;
            self.daemon
                .add_mcp_servers(&session.id, &mcp_servers)
                .map_err(daemon_error)?;
            Ok(NewSessionResult {
                session_id: session.id.clone(),
                mode: session.mode().as_str().to_string(),
                instructions: crate::frontend::updates::instruction_files(&session.instructions()),
                model_state: crate::frontend::models::model_state(&session),
            })
        })
        .await
    }

    async fn prompt(&self, params: PromptParams) -> Result<PromptResult> {
        guarded("tandem/prompt", async move {
            if params.prompt.is_empty() {
                return Err(Error::invalid_params(
                    "prompt: expected at least one content block",
                ));
            }
            let (message_id, receipt) = self
                .daemon
                .prompt(
                    &self.client,
                    &params.session_id,
                    user_content(params.prompt),
                )
                .map_err(daemon_error)?;
            // `$/cancelRequest` for this request fires its token (see
            // `cancel_request`): the prompt is withdrawn and the answer waits
            // for the turn's end, so its updates come first. Should the future
            // be dropped anyway (shutdown), the guard withdraws the prompt, so
            // the turn does not run on unseen.
            let mut guard = WithdrawOnDrop {
                daemon: self.daemon.clone(),
                session_id: params.session_id.clone(),
                message_id: message_id.clone(),
                armed: true,
            };
            let cancelled = super::cancel_request::current_token();
            let receipt = match cancelled {
                Some(token) => {
                    tokio::pin!(receipt);
                    tokio::select! {
                        receipt = &mut receipt => receipt,
                        _ = token.cancelled() => {
                            if let Ok(session) = self.daemon.session(&params.session_id) {
                                session.withdraw_prompt(&message_id);
                            }
                            receipt.await
                        }
                    }
                }
                None => receipt.await,
            };
            guard.armed = false;
            match receipt {
                Ok(receipt) => Ok(PromptResult {
                    message_id: Some(message_id),
                    ..prompt_result(receipt)
                }),
                Err(_) => Err(Error {
                    code: ErrorCode::InternalError,
                    message: "the session stopped before the turn ended".into(),
                    data: None,
                }),
            }
        })
        .await
    }

    async fn steer(&self, params: SteerParams) -> Result<SteerResult> {
        guarded("tandem/steer", async move {
            if params.prompt.is_empty() {
                return Err(Error::invalid_params(
                    "prompt: expected at least one content block",
                ));
            }
            let message_id = self
                .daemon
                .steer(
                    &self.client,
                    &params.session_id,
                    user_content(params.prompt),
                    params.wake,
                )
                .map_err(daemon_error)?;
            Ok(SteerResult { message_id })
        })
        .await
    }

    /// `tandem/renameSession`: the user's title for a loaded session.
    async fn rename_session(&self, params: RenameSessionParams) -> Result<Value> {
        guarded("tandem/renameSession", async move {
            let title = renamed_title(&params.title).map_err(Error::invalid_params)?;
            self.daemon
                .rename_session(&params.session_id, title.clone())
                .map_err(daemon_error)?;
            Ok(json!({ "title": title }))
        })
        .await
    }

    /// `tandem/closeSession`: frees the session (its log stays).
    async fn close_session(&self, params: SessionIdParams) -> Result<Value> {
        guarded("tandem/closeSession", async move {
            self.daemon.close_session(&params.session_id).await;
            Ok(json!({}))
        })
        .await
    }

    /// `tandem/forkSession`: a new session with the history up to a user
    /// message, loaded without a replay.
    async fn fork_session(&self, params: ForkSessionParams) -> Result<ForkSessionResult> {
        guarded("tandem/forkSession", async move {
            let more =
                additional_roots(&params.additional_directories).map_err(Error::invalid_params)?;
            let fork = self
                .daemon
                .fork_session_in(
                    &self.client,
                    &params.session_id,
                    params.message_id.as_deref(),
                    more,
                )
                .map_err(daemon_error)?;
            Ok(ForkSessionResult {
                session_id: fork.id.clone(),
                mode: fork.mode().as_str().to_string(),
            })
        })
        .await
    }

    /// `tandem/deleteSession`: removes the session's log.
    async fn delete_session(&self, params: SessionIdParams) -> Result<Value> {
        guarded("tandem/deleteSession", async move {
            self.daemon
                .delete_session(&params.session_id)
                .await
                .map_err(daemon_error)?;
            Ok(json!({}))
        })
        .await
    }

    async fn set_model(
        &self,
        params: crate::protocol::SetModelParams,
    ) -> Result<crate::protocol::ModelState> {
        guarded("tandem/setModel", async move {
            let session = self
                .daemon
                .session(&params.session_id)
                .map_err(daemon_error)?;
            crate::frontend::models::set_model(&session, &params.model, params.effort.as_deref())
                .map_err(Error::invalid_params)
        })
        .await
    }

    async fn set_mode(&self, params: SetModeParams) -> Result<SetModeResult> {
        guarded("tandem/setMode", async move {
            let mode: ApprovalMode = params
                .mode
                .parse()
                .map_err(|e| Error::invalid_params(format!("mode: {e}")))?;
            let session = self
                .daemon
                .session(&params.session_id)
                .map_err(daemon_error)?;
            session.set_mode(mode);
            Ok(SetModeResult { mode: params.mode })
        })
        .await
    }

    /// `{sessionId?}`: that session's MCP servers, or every one running.
    async fn list_mcp_servers(&self, params: Value) -> Result<Value> {
        guarded("tandem/listMcpServers", async move {
            let session = params.get("sessionId").and_then(Value::as_str);
            let servers = self.daemon.mcp_servers(session).map_err(daemon_error)?;
            Ok(list_result(&servers))
        })
        .await
    }

    async fn list_sessions(&self, params: ListSessionsParams) -> Result<Value> {
        guarded("tandem/listSessions", async move {
            let folder = match params.workspace_folder.as_deref() {
                Some(folder) => Some(
                    folder_path(folder)
                        .map(|p| p.canonicalize().unwrap_or(p))
                        .ok_or_else(|| {
                            Error::invalid_params(format!(
                                "workspaceFolder: `{folder}` is neither a file:// URI nor an absolute path"
                            ))
                        })?,
                ),
                None => None,
            };
            let sessions: Vec<_> = self
                .daemon
                .list_sessions()
                .await
                .into_iter()
                .filter(|s| match &folder {
                    Some(folder) => s
                        .workspace
                        .iter()
                        .any(|w| std::path::Path::new(w) == folder.as_path()),
                    None => true,
                })
                .collect();
            Ok(json!({ "sessions": sessions }))
        })
        .await
    }

    async fn load_session(&self, params: LoadSessionParams) -> Result<LoadSessionResult> {
        guarded("tandem/loadSession", self.load(params, true)).await
    }

    /// `tandem/attachSession`: `tandem/loadSession` with the replay
    /// optional (a window following a session it already shows).
    async fn attach_session(
        &self,
        params: crate::protocol::AttachSessionParams,
    ) -> Result<LoadSessionResult> {
        let load = LoadSessionParams {
            session_id: params.session_id,
            additional_directories: params.additional_directories,
            config: None,
        };
        guarded("tandem/attachSession", self.load(load, params.replay)).await
    }

    async fn load(&self, params: LoadSessionParams, replay: bool) -> Result<LoadSessionResult> {
        {
            let more =
                additional_roots(&params.additional_directories).map_err(Error::invalid_params)?;
            let mcp_servers = crate::frontend::mcp_servers::load_config_mcp_servers(params.config)
                .map_err(Error::invalid_params)?;
            let (session, events) = self
                .daemon
                .attach_session(&self.client, &params.session_id, replay, more)
                .map_err(daemon_error)?;
            self.daemon
                .add_mcp_servers(&session.id, &mcp_servers)
                .map_err(daemon_error)?;
            let replayed = events
                .iter()
                .filter(|_| replay)
                .filter(|e| crate::frontend::updates::session_update(&e.event).is_some())
                .count();
            // The log's events are freed here, the replay's frames once
            // written: give that memory back after them.
            drop(events);
            self.outgoing.trim_when_idle();
            Ok(LoadSessionResult {
                session_id: session.id.clone(),
                replayed,
                mode: session.mode().as_str().to_string(),
                instructions: crate::frontend::updates::instruction_files(&session.instructions()),
                model_state: crate::frontend::models::model_state(&session),
            })
        }
    }

    async fn run_task(&self, params: RunTaskParams) -> Result<RunTaskResult> {
        guarded("tandem/runTask", async move {
            let cancelled = super::cancel_request::current_token();
            super::tasks::run_task(
                &self.daemon,
                &TaskOrigin::of(&self.client),
                params,
                cancelled,
            )
            .await
        })
        .await
    }

    async fn cancel(&self, params: Value) {
        guarded_notification("tandem/cancel", async move {
            match serde_json::from_value::<CancelParams>(params) {
                Ok(params) => {
                    if let Err(e) = self.daemon.cancel(&params.session_id, params.keep_inbox) {
                        tracing::warn!("tandem/cancel: {e}");
                    }
                }
                Err(e) => tracing::warn!("tandem/cancel with bad params: {e}"),
            }
        })
        .await
    }
}
