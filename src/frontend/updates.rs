//! Conversions between the core's types and the wire's, shared by every
//! frontend: session events become `session/update`-shaped updates, wire
//! prompts become user content, receipts become prompt results.
//!
//! Invariant: an update is a function of one logged event and nothing else,
//! which is why a replayed session sends exactly what its live turns sent.

use crate::core::daemon::DaemonError;
use crate::core::log::LoggedEvent;
use crate::core::session::TurnReceipt;
use crate::protocol::{
    error_code, ContentBlock, EmbeddedResource, PlanEntry, PromptResult, RequestUserInputParams,
    SessionUpdate, ToolCallContent, UpdateParams, WireLocation, WireMcpTarget, WireQuestion,
    WireQuestionOption, WireUsage,
};
use crate::vocab::bridge::{Question, UserInputRequest};
use crate::vocab::event::{Event, InputStatus, ToolStatus, Usage, UserContent};
use crate::vocab::plan::PlanPriority;
use crate::vocab::tool_call::ToolCallStatus;

/// A daemon error as every wire reports it: tandem's error code, the
/// message, and data naming what was unknown.
pub fn daemon_error_parts(error: DaemonError) -> (i64, String, Option<serde_json::Value>) {
    match error {
        DaemonError::UnknownSession(id) => (
            error_code::UNKNOWN_SESSION,
            format!("unknown session `{id}`"),
            Some(serde_json::json!({ "sessionId": id })),
        ),
        DaemonError::Config(e) => (error_code::INVALID_CONFIG, e.to_string(), None),
        DaemonError::Storage(message) => (error_code::SESSION_STORAGE, message, None),
        DaemonError::Busy(message) => (error_code::SESSION_BUSY, message, None),
        DaemonError::Prompt(message) => (-32602, format!("invalid params: {message}"), None),
        DaemonError::InvalidParams(message) => (-32602, message, None),
    }
}

/// Token counts on the wire, with their cost when the price is known.
fn priced(usage: &Usage, cost: Option<f64>) -> WireUsage {
    WireUsage {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cached_tokens: usage.cached_tokens,
        cost_usd: cost,
    }
}

fn text_block(text: &str) -> ContentBlock {
    ContentBlock::Text {
        text: text.to_string(),
    }
}

fn wire_content(content: &[UserContent]) -> Vec<ContentBlock> {
    content
        .iter()
        .map(|block| match block {
            UserContent::Text { text } => text_block(text),
            UserContent::Resource { uri, text } => ContentBlock::Resource {
                resource: EmbeddedResource {
                    uri: uri.clone(),
                    text: text.clone(),
                    mime_type: None,
                },
            },
            UserContent::Image {
                mime_type,
                bytes,
                data,
                ..
            } => match data.base64() {
                Some(data) => ContentBlock::Image {
                    data: data.to_string(),
                    mime_type: mime_type.clone(),
                },
                None => text_block(&format!(
                    "[image ({}, {}) not available]",
                    crate::vocab::image::image_kind(mime_type),
                    crate::vocab::image::human_size(*bytes)
                )),
            },
        })
        .collect()
}

/// Wire prompt content to the core's.
pub fn user_content(prompt: Vec<ContentBlock>) -> Vec<UserContent> {
    prompt
        .into_iter()
        .map(|block| match block {
            ContentBlock::Text { text } => UserContent::Text { text },
            ContentBlock::ResourceLink { uri, .. } => UserContent::Resource { uri, text: None },
            ContentBlock::Resource { resource } => UserContent::Resource {
                uri: resource.uri,
                text: resource.text,
            },
            // Checked, hashed and stored by the daemon before it is queued.
            ContentBlock::Image { data, mime_type } => UserContent::Image {
                mime_type,
                sha256: String::new(),
                bytes: 0,
                data: crate::vocab::image::ImageData(Some(data.into())),
            },
        })
        .collect()
}

/// The editor's status of a finished tool call.
fn tool_status(status: ToolStatus) -> ToolCallStatus {
    match status {
        ToolStatus::Completed => ToolCallStatus::Completed,
        ToolStatus::Failed | ToolStatus::Aborted | ToolStatus::NotRun | ToolStatus::Rejected => {
            ToolCallStatus::Failed
        }
    }
}

