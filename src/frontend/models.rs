//! The session's model on every wire: its state in session answers
//! (`ModelState`), `tandem/setModel`, the `current_model_update` of a
//! `model_changed` event, and the context figures of a `usage` update.

use crate::config::models::catalog;
use crate::core::session::Session;
use crate::core::session_model::ModelError;
use crate::protocol::{ModelState, SessionUpdate, WireContext, WireModel};
use crate::vocab::event::{ContextUse, Event};

/// The model and effort in force in `session`, and the models it has.
pub fn model_state(session: &Session) -> ModelState {
    let choice = session.model();
    ModelState {
        model: choice.id,
        effort: choice.effort,
        models: catalog(&session.config)
            .into_iter()
            .map(|(id, model)| WireModel {
                id: id.to_string(),
                name: model.name.clone(),
                efforts: model.efforts.clone(),
                context_window: model.context_window,
            })
            .collect(),
    }
}

/// Switches `session`'s model (`tandem/setModel`); the answer is the
/// state after it, or the message of the `-32602` an unknown model or
/// effort gets.
pub fn set_model(
    session: &Session,
    model: &str,
    effort: Option<&str>,
) -> Result<ModelState, String> {
    session
        .set_model(model, effort)
        .map_err(|e: ModelError| e.to_string())?;
    Ok(model_state(session))
}

pub(crate) fn wire_context(context: ContextUse) -> WireContext {
    WireContext {
        used: context.used,
        size: context.size,
    }
}

/// The update of a `model_changed` event.
pub(crate) fn model_update(event: &Event) -> Option<SessionUpdate> {
    let Event::ModelChanged {
        model,
        name,
        effort,
    } = event
    else {
        return None;
    };
    Some(SessionUpdate::CurrentModelUpdate {
        model_id: model.clone(),
        name: name.clone(),
        effort: effort.clone(),
    })
}
