//! Requests from the daemon to the editor, and the [`ClientBridge`] over
//! them.
//!
//! Our requests carry string ids `tandem-N`; the stdin loop hands responses
//! with such ids here instead of to tower-lsp. We keep this path rather than
//! tower-lsp's `Client::send_request` because a cancelled turn must withdraw
//! its requests with `$/cancelRequest`, which needs the id.
//!
//! Invariant: every pending request ends — answered, withdrawn on cancel,
//! or failed when the connection closes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::OutboundQueue;
use crate::frontend::answers::{malformed, typed_answer};
use crate::protocol::{
    ContentBlock, PermissionOption, PermissionOptionKind, PermissionToolCall,
    RequestPermissionParams, RequestUserInputResult, ToolCallContent, ToolCallStatus, ToolKind,
    UserInputOutcome,
};
use crate::vocab::bridge::{
    ApplyEditRequest, ApplyEditResponse, BridgeOutcome, ClientAbilities, ClientBridge,
    PermissionAnswer, PermissionRequest, UserInputRequest,
};
use crate::vocab::language::{FileDiagnostics, LanguageAnswer, Location, Symbol, TextPoint};

/// Prefix of the ids of our requests.
pub const ID_PREFIX: &str = "tandem-";

type Reply = Result<Value, Value>;

/// Why a request got no answer: the editor's connection closed first.
pub const CONNECTION_CLOSED: &str = "the editor connection closed";

pub struct Outgoing {
    out: OutboundQueue,
    next: AtomicU64,
    pending: Mutex<HashMap<String, oneshot::Sender<Reply>>>,
    abilities: Mutex<ClientAbilities>,
    permission_method: &'static str,
    user_input_method: &'static str,
    /// How a pending request is withdrawn: LSP's `$/cancelRequest {id}`,
    /// ACP's `$/cancel_request {requestId}`.
    cancel_method: &'static str,
    /// What our ids start with: [`ID_PREFIX`], or a longer one that keeps
    /// two `Outgoing`s of one client apart (the serve's progress tokens).
    prefix: std::borrow::Cow<'static, str>,
}

impl Outgoing {
    pub fn new(out: OutboundQueue) -> Arc<Outgoing> {
        Outgoing::with_methods(
            out,
            "tandem/requestPermission",
            "tandem/requestUserInput",
            "$/cancelRequest",
        )
    }

    /// With the method names of another wire (ACP's
    /// `session/request_permission` and `$/cancel_request`).
    pub fn with_methods(
        out: OutboundQueue,
        permission: &'static str,
        user_input: &'static str,
        cancel: &'static str,
    ) -> Arc<Outgoing> {
        Arc::new(Outgoing {
            out,
            next: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            abilities: Mutex::new(ClientAbilities::default()),
            permission_method: permission,
            user_input_method: user_input,
            cancel_method: cancel,
            prefix: ID_PREFIX.into(),
        })
    }

    /// With ids `<prefix>N` (`prefix` should start with [`ID_PREFIX`]).
    pub fn with_id_prefix(
        out: OutboundQueue,
        prefix: impl Into<std::borrow::Cow<'static, str>>,
    ) -> Arc<Outgoing> {
        let mut outgoing = Outgoing::with_methods(
            out,
            "tandem/requestPermission",
            "tandem/requestUserInput",
            "$/cancelRequest",
        );
        if let Some(o) = Arc::get_mut(&mut outgoing) {
            o.prefix = prefix.into();
        }
        outgoing
    }

    /// Asks this editor's writer to give freed memory back once what is
    /// queued is written (see `memory`).
    pub(crate) fn trim_when_idle(&self) {
        self.out.trim_when_idle();
    }

    pub fn set_abilities(&self, abilities: ClientAbilities) {
        *self.abilities.lock() = abilities;
    }

    /// Whether a message from the editor answers one of our requests.
    pub fn is_ours(message: &Value) -> bool {
        message.get("method").is_none()
            && message
                .get("id")
                .and_then(Value::as_str)
                .is_some_and(|id| id.starts_with(ID_PREFIX))
    }

    /// Delivers the editor's answer to the waiting request; false when no
    /// request of ours waits for it.
    pub fn complete(&self, message: &Value) -> bool {
        let Some(id) = message.get("id").and_then(Value::as_str) else {
            return false;
        };
        let Some(waiter) = self.pending.lock().remove(id) else {
            tracing::warn!(id, "answer to an unknown or withdrawn request");
            return false;
        };
        let reply = match message.get("error") {
            Some(error) => Err(error.clone()),
            None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
        };
        let _ = waiter.send(reply);
        true
    }

