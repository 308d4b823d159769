//! What the model is asked for a task: the task's template filled in, then
//! where the selection is, the diagnostics in it, the lines around it, and,
//! for inline edits, the shape the answer must have.
//!
//! Invariant: the rendered text is the turn's user message, logged as is,
//! so `tandem replay` shows exactly what the model was asked.

use std::path::Path;

use super::TaskDiagnostic;
use crate::config::tasks::{parse_template, EditScope, TaskDef, TemplatePart};

/// Lines of context shown before and after the selection.
pub const CONTEXT_LINES: usize = 10;

/// Everything a task's message is made of.
#[derive(Debug, Clone)]
pub struct TaskContext<'a> {
    pub task: &'a TaskDef,
    /// Relative to the workspace root when inside it.
    pub file: &'a str,
    pub language: &'a str,
    pub selection: &'a str,
    /// 1-based, inclusive.
    pub first_line: usize,
    pub last_line: usize,
    pub total_lines: usize,
    pub diagnostics: &'a [TaskDiagnostic],
    pub instruction: Option<&'a str>,
    /// The lines before the selection, and the 1-based number of the first.
    pub before: (&'a str, usize),
    /// The lines after the selection, and the 1-based number of the first.
    pub after: (&'a str, usize),
}

/// The turn's user message.
pub fn render(cx: &TaskContext<'_>) -> String {
    let parts = parse_template(&cx.task.prompt).unwrap_or_else(|_| {
        // The catalog only holds checked templates; keep the text anyway.
        vec![TemplatePart::Text(cx.task.prompt.as_str().into())]
    });
    let uses = |name: &str| parts.contains(&TemplatePart::Placeholder(name));
    let mut out = String::new();
    for part in &parts {
        match part {
            TemplatePart::Text(text) => out.push_str(text),
            TemplatePart::Placeholder("selection") => {
                out.push_str(&fenced(cx.language, cx.selection))
            }
            TemplatePart::Placeholder("file") => out.push_str(cx.file),
            TemplatePart::Placeholder("language") => out.push_str(cx.language),
            TemplatePart::Placeholder("diagnostics") => out.push_str(&diagnostics(cx.diagnostics)),
            TemplatePart::Placeholder("instruction") => out.push_str(cx.instruction.unwrap_or("")),
            TemplatePart::Placeholder(_) => {}
        }
    }
    let mut sections = vec![out.trim_end().to_string()];
    if let (Some(instruction), false) = (cx.instruction, uses("instruction")) {
        sections.push(format!("The user adds: {instruction}"));
    }
    sections.push(format!(
        "Selection: `{}` ({}), {} of {}.",
        cx.file,
        cx.language,
        line_span(cx.first_line, cx.last_line),
        cx.total_lines
    ));
    if !uses("selection") {
        sections.push(format!(
            "Selected code:\n{}",
            fenced(cx.language, cx.selection)
        ));
    }
    if !cx.diagnostics.is_empty() && !uses("diagnostics") {
        sections.push(format!(
            "Diagnostics in the selection:\n{}",
            diagnostics(cx.diagnostics)
        ));
    }
    if !cx.before.0.is_empty() {
        sections.push(format!(
            "Before the selection ({}):\n{}",
            line_span(cx.before.1, cx.before.1 + cx.before.0.lines().count() - 1),
            fenced(cx.language, cx.before.0)
        ));
    }
    if !cx.after.0.is_empty() {
        sections.push(format!(
            "After the selection ({}):\n{}",
            line_span(cx.after.1, cx.after.1 + cx.after.0.lines().count() - 1),
            fenced(cx.language, cx.after.0)
        ));
    }
    sections.push(match cx.task.edit {
        EditScope::Selection => format!(
            "Answer with only the code that replaces the selected text ({}), exactly as it \
                 should appear in the file: no explanation and no other code, in at most one \
                 markdown code block. Do not change files with tools; the user reviews your \
                 answer as an edit of the selection.",
            line_span(cx.first_line, cx.last_line)
        ),
        EditScope::None => "Answer in prose and code snippets; do not change any file.".to_string(),
        EditScope::Workspace => {
            "Work on the selection above; read more of the workspace as you need.".to_string()
        }
    });
    sections.join("\n\n")
}

fn line_span(first: usize, last: usize) -> String {
    if first >= last {
        format!("line {first}")
    } else {
        format!("lines {first}-{last}")
    }
}

/// A markdown code block long enough not to be closed by the code itself.
fn fenced(language: &str, code: &str) -> String {
    let longest = code
        .lines()
        .map(|l| l.trim_start().chars().take_while(|&c| c == '`').count())
        .max()
        .unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let body = code.strip_suffix('\n').unwrap_or(code);
    format!("{fence}{language}\n{body}\n{fence}")
}

/// One line per diagnostic: `- line 4: error [rustc E0308]: mismatched types`.
pub fn diagnostics(diagnostics: &[TaskDiagnostic]) -> String {
    if diagnostics.is_empty() {
        return "(none)".to_string();
    }
    diagnostics
        .iter()
        .map(|d| {
            let severity = match d.severity {
                Some(1) => "error",
                Some(2) => "warning",
                Some(3) => "info",
                Some(4) => "hint",
                _ => "problem",
            };
            let origin: Vec<&str> = [d.source.as_deref(), d.code.as_deref()]
                .into_iter()
                .flatten()
                .collect();
            let origin = if origin.is_empty() {
                String::new()
            } else {
                format!(" [{}]", origin.join(" "))
            };
            format!(
                "- line {}: {severity}{origin}: {}",
                d.range.start.line + 1,
                d.message
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The language of a file, from its extension (the editor's `languageId`
/// is not kept by the buffer cache).
pub fn language_of(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
        .to_ascii_lowercase();
    match ext.as_str() {
        "rs" => "rust",
        "py" | "pyi" => "python",
        "js" | "mjs" | "cjs" => "javascript",
        "jsx" => "javascriptreact",
        "ts" | "mts" | "cts" => "typescript",
        "tsx" => "typescriptreact",
        "go" => "go",
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" => "cpp",
        "java" => "java",
        "kt" | "kts" => "kotlin",
        "rb" => "ruby",
        "lua" => "lua",
        "sh" | "bash" => "shellscript",
        "md" => "markdown",
        "json" => "json",
        "toml" => "toml",
        "yaml" | "yml" => "yaml",
        "cs" => "csharp",
        "swift" => "swift",
        "php" => "php",
        "html" => "html",
        "css" => "css",
        "sql" => "sql",
        _ => "text",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffers::{Position, Range};
    use crate::config::tasks::TaskCatalog;
    use std::collections::BTreeMap;

    #[test]
    fn a_message_holds_the_selection_its_place_and_the_diagnostics() {
        let catalog = TaskCatalog::from_config(&BTreeMap::new());
        let diagnostic = TaskDiagnostic {
            range: Range {
                start: Position {
                    line: 3,
                    character: 4,
                },
                end: Position {
                    line: 3,
                    character: 9,
                },
            },
            message: "mismatched types".to_string(),
            severity: Some(1),
            source: Some("rustc".to_string()),
            code: Some("E0308".to_string()),
        };
        let text = render(&TaskContext {
            task: catalog.get("fix").unwrap(),
            file: "src/lib.rs",
            language: "rust",
            selection: "let x: u8 = \"a\";\n",
            first_line: 4,
            last_line: 4,
            total_lines: 20,
            diagnostics: std::slice::from_ref(&diagnostic),
            instruction: None,
            before: ("fn f() {\n", 3),
            after: ("}\n", 5),
        });
        assert!(
            text.contains("- line 4: error [rustc E0308]: mismatched types"),
            "{text}"
        );
        assert!(text.contains("```rust\nlet x: u8 = \"a\";\n```"), "{text}");
        assert!(
            text.contains("Selection: `src/lib.rs` (rust), line 4 of 20."),
            "{text}"
        );
        assert!(
            text.contains("Before the selection (line 3):\n```rust\nfn f() {\n```"),
            "{text}"
        );
    }

    #[test]
    fn fences_outgrow_the_code() {
        assert_eq!(fenced("md", "```x```"), "````md\n```x```\n````");
    }
}
