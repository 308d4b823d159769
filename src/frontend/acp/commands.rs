//! The keybinding tasks (built-in and configured) as ACP slash commands:
//! offered with `available_commands_update` when a session is made, loaded
//! or resumed, and run when a prompt starts with `/<task>`. The task works
//! on the file the prompt carries (an embedded resource or a resource
//! link; a `#L10-20` or `#L10:20` fragment narrows it to those lines), and
//! the text after the command is its instruction.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_client_protocol_schema::v1 as acp;

use crate::buffers::{Position, Range};
use crate::config::tasks::{parse_template, takes_instruction, TemplatePart};
use crate::core::client::Client;
use crate::core::daemon::Daemon;
use crate::core::tasks::run::{start_task, Started, TaskError, TaskRequest, TaskResult};
use crate::core::tasks::TaskOrigin;
use crate::protocol::ContentBlock;
use crate::workspace::file_uri_to_path;

/// The `availableCommands` for a session working in `cwd`.
pub(super) fn available_commands(
    daemon: &Daemon,
    editor: &Arc<Client>,
    cwd: &Path,
) -> Vec<acp::AvailableCommand> {
    let catalog = match daemon.task_catalog(editor, cwd) {
        Ok(catalog) => catalog,
        Err(e) => {
            tracing::warn!("no slash commands: {e}");
            return Vec::new();
        }
    };
    catalog
        .tasks()
        .iter()
        .map(|task| available_command(&task.id, &task.title, takes_instruction(&task.prompt)))
        .collect()
}

/// One `AvailableCommand`: a task, and whether its prompt takes an
/// instruction.
pub(crate) fn available_command(
    id: &str,
    title: &str,
    takes_instruction: bool,
) -> acp::AvailableCommand {
    let hint = if takes_instruction {
        "what to do (attach the file or selection)"
    } else {
        "attach the file or selection; optional note"
    };
    acp::AvailableCommand::new(id, title).input(acp::AvailableCommandInput::Unstructured(
        acp::UnstructuredCommandInput::new(hint),
    ))
}

/// A prompt with a text block that starts with `/<name>` (the first such
/// block, wherever it is: CodeCompanion sends the shared file first, as
/// text, then the command): the name and the rest of that block's text.
pub(crate) fn slash_command(prompt: &[ContentBlock]) -> Option<(String, String)> {
    let text = prompt.iter().find_map(|block| match block {
        ContentBlock::Text { text } if text.trim_start().starts_with('/') => Some(text),
        _ => None,
    })?;
    let rest = text.trim_start().strip_prefix('/')?;
    let (name, instruction) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    if name.is_empty() {
        return None;
    }
    Some((name.to_string(), instruction.trim().to_string()))
}

/// The prompt template of task `name` for `cwd`, if it is one.
pub(super) fn task_template(
    daemon: &Daemon,
    editor: &Arc<Client>,
    cwd: &Path,
    name: &str,
) -> Option<String> {
    let catalog = daemon.task_catalog(editor, cwd).ok()?;
    catalog.get(name).map(|task| task.prompt.clone())
}

/// Whether the prompt carries a file (a resource or a resource link) for
/// a task to work on.
pub(crate) fn carries_file(prompt: &[ContentBlock]) -> bool {
    context(prompt).is_some()
}

/// Where the selection goes while the template's text is cleaned up.
const SELECTION: char = '\u{E000}';

/// Task `name` without a file: an ordinary prompt of the session, its
/// template filled in with the text the prompt carries (every text block
/// but the command's; the paths in it are the model's to read) in place of
/// the selection.
pub(crate) fn fileless_task_prompt(
    template: &str,
    instruction: &str,
    prompt: &[ContentBlock],
) -> Vec<ContentBlock> {
    let carried: Vec<&str> = prompt
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } if !text.trim_start().starts_with('/') => Some(text.trim()),
            _ => None,
        })
        .filter(|text| !text.is_empty())
        .collect();
    let carried = carried.join("\n\n");
    let parts =
        parse_template(template).unwrap_or_else(|_| vec![TemplatePart::Text(template.into())]);
    let mut out = String::new();
    for part in &parts {
        match part {
            TemplatePart::Text(text) => out.push_str(text),
            TemplatePart::Placeholder("selection") if carried.is_empty() => {
                out.push_str("(no code was attached: work on what the user names)")
            }
            // Put in after the clean-up below, which must not touch it.
            TemplatePart::Placeholder("selection") => out.push(SELECTION),
            TemplatePart::Placeholder("file") => out.push_str("the text the user gave"),
            TemplatePart::Placeholder("diagnostics") => out.push_str("(none given)"),
            TemplatePart::Placeholder("instruction") => out.push_str(instruction),
            // `{language}`: unknown without a file.
            TemplatePart::Placeholder(_) => {}
        }
    }
    // What an empty `{language}` left behind.
    let mut text = out
        .replace("  ", " ")
        .replace(" \n", "\n")
        .replace(SELECTION, &format!("```\n{carried}\n```"));
    let text_has_selection = parts.contains(&TemplatePart::Placeholder("selection"));
    if !text_has_selection && !carried.is_empty() {
        text = format!("{}\n\n{carried}", text.trim_end());
    }
    if !instruction.is_empty() && !takes_instruction(template) {
        text = format!("{}\n\nThe user adds: {instruction}", text.trim_end());
    }
    vec![ContentBlock::Text {
        text: text.trim().to_string(),
    }]
}