/// The update an editor sees for an event; `None` for bookkeeping events.
pub fn session_update(event: &Event) -> Option<SessionUpdate> {
    let update = match event {
        Event::UserMessage {
            message_id,
            content,
            ..
        } => SessionUpdate::UserMessage {
            message_id: message_id.clone(),
            content: wire_content(content),
        },
        Event::AssistantChunk { text, .. } => SessionUpdate::AgentMessageChunk {
            message_id: event.message_id().unwrap_or_default(),
            content: text_block(text),
        },
        Event::ThoughtChunk { text, .. } => SessionUpdate::AgentThoughtChunk {
            message_id: event.message_id().unwrap_or_default(),
            content: text_block(text),
        },
        Event::AttemptFailed {
            retry: true,
            streamed: true,
            ..
        } => SessionUpdate::AgentMessageReset {},
        Event::ToolCall {
            call_id,
            arguments,
            title,
            kind,
            mcp,
            ..
        } => SessionUpdate::ToolCall {
            tool_call_id: call_id.clone(),
            title: title.clone(),
            kind: *kind,
            status: ToolCallStatus::Pending,
            raw_input: arguments.clone(),
            mcp: mcp.as_ref().map(|m| WireMcpTarget {
                server: m.server.clone(),
                tool: m.tool.clone(),
            }),
        },
        Event::ToolStarted { call_id, .. } => SessionUpdate::ToolCallUpdate {
            tool_call_id: call_id.clone(),
            status: Some(ToolCallStatus::InProgress),
            content: Vec::new(),
            output_delta: None,
            waiting_for: None,
            locations: Vec::new(),
        },
        Event::ToolOutput { call_id, text, .. } => SessionUpdate::ToolCallUpdate {
            tool_call_id: call_id.clone(),
            status: None,
            content: Vec::new(),
            output_delta: Some(text.clone()),
            waiting_for: None,
            locations: Vec::new(),
        },
        // Editors read the result's text, which says the image was passed on.
        Event::ToolImage { .. } => return None,
        Event::ToolDiff { call_id, files, .. } => SessionUpdate::ToolCallUpdate {
            tool_call_id: call_id.clone(),
            status: None,
            content: files
                .iter()
                .map(|f| ToolCallContent::Diff {
                    path: f.path.clone(),
                    old_text: f.old_text.clone(),
                    new_text: f.new_text.clone(),
                })
                .collect(),
            output_delta: None,
            waiting_for: None,
            locations: Vec::new(),
        },
        Event::ToolLocations {
            call_id, locations, ..
        } => SessionUpdate::ToolCallUpdate {
            tool_call_id: call_id.clone(),
            status: None,
            content: Vec::new(),
            output_delta: None,
            waiting_for: None,
            locations: locations
                .iter()
                .map(|l| WireLocation {
                    path: l.path.clone(),
                    line: l.line,
                })
                .collect(),
        },
        Event::ToolWaiting {
            call_id,
            waiting_for,
            ..
        } => SessionUpdate::ToolCallUpdate {
            tool_call_id: call_id.clone(),
            status: Some(ToolCallStatus::Pending),
            content: Vec::new(),
            output_delta: None,
            waiting_for: Some(*waiting_for),
            locations: Vec::new(),
        },
        Event::Plan { steps, .. } => SessionUpdate::Plan {
            entries: steps
                .iter()
                .map(|step| PlanEntry {
                    content: step.step.clone(),
                    priority: PlanPriority::Medium,
                    status: step.status,
                })
                .collect(),
        },
        Event::Compacted {
            summary, removed, ..
        } => SessionUpdate::ContextCompacted {
            removed_messages: *removed,
            summarized: summary.is_some(),
        },
        Event::ModeChanged { mode } => SessionUpdate::CurrentModeUpdate {
            current_mode_id: mode.as_str().to_string(),
        },
        Event::TitleChanged { title, .. } => SessionUpdate::SessionInfo {
            title: title.clone(),
        },
        Event::Rewound {
            rewind_id,
            to_message_id,
            conversation,
            dropped_messages,
            restored_messages,
            ..
        } => SessionUpdate::Rewound {
            rewind_id: rewind_id.clone(),
            to_message_id: to_message_id.clone(),
            conversation: *conversation,
            dropped_message_ids: dropped_messages.clone(),
            restored_message_ids: restored_messages.clone(),
        },
        Event::ToolResult {
            call_id,
            status,
            output,
            ..
        } => SessionUpdate::ToolCallUpdate {
            tool_call_id: call_id.clone(),
            status: Some(tool_status(*status)),
            content: vec![ToolCallContent::Content {
                content: text_block(output),
            }],
            output_delta: None,
            waiting_for: None,
            locations: Vec::new(),
        },
        Event::UsageUpdate {
            call,
            turn,
            session,
            cost,
            context,
            ..
        } => SessionUpdate::Usage {
            call: Some(priced(call, cost.map(|c| c.call))),
            turn: priced(turn, cost.map(|c| c.turn)),
            session: priced(session, cost.map(|c| c.session)),
            context: context.map(crate::frontend::models::wire_context),
        },
        Event::ModelChanged { .. } => crate::frontend::models::model_update(event)?,
        Event::TurnEnd {
            stop_reason,
            message,
            usage,
            cost_usd,
            ..
        } => SessionUpdate::TurnEnd {
            stop_reason: *stop_reason,
            message: message.clone(),
            usage: priced(usage, *cost_usd),
        },
        Event::InputQueued {
            message_id, queue, ..
        } => SessionUpdate::InputStatus {
            message_ids: vec![message_id.clone()],
            status: InputStatus::Pending,
            queue: Some(*queue),
            reason: None,
        },
        Event::InputClaimed { message_ids, .. } => SessionUpdate::InputStatus {
            message_ids: message_ids.clone(),
            status: InputStatus::Claimed,
            queue: None,
            reason: None,
        },
        Event::InputDiscarded { message_id, reason } => SessionUpdate::InputStatus {
            message_ids: vec![message_id.clone()],
            status: InputStatus::Discarded,
            queue: None,
            reason: Some(reason.clone()),
        },
        Event::TurnStart { .. }
        | Event::ApprovalDecided { .. }
        | Event::HistoryRepaired { .. }
        | Event::ResultsShrunk { .. }
        | Event::LoopDetected { .. }
        | Event::StepStart { .. }
        | Event::AssistantMessage { .. }
        | Event::AttemptFailed { .. }
        | Event::ModelRequest { .. }
        | Event::StepEnd { .. }
        | Event::RetryBudgetSpent { .. }
        | Event::BudgetExceeded { .. }
        | Event::Instructions { .. }
        | Event::Checkpoint { .. }
        | Event::CheckpointEnd { .. }
        | Event::RewindStarted { .. }
        | Event::RewindFile { .. } => return None,
    };
    Some(update)
}

