//! Named models: `[models.<id>]` beside `[model]`, which is the model
//! named `default`. A session starts on `default` and can switch to any
//! of them (`tandem/setModel`, ACP's `model` config option); each lists
//! the reasoning efforts it accepts (`efforts`).
//!
//! Invariant: a named model that does not name its `provider` is served by
//! `[model]`'s endpoint (its `provider`, and its `base_url` and
//! `api_key_env` where the named model sets none); an Anthropic model
//! lists only efforts with a thinking budget; no id shadows `default`.

use serde_json::Value;

use super::{Config, ModelConfig, ProviderKind, ANTHROPIC_BASE_URL};

/// The id of `[model]` among the session's models.
pub const DEFAULT_MODEL_ID: &str = "default";

/// Anthropic's `thinking.budget_tokens` per effort; `none` turns thinking
/// off. The request's `max_tokens` is raised above the budget when needed
/// (budget + the model's output cap).
pub const ANTHROPIC_THINKING_BUDGETS: [(&str, Option<u32>); 6] = [
    ("none", None),
    ("minimal", Some(1024)),
    ("low", Some(2048)),
    ("medium", Some(8192)),
    ("high", Some(24576)),
    ("max", Some(32768)),
];

/// The thinking budget of `effort` for an Anthropic model: `Some(None)`
/// for `none`, `None` for an effort Anthropic has no budget for.
pub fn anthropic_thinking_budget(effort: &str) -> Option<Option<u32>> {
    ANTHROPIC_THINKING_BUDGETS
        .iter()
        .find(|(name, _)| *name == effort)
        .map(|(_, budget)| *budget)
}

/// Every model a session of `config` can use: `default` first, then the
/// named ones by id.
pub fn catalog(config: &Config) -> Vec<(&str, &ModelConfig)> {
    std::iter::once((DEFAULT_MODEL_ID, &config.model))
        .chain(config.models.iter().map(|(id, m)| (id.as_str(), m)))
        .collect()
}

/// The model `id` of `config`, if it has one.
pub fn find<'a>(config: &'a Config, id: &str) -> Option<&'a ModelConfig> {
    catalog(config)
        .into_iter()
        .find(|(model_id, _)| *model_id == id)
        .map(|(_, model)| model)
}

/// Fills each named model's endpoint (see the module's invariant) from
/// `explicit` (what the layers set under `models`) and checks the lot.
pub(super) fn settle(config: &mut Config, explicit: Option<&Value>) -> Result<(), String> {
    if config.models.contains_key(DEFAULT_MODEL_ID) {
        return Err(format!(
            "[models.{DEFAULT_MODEL_ID}]: the id `{DEFAULT_MODEL_ID}` names [model]; pick another id"
        ));
    }
    let default = config.model.clone();
    for (id, model) in config.models.iter_mut() {
        let set = |key: &str| {
            explicit
                .and_then(|m| m.get(id))
                .and_then(|m| m.get(key))
                .is_some()
        };
        if !set("provider") {
            model.provider = default.provider;
            if !set("base_url") {
                model.base_url = default.base_url.clone();
            }
            if !set("api_key_env") {
                model.api_key_env = default.api_key_env.clone();
            }
        } else if model.provider == ProviderKind::Anthropic {
            if !set("base_url") {
                model.base_url = ANTHROPIC_BASE_URL.to_string();
            }
            if !set("api_key_env") {
                model.api_key_env = "ANTHROPIC_API_KEY".to_string();
            }
        }
    }
    for (id, model) in catalog(config) {
        check_efforts(id, model)?;
    }
    Ok(())
}

fn check_efforts(id: &str, model: &ModelConfig) -> Result<(), String> {
    let table = match id {
        DEFAULT_MODEL_ID => "[model]".to_string(),
        id => format!("[models.{id}]"),
    };
    for (i, effort) in model.efforts.iter().enumerate() {
        if effort.trim().is_empty() {
            return Err(format!("{table} efforts: an effort cannot be empty"));
        }
        if model.efforts[..i].contains(effort) {
            return Err(format!("{table} efforts: `{effort}` is listed twice"));
        }
        if model.provider == ProviderKind::Anthropic && anthropic_thinking_budget(effort).is_none()
        {
            let known: Vec<&str> = ANTHROPIC_THINKING_BUDGETS.iter().map(|(n, _)| *n).collect();
            return Err(format!(
                "{table} efforts: `{effort}` has no thinking budget for an Anthropic model; use one of {}",
                known.join(", ")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigBuilder;
    use serde_json::json;

    fn build(layer: Value) -> Result<Config, String> {
        ConfigBuilder::new()
            .json("test", &layer)
            .and_then(|b| b.build())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_named_model_without_a_provider_uses_the_default_models_endpoint() {
        let config = build(json!({
            "model": {"base_url": "http://here/v1", "api_key_env": "K", "name": "big"},
            "models": {"fast": {"name": "small", "efforts": ["low", "high"]},
                       "claude": {"provider": "anthropic", "name": "claude-x"}},
        }))
        .unwrap();
        let ids: Vec<&str> = catalog(&config).iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, ["default", "claude", "fast"]);
        let fast = find(&config, "fast").unwrap();
        assert_eq!(
            (fast.base_url.as_str(), fast.api_key_env.as_str()),
            ("http://here/v1", "K")
        );
        assert_eq!(fast.efforts, ["low", "high"]);
        let claude = find(&config, "claude").unwrap();
        assert_eq!(claude.base_url, ANTHROPIC_BASE_URL);
        assert_eq!(claude.api_key_env, "ANTHROPIC_API_KEY");
        assert!(find(&config, "nope").is_none());
    }

    #[test]
    fn bad_models_are_refused_naming_the_table_and_the_key() {
        let unknown = build(json!({"models": {"fast": {"nmae": "x"}}})).unwrap_err();
        assert!(unknown.contains("nmae"), "{unknown}");
        let default = build(json!({"models": {"default": {"name": "x"}}})).unwrap_err();
        assert!(default.contains("[models.default]"), "{default}");
        let effort =
            build(json!({"models": {"c": {"provider": "anthropic", "efforts": ["turbo"]}}}))
                .unwrap_err();
        assert!(effort.contains("[models.c] efforts: `turbo`"), "{effort}");
        let twice = build(json!({"model": {"efforts": ["low", "low"]}})).unwrap_err();
        assert!(
            twice.contains("[model] efforts: `low` is listed twice"),
            "{twice}"
        );
    }
}
