//! Which model a step calls: the session's choice at the step's start
//! (`Session::model`), so a switch during a turn takes effect at its next
//! step and the running step finishes on the model it started with.
//!
//! Invariant: one provider per model and effort in force, made again only
//! when the choice changes.

use std::sync::Arc;

use parking_lot::Mutex;

use super::turn::Turn;
use crate::core::session_model::ModelChoice;
use crate::provider::{for_model, Provider};

/// The provider of the model in force, made when the choice changes.
#[derive(Default)]
pub struct ProviderSlot {
    current: Mutex<Option<(ModelChoice, Arc<dyn Provider>)>>,
}

impl ProviderSlot {
    /// The provider for `choice`.
    pub fn provider(&self, choice: &ModelChoice) -> Arc<dyn Provider> {
        let mut current = self.current.lock();
        match &*current {
            Some((made_for, provider)) if made_for == choice => provider.clone(),
            _ => {
                let provider = for_model(&choice.config, choice.effort.as_deref());
                *current = Some((choice.clone(), provider.clone()));
                provider
            }
        }
    }
}

impl Turn<'_> {
    /// Takes the session's model choice for the step about to start.
    pub(super) fn pick_model(&mut self) {
        let choice = self.session.model();
        self.provider = self.env.providers.provider(&choice);
        self.model = choice;
    }
}
