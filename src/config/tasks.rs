//! Keybinding tasks as configuration: the built-in tasks and the
//! `[tasks.<id>]` tables of `config.toml` (and `initializationOptions`),
//! checked one task at a time.
//!
//! Invariant: a bad task definition never makes the configuration invalid.
//! It becomes a [`TaskConfigError`] naming the task and the key, the task is
//! left out of the catalog, and every valid task stays available.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

/// What a task may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditScope {
    /// The answer replaces the selected range (inline edit).
    Selection,
    /// The full agent loop, with its tools and `apply_patch` review.
    Workspace,
    /// The model only answers.
    None,
}

impl EditScope {
    pub fn as_str(&self) -> &'static str {
        match self {
            EditScope::Selection => "selection",
            EditScope::Workspace => "workspace",
            EditScope::None => "none",
        }
    }
}

/// When a task is offered as a code action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// On a selection, or on the cursor's line when that line has text.
    Selection,
    /// Only when diagnostics intersect the range.
    Diagnostics,
    /// On any range, an empty one on a blank line included.
    Always,
}

impl When {
    pub fn as_str(&self) -> &'static str {
        match self {
            When::Selection => "selection",
            When::Diagnostics => "diagnostics",
            When::Always => "always",
        }
    }
}

/// One task, built in or configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskDef {
    pub id: String,
    /// Shown as `tandem: <title>`.
    pub title: String,
    /// The instruction template: `{selection}`, `{file}`, `{language}`,
    /// `{diagnostics}`, `{instruction}`; `{{` and `}}` for braces.
    pub prompt: String,
    /// The LSP code action kind (`quickfix`, `refactor.rewrite`, `source`, ...).
    pub kind: String,
    pub edit: EditScope,
    pub when: When,
}

/// A task definition that was refused, with the key at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskConfigError {
    pub task: String,
    /// `None` when the whole definition is at fault (not a table).
    pub key: Option<String>,
    pub message: String,
}

impl fmt::Display for TaskConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Some(key) => write!(f, "[tasks.{}] `{key}`: {}", self.task, self.message),
            None => write!(f, "[tasks.{}]: {}", self.task, self.message),
        }
    }
}

/// The placeholders a prompt template may use.
pub const PLACEHOLDERS: [&str; 5] = [
    "selection",
    "file",
    "language",
    "diagnostics",
    "instruction",
];

/// The keys of a `[tasks.<id>]` table.
const KEYS: [&str; 6] = ["title", "prompt", "kind", "edit", "when", "enabled"];

/// The built-in tasks, in the order they are offered, as the tables a user
/// would write (so an override merges over them key by key).
fn builtin_tables() -> Vec<(&'static str, Value)> {
    use serde_json::json;
    vec![
        (
            "fix",
            json!({
                "title": "Fix",
                "kind": "quickfix",
                "edit": "workspace",
                "when": "diagnostics",
                "prompt": "Fix the problems the diagnostics report in the selected code of {file}. \
                           Change only what the fix needs, and propose the change with apply_patch.\n\n\
                           Diagnostics:\n{diagnostics}\n\nSelected code:\n{selection}",
            }),
        ),
        (
            "explain",
            json!({
                "title": "Explain",
                "kind": "refactor.rewrite",
                "edit": "none",
                "when": "selection",
                "prompt": "Explain what the selected {language} code in {file} does, how, and anything \
                           surprising about it. Do not change any file.\n\nSelected code:\n{selection}",
            }),
        ),
        (
            "edit",
            json!({
                "title": "Edit selection…",
                "kind": "refactor.rewrite",
                "edit": "selection",
                "when": "selection",
                "prompt": "{instruction}",
            }),
        ),
        (
            "document",
            json!({
                "title": "Document",
                "kind": "refactor.rewrite",
                "edit": "selection",
                "when": "selection",
                "prompt": "Add documentation comments to the selected {language} code, in the style \
                           the file already uses. Keep the code itself exactly as it is.",
            }),
        ),
        (
            "tests",
            json!({
                "title": "Write tests",
                "kind": "source",
                "edit": "workspace",
                "when": "selection",
                "prompt": "Write tests for the selected {language} code in {file}, where this project \
                           keeps its tests and in its style, and propose them with apply_patch.\n\n\
                           Selected code:\n{selection}",
            }),
        ),
    ]
}

/// The tasks a configuration makes available, and the definitions it
/// refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskCatalog {
    tasks: Vec<TaskDef>,
    errors: Vec<TaskConfigError>,
}

