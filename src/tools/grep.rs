//! `grep {pattern, path?, glob?, limit?}`: regex search, gitignore-aware.
use serde_json::Value;

use super::{ApprovalClass, ExecMode, Tool, ToolContext, ToolError};

pub struct Grep;

#[async_trait::async_trait]
impl Tool for Grep {
    fn name(&self) -> &'static str {
        "grep"
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
        "search"
    }
    fn title(&self, _args: &Value) -> String {
        todo!()
    }
    async fn run(&self, _args: Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        todo!()
    }
}
