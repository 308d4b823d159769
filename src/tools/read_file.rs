//! `read_file {path, offset?, limit?}`: numbered lines, from the buffer when open.
use serde_json::Value;

use super::{ApprovalClass, ExecMode, Tool, ToolContext, ToolError};

pub struct ReadFile;

#[async_trait::async_trait]
impl Tool for ReadFile {
    fn name(&self) -> &'static str {
        "read_file"
    }
    fn description(&self) -> &'static str {
        todo!()
    }
    fn parameters(&self) -> Value {
        todo!()
    }
    fn mode(&self) -> ExecMode {
        ExecMode::Parallel
    }
    fn approval(&self) -> ApprovalClass {
        ApprovalClass::Read
    }
    fn kind(&self) -> &'static str {
        "read"
    }
    fn title(&self, _args: &Value) -> String {
        todo!()
    }
    async fn run(&self, _args: Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        todo!()
    }
}
