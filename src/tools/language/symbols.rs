//! `workspace_symbols {query}`: the symbols of the workspace the editor's
//! providers find for a query (fuzzy, as the editor's "go to symbol").
//!
//! Output: `path:line:col: kind name (in container)` and the source line
//! under it, `cat -n` style.

use serde::Deserialize;
use serde_json::{json, Value};

use super::{answered, because, Sources, LANGUAGE_TIMEOUT};
use crate::tools::{parse_args, ApprovalClass, ExecMode, Tool, ToolContext, ToolError};
use crate::vocab::bridge::ClientAbilities;
use crate::vocab::tool_call::ToolKind;

pub struct WorkspaceSymbols;

/// Symbols listed at most.
const LIMIT: usize = 100;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    query: String,
}

#[async_trait::async_trait]
impl Tool for WorkspaceSymbols {
    fn name(&self) -> &'static str {
        "workspace_symbols"
    }

    fn description(&self) -> &'static str {
        "Finds classes, functions, methods, variables and other symbols of the workspace by \
         name, from the user's editor and its language servers (like its \"go to symbol in \
         workspace\"). `query` is matched fuzzily against symbol names."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "A symbol name or part of one."}
            },
            "required": ["query"],
            "additionalProperties": false
        })
    }

    fn mode(&self) -> ExecMode {
        ExecMode::Parallel
    }

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::Read
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Search
    }

    fn title(&self, args: &Value) -> String {
        match args.get("query").and_then(Value::as_str) {
            Some(query) => format!("Symbols matching `{query}`"),
            None => "Workspace symbols".to_string(),
        }
    }

    fn timeout(&self) -> Option<std::time::Duration> {
        Some(LANGUAGE_TIMEOUT)
    }

    fn offered_to(&self, abilities: ClientAbilities) -> bool {
        abilities.language.symbols
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let args: Args = parse_args(self.name(), &args)?;
        let outcome = ctx
            .bridge
            .workspace_symbols(args.query.clone(), &ctx.cancel)
            .await;
        let answer = match answered(outcome, "workspace symbols", ctx)? {
            Ok(answer) => answer,
            Err(text) => return Ok(text),
        };
        if answer.items.is_empty() {
            return Ok(format!(
                "No symbols match `{}`{}.",
                args.query,
                because(&answer.reason)
            ));
        }
        let mut sources = Sources::new(ctx);
        let total = answer.items.len();
        let mut lines = vec![match total {
            1 => format!("1 symbol matches `{}`:", args.query),
            n => format!("{n} symbols match `{}`:", args.query),
        }];
        for symbol in answer.items.iter().take(LIMIT) {
            let place = sources.place(&symbol.location.path, symbol.location.range.start);
            let container = symbol
                .container
                .as_deref()
                .filter(|c| !c.is_empty())
                .map(|c| format!(" (in {c})"))
                .unwrap_or_default();
            lines.push(format!(
                "{}:{}:{}: {} {}{container}",
                sources.shown(&symbol.location.path),
                place.line,
                place.column,
                symbol.kind,
                symbol.name
            ));
            if let Some(source) = place.source {
                lines.push(format!("{:>6}\t{source}", place.line));
            }
        }
        if total > LIMIT {
            lines.push(format!("[truncated: showing {LIMIT} of {total}]"));
        }
        Ok(lines.join("\n"))
    }
}
