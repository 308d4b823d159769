//! `session/request_permission` built from ACP's schema types: the call as
//! its `tool_call` showed it, with what is approved in its `content` (the
//! command, the reason for asking again, each file's diff), and an option
//! of its own kind for each choice (clients bind their keys by kind).

use agent_client_protocol_schema::v1 as acp;

use crate::vocab::bridge::PermissionRequest;

/// The params of the `session/request_permission` that asks `request`.
pub(super) fn request_params(request: &PermissionRequest) -> acp::RequestPermissionRequest {
    let mut content = Vec::new();
    if let Some(text) = &request.text {
        content.push(acp::ToolCallContent::Content(acp::Content::new(
            acp::ContentBlock::Text(acp::TextContent::new(text.as_str())),
        )));
    }
    for diff in &request.diffs {
        content.push(acp::ToolCallContent::Diff(
            acp::Diff::new(diff.path.as_str(), diff.new_text.as_str())
                .old_text(diff.old_text.clone()),
        ));
    }
    let mut fields = acp::ToolCallUpdateFields::new()
        .title(request.title.clone())
        .kind(super::session_updates::tool_kind(request.kind))
        .status(acp::ToolCallStatus::Pending)
        .raw_input(request.raw_input.clone());
    if !content.is_empty() {
        fields = fields.content(content);
    }
    let tool_call =
        acp::ToolCallUpdate::new(acp::ToolCallId::new(request.tool_call_id.as_str()), fields);
    acp::RequestPermissionRequest::new(
        acp::SessionId::new(request.session_id.as_str()),
        tool_call,
        options(request.always_scope.as_deref()),
    )
}

/// "Always" is offered only when there is something to remember (a
/// command's scope); a choice that would remember nothing is not shown as
/// if it did.
fn options(scope: Option<&str>) -> Vec<acp::PermissionOption> {
    use acp::PermissionOptionKind as Kind;
    let option = |id: &'static str, name: String, kind| acp::PermissionOption::new(id, name, kind);
    let mut options = vec![option("allow_once", "Allow once".into(), Kind::AllowOnce)];
    if let Some(scope) = scope {
        options.push(option(
            "allow_always",
            format!("Always allow `{scope}` in this session"),
            Kind::AllowAlways,
        ));
    }
    options.push(option("reject_once", "Reject".into(), Kind::RejectOnce));
    if let Some(scope) = scope {
        options.push(option(
            "reject_always",
            format!("Always reject `{scope}` in this session"),
            Kind::RejectAlways,
        ));
    }
    options
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::vocab::event::FileDiff;

    #[test]
    fn a_request_is_acps_with_the_call_its_content_and_one_option_per_kind() {
        let request = PermissionRequest {
            session_id: "s1".into(),
            tool_call_id: "c1".into(),
            title: "Run `ls`".into(),
            kind: crate::vocab::tool_call::ToolKind::Mcp,
            raw_input: json!({"command": "ls"}),
            always_scope: Some("ls".into()),
            text: Some("ls -la".into()),
            diffs: vec![FileDiff {
                path: "/w/a".into(),
                old_text: None,
                new_text: "new".into(),
            }],
        };
        assert_eq!(
            serde_json::to_value(request_params(&request)).unwrap(),
            json!({
                "sessionId": "s1",
                "toolCall": {"toolCallId": "c1", "title": "Run `ls`", "kind": "other",
                             "status": "pending", "rawInput": {"command": "ls"},
                             "content": [
                                 {"type": "content", "content": {"type": "text", "text": "ls -la"}},
                                 {"type": "diff", "path": "/w/a", "newText": "new"}]},
                "options": [
                    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
                    {"optionId": "allow_always", "name": "Always allow `ls` in this session",
                     "kind": "allow_always"},
                    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
                    {"optionId": "reject_always", "name": "Always reject `ls` in this session",
                     "kind": "reject_always"}],
            })
        );
    }
}
