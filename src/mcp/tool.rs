//! An MCP server's tool as one of the session's tools: its name for the
//! model, its schema, its approval class, and its result as text.
//!
//! Invariant: nothing of the call is decided here beyond the server's own
//! annotations and the server's configuration; approval, the time limit
//! and cancellation are the scheduler's, like every tool's.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::rmcp_client::ListedTool;
use super::server::McpServer;
use crate::tools::exec::cap_like_command_output;
use crate::tools::{ApprovalClass, ExecMode, McpTarget, Tool, ToolContext, ToolError, ToolEvent};
use crate::vocab::image::{human_size, IMAGE_TYPES};
use crate::vocab::tool_call::ToolKind;

pub struct McpTool {
    pub(super) server: Arc<McpServer>,
    pub(super) listed: ListedTool,
    /// `mcp__<server>__<tool>`, made unique in the session.
    pub(super) offered_name: String,
    pub(super) description: String,
}

impl McpTool {
    pub(super) fn new(server: Arc<McpServer>, listed: ListedTool, offered_name: String) -> Self {
        let description = if listed.description.trim().is_empty() {
            format!(
                "The `{}` tool of the MCP server `{}`.",
                listed.name, server.name
            )
        } else {
            format!(
                "{} (MCP server `{}`)",
                listed.description.trim(),
                server.name
            )
        };
        McpTool {
            server,
            listed,
            offered_name,
            description,
        }
    }
}

#[async_trait::async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.offered_name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        let mut schema = self.listed.input_schema.clone();
        // Providers want an object schema even for a tool without input.
        if let Some(map) = schema.as_object_mut() {
            map.entry("type").or_insert_with(|| Value::from("object"));
            if map.get("type") == Some(&Value::from("object")) {
                map.entry("properties")
                    .or_insert_with(|| Value::Object(Map::new()));
            }
        } else {
            schema = serde_json::json!({"type": "object", "properties": {}});
        }
        schema
    }

    /// Parallel, unless the server says the tool is destructive.
    fn mode(&self) -> ExecMode {
        if self.listed.destructive && !self.listed.read_only {
            ExecMode::Exclusive
        } else {
            ExecMode::Parallel
        }
    }

    /// `execute`, unless the tool is read-only and the configuration trusts
    /// the server's word on that.
    fn approval(&self) -> ApprovalClass {
        if self.listed.read_only && self.server.config.trust_read_only {
            ApprovalClass::Read
        } else {
            ApprovalClass::Execute
        }
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Mcp
    }

    fn title(&self, _args: &Value) -> String {
        let tool = self.listed.title.as_deref().unwrap_or(&self.listed.name);
        format!("{} ({})", tool, self.server.name)
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let arguments = match args {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                return Err(ToolError::new(format!(
                    "the arguments of {} must be a JSON object, not {other}",
                    self.offered_name
                )))
            }
        };
        let result = self
            .server
            .call(&self.listed.name, arguments)
            .await
            .map_err(ToolError::new)?;
        let (text, is_error, images) =
            render_result_with_images(&result, ctx.vision.then_some(ctx.max_image_bytes));
        // Logged before the result, read by the model after its block.
        for (mime_type, data) in images {
            (ctx.emit)(ToolEvent::Image { mime_type, data });
        }
        let text = cap_like_command_output(&text);
        if is_error {
            Err(ToolError::new(text))
        } else {
            Ok(text)
        }
    }

    fn timeout(&self) -> Option<std::time::Duration> {
        Some(self.server.config.tool_timeout())
    }

    fn mcp(&self) -> Option<McpTarget> {
        Some(McpTarget {
            server: self.server.name.clone(),
            tool: self.listed.name.clone(),
        })
    }

    fn read_only_hint(&self) -> bool {
        self.listed.read_only
    }
}

/// A `tools/call` result as the model reads it, and whether the server
/// called it an error. Text parts as they are; structured content as JSON
/// text (unless a text part already is that JSON); what tandem cannot pass
/// on (images, audio) said so.
pub fn render_result(result: &Value) -> (String, bool) {
    let (text, is_error, _) = render_result_with_images(result, None);
    (text, is_error)
}

