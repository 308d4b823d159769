//! `diagnostics {paths?}`: the editor's current diagnostics (every source:
//! its language servers, linters, …), unsaved text included.
//!
//! Output: a count by severity, then `path:line:col: severity: message
//! (source code)` with the source line under it, `cat -n` style, by file
//! and line. Hints are counted, not listed.

use serde::Deserialize;
use serde_json::{json, Value};

use super::{answered, because, Sources, LANGUAGE_TIMEOUT};
use crate::tools::{parse_args, ApprovalClass, ExecMode, Tool, ToolContext, ToolError};
use crate::vocab::bridge::ClientAbilities;
use crate::vocab::language::{Diagnostic, FileDiagnostics, Severity};
use crate::vocab::tool_call::ToolKind;

pub struct Diagnostics;

/// Diagnostics listed at most; the rest are counted.
const LIMIT: usize = 200;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    #[serde(default)]
    paths: Option<Vec<String>>,
}

#[async_trait::async_trait]
impl Tool for Diagnostics {
    fn name(&self) -> &'static str {
        "diagnostics"
    }

    fn description(&self) -> &'static str {
        "The errors and warnings the user's editor shows right now (its language servers, \
         linters and compilers), for the text as it is in the editor, unsaved edits included. \
         Give `paths` to check some files, or nothing for every file the editor has \
         diagnostics for. Faster and more precise than running the compiler."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "paths": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Files to check, relative to the workspace root. Omit for every file with diagnostics."
                }
            },
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
        ToolKind::Read
    }

    fn title(&self, args: &Value) -> String {
        match args.get("paths").and_then(Value::as_array) {
            Some(paths) if !paths.is_empty() => {
                let names: Vec<&str> = paths.iter().filter_map(Value::as_str).collect();
                format!("Diagnostics of {}", names.join(", "))
            }
            _ => "Diagnostics".to_string(),
        }
    }

    fn timeout(&self) -> Option<std::time::Duration> {
        Some(LANGUAGE_TIMEOUT)
    }

    fn offered_to(&self, abilities: ClientAbilities) -> bool {
        abilities.language.diagnostics
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let args: Args = parse_args(self.name(), &args)?;
        let paths = match &args.paths {
            Some(paths) if !paths.is_empty() => Some(
                paths
                    .iter()
                    .map(|p| {
                        ctx.workspace
                            .resolve(p)
                            .map_err(|e| ToolError::new(e.to_string()))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            _ => None,
        };
        let outcome = ctx.bridge.diagnostics(paths.clone(), &ctx.cancel).await;
        let answer = match answered(outcome, "diagnostics", ctx)? {
            Ok(answer) => answer,
            Err(text) => return Ok(text),
        };
        let mut sources = Sources::new(ctx);
        let files: Vec<FileDiagnostics> = answer.items;
        let listed = render(&files, &mut sources, LIMIT);
        if listed.is_empty() {
            let scope = match &paths {
                Some(paths) => paths
                    .iter()
                    .map(|p| sources.shown(p))
                    .collect::<Vec<_>>()
                    .join(", "),
                None => "any file".to_string(),
            };
            return Ok(format!(
                "No errors or warnings in {scope}{}.",
                because(&answer.reason)
            ));
        }
        Ok(listed)
    }
}

/// Every diagnostic but hints, file by file, line by line: a summary line,
/// then each with its source line; at most `limit`.
pub(crate) fn render(files: &[FileDiagnostics], sources: &mut Sources<'_>, limit: usize) -> String {
    let mut shown: Vec<(&FileDiagnostics, &Diagnostic)> = Vec::new();
    let mut hints = 0;
    let mut files_sorted: Vec<&FileDiagnostics> = files.iter().collect();
    files_sorted.sort_by(|a, b| a.path.cmp(&b.path));
    for file in files_sorted {
        let mut diagnostics: Vec<&Diagnostic> = file.diagnostics.iter().collect();
        diagnostics.sort_by_key(|d| (d.range.start, d.severity));
        for d in diagnostics {
            if d.severity == Some(Severity::Hint) {
                hints += 1;
            } else {
                shown.push((file, d));
            }
        }
    }
    if shown.is_empty() {
        return String::new();
    }
    let count = |severity: Severity| {
        shown
            .iter()
            .filter(|(_, d)| d.severity.unwrap_or(Severity::Error) == severity)
            .count()
    };
    let mut parts = Vec::new();
    for (severity, one, many) in [
        (Severity::Error, "error", "errors"),
        (Severity::Warning, "warning", "warnings"),
        (Severity::Information, "info", "infos"),
    ] {
        match count(severity) {
            0 => {}
            1 => parts.push(format!("1 {one}")),
            n => parts.push(format!("{n} {many}")),
        }
    }
    let mut lines = vec![format!("{}:", parts.join(", "))];
    for (file, d) in shown.iter().take(limit) {
        lines.extend(diagnostic_lines(&file.path, d, sources));
    }
    if shown.len() > limit {
        lines.push(format!("[truncated: showing {limit} of {}]", shown.len()));
    }
    if hints > 0 {
        lines.push(format!("({hints} hints not shown)"));
    }
    lines.join("\n")
}

/// `path:line:col: severity: message (source code)` and the source line.
pub(crate) fn diagnostic_lines(
    path: &std::path::Path,
    d: &Diagnostic,
    sources: &mut Sources<'_>,
) -> Vec<String> {
    let place = sources.place(path, d.range.start);
    let severity = d.severity.unwrap_or(Severity::Error).label();
    let origin: Vec<&str> = [d.source.as_deref(), d.code.as_deref()]
        .into_iter()
        .flatten()
        .collect();
    let origin = if origin.is_empty() {
        String::new()
    } else {
        format!(" ({})", origin.join(" "))
    };
    let message = d.message.trim().replace('\n', " ");
    let mut lines = vec![format!(
        "{}:{}:{}: {severity}: {message}{origin}",
        sources.shown(path),
        place.line,
        place.column
    )];
    if let Some(source) = place.source {
        lines.push(format!("{:>6}\t{source}", place.line));
    }
    lines
}
