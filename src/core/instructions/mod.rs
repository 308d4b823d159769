//! Project instructions: the `AGENTS.md` files (names from
//! `[instructions] files`) of the user and of the workspace, given to the
//! model at the end of its system prompt.
//!
//! At a session's start and at each turn's start the files are looked
//! for again ([`discover`]: the user's own directory, each workspace
//! root, then every directory down to the turn's file — or, for a turn
//! about no file, the last file a turn was about), read when their
//! size or time changed ([`read`]), and rendered within the 32 KiB cap
//! ([`render`]). When the files or their content differ from what the
//! session's last `instructions` event says, a new one is logged; the
//! projection puts its text in the system prompt, which compaction never
//! touches.
//!
//! Invariant: what the model reads is the `text` of the session's last
//! `instructions` event, so a reloaded session and `tandem replay` see
//! exactly what the model got.

mod discover;
mod read;
mod render;

use std::path::{Path, PathBuf};

use self::discover::places;
use self::read::FileReader;
use self::render::{render, Found};
use crate::config::instructions::MAX_INSTRUCTION_BYTES;
use crate::vocab::event::{Event, TurnId, UserContent};
use crate::vocab::instructions::InstructionFile;

/// Where a session's instruction files are looked for.
#[derive(Debug, Clone, Default)]
pub struct InstructionSources {
    /// The user's own directory (see
    /// [`crate::config::instructions::user_instructions_dir`]).
    pub user_dir: Option<PathBuf>,
    /// `[instructions] files`.
    pub names: Vec<String>,
}

/// A session's instructions: what it last logged, and the files read.
#[derive(Debug, Default)]
pub struct SessionInstructions {
    reader: FileReader,
    /// The files and text of the last `instructions` event.
    files: Vec<InstructionFile>,
    text: String,
    /// The file the last turn that had one was about: a turn about no
    /// file keeps its directories (a follow-up is still about it).
    about: Option<PathBuf>,
}

impl SessionInstructions {
    /// Folds an event of the session's log (the last `instructions` wins).
    pub fn restore(&mut self, event: &Event) {
        if let Event::Instructions {
            files, text, about, ..
        } = event
        {
            self.files = files.clone();
            self.text = text.clone();
            self.about = about.as_ref().map(PathBuf::from);
        }
    }

    /// The files in force: those of the last `instructions` event.
    pub fn in_force(&self) -> &[InstructionFile] {
        &self.files
    }

    /// Looks for the files again; an `instructions` event to log when
    /// they differ from the last one logged.
    pub fn refresh(
        &mut self,
        sources: &InstructionSources,
        roots: &[PathBuf],
        about: Option<&Path>,
        turn_id: Option<TurnId>,
    ) -> Option<Event> {
        if let Some(about) = about {
            self.about = Some(about.to_path_buf());
        }
        let about = self.about.clone();
        let mut found: Vec<Found> = Vec::new();
        for place in places(sources.user_dir.as_deref(), roots, about.as_deref()) {
            for name in &sources.names {
                let path = place.dir.join(name);
                let Some(file) = self.reader.read(&path) else {
                    continue;
                };
                // Nothing to follow; and a `CLAUDE.md` that is a link to
                // (or a copy of) `AGENTS.md` is given once.
                if file.text.trim().is_empty() || found.iter().any(|f| f.file.sha256 == file.sha256)
                {
                    continue;
                }
                found.push(Found {
                    path,
                    scope: place.scope.clone(),
                    file,
                });
            }
        }
        let rendered = render(&found, roots, MAX_INSTRUCTION_BYTES);
        if rendered.files == self.files && rendered.text == self.text {
            return None;
        }
        if let Some(cut) = &rendered.cut {
            tracing::warn!("instruction files over the cap: {cut}");
        }
        tracing::info!(
            files = ?rendered.files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(),
            "instructions changed"
        );
        self.files = rendered.files.clone();
        self.text = rendered.text.clone();
        Some(Event::Instructions {
            turn_id,
            files: rendered.files,
            text: rendered.text,
            cut: rendered.cut,
            about: about.map(|a| a.display().to_string()),
        })
    }
}

/// The file a turn's input is about: its first attached local file.
pub fn attached_file(content: &[UserContent]) -> Option<PathBuf> {
    content.iter().find_map(|block| match block {
        UserContent::Resource { uri, .. } => crate::workspace::file_uri_to_path(uri),
        UserContent::Text { .. } | UserContent::Image { .. } => None,
    })
}

#[cfg(test)]
mod tests;
