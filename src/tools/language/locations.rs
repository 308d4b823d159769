//! `definition {path, line, column | symbol}` and `references {path, line,
//! column | symbol}`: the editor's own providers, asked at a place in the
//! file as the user sees it.
//!
//! Output: a header, then `path:line:col: source line` per location, grep's
//! style with a column.

use serde::Deserialize;
use serde_json::{json, Value};

use super::{answered, because, target, Sources, Target, LANGUAGE_TIMEOUT};
use crate::tools::{parse_args, ApprovalClass, ExecMode, Tool, ToolContext, ToolError};
use crate::vocab::bridge::ClientAbilities;
use crate::vocab::language::{LanguageAnswer, Location, TextPoint};
use crate::vocab::tool_call::ToolKind;

pub struct Definition;
pub struct References;

/// Locations listed at most.
const LIMIT: usize = 200;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    line: usize,
    #[serde(default)]
    column: Option<usize>,
    #[serde(default)]
    symbol: Option<String>,
    /// `references` only.
    #[serde(default)]
    include_declaration: Option<bool>,
}

fn parameters(references: bool) -> Value {
    let mut schema = json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File, relative to the workspace root."},
            "line": {"type": "integer", "minimum": 1, "description": "1-based line number, as read_file and grep show it."},
            "column": {"type": "integer", "minimum": 1, "description": "1-based column in characters. Give this or `symbol`."},
            "symbol": {"type": "string", "description": "The name on that line to ask about (its first occurrence there). Give this or `column`."}
        },
        "required": ["path", "line"],
        "additionalProperties": false
    });
    if references {
        schema["properties"]["include_declaration"] = json!({
            "type": "boolean",
            "description": "List the declaration too. Default true."
        });
    }
    schema
}

fn title(verb: &str, args: &Value) -> String {
    let path = args.get("path").and_then(Value::as_str).unwrap_or("?");
    let line = args.get("line").and_then(Value::as_u64).unwrap_or(0);
    match args.get("symbol").and_then(Value::as_str) {
        Some(symbol) => format!("{verb} `{symbol}` ({path}:{line})"),
        None => format!("{verb} {path}:{line}"),
    }
}

/// The call's place, checked and converted for the editor.
fn place_of(tool: &str, args: &Value, ctx: &ToolContext) -> Result<(Args, Target), ToolError> {
    let args: Args = parse_args(tool, args)?;
    if tool == "definition" && args.include_declaration.is_some() {
        return Err(ToolError::new(
            "invalid arguments for definition: unknown field `include_declaration`",
        ));
    }
    let target = target(
        ctx,
        &args.path,
        args.line,
        args.column,
        args.symbol.as_deref(),
    )?;
    Ok((args, target))
}

/// The answer as the model reads it.
fn render(
    ctx: &ToolContext,
    what: &str,
    target: &Target,
    line: usize,
    answer: LanguageAnswer<Location>,
) -> String {
    let subject = if target.word.is_empty() {
        format!("{}:{line}", target.shown)
    } else {
        format!("`{}` ({}:{line})", target.word, target.shown)
    };
    let mut locations: Vec<Location> = Vec::new();
    for location in answer.items {
        if !locations.contains(&location) {
            locations.push(location);
        }
    }
    if locations.is_empty() {
        return format!("No {what} found for {subject}{}.", because(&answer.reason));
    }
    let mut sources = Sources::new(ctx);
    let noun = match (what, locations.len()) {
        ("definition", 1) => "1 definition".to_string(),
        ("definition", n) => format!("{n} definitions"),
        (_, 1) => "1 reference".to_string(),
        (_, n) => format!("{n} references"),
    };
    let mut lines = vec![format!("{noun} of {subject}:")];
    for location in locations.iter().take(LIMIT) {
        lines.push(sources.location_line(&location.path, location.range));
    }
    if locations.len() > LIMIT {
        lines.push(format!(
            "[truncated: showing {LIMIT} of {}]",
            locations.len()
        ));
    }
    lines.join("\n")
}

#[async_trait::async_trait]
impl Tool for Definition {
    fn name(&self) -> &'static str {
        "definition"
    }

    fn description(&self) -> &'static str {
        "Where a symbol is defined, from the user's editor and its language servers (which \
         know imports, types and overloads; grep does not). Point at the symbol with `path`, \
         `line` and either `column` or `symbol` (its name on that line)."
    }

    fn parameters(&self) -> Value {
        parameters(false)
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
        title("Definition of", args)
    }

    fn timeout(&self) -> Option<std::time::Duration> {
        Some(LANGUAGE_TIMEOUT)
    }

    fn offered_to(&self, abilities: ClientAbilities) -> bool {
        abilities.language.definition
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let (args, target) = place_of(self.name(), &args, ctx)?;
        let at = TextPoint {
            path: target.path.clone(),
            position: target.position,
        };
        let outcome = ctx.bridge.definition(at, &ctx.cancel).await;
        Ok(match answered(outcome, "definition", ctx)? {
            Ok(answer) => render(ctx, "definition", &target, args.line.max(1), answer),
            Err(text) => text,
        })
    }
}

#[async_trait::async_trait]
impl Tool for References {
    fn name(&self) -> &'static str {
        "references"
    }

    fn description(&self) -> &'static str {
        "Every use of a symbol in the workspace, from the user's editor and its language \
         servers (exact, unlike a text search). Point at the symbol with `path`, `line` and \
         either `column` or `symbol` (its name on that line)."
    }

    fn parameters(&self) -> Value {
        parameters(true)
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
        title("References to", args)
    }

    fn timeout(&self) -> Option<std::time::Duration> {
        Some(LANGUAGE_TIMEOUT)
    }

    fn offered_to(&self, abilities: ClientAbilities) -> bool {
        abilities.language.references
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let (args, target) = place_of(self.name(), &args, ctx)?;
        let at = TextPoint {
            path: target.path.clone(),
            position: target.position,
        };
        let include = args.include_declaration.unwrap_or(true);
        let outcome = ctx.bridge.references(at, include, &ctx.cancel).await;
        Ok(match answered(outcome, "references", ctx)? {
            Ok(answer) => render(ctx, "references", &target, args.line.max(1), answer),
            Err(text) => text,
        })
    }
}