impl TaskCatalog {
    /// The built-in tasks with `[tasks.*]` merged over them: a table with a
    /// built-in id overrides that task key by key, `enabled = false`
    /// removes it, and other ids add tasks (after the built-ins, by id).
    pub fn from_config(configured: &BTreeMap<String, Value>) -> TaskCatalog {
        let mut catalog = TaskCatalog::default();
        let builtins = builtin_tables();
        let mut ids: Vec<String> = builtins.iter().map(|(id, _)| id.to_string()).collect();
        ids.extend(
            configured
                .keys()
                .filter(|id| !builtins.iter().any(|(b, _)| b == id))
                .cloned(),
        );
        for id in ids {
            let builtin = builtins.iter().find(|(b, _)| *b == id).map(|(_, t)| t);
            let table = match (builtin, configured.get(&id)) {
                (Some(base), None) => base.clone(),
                (base, Some(Value::Object(layer))) => {
                    let mut table = base.cloned().unwrap_or_else(|| Value::Object(Map::new()));
                    if let Value::Object(table) = &mut table {
                        table.extend(layer.clone());
                    }
                    table
                }
                (_, Some(_)) => {
                    catalog.errors.push(TaskConfigError {
                        task: id.clone(),
                        key: None,
                        message: "expected a table of task settings".to_string(),
                    });
                    continue;
                }
                (None, None) => continue,
            };
            match parse_task(&id, &table) {
                Ok(Some(task)) => catalog.tasks.push(task),
                Ok(None) => {}
                Err(error) => catalog.errors.push(error),
            }
        }
        for error in &catalog.errors {
            tracing::warn!("task left out of the catalog: {error}");
        }
        catalog
    }

    /// The enabled tasks, built-ins first.
    pub fn tasks(&self) -> &[TaskDef] {
        &self.tasks
    }

    pub fn get(&self, id: &str) -> Option<&TaskDef> {
        self.tasks.iter().find(|t| t.id == id)
    }

    /// The definitions that were refused.
    pub fn errors(&self) -> &[TaskConfigError] {
        &self.errors
    }

    /// The refusal of task `id`, if its definition was refused.
    pub fn error_of(&self, id: &str) -> Option<&TaskConfigError> {
        self.errors.iter().find(|e| e.task == id)
    }

    /// The ids of the enabled tasks, for error messages.
    pub fn ids(&self) -> Vec<&str> {
        self.tasks.iter().map(|t| t.id.as_str()).collect()
    }
}