    /// Sends a request and waits for its answer or `cancel`.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<Value> {
        let id = format!(
            "{}{}",
            self.prefix,
            self.next.fetch_add(1, Ordering::Relaxed)
        );
        let (tx, rx) = oneshot::channel();
        self.pending.lock().insert(id.clone(), tx);
        self.out
            .send_json(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        // Withdraws the request if this future ends without an answer: on
        // `cancel` below, and also when the caller stops polling it (the
        // driver drops a running tool's future when its turn is cancelled,
        // and may do so before this select ever sees `cancel`).
        let _withdraw = WithdrawOnDrop {
            outgoing: self,
            id: &id,
        };
        tokio::select! {
            reply = rx => match reply {
                Ok(Ok(result)) => BridgeOutcome::Answered(result),
                Ok(Err(error)) => {
                    // -32800: the editor cancelled it (the user dismissed it).
                    if error.get("code").and_then(Value::as_i64) == Some(-32800) {
                        BridgeOutcome::Cancelled
                    } else {
                        BridgeOutcome::Unavailable(format!(
                            "the editor answered {method} with an error: {}",
                            error.get("message").and_then(Value::as_str).unwrap_or("(no message)")
                        ))
                    }
                }
                Err(_) => BridgeOutcome::Unavailable(CONNECTION_CLOSED.to_string()),
            },
            _ = cancel.cancelled() => BridgeOutcome::Cancelled,
        }
    }

    /// Withdraws request `id` (`$/cancelRequest`) if it is still
    /// pending: not when it was answered, nor when the connection closed.
    fn withdraw(&self, id: &str) {
        let pending = self.pending.lock().remove(id).is_some();
        if pending {
            let field = if self.cancel_method == "$/cancel_request" {
                "requestId"
            } else {
                "id"
            };
            self.out.send_json(
                &json!({"jsonrpc": "2.0", "method": self.cancel_method, "params": {field: id}}),
            );
        }
    }

    /// Fails every pending request (the connection is closing).
    pub fn fail_all(&self) {
        self.pending.lock().clear();
    }
}

/// Withdraws a request that is still pending when its waiter goes away.
struct WithdrawOnDrop<'a> {
    outgoing: &'a Outgoing,
    id: &'a str,
}

impl Drop for WithdrawOnDrop<'_> {
    fn drop(&mut self) {
        self.outgoing.withdraw(self.id);
    }
}

#[async_trait::async_trait]
impl ClientBridge for Outgoing {
    fn abilities(&self) -> ClientAbilities {
        *self.abilities.lock()
    }

