//! tandem's session updates as ACP's `session/update` notifications, built
//! from the official schema crate's types (`agent-client-protocol-schema`),
//! so the compiler checks each field's name and type against ACP's.
//!
//! Invariant: every tandem-only field travels in the schema's `meta`
//! (`_meta.tandem`); nothing else leaves here that the schema lacks.

use agent_client_protocol_schema::v1 as acp;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::protocol::{
    self, PlanPriority, PlanStatus, SessionUpdate as Tandem, ToolCallStatus, ToolKind,
};

/// A `session/update` notification: JSON-RPC's envelope around the
/// schema's [`acp::SessionNotification`].
#[derive(Serialize)]
pub(crate) struct UpdateMessage {
    jsonrpc: &'static str,
    method: &'static str,
    params: acp::SessionNotification,
}

impl UpdateMessage {
    pub(crate) fn new(session_id: &str, update: acp::SessionUpdate) -> UpdateMessage {
        UpdateMessage::on("session/update", session_id, update)
    }

    /// The same notification as `method` (the serve's `tandem/update` has
    /// `session/update`'s params for the kinds both share).
    pub(crate) fn on(
        method: &'static str,
        session_id: &str,
        update: acp::SessionUpdate,
    ) -> UpdateMessage {
        UpdateMessage {
            jsonrpc: "2.0",
            method,
            params: acp::SessionNotification::new(acp::SessionId::new(session_id), update),
        }
    }
}

/// The ACP updates of one tandem update (none for tandem-only kinds).
pub(crate) fn acp_updates(update: Tandem) -> Vec<acp::SessionUpdate> {
    let update = match update {
        // ACP streams the user's message as chunks, each with its id.
        Tandem::UserMessage {
            message_id,
            content,
        } => {
            return content
                .into_iter()
                .map(|block| {
                    acp::SessionUpdate::UserMessageChunk(
                        acp::ContentChunk::new(content_block(block))
                            .message_id(acp::MessageId::new(message_id.as_str())),
                    )
                })
                .collect();
        }
        Tandem::AgentMessageChunk {
            message_id,
            content,
        } => acp::SessionUpdate::AgentMessageChunk(chunk(message_id, content)),
        Tandem::AgentThoughtChunk {
            message_id,
            content,
        } => acp::SessionUpdate::AgentThoughtChunk(chunk(message_id, content)),
        Tandem::ToolCall {
            tool_call_id,
            title,
            kind,
            status,
            raw_input,
            mcp,
        } => acp::SessionUpdate::ToolCall(
            acp::ToolCall::new(tool_call_id, title)
                .kind(tool_kind(kind))
                .status(tool_status(status))
                .raw_input(raw_input)
                .meta(tandem_meta(mcp.map(|m| ("mcp", super::wire::to_wire(m))))),
        ),
        Tandem::ToolCallUpdate {
            tool_call_id,
            status,
            content,
            output_delta,
            waiting_for,
            locations,
        } => {
            let mut fields = acp::ToolCallUpdateFields::new();
            if let Some(status) = status {
                fields = fields.status(tool_status(status));
            }
            if !content.is_empty() {
                fields = fields.content(content.into_iter().map(tool_content).collect::<Vec<_>>());
            }
            if !locations.is_empty() {
                fields = fields.locations(
                    locations
                        .into_iter()
                        .map(|l| acp::ToolCallLocation::new(l.path).line(l.line))
                        .collect::<Vec<_>>(),
                );
            }
            let meta = tandem_meta(
                [
                    waiting_for.map(|w| ("waitingFor", Value::from(w.as_str()))),
                    output_delta.map(|d| ("outputDelta", Value::String(d))),
                ]
                .into_iter()
                .flatten(),
            );
            acp::SessionUpdate::ToolCallUpdate(
                acp::ToolCallUpdate::new(tool_call_id, fields).meta(meta),
            )
        }
        Tandem::Plan { entries } => acp::SessionUpdate::Plan(acp::Plan::new(
            entries.into_iter().map(plan_entry).collect(),
        )),
        // The mode's `config_option_update` (the whole set, with the model
        // and effort) follows from `ConfigStates::follow`.
        Tandem::CurrentModeUpdate { current_mode_id } => {
            acp::SessionUpdate::CurrentModeUpdate(acp::CurrentModeUpdate::new(current_mode_id))
        }
        // ACP's name for it.
        Tandem::SessionInfo { title } => {
            acp::SessionUpdate::SessionInfoUpdate(acp::SessionInfoUpdate::new().title(title))
        }
        Tandem::InputStatus { .. }
        | Tandem::Usage { .. }
        | Tandem::CurrentModelUpdate { .. }
        | Tandem::Rewound { .. }
        | Tandem::TurnEnd { .. }
        | Tandem::AgentMessageReset {}
        | Tandem::ContextCompacted { .. } => return Vec::new(),
    };
    vec![update]
}

