//! ACP authentication: one `authMethods` entry naming the environment
//! variable the configured model's API key is read from (ACP's plain
//! `agent` method with a description: the schema has no environment-
//! variable kind any more), and `authenticate`, which says whether that
//! variable is set.
//!
//! Invariant: the key itself is never read into a message, logged or
//! stored: only whether its variable is set.

use std::path::Path;

use agent_client_protocol_schema::v1 as acp;
use serde_json::{Map, Value};

use crate::config::ConfigBuilder;

/// The one method's id.
pub const API_KEY_METHOD: &str = "api-key";

/// ACP's "authentication required" error code.
pub const AUTH_REQUIRED: i64 = -32000;

/// The variable the user's configured model reads its key from
/// (`[model] api_key_env` of `$TANDEM_HOME/config.toml` and the
/// environment; a broken config file gives the default's).
fn api_key_env(home: &Path) -> String {
    ConfigBuilder::standard(home, &[])
        .and_then(|builder| builder.build())
        .map(|config| config.model.api_key_env)
        .unwrap_or_else(|_| crate::config::Config::default().model.api_key_env)
}

/// `initialize`'s `authMethods`.
pub fn auth_methods(home: &Path) -> Vec<acp::AuthMethod> {
    let var = api_key_env(home);
    vec![acp::AuthMethod::Agent(
        acp::AuthMethodAgent::new(API_KEY_METHOD, format!("API key in {var}")).description(
            format!(
                "tandem reads the model's API key from the environment variable {var} \
                 (`[model] api_key_env` in config.toml names another). Set it in the \
                 environment the client starts tandem with; tandem never stores it. \
                 A local model server that needs no key needs nothing."
            ),
        ),
    )]
}

/// `authenticate {methodId}`: `{}` when the key's variable is set, else
/// ACP's `auth_required` error naming it.
pub fn authenticate(home: &Path, params: &Value) -> Result<Value, (i64, String)> {
    let method = params.get("methodId").and_then(Value::as_str);
    if method != Some(API_KEY_METHOD) {
        return Err((
            -32602,
            format!(
                "invalid params: `methodId` must be `{API_KEY_METHOD}`, got {}",
                params.get("methodId").unwrap_or(&Value::Null)
            ),
        ));
    }
    let var = api_key_env(home);
    match std::env::var_os(&var) {
        Some(value) if !value.is_empty() => Ok(Value::Object(Map::new())),
        _ => Err((
            AUTH_REQUIRED,
            format!(
                "{var} is not set: set it to the model's API key in the environment the client \
                 starts tandem with (tandem reads it from there and never stores it)"
            ),
        )),
    }
}
