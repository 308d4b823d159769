//! The approval gate of an MCP tool call (`execute` class): `auto` runs it,
//! `read-only` runs only a tool the server annotates read-only (the only
//! ones it offers), `review` asks, showing the server, the tool and the
//! arguments, unless a remembered answer covers that very tool.
//!
//! Invariant: what `allow_always` remembers is one server's one tool, in
//! one session (so never across workspaces), and its scope can never cover
//! a command: it contains `|`, which no command scope does.

use std::sync::Arc;

use serde_json::Value;

use crate::core::session::Session;
use crate::tools::{McpTarget, Tool, ToolContext, ToolEvent};
use crate::vocab::approval::ApprovalMode;
use crate::vocab::bridge::{BridgeOutcome, PermissionChoice, PermissionRequest};
use crate::vocab::event::{Event, ToolStatus, TurnId};
use crate::vocab::tool_call::WaitingFor;

/// What `allow_always` remembers for an MCP tool.
pub(super) fn mcp_scope(target: &McpTarget) -> String {
    format!("mcp|{}|{}", target.server, target.tool)
}

/// The arguments as the permission's title shows them: the first 200
/// characters (`rawInput` has them whole).
fn short(args: &str) -> String {
    match args.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &args[..cut]),
        None => args.to_string(),
    }
}

pub(super) async fn approve_mcp(
    tool: &Arc<dyn Tool>,
    target: &McpTarget,
    args: &Value,
    ctx: &ToolContext,
    session: &Arc<Session>,
    turn_id: &TurnId,
) -> Result<(), (ToolStatus, String)> {
    let decide = |decision: &str, scope: Option<String>| {
        session.log.append(Event::ApprovalDecided {
            turn_id: turn_id.clone(),
            call_id: ctx.call_id.clone(),
            decision: decision.to_string(),
            scope,
            unsandboxed: false,
        });
    };
    let what = format!("`{}` of the MCP server `{}`", target.tool, target.server);
    match ctx.mode {
        ApprovalMode::Auto => return Ok(()),
        ApprovalMode::ReadOnly if !tool.read_only_hint() => {
            decide("rejected_by_mode", None);
            return Err((
                ToolStatus::Rejected,
                format!("the session is in read-only mode: {what} is not marked read-only"),
            ));
        }
        ApprovalMode::ReadOnly | ApprovalMode::Review => {}
    }
    let scope = mcp_scope(target);
    let approvals = session.approvals();
    if approvals.always_reject.contains(&scope) {
        decide("rejected_by_rule", Some(scope));
        return Err((
            ToolStatus::Rejected,
            format!("the user chose to always reject {what} in this session"),
        ));
    }
    if approvals.always_allow.contains(&scope) {
        decide("allowed_by_rule", Some(scope));
        return Ok(());
    }
    if ctx.bridge.abilities().request_permission {
        (ctx.emit)(ToolEvent::Waiting(WaitingFor::Permission));
    }
    let request = PermissionRequest {
        session_id: session.id.clone(),
        tool_call_id: ctx.call_id.clone(),
        title: format!(
            "{}: {} {}",
            target.server,
            target.tool,
            short(&args.to_string())
        ),
        kind: tool.kind(),
        raw_input: args.clone(),
        always_scope: Some(scope.clone()),
        // What the call would do, in the request itself (issue 29).
        text: Some(format!("{}: {}\n\n{}", target.server, target.tool, args)),
        diffs: Vec::new(),
    };
    match ctx.bridge.request_permission(request, &ctx.cancel).await {
        BridgeOutcome::Answered(answer) => {
            let choice = answer.choice;
            let remembered = matches!(
                choice,
                PermissionChoice::AllowAlways | PermissionChoice::RejectAlways
            )
            .then(|| scope.clone());
            decide(choice.option_id(), remembered.clone());
            if let Some(scope) = &remembered {
                session.remember(scope, choice.allows());
            }
            if choice.allows() {
                Ok(())
            } else {
                let because = answer
                    .reason
                    .map(|r| format!("; they said: {r}"))
                    .unwrap_or_default();
                Err((
                    ToolStatus::Rejected,
                    format!("the user rejected calling {what}{because}"),
                ))
            }
        }
        BridgeOutcome::Cancelled if ctx.cancel.is_cancelled() => {
            decide("cancelled", None);
            Err((
                ToolStatus::NotRun,
                "ABORTED_BEFORE_DISPATCH: the turn was cancelled while waiting for permission"
                    .to_string(),
            ))
        }
        BridgeOutcome::Cancelled => {
            decide("dismissed", None);
            Err((
                ToolStatus::Rejected,
                format!("the user dismissed the permission request for {what}"),
            ))
        }
        BridgeOutcome::Unavailable(why) => {
            decide("unavailable", None);
            Err((
                ToolStatus::Rejected,
                format!(
                    "permission to call {what} could not be asked ({why}); in review mode MCP tools need the user's approval"
                ),
            ))
        }
    }
}