/// [`render_result`], and the images to pass on as image parts
/// (`(mime type, base64)`) when the model reads images up to
/// `max_image_bytes` (`None`: it does not); the text says where each went.
pub fn render_result_with_images(
    result: &Value,
    max_image_bytes: Option<u64>,
) -> (String, bool, Vec<(String, String)>) {
    let mut images = Vec::new();
    let mut parts: Vec<String> = Vec::new();
    for block in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
        let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or("");
        match kind {
            "text" => parts.push(text("text").to_string()),
            "image" => {
                let (mime, data) = (text("mimeType"), text("data"));
                let bytes = (data.len() * 3 / 4) as u64;
                let label = format!("image ({mime}, {})", human_size(bytes));
                parts.push(match max_image_bytes {
                    None => format!(
                        "[{label}: not shown; the model is configured without vision ([model] vision = false)]"
                    ),
                    Some(_) if !IMAGE_TYPES.contains(&mime) => format!(
                        "[{label}: not shown; tandem passes {} images]",
                        IMAGE_TYPES.join(", ")
                    ),
                    Some(max) if bytes > max => format!(
                        "[{label}: not shown; over the {} limit ([limits] max_image_bytes)]",
                        human_size(max)
                    ),
                    Some(_) => {
                        images.push((mime.to_string(), data.to_string()));
                        format!("[{label}: attached after the tool results]")
                    }
                });
            }
            "audio" => parts.push(format!(
                "[audio ({}, {} bytes): not shown; tandem passes only text and images from MCP tools to the model]",
                text("mimeType"),
                text("data").len() * 3 / 4
            )),
            "resource" => {
                let resource = block.get("resource").cloned().unwrap_or_default();
                match resource.get("text").and_then(Value::as_str) {
                    Some(body) => parts.push(body.to_string()),
                    None => parts.push(format!(
                        "[resource {}: binary content not shown]",
                        resource.get("uri").and_then(Value::as_str).unwrap_or("")
                    )),
                }
            }
            "resource_link" => parts.push(format!("[resource link: {}]", text("uri"))),
            other => parts.push(format!("[{other} content not shown]")),
        }
    }
    if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
        let already = parts
            .iter()
            .any(|p| serde_json::from_str::<Value>(p).ok().as_ref() == Some(structured));
        if !already {
            parts.push(structured.to_string());
        }
    }
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    (parts.join("\n"), is_error, images)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_structured_content_and_images_read_as_text() {
        let (text, error) = render_result(&json!({
            "content": [{"type": "text", "text": "Echo: hi"},
                        {"type": "image", "mimeType": "image/png", "data": "AAAA"}],
            "structuredContent": {"n": 1}
        }));
        assert!(!error);
        assert_eq!(
            text,
            "Echo: hi\n[image (image/png, 3 B): not shown; the model is configured without vision ([model] vision = false)]\n{\"n\":1}"
        );
        let (text, _, images) = render_result_with_images(
            &json!({"content": [{"type": "image", "mimeType": "image/png", "data": "AAAA"},
                                {"type": "image", "mimeType": "image/png", "data": "A".repeat(40)},
                                {"type": "image", "mimeType": "image/svg+xml", "data": "AAAA"}]}),
            Some(10),
        );
        assert_eq!(images, vec![("image/png".to_string(), "AAAA".to_string())]);
        assert_eq!(
            text,
            "[image (image/png, 3 B): attached after the tool results]\n\
             [image (image/png, 30 B): not shown; over the 10 B limit ([limits] max_image_bytes)]\n\
             [image (image/svg+xml, 3 B): not shown; tandem passes image/png, image/jpeg, image/gif, image/webp images]"
        );
        let (text, _) = render_result(&json!({
            "content": [{"type": "text", "text": "{\"n\": 1}"}],
            "structuredContent": {"n": 1}
        }));
        assert_eq!(text, "{\"n\": 1}", "the JSON is not repeated");
        let (_, error) = render_result(&json!({"content": [], "isError": true}));
        assert!(error);
    }
}