/// An update as the JSON it goes on the wire as. The schema leaves out a
/// `tool_call`'s `status` and `kind` when they are ACP's defaults
/// (`pending`, `other`); tandem has always sent both, so they stay.
pub(crate) fn update_value(update: &acp::SessionUpdate) -> Option<Value> {
    let mut value = match serde_json::to_value(update) {
        Ok(value) => value,
        Err(e) => {
            tracing::error!("cannot serialize an ACP update: {e}");
            return None;
        }
    };
    if let (acp::SessionUpdate::ToolCall(_), Some(map)) = (update, value.as_object_mut()) {
        map.entry("kind").or_insert_with(|| "other".into());
        map.entry("status").or_insert_with(|| "pending".into());
    }
    Some(value)
}

fn chunk(message_id: String, content: protocol::ContentBlock) -> acp::ContentChunk {
    acp::ContentChunk::new(content_block(content)).message_id(acp::MessageId::new(message_id))
}

/// A content block in the schema's terms. ACP requires a resource link's
/// `name` and an embedded text resource's `text`, which tandem's prompt
/// blocks may lack: they go out empty (see protocol.md, `session/load`).
fn content_block(block: protocol::ContentBlock) -> acp::ContentBlock {
    match block {
        protocol::ContentBlock::Text { text } => {
            acp::ContentBlock::Text(acp::TextContent::new(text))
        }
        protocol::ContentBlock::Image { data, mime_type } => {
            acp::ContentBlock::Image(acp::ImageContent::new(data, mime_type))
        }
        protocol::ContentBlock::ResourceLink { uri, name } => {
            acp::ContentBlock::ResourceLink(acp::ResourceLink::new(name.unwrap_or_default(), uri))
        }
        protocol::ContentBlock::Resource { resource } => {
            let mut contents =
                acp::TextResourceContents::new(resource.text.unwrap_or_default(), resource.uri);
            contents = contents.mime_type(resource.mime_type);
            acp::ContentBlock::Resource(acp::EmbeddedResource::new(
                acp::EmbeddedResourceResource::TextResourceContents(contents),
            ))
        }
    }
}

fn tool_content(content: protocol::ToolCallContent) -> acp::ToolCallContent {
    match content {
        protocol::ToolCallContent::Content { content } => {
            acp::ToolCallContent::Content(acp::Content::new(content_block(content)))
        }
        protocol::ToolCallContent::Diff {
            path,
            old_text,
            new_text,
        } => acp::ToolCallContent::Diff(acp::Diff::new(path, new_text).old_text(old_text)),
        protocol::ToolCallContent::Terminal { terminal_id } => {
            acp::ToolCallContent::Terminal(acp::Terminal::new(terminal_id))
        }
    }
}

/// ACP's tool kinds have no `mcp`: an MCP tool's call is `other` there
/// (its server and tool go under `_meta.tandem.mcp`).
pub(super) fn tool_kind(kind: ToolKind) -> acp::ToolKind {
    match kind {
        ToolKind::Read => acp::ToolKind::Read,
        ToolKind::Search => acp::ToolKind::Search,
        ToolKind::Edit => acp::ToolKind::Edit,
        ToolKind::Execute => acp::ToolKind::Execute,
        ToolKind::Think => acp::ToolKind::Think,
        ToolKind::Mcp | ToolKind::Other => acp::ToolKind::Other,
    }
}

fn tool_status(status: ToolCallStatus) -> acp::ToolCallStatus {
    match status {
        ToolCallStatus::Pending => acp::ToolCallStatus::Pending,
        ToolCallStatus::InProgress => acp::ToolCallStatus::InProgress,
        ToolCallStatus::Completed => acp::ToolCallStatus::Completed,
        ToolCallStatus::Failed => acp::ToolCallStatus::Failed,
    }
}

fn plan_entry(entry: protocol::PlanEntry) -> acp::PlanEntry {
    let priority = match entry.priority {
        PlanPriority::High => acp::PlanEntryPriority::High,
        PlanPriority::Medium => acp::PlanEntryPriority::Medium,
        PlanPriority::Low => acp::PlanEntryPriority::Low,
    };
    let status = match entry.status {
        PlanStatus::Pending => acp::PlanEntryStatus::Pending,
        PlanStatus::InProgress => acp::PlanEntryStatus::InProgress,
        PlanStatus::Completed => acp::PlanEntryStatus::Completed,
    };
    acp::PlanEntry::new(entry.content, priority, status)
}

