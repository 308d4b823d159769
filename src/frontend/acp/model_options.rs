//! The session's model and reasoning effort as ACP session config options:
//! a `model` select (category `model`) over the configured models and an
//! `effort` select (category `thought_level`) over the current model's
//! efforts (absent when it lists none), beside the mode's select. Config
//! options are stable in ACP's schema: no capability gates them.
//!
//! `session/set_config_option` answers, and every `config_option_update`
//! carries, the full set; so both `tandem acp` and `tandem acp --attach`
//! keep each session's mode and model here ([`ConfigStates`]), followed
//! from the updates that change them.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{json, Value};

use super::modes::config_options;
use crate::protocol::ModelState;
use crate::vocab::approval::ApprovalMode;

/// The id of the model config option.
pub(crate) const MODEL_OPTION: &str = "model";
/// The id of the reasoning effort config option.
pub(crate) const EFFORT_OPTION: &str = "effort";

/// The model and effort selects of a session in `state`.
fn model_options(state: &ModelState) -> Vec<Value> {
    let mut options = vec![json!({
        "id": MODEL_OPTION,
        "name": "Model",
        "description": "The model the next request uses",
        "category": "model",
        "type": "select",
        "currentValue": state.model,
        "options": state.models.iter().map(|m| json!({
            "value": m.id,
            "name": m.id,
            "description": format!("{} ({} tokens of context)", m.name, m.context_window),
        })).collect::<Vec<_>>(),
    })];
    let efforts = state
        .models
        .iter()
        .find(|m| m.id == state.model)
        .map(|m| m.efforts.as_slice())
        .unwrap_or_default();
    if let (Some(effort), false) = (&state.effort, efforts.is_empty()) {
        options.push(json!({
            "id": EFFORT_OPTION,
            "name": "Reasoning effort",
            "description": "How hard the model thinks before it answers",
            "category": "thought_level",
            "type": "select",
            "currentValue": effort,
            "options": efforts.iter().map(|e| json!({"value": e, "name": e})).collect::<Vec<_>>(),
        }));
    }
    options
}

/// Every config option of a session: mode, model, effort.
pub(crate) fn all_options(mode: ApprovalMode, state: &ModelState) -> Value {
    let mut options = config_options(mode);
    if let Some(list) = options.as_array_mut() {
        list.extend(model_options(state));
    }
    options
}

/// `modes` and `configOptions` of a session/new, load or resume result.
pub(crate) fn session_state(mode: ApprovalMode, state: &ModelState) -> Value {
    let mut result = super::modes::session_state(mode);
    result["configOptions"] = all_options(mode, state);
    result
}

/// The `tandem/setModel` a `session/set_config_option` of the model or
/// effort option stands for (model id, effort); `None` for other options.
pub(crate) fn model_switch(
    config_id: &str,
    value: &str,
    current: &ModelState,
) -> Option<(String, Option<String>)> {
    match config_id {
        MODEL_OPTION => Some((value.to_string(), None)),
        EFFORT_OPTION => Some((current.model.clone(), Some(value.to_string()))),
        _ => None,
    }
}

/// Each session's mode and model, for the full set of config options.
#[derive(Clone, Default)]
pub(crate) struct ConfigStates(Arc<Mutex<HashMap<String, (ApprovalMode, ModelState)>>>);

impl ConfigStates {
    pub(crate) fn set(&self, session_id: &str, mode: ApprovalMode, state: ModelState) {
        self.0.lock().insert(session_id.to_string(), (mode, state));
    }

    pub(crate) fn set_models(&self, session_id: &str, state: ModelState) {
        if let Some(entry) = self.0.lock().get_mut(session_id) {
            entry.1 = state;
        }
    }

    pub(crate) fn forget(&self, session_id: &str) {
        self.0.lock().remove(session_id);
    }

    /// The full config options of a session (the mode's alone when its
    /// model is not known here).
    pub(crate) fn options(&self, session_id: &str, mode: Option<ApprovalMode>) -> Value {
        let mut states = self.0.lock();
        match states.get_mut(session_id) {
            Some(entry) => {
                if let Some(mode) = mode {
                    entry.0 = mode;
                }
                all_options(entry.0, &entry.1)
            }
            None => config_options(mode.unwrap_or_default()),
        }
    }

    /// The `config_option_update` that follows a tandem update changing
    /// the mode or the model (`current_mode_update`,
    /// `current_model_update`), with the state it records.
    pub(crate) fn follow(&self, session_id: &str, update: &Value) -> Option<Value> {
        let options = match update["sessionUpdate"].as_str()? {
            "current_mode_update" => {
                let mode = update["currentModeId"].as_str()?.parse().ok()?;
                self.options(session_id, Some(mode))
            }
            "current_model_update" => {
                let mut states = self.0.lock();
                let (mode, state) = states.get_mut(session_id)?;
                state.model = update["modelId"].as_str()?.to_string();
                state.effort = update["effort"].as_str().map(str::to_string);
                all_options(*mode, state)
            }
            _ => return None,
        };
        Some(json!({"sessionUpdate": "config_option_update", "configOptions": options}))
    }
}

/// ACP's `usage_update` of a tandem `usage` update that says how much
/// context is in use: `used` and `size`, the session's cost when known,
/// and the call's, turn's and session's tokens under `_meta.tandem`.
pub(crate) fn usage_update(update: &Value) -> Option<Value> {
    let context = update.get("context")?;
    let mut usage = json!({
        "sessionUpdate": "usage_update",
        "used": context["used"],
        "size": context["size"],
        "_meta": {"tandem": {"call": update["call"], "turn": update["turn"],
                             "session": update["session"]}},
    });
    if let Some(amount) = update["session"]["costUsd"].as_f64() {
        usage["cost"] = json!({"amount": amount, "currency": "USD"});
    }
    Some(usage)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::WireModel;

    fn state() -> ModelState {
        ModelState {
            model: "fast".into(),
            effort: Some("low".into()),
            models: vec![
                WireModel {
                    id: "default".into(),
                    name: "big".into(),
                    efforts: vec![],
                    context_window: 1000,
                },
                WireModel {
                    id: "fast".into(),
                    name: "small".into(),
                    efforts: vec!["low".into(), "high".into()],
                    context_window: 500,
                },
            ],
        }
    }

    #[test]
    fn the_options_are_mode_model_and_the_current_models_efforts() {
        let options = all_options(ApprovalMode::Review, &state());
        let ids: Vec<&str> = options
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["mode", "model", "effort"]);
        assert_eq!(options[1]["category"], "model");
        assert_eq!(options[2]["category"], "thought_level");
        assert_eq!(options[2]["currentValue"], "low");
        let mut no_efforts = state();
        no_efforts.model = "default".into();
        no_efforts.effort = None;
        assert_eq!(
            all_options(ApprovalMode::Auto, &no_efforts)
                .as_array()
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn a_model_switch_is_followed_by_the_full_set_of_options() {
        let states = ConfigStates::default();
        states.set("s", ApprovalMode::Review, state());
        let update = states
            .follow(
                "s",
                &json!({"sessionUpdate": "current_model_update", "modelId": "default", "name": "big"}),
            )
            .unwrap();
        assert_eq!(update["configOptions"][1]["currentValue"], "default");
        assert_eq!(update["configOptions"].as_array().unwrap().len(), 2);
        assert!(states
            .follow(
                "other",
                &json!({"sessionUpdate": "current_model_update", "modelId": "x"})
            )
            .is_none());
    }
}