/// The `tandem/update` params for a logged event, if editors see it.
fn update_params(session_id: &str, event: &LoggedEvent) -> Option<UpdateParams> {
    let update = session_update(&event.event)?;
    Some(UpdateParams {
        session_id: session_id.to_string(),
        turn_id: event.event.turn_id().map(str::to_string),
        update,
    })
}

/// The whole `tandem/update` notification of a logged event, as the wire
/// struct it is serialized from.
#[derive(serde::Serialize)]
pub struct UpdateNotification {
    jsonrpc: &'static str,
    method: &'static str,
    params: UpdateParams,
}

/// The `tandem/update` notification for a logged event (`None` for
/// bookkeeping events).
pub fn notification(session_id: &str, event: &LoggedEvent) -> Option<UpdateNotification> {
    Some(UpdateNotification {
        jsonrpc: "2.0",
        method: "tandem/update",
        params: update_params(session_id, event)?,
    })
}

/// [`notification`], serialized straight from the wire structs, with no
/// intermediate JSON tree: a replay renders every event.
pub fn update_notification(session_id: &str, event: &LoggedEvent) -> Option<Vec<u8>> {
    serde_json::to_vec(&notification(session_id, event)?).ok()
}

pub fn prompt_result(receipt: TurnReceipt) -> PromptResult {
    PromptResult {
        turn_id: receipt.turn_id,
        stop_reason: receipt.stop_reason,
        message: receipt.message,
        usage: priced(&receipt.usage, receipt.cost_usd),
        message_id: None,
    }
}

/// The instruction files a session's model is given, on the wire.
pub fn instruction_files(
    files: &[crate::vocab::instructions::InstructionFile],
) -> Vec<crate::protocol::InstructionFileInfo> {
    files
        .iter()
        .map(|f| crate::protocol::InstructionFileInfo {
            path: f.path.clone(),
            bytes: f.bytes,
            sha256: f.sha256.clone(),
            included_bytes: f.included_bytes,
        })
        .collect()
}

/// The `tandem/requestUserInput` params for a question to the user.
pub fn user_input_params(request: &UserInputRequest) -> RequestUserInputParams {
    RequestUserInputParams {
        session_id: request.session_id.clone(),
        tool_call_id: request.tool_call_id.clone(),
        questions: wire_questions(&request.questions),
    }
}

/// The questions as the wire spells them (the model's own shape).
pub fn wire_questions(questions: &[Question]) -> Vec<WireQuestion> {
    questions
        .iter()
        .map(|q| WireQuestion {
            id: q.id.clone(),
            question: q.question.clone(),
            options: q.options.as_ref().map(|options| {
                options
                    .iter()
                    .map(|o| WireQuestionOption {
                        label: o.label.clone(),
                        description: o.description.clone(),
                    })
                    .collect()
            }),
        })
        .collect()
}
