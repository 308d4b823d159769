//! The instruction files at a turn's start: looked for again (a `stat`
//! per file when nothing changed), and logged when they changed, before
//! the turn's first model request.

use std::path::{Path, PathBuf};

use super::turn::Turn;
use crate::core::instructions::attached_file;
use crate::core::session::PendingInput;

/// The file a turn is about: the prompt's task file, else the first file
/// attached to the inputs, the prompt (entered last) first.
pub(super) fn about(inputs: &[PendingInput]) -> Option<PathBuf> {
    inputs
        .iter()
        .rev()
        .find_map(|input| input.about.clone())
        .or_else(|| {
            inputs
                .iter()
                .rev()
                .find_map(|input| attached_file(&input.content))
        })
}

impl Turn<'_> {
    /// Records an `instructions` event when the files in force changed.
    pub(super) fn refresh_instructions(&mut self, about: Option<&Path>) {
        let roots = self.env.workspace.roots();
        if let Some(event) = self.session.refresh_instructions(
            &self.env.instructions,
            &roots,
            about,
            Some(self.turn_id.clone()),
        ) {
            self.record(event);
        }
    }
}