    async fn request_permission(
        &self,
        request: PermissionRequest,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<PermissionAnswer> {
        if !self.abilities().request_permission {
            return BridgeOutcome::Unavailable(
                "the editor cannot answer permission requests".to_string(),
            );
        }
        let params = serde_json::to_value(permission_params(&request, self.permission_method))
            .unwrap_or(Value::Null);
        let answer = self.request(self.permission_method, params, cancel).await;
        crate::frontend::answers::permission_answer(self.permission_method, answer)
    }

    async fn request_user_input(
        &self,
        request: UserInputRequest,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<Value> {
        if !self.abilities().request_user_input {
            return BridgeOutcome::Unavailable("the editor cannot answer questions".to_string());
        }
        let params = serde_json::to_value(crate::frontend::updates::user_input_params(&request))
            .unwrap_or(Value::Null);
        let answer = self.request(self.user_input_method, params, cancel).await;
        let method = self.user_input_method;
        match typed_answer(method, answer, |a: RequestUserInputResult| a) {
            BridgeOutcome::Answered(RequestUserInputResult {
                outcome: Some(UserInputOutcome::Cancelled),
                ..
            }) => BridgeOutcome::Cancelled,
            BridgeOutcome::Answered(RequestUserInputResult {
                answers: Some(answers),
                ..
            }) => BridgeOutcome::Answered(answers),
            BridgeOutcome::Answered(_) => {
                BridgeOutcome::Unavailable(malformed(method, "missing field `answers`"))
            }
            BridgeOutcome::Cancelled => BridgeOutcome::Cancelled,
            BridgeOutcome::Unavailable(why) => BridgeOutcome::Unavailable(why),
        }
    }

    async fn apply_edit(
        &self,
        request: ApplyEditRequest,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<ApplyEditResponse> {
        if !self.abilities().apply_edit {
            return BridgeOutcome::Unavailable(
                "the editor cannot apply workspace edits".to_string(),
            );
        }
        let params = serde_json::to_value(ApplyEditParams {
            label: request.label,
            edit: super::workspace_edit::workspace_edit_json(&request.edit),
        })
        .unwrap_or(Value::Null);
        let answer = self.request("workspace/applyEdit", params, cancel).await;
        typed_answer(
            "workspace/applyEdit",
            answer,
            |a: tower_lsp::lsp_types::ApplyWorkspaceEditResponse| ApplyEditResponse {
                applied: a.applied,
                failure_reason: a.failure_reason,
            },
        )
    }

    async fn diagnostics(
        &self,
        paths: Option<Vec<std::path::PathBuf>>,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<LanguageAnswer<FileDiagnostics>> {
        self.ask_diagnostics(paths, cancel).await
    }

    async fn definition(
        &self,
        at: TextPoint,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<LanguageAnswer<Location>> {
        self.ask_definition(at, cancel).await
    }

    async fn references(
        &self,
        at: TextPoint,
        include_declaration: bool,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<LanguageAnswer<Location>> {
        self.ask_references(at, include_declaration, cancel).await
    }

    async fn workspace_symbols(
        &self,
        query: String,
        cancel: &CancellationToken,
    ) -> BridgeOutcome<LanguageAnswer<Symbol>> {
        self.ask_workspace_symbols(query, cancel).await
    }
}

/// `workspace/applyEdit` params: lsp-types' `ApplyWorkspaceEditParams`
/// with the edit as `workspace_edit_json` writes it.
#[derive(serde::Serialize)]
struct ApplyEditParams {
    label: String,
    edit: Value,
}

/// `tandem/requestPermission`'s params: the call as its `tool_call` showed
/// it, with what is approved in its `content` (the command, the reason for
/// asking again, each file's diff), so a client that kept no earlier
/// update still shows what it asks about; and the choices. "Always" is
/// offered only when there is something to remember (a command's scope); a
/// choice that would remember nothing is not shown as if it did. Every
/// option has a kind of its own: clients bind their keys by kind.
fn permission_params(request: &PermissionRequest, method: &str) -> RequestPermissionParams {
    let mut content = Vec::new();
    if let Some(text) = &request.text {
        content.push(ToolCallContent::Content {
            content: ContentBlock::Text { text: text.clone() },
        });
    }
    for diff in &request.diffs {
        content.push(ToolCallContent::Diff {
            path: diff.path.clone(),
            old_text: diff.old_text.clone(),
            new_text: diff.new_text.clone(),
        });
    }
    // ACP has no `mcp` kind: an MCP tool is `other` there.
    let kind = match request.kind {
        ToolKind::Mcp if method == "session/request_permission" => ToolKind::Other,
        kind => kind,
    };
    use PermissionOptionKind as Kind;
    let option = |id: &str, kind, name: String| PermissionOption {
        option_id: id.to_string(),
        name,
        kind,
    };
    let scope = request.always_scope.as_deref();
    let mut options = vec![option("allow_once", Kind::AllowOnce, "Allow once".into())];
    if let Some(scope) = scope {
        options.push(option(
            "allow_always",
            Kind::AllowAlways,
            format!("Always allow `{scope}` in this session"),
        ));
    }
    options.push(option("reject_once", Kind::RejectOnce, "Reject".into()));
    if let Some(scope) = scope {
        options.push(option(
            "reject_always",
            Kind::RejectAlways,
            format!("Always reject `{scope}` in this session"),
        ));
    }
    RequestPermissionParams {
        session_id: request.session_id.clone(),
        tool_call: PermissionToolCall {
            tool_call_id: request.tool_call_id.clone(),
            title: request.title.clone(),
            kind,
            status: ToolCallStatus::Pending,
            raw_input: request.raw_input.clone(),
            content,
        },
        options,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::vocab::event::FileDiff;

    fn request(kind: ToolKind, scope: Option<&str>) -> PermissionRequest {
        PermissionRequest {
            session_id: "a724d54fff2b4a38a9b6eb5258a5217c".into(),
            tool_call_id: "call_7".into(),
            title: "Run `cargo test`".into(),
            kind,
            raw_input: json!({"cmd": "cargo test"}),
            always_scope: scope.map(str::to_string),
            text: Some("$ cargo test".into()),
            diffs: Vec::new(),
        }
    }

    #[test]
    fn a_permission_request_is_protocol_mds_example() {
        let params = permission_params(
            &request(ToolKind::Execute, Some("cargo test")),
            "tandem/requestPermission",
        );
        assert_eq!(
            serde_json::to_value(params).unwrap(),
            json!({
              "sessionId":"a724d54fff2b4a38a9b6eb5258a5217c",
              "toolCall":{"toolCallId":"call_7","title":"Run `cargo test`","kind":"execute","status":"pending","rawInput":{"cmd":"cargo test"},
                "content":[{"type":"content","content":{"type":"text","text":"$ cargo test"}}]},
              "options":[
                {"optionId":"allow_once","name":"Allow once","kind":"allow_once"},
                {"optionId":"allow_always","name":"Always allow `cargo test` in this session","kind":"allow_always"},
                {"optionId":"reject_once","name":"Reject","kind":"reject_once"},
                {"optionId":"reject_always","name":"Always reject `cargo test` in this session","kind":"reject_always"}]})
        );
    }

    #[test]
    fn a_patch_request_has_its_diffs_no_always_and_mcp_is_tandems_kind() {
        let mut patch = request(ToolKind::Mcp, None);
        patch.text = None;
        patch.diffs = vec![FileDiff {
            path: "/w/a.rs".into(),
            old_text: Some("x".into()),
            new_text: "y".into(),
        }];
        let params =
            serde_json::to_value(permission_params(&patch, "tandem/requestPermission")).unwrap();
        assert_eq!(params["toolCall"]["kind"], "mcp");
        assert_eq!(
            params["toolCall"]["content"],
            json!([{"type": "diff", "path": "/w/a.rs", "oldText": "x", "newText": "y"}])
        );
        let kinds: Vec<&str> = params["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["allow_once", "reject_once"]);
        let acp = permission_params(&patch, "session/request_permission");
        assert_eq!(acp.tool_call.kind, ToolKind::Other);
    }
}
