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

use agent_client_protocol_schema::v1 as acp;
use parking_lot::Mutex;
use serde_json::Value;

use super::modes::{config_options, mode_state};
use super::session_updates::tandem_meta;
use super::wire::to_wire;
use crate::protocol::{ModelState, WireContext, WireUsage};
use crate::vocab::approval::ApprovalMode;

/// The id of the model config option.
pub(crate) const MODEL_OPTION: &str = "model";
/// The id of the reasoning effort config option.
pub(crate) const EFFORT_OPTION: &str = "effort";

/// The model and effort selects of a session in `state`.
fn model_options(state: &ModelState) -> Vec<acp::SessionConfigOption> {
    let models: Vec<_> = state
        .models
        .iter()
        .map(|m| {
            acp::SessionConfigSelectOption::new(m.id.clone(), m.id.clone()).description(format!(
                "{} ({} tokens of context)",
                m.name, m.context_window
            ))
        })
        .collect();
    let mut options =
        vec![
            acp::SessionConfigOption::select(MODEL_OPTION, "Model", state.model.clone(), models)
                .description("The model the next request uses")
                .category(acp::SessionConfigOptionCategory::Model),
        ];
    let efforts = state
        .models
        .iter()
        .find(|m| m.id == state.model)
        .map(|m| m.efforts.as_slice())
        .unwrap_or_default();
    if let (Some(effort), false) = (&state.effort, efforts.is_empty()) {
        let choices: Vec<_> = efforts
            .iter()
            .map(|e| acp::SessionConfigSelectOption::new(e.clone(), e.clone()))
            .collect();
        options.push(
            acp::SessionConfigOption::select(
                EFFORT_OPTION,
                "Reasoning effort",
                effort.clone(),
                choices,
            )
            .description("How hard the model thinks before it answers")
            .category(acp::SessionConfigOptionCategory::ThoughtLevel),
        );
    }
    options
}

/// Every config option of a session: mode, model, effort.
pub(crate) fn all_options(mode: ApprovalMode, state: &ModelState) -> Vec<acp::SessionConfigOption> {
    let mut options = config_options(mode);
    options.extend(model_options(state));
    options
}

/// `modes` and `configOptions` of a session/new, load or resume result.
pub(crate) fn session_setup(mode: ApprovalMode, state: &ModelState) -> acp::LoadSessionResponse {
    acp::LoadSessionResponse::new()
        .modes(mode_state(mode))
        .config_options(all_options(mode, state))
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
    pub(crate) fn options(
        &self,
        session_id: &str,
        mode: Option<ApprovalMode>,
    ) -> Vec<acp::SessionConfigOption> {
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
        super::session_updates::update_value(&acp::SessionUpdate::ConfigOptionUpdate(
            acp::ConfigOptionUpdate::new(options),
        ))
    }
}

/// ACP's `usage_update` of a tandem `usage` update that says how much
/// context is in use: `used` and `size`, the session's cost when known,
/// and the call's, turn's and session's tokens under `_meta.tandem`.
pub(crate) fn usage_update(
    call: Option<WireUsage>,
    turn: WireUsage,
    session: WireUsage,
    context: Option<WireContext>,
) -> Option<acp::SessionUpdate> {
    let context = context?;
    let mut usage = acp::UsageUpdate::new(context.used, context.size).meta(tandem_meta([
        ("call", to_wire(call)),
        ("turn", to_wire(turn)),
        ("session", to_wire(session)),
    ]));
    if let Some(amount) = session.cost_usd {
        usage = usage.cost(acp::Cost::new(amount, "USD"));
    }
    Some(acp::SessionUpdate::UsageUpdate(usage))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

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
        let options = to_wire(all_options(ApprovalMode::Review, &state()));
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
        assert_eq!(all_options(ApprovalMode::Auto, &no_efforts).len(), 2);
    }

    #[test]
    fn the_model_and_effort_selects_are_acps_config_options() {
        let options = to_wire(model_options(&state()));
        assert_eq!(
            options,
            json!([
                {"id": "model", "name": "Model", "description": "The model the next request uses",
                 "category": "model", "type": "select", "currentValue": "fast",
                 "options": [
                    {"value": "default", "name": "default", "description": "big (1000 tokens of context)"},
                    {"value": "fast", "name": "fast", "description": "small (500 tokens of context)"},
                 ]},
                {"id": "effort", "name": "Reasoning effort",
                 "description": "How hard the model thinks before it answers",
                 "category": "thought_level", "type": "select", "currentValue": "low",
                 "options": [{"value": "low", "name": "low"}, {"value": "high", "name": "high"}]},
            ])
        );
    }

    #[test]
    fn a_usage_update_carries_the_context_the_cost_and_tandems_tokens() {
        let tokens = WireUsage {
            input_tokens: 10,
            output_tokens: 2,
            cached_tokens: 0,
            cost_usd: Some(0.5),
        };
        let update = usage_update(
            None,
            tokens,
            tokens,
            Some(WireContext {
                used: 12,
                size: 100,
            }),
        );
        let wire = update
            .as_ref()
            .and_then(super::super::session_updates::update_value);
        let usage =
            json!({"inputTokens": 10, "outputTokens": 2, "cachedTokens": 0, "costUsd": 0.5});
        assert_eq!(
            wire,
            Some(
                json!({"sessionUpdate": "usage_update", "used": 12, "size": 100,
                        "cost": {"amount": 0.5, "currency": "USD"},
                        "_meta": {"tandem": {"call": null, "turn": usage, "session": usage}}})
            )
        );
        assert!(usage_update(None, tokens, tokens, None).is_none());
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