/// `_meta: {"tandem": {...}}` of tandem-only fields, or none.
pub(super) fn tandem_meta<'a>(
    fields: impl IntoIterator<Item = (&'a str, Value)>,
) -> Option<acp::Meta> {
    let tandem: Map<String, Value> = fields
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    (!tandem.is_empty()).then(|| Map::from_iter([("tandem".to_string(), Value::Object(tandem))]))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Each update as JSON, as `tandem acp` wrote it before the schema's
    /// types built it.
    fn wire(update: Value) -> Vec<Value> {
        let update: Tandem = serde_json::from_value(update).expect("a tandem update");
        acp_updates(update)
            .iter()
            .filter_map(update_value)
            .collect()
    }

    #[test]
    fn tool_calls_keep_status_and_kind_and_put_mcp_under_meta() {
        assert_eq!(
            wire(
                json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Read a.txt",
                        "kind": "read", "status": "pending", "rawInput": {"path": "a.txt"}})
            ),
            vec![
                json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Read a.txt",
                        "kind": "read", "status": "pending", "rawInput": {"path": "a.txt"}})
            ]
        );
        assert_eq!(
            wire(
                json!({"sessionUpdate": "tool_call", "toolCallId": "c2", "title": "t",
                        "kind": "mcp", "status": "pending", "rawInput": {},
                        "mcp": {"server": "time", "tool": "now"}})
            ),
            vec![
                json!({"sessionUpdate": "tool_call", "toolCallId": "c2", "title": "t",
                        "kind": "other", "status": "pending", "rawInput": {},
                        "_meta": {"tandem": {"mcp": {"server": "time", "tool": "now"}}}})
            ]
        );
    }

    #[test]
    fn tool_call_updates_carry_content_diffs_locations_and_tandems_meta() {
        let result = json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1",
                            "status": "completed",
                            "content": [{"type": "content", "content": {"type": "text", "text": "ok"}},
                                        {"type": "diff", "path": "/w/a", "oldText": "x", "newText": "y"},
                                        {"type": "diff", "path": "/w/b", "newText": "z"},
                                        {"type": "terminal", "terminalId": "term-1"}],
                            "locations": [{"path": "/w/a", "line": 3}, {"path": "/w/b"}]});
        assert_eq!(wire(result.clone()), vec![result]);
        assert_eq!(
            wire(
                json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1",
                        "status": "pending", "waitingFor": "permission"})
            ),
            vec![
                json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1",
                        "status": "pending", "_meta": {"tandem": {"waitingFor": "permission"}}})
            ]
        );
        assert_eq!(
            wire(
                json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1",
                        "outputDelta": "line\n"})
            ),
            vec![
                json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1",
                        "_meta": {"tandem": {"outputDelta": "line\n"}}})
            ]
        );
    }

    #[test]
    fn chunks_plans_titles_and_modes_are_acps() {
        let chunk = json!({"sessionUpdate": "agent_message_chunk", "messageId": "m1",
                           "content": {"type": "text", "text": "hi"}});
        assert_eq!(wire(chunk.clone()), vec![chunk]);
        let thought = json!({"sessionUpdate": "agent_thought_chunk", "messageId": "m1",
                             "content": {"type": "text", "text": "hm"}});
        assert_eq!(wire(thought.clone()), vec![thought]);
        assert_eq!(
            wire(json!({"sessionUpdate": "user_message", "messageId": "u1",
                        "content": [{"type": "text", "text": "fix"},
                                    {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                                    {"type": "resource_link", "uri": "file:///w/a", "name": "a"},
                                    {"type": "resource", "resource": {"uri": "file:///w/b",
                                        "text": "b", "mimeType": "text/plain"}}]})),
            vec![
                json!({"sessionUpdate": "user_message_chunk", "messageId": "u1",
                       "content": {"type": "text", "text": "fix"}}),
                json!({"sessionUpdate": "user_message_chunk", "messageId": "u1",
                       "content": {"type": "image", "data": "AAAA", "mimeType": "image/png"}}),
                json!({"sessionUpdate": "user_message_chunk", "messageId": "u1",
                       "content": {"type": "resource_link", "uri": "file:///w/a", "name": "a"}}),
                json!({"sessionUpdate": "user_message_chunk", "messageId": "u1",
                       "content": {"type": "resource", "resource": {"uri": "file:///w/b",
                           "text": "b", "mimeType": "text/plain"}}}),
            ]
        );
        let plan = json!({"sessionUpdate": "plan", "entries": [
            {"content": "a", "priority": "medium", "status": "in_progress"}]});
        assert_eq!(wire(plan.clone()), vec![plan]);
        assert_eq!(
            wire(json!({"sessionUpdate": "session_info", "title": "Fix it"})),
            vec![json!({"sessionUpdate": "session_info_update", "title": "Fix it"})]
        );
        assert_eq!(
            wire(json!({"sessionUpdate": "current_mode_update", "currentModeId": "auto"})),
            // The config options (mode, model, effort) follow from the
            // sink's `ConfigStates`, not from this mapping.
            vec![json!({"sessionUpdate": "current_mode_update", "currentModeId": "auto"})]
        );
        for quiet in [
            json!({"sessionUpdate": "agent_message_reset"}),
            json!({"sessionUpdate": "context_compacted", "removedMessages": 3, "summarized": true}),
            json!({"sessionUpdate": "input_status", "messageIds": ["m2"], "status": "claimed"}),
        ] {
            assert_eq!(wire(quiet), Vec::<Value>::new());
        }
    }

    #[test]
    fn a_chunk_notification_is_json_rpcs_envelope() {
        let update = acp::SessionUpdate::AgentMessageChunk(chunk(
            "m1".into(),
            protocol::ContentBlock::Text { text: "hi".into() },
        ));
        let bytes = serde_json::to_vec(&UpdateMessage::new("s1", update)).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&bytes).unwrap(),
            json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1",
                   "update": {"sessionUpdate": "agent_message_chunk", "messageId": "m1",
                              "content": {"type": "text", "text": "hi"}}}})
        );
    }
}