/// One merged task table to a [`TaskDef`]; `Ok(None)` when it is disabled.
fn parse_task(id: &str, table: &Value) -> Result<Option<TaskDef>, TaskConfigError> {
    let error = |key: &str, message: String| TaskConfigError {
        task: id.to_string(),
        key: Some(key.to_string()),
        message,
    };
    if id.is_empty()
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(TaskConfigError {
            task: id.to_string(),
            key: None,
            message: "a task id may only hold letters, digits, `-`, `_` and `.`".to_string(),
        });
    }
    let Value::Object(table) = table else {
        return Err(TaskConfigError {
            task: id.to_string(),
            key: None,
            message: "expected a table of task settings".to_string(),
        });
    };
    if let Some(unknown) = table.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(error(
            unknown,
            format!("unknown key, expected one of {}", quoted(&KEYS)),
        ));
    }
    let string = |key: &str| -> Result<Option<String>, TaskConfigError> {
        match table.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(error(key, format!("expected a string, found {other}"))),
        }
    };
    let enabled = match table.get("enabled") {
        None => true,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(error(
                "enabled",
                format!("expected true or false, found {other}"),
            ))
        }
    };
    let title = string("title")?
        .ok_or_else(|| error("title", "missing: every task needs a title".to_string()))?;
    if title.trim().is_empty() {
        return Err(error("title", "must not be empty".to_string()));
    }
    let prompt = string("prompt")?.ok_or_else(|| {
        error(
            "prompt",
            "missing: every task needs a prompt template".to_string(),
        )
    })?;
    check_template(&prompt).map_err(|message| error("prompt", message))?;
    let kind = string("kind")?.unwrap_or_else(|| "refactor.rewrite".to_string());
    if kind.is_empty()
        || !kind.split('.').all(|part| {
            !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    {
        return Err(error(
            "kind",
            format!("`{kind}` is not a code action kind (like `quickfix`, `refactor.rewrite`, `source`)"),
        ));
    }
    let edit = match string("edit")?.as_deref() {
        None | Some("none") => EditScope::None,
        Some("selection") => EditScope::Selection,
        Some("workspace") => EditScope::Workspace,
        Some(other) => {
            return Err(error(
                "edit",
                format!("`{other}` is not one of `selection`, `workspace`, `none`"),
            ))
        }
    };
    let when = match string("when")?.as_deref() {
        None | Some("selection") => When::Selection,
        Some("diagnostics") => When::Diagnostics,
        Some("always") => When::Always,
        Some(other) => {
            return Err(error(
                "when",
                format!("`{other}` is not one of `selection`, `diagnostics`, `always`"),
            ))
        }
    };
    if !enabled {
        return Ok(None);
    }
    Ok(Some(TaskDef {
        id: id.to_string(),
        title,
        prompt,
        kind,
        edit,
        when,
    }))
}

fn quoted(keys: &[&str]) -> String {
    keys.iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One piece of a prompt template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplatePart<'a> {
    Text(std::borrow::Cow<'a, str>),
    /// One of [`PLACEHOLDERS`].
    Placeholder(&'a str),
}

/// Splits a template into text and placeholders; `{{` and `}}` are
/// literal braces. An unknown placeholder or a lone brace is an error.
pub fn parse_template(template: &str) -> Result<Vec<TemplatePart<'_>>, String> {
    let mut parts = Vec::new();
    let mut text = String::new();
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        text.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("{{") {
            text.push('{');
            rest = after;
        } else if let Some(after) = tail.strip_prefix("}}") {
            text.push('}');
            rest = after;
        } else if tail.starts_with('}') {
            return Err("a lone `}` (write `}}` for a brace)".to_string());
        } else {
            let Some(end) = tail.find('}') else {
                return Err("a `{` without its `}` (write `{{` for a brace)".to_string());
            };
            let name = &tail[1..end];
            if !PLACEHOLDERS.contains(&name) {
                return Err(format!(
                    "unknown placeholder `{{{name}}}`, expected one of {}",
                    PLACEHOLDERS
                        .iter()
                        .map(|p| format!("`{{{p}}}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            if !text.is_empty() {
                parts.push(TemplatePart::Text(std::mem::take(&mut text).into()));
            }
            parts.push(TemplatePart::Placeholder(name));
            rest = &tail[end + 1..];
        }
    }
    text.push_str(rest);
    if !text.is_empty() {
        parts.push(TemplatePart::Text(text.into()));
    }
    Ok(parts)
}

fn check_template(template: &str) -> Result<(), String> {
    parse_template(template).map(|_| ())
}

/// Whether a task's prompt template has an `{instruction}` placeholder.
pub fn takes_instruction(template: &str) -> bool {
    parse_template(template)
        .map(|parts| parts.contains(&TemplatePart::Placeholder("instruction")))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn configured(value: Value) -> BTreeMap<String, Value> {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn builtins_are_offered_in_order() {
        let catalog = TaskCatalog::from_config(&BTreeMap::new());
        assert_eq!(
            catalog.ids(),
            ["fix", "explain", "edit", "document", "tests"]
        );
        assert!(catalog.errors().is_empty());
        assert_eq!(catalog.get("edit").unwrap().title, "Edit selection…");
        assert_eq!(catalog.get("fix").unwrap().when, When::Diagnostics);
    }

    #[test]
    fn overrides_merge_key_by_key_and_disable() {
        let catalog = TaskCatalog::from_config(&configured(json!({
            "explain": {"title": "Explain briefly"},
            "tests": {"enabled": false},
            "review": {"title": "Review", "prompt": "Review {selection} in {file}", "kind": "quickfix", "when": "always"},
        })));
        assert_eq!(
            catalog.ids(),
            ["fix", "explain", "edit", "document", "review"]
        );
        let explain = catalog.get("explain").unwrap();
        assert_eq!(explain.title, "Explain briefly");
        assert_eq!(explain.edit, EditScope::None);
        assert_eq!(catalog.get("review").unwrap().when, When::Always);
    }

    #[test]
    fn a_bad_task_names_the_task_and_key_and_leaves_the_others() {
        let catalog = TaskCatalog::from_config(&configured(json!({
            "a": {"title": "A", "prompt": "x", "edit": "everything"},
            "b": {"title": "B", "prompt": "{selction}"},
            "c": {"titel": "C", "prompt": "x"},
            "d": {"prompt": "x"},
            "e": 3,
            "ok": {"title": "OK", "prompt": "fine {{braces}}"},
        })));
        assert!(catalog.get("ok").is_some());
        let errors: Vec<String> = catalog.errors().iter().map(|e| e.to_string()).collect();
        assert_eq!(errors.len(), 5, "{errors:?}");
        assert!(
            errors[0].starts_with("[tasks.a] `edit`: `everything` is not one of"),
            "{errors:?}"
        );
        assert!(
            errors[1].contains("[tasks.b] `prompt`: unknown placeholder `{selction}`"),
            "{errors:?}"
        );
        assert!(
            errors[2].starts_with("[tasks.c] `titel`: unknown key"),
            "{errors:?}"
        );
        assert!(
            errors[3].starts_with("[tasks.d] `title`: missing"),
            "{errors:?}"
        );
        assert_eq!(errors[4], "[tasks.e]: expected a table of task settings");
    }

    #[test]
    fn templates_split_into_text_and_placeholders() {
        let parts = parse_template("a {{x}} {file}:{selection}").unwrap();
        assert_eq!(
            parts,
            vec![
                TemplatePart::Text("a {x} ".into()),
                TemplatePart::Placeholder("file"),
                TemplatePart::Text(":".into()),
                TemplatePart::Placeholder("selection"),
            ]
        );
        assert!(parse_template("oops {").is_err());
        assert!(parse_template("oops }").is_err());
    }
}
