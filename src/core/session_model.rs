//! The model a session's requests use and its reasoning effort: `default`
//! (`[model]`) at its first effort when the session starts, then whatever
//! the last `model_changed` event of its log says.
//!
//! Invariant: a choice always names a model of the session's configuration
//! and one of that model's efforts (or none when it lists none); a switch
//! that does not is refused and changes nothing.

use crate::config::models::{catalog, find, DEFAULT_MODEL_ID};
use crate::config::{Config, ModelConfig};
use crate::vocab::event::Event;

/// The model and effort in force.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelChoice {
    /// `default`, or the id of a `[models.<id>]`.
    pub id: String,
    pub config: ModelConfig,
    pub effort: Option<String>,
}

/// A switch that names what the configuration does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("unknown model `{id}`; the configured models are: {}", known.join(", "))]
    UnknownModel { id: String, known: Vec<String> },
    #[error("model `{model}` has no effort `{effort}`; {}", efforts_phrase(known))]
    UnknownEffort {
        model: String,
        effort: String,
        known: Vec<String>,
    },
}

fn efforts_phrase(known: &[String]) -> String {
    if known.is_empty() {
        "it lists no efforts (`efforts` in its config)".to_string()
    } else {
        format!("its efforts are: {}", known.join(", "))
    }
}

impl ModelChoice {
    /// What a new session uses: `[model]` at its first effort.
    pub fn initial(config: &Config) -> ModelChoice {
        ModelChoice {
            id: DEFAULT_MODEL_ID.to_string(),
            effort: config.model.efforts.first().cloned(),
            config: config.model.clone(),
        }
    }

    /// Model `id` at `effort`; with no effort, the current one if the
    /// model stays, else the model's first.
    pub fn resolve(
        config: &Config,
        current: &ModelChoice,
        id: &str,
        effort: Option<&str>,
    ) -> Result<ModelChoice, ModelError> {
        let model = find(config, id).ok_or_else(|| ModelError::UnknownModel {
            id: id.to_string(),
            known: catalog(config)
                .iter()
                .map(|(id, _)| id.to_string())
                .collect(),
        })?;
        let effort = match effort {
            Some(effort) if model.efforts.iter().any(|e| e == effort) => Some(effort.to_string()),
            Some(effort) => {
                return Err(ModelError::UnknownEffort {
                    model: id.to_string(),
                    effort: effort.to_string(),
                    known: model.efforts.clone(),
                })
            }
            None if current.id == id => current.effort.clone(),
            None => model.efforts.first().cloned(),
        };
        Ok(ModelChoice {
            id: id.to_string(),
            config: model.clone(),
            effort,
        })
    }

    /// The event that records this choice.
    pub fn event(&self) -> Event {
        Event::ModelChanged {
            model: self.id.clone(),
            name: self.config.name.clone(),
            effort: self.effort.clone(),
        }
    }

    /// The choice a logged `model_changed` made, if the configuration
    /// still has that model and effort (a model since removed from the
    /// config leaves the session on the one it has).
    pub fn restored(config: &Config, current: &ModelChoice, event: &Event) -> Option<ModelChoice> {
        let Event::ModelChanged { model, effort, .. } = event else {
            return None;
        };
        match ModelChoice::resolve(config, current, model, effort.as_deref()) {
            Ok(choice) => Some(choice),
            Err(e) => {
                tracing::warn!("the session's logged model switch no longer applies: {e}");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigBuilder;
    use serde_json::json;

    fn config() -> Config {
        ConfigBuilder::new()
            .json(
                "test",
                &json!({"model": {"name": "big"},
                        "models": {"fast": {"name": "small", "efforts": ["low", "high"]}}}),
            )
            .unwrap()
            .build()
            .unwrap()
    }

    #[test]
    fn switching_checks_the_model_and_the_effort() {
        let config = config();
        let start = ModelChoice::initial(&config);
        assert_eq!(
            (start.id.as_str(), start.effort.as_deref()),
            ("default", None)
        );
        let fast = ModelChoice::resolve(&config, &start, "fast", None).unwrap();
        assert_eq!(
            (fast.config.name.as_str(), fast.effort.as_deref()),
            ("small", Some("low"))
        );
        let high = ModelChoice::resolve(&config, &fast, "fast", Some("high")).unwrap();
        assert_eq!(
            ModelChoice::resolve(&config, &high, "fast", None)
                .unwrap()
                .effort
                .as_deref(),
            Some("high"),
            "the effort stays with the model"
        );
        assert_eq!(
            ModelChoice::resolve(&config, &start, "huge", None)
                .unwrap_err()
                .to_string(),
            "unknown model `huge`; the configured models are: default, fast"
        );
        assert_eq!(
            ModelChoice::resolve(&config, &start, "default", Some("high"))
                .unwrap_err()
                .to_string(),
            "model `default` has no effort `high`; it lists no efforts (`efforts` in its config)"
        );
    }
}
