//! ACP's `/rewind` slash command, for `tandem acp` and its shim: `/rewind`
//! alone lists the session's messages; `/rewind N [files|conversation]
//! [force]` rewinds to before message N (both, unless one is named). The
//! answer is text the agent says; nothing reaches the model.

use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;

use super::commands::{available_command, slash_command};
use crate::protocol::{ContentBlock, RewindForce, RewindParams};

/// What a `/rewind` prompt asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RewindCommand {
    List,
    Run {
        /// A 1-based number from the list, or a message or rewind id.
        target: String,
        files: bool,
        conversation: bool,
        force: bool,
    },
}

/// The `availableCommands` entry.
pub fn rewind_command_entry() -> acp::AvailableCommand {
    available_command(
        "rewind",
        "Rewind files and conversation to before a message (/rewind lists them)",
        true,
    )
}

/// The command of a `/rewind` prompt; `Err` names what is wrong.
pub fn rewind_command(prompt: &[ContentBlock]) -> Option<Result<RewindCommand, String>> {
    let (name, rest) = slash_command(prompt)?;
    if name != "rewind" {
        return None;
    }
    let mut words = rest.split_whitespace();
    let Some(target) = words.next() else {
        return Some(Ok(RewindCommand::List));
    };
    let (mut files, mut conversation, mut force) = (false, false, false);
    for word in words {
        match word {
            "files" => files = true,
            "conversation" => conversation = true,
            "both" => (files, conversation) = (true, true),
            "force" => force = true,
            other => {
                return Some(Err(format!(
                    "/rewind: unknown word `{other}`; use `/rewind N [files|conversation|both] [force]`"
                )))
            }
        }
    }
    if !files && !conversation {
        (files, conversation) = (true, true);
    }
    Some(Ok(RewindCommand::Run {
        target: target.to_string(),
        files,
        conversation,
        force,
    }))
}

/// The numbered list of messages `/rewind` offers.
pub fn list_text(messages: &[(String, String)]) -> String {
    if messages.is_empty() {
        return "There is no message to rewind to yet.".to_string();
    }
    let mut text = String::from("Rewind to before which message?\n\n");
    for (n, (id, said)) in messages.iter().enumerate() {
        text.push_str(&format!("{}. {said} ({id})\n", n + 1));
    }
    text.push_str(
        "\nSend `/rewind N` to restore the files and the conversation to before message N, \
         `/rewind N files` or `/rewind N conversation` for one of them; add `force` to overwrite \
         files you changed since.",
    );
    text
}

/// The `tandem/rewind` params of a `/rewind N ...`.
pub fn rewind_params(
    session_id: &str,
    command: &RewindCommand,
    messages: &[(String, String)],
) -> Result<RewindParams, String> {
    let RewindCommand::Run {
        target,
        files,
        conversation,
        force,
    } = command
    else {
        return Err("nothing to run".to_string());
    };
    let to = match target.parse::<usize>() {
        Ok(n) if (1..=messages.len()).contains(&n) => messages[n - 1].0.clone(),
        Ok(n) => {
            return Err(format!(
                "/rewind: there is no message {n}; `/rewind` lists {}",
                messages.len()
            ))
        }
        Err(_) => target.clone(),
    };
    Ok(RewindParams {
        session_id: session_id.to_string(),
        to_message_id: to,
        files: *files,
        conversation: *conversation,
        force: force.then_some(RewindForce::All(true)),
        dry_run: false,
    })
}

/// What the agent says after a rewind (`result`: `tandem/rewind`'s).
pub fn outcome_text(result: &Value) -> String {
    let mut lines = Vec::new();
    for file in result["files"].as_array().into_iter().flatten() {
        let path = file["path"].as_str().unwrap_or_default();
        let status = file["status"].as_str().unwrap_or_default();
        let mut line = format!("- {path}: {status}");
        if let Some(reason) = file["reason"].as_str() {
            line.push_str(&format!(" ({reason})"));
        }
        if let Some(diff) = file["diff"].as_str() {
            line.push_str(&format!("\n```diff\n{}```", diff));
        }
        lines.push(line);
    }
    let mut text = match result["rewindId"].as_str() {
        Some(id) => format!("Rewound ({id}; `/rewind {id} files` undoes it)."),
        None => "Rewound.".to_string(),
    };
    if !lines.is_empty() {
        text.push_str("\n\n");
        text.push_str(&lines.join("\n"));
    }
    if result["conversation"] == true {
        text.push_str("\n\nThe conversation continues from before that message.");
    }
    text
}

/// An `agent_message_chunk` update carrying `text`.
pub fn said(text: String) -> Value {
    super::wire::to_wire(acp::SessionUpdate::AgentMessageChunk(
        acp::ContentChunk::new(acp::ContentBlock::Text(acp::TextContent::new(text))),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> Vec<ContentBlock> {
        vec![ContentBlock::Text { text: t.into() }]
    }

    #[test]
    fn rewind_commands_parse_with_both_by_default() {
        assert_eq!(
            rewind_command(&text("/rewind")),
            Some(Ok(RewindCommand::List))
        );
        assert_eq!(
            rewind_command(&text("/rewind 2")),
            Some(Ok(RewindCommand::Run {
                target: "2".into(),
                files: true,
                conversation: true,
                force: false
            }))
        );
        assert_eq!(
            rewind_command(&text("/rewind m3 files force")),
            Some(Ok(RewindCommand::Run {
                target: "m3".into(),
                files: true,
                conversation: false,
                force: true
            }))
        );
        assert!(matches!(
            rewind_command(&text("/rewind 2 sideways")),
            Some(Err(_))
        ));
        assert_eq!(rewind_command(&text("/explain")), None);
        let messages = vec![("m1".to_string(), "hi".to_string())];
        let run = rewind_command(&text("/rewind 1")).unwrap().unwrap();
        assert_eq!(
            rewind_params("s", &run, &messages).unwrap().to_message_id,
            "m1"
        );
        let far = rewind_command(&text("/rewind 5")).unwrap().unwrap();
        assert!(rewind_params("s", &far, &messages).is_err());
    }
}