/// Runs task `name` in `session_id` on the prompt's file.
pub(super) async fn run(
    daemon: &Arc<Daemon>,
    editor: &Arc<Client>,
    session_id: &str,
    name: String,
    instruction: String,
    prompt: &[ContentBlock],
) -> Result<TaskResult, TaskError> {
    let (path, range) = target(&name, prompt).map_err(TaskError::BadRequest)?;
    let request = TaskRequest {
        task: name,
        path,
        version: None,
        range,
        instruction: (!instruction.is_empty()).then_some(instruction),
        diagnostics: Vec::new(),
        session_id: Some(session_id.to_string()),
    };
    match start_task(daemon, &TaskOrigin::of(editor), request).await? {
        Started::Running(running) => running.finish().await,
        Started::Ended(result) => Ok(result),
    }
}

/// The file task `name` works on (the one the prompt carries) and its
/// lines: those the URI's fragment names, else the whole file.
pub(crate) fn target(name: &str, prompt: &[ContentBlock]) -> Result<(PathBuf, Range), String> {
    let Carried { path, text, lines } = context(prompt).ok_or_else(|| {
        format!(
            "`/{name}` works on a file: attach one to the prompt (a resource or a resource link)"
        )
    })?;
    let range = match lines {
        Some((first, last)) => line_range(first, last),
        None => {
            let text = match text {
                Some(text) => text,
                None => std::fs::read_to_string(&path)
                    .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?,
            };
            let count = text.split('\n').count() as u32;
            line_range(1, count)
        }
    };
    Ok((path, range))
}

/// 1-based inclusive lines as a range to the end of the last one.
fn line_range(first: u32, last: u32) -> Range {
    Range {
        start: Position {
            line: first.saturating_sub(1),
            character: 0,
        },
        end: Position {
            line: last.max(first).saturating_sub(1),
            character: u32::MAX,
        },
    }
}

/// The file a prompt carries.
struct Carried {
    path: PathBuf,
    /// Its text, when embedded whole.
    text: Option<String>,
    /// The 1-based lines its URI's fragment names.
    lines: Option<(u32, u32)>,
}

fn context(prompt: &[ContentBlock]) -> Option<Carried> {
    prompt.iter().find_map(|block| {
        let (uri, text) = match block {
            ContentBlock::Resource { resource } => (resource.uri.as_str(), resource.text.clone()),
            ContentBlock::ResourceLink { uri, .. } => (uri.as_str(), None),
            ContentBlock::Text { .. } | ContentBlock::Image { .. } => return None,
        };
        let (uri, fragment) = match uri.split_once('#') {
            Some((uri, fragment)) => (uri, Some(fragment)),
            None => (uri, None),
        };
        let path = file_uri_to_path(uri)?;
        let lines = fragment.and_then(fragment_lines);
        // An embedded resource narrowed to lines holds just those lines.
        let text = if lines.is_some() { None } else { text };
        Some(Carried { path, text, lines })
    })
}

/// `L10`, `L10-20`, `L10:20`, `L10-L20` as 1-based lines.
fn fragment_lines(fragment: &str) -> Option<(u32, u32)> {
    let rest = fragment.strip_prefix('L')?;
    let (first, last) = match rest.split_once(['-', ':']) {
        Some((first, last)) => (first, last.trim_start_matches('L')),
        None => (rest, rest),
    };
    let first: u32 = first.parse().ok()?;
    let last: u32 = last.parse().ok()?;
    (first >= 1 && last >= first).then_some((first, last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_name_lines() {
        assert_eq!(fragment_lines("L10"), Some((10, 10)));
        assert_eq!(fragment_lines("L10-20"), Some((10, 20)));
        assert_eq!(fragment_lines("L10:20"), Some((10, 20)));
        assert_eq!(fragment_lines("L10-L20"), Some((10, 20)));
        assert_eq!(fragment_lines("L20-10"), None);
        assert_eq!(fragment_lines("top"), None);
    }

    #[test]
    fn a_slash_command_is_the_first_word_of_the_first_text() {
        let text = |t: &str| ContentBlock::Text {
            text: t.to_string(),
        };
        assert_eq!(
            slash_command(&[text("/explain  the loop please")]),
            Some(("explain".to_string(), "the loop please".to_string()))
        );
        assert_eq!(
            slash_command(&[text("/fix")]),
            Some(("fix".to_string(), String::new()))
        );
        assert_eq!(slash_command(&[text("no command")]), None);
        assert_eq!(slash_command(&[text("/ spaced")]), None);
        // Wherever it is: CodeCompanion sends the shared file first.
        assert_eq!(
            slash_command(&[text("def f(): pass"), text("/explain briefly")]),
            Some(("explain".to_string(), "briefly".to_string()))
        );
    }

    #[test]
    fn a_task_without_a_file_fills_its_template_with_the_text_the_prompt_carries() {
        let text = |t: &str| ContentBlock::Text {
            text: t.to_string(),
        };
        let prompt = fileless_task_prompt(
            "Explain what the selected {language} code in {file} does.\n\nSelected code:\n{selection}",
            "briefly",
            &[text("def f():\n    return 1"), text("/explain briefly")],
        );
        let [ContentBlock::Text { text }] = prompt.as_slice() else {
            panic!("{prompt:?}");
        };
        assert_eq!(
            text,
            "Explain what the selected code in the text the user gave does.\n\nSelected code:\n```\ndef f():\n    return 1\n```\n\nThe user adds: briefly"
        );
    }
}
