//! The configuration files `tandem` reads (the user's `config.toml`, the
//! workspace's `.tandem/config.toml`), the environment layer, and the
//! configuration they make, which the other checks then use.

use std::path::Path;

use crate::config::{Config, ConfigBuilder, ConfigError};

use super::{Check, Section, Status};

/// The environment variables of the configuration layer.
const ENV_LAYER: [&str; 3] = ["TANDEM_PROVIDER", "TANDEM_BASE_URL", "TANDEM_MODEL"];

/// The checks, and the configuration made of every layer that is valid
/// (a broken file is left out, as if absent, so that the model server can
/// still be checked).
pub(super) struct Findings {
    pub checks: Vec<Check>,
    pub config: Config,
}

pub(super) fn check(home: &Path, workspace: &Path) -> Findings {
    let mut checks = Vec::new();
    let builder = ConfigBuilder::new();
    let user = home.join("config.toml");
    let builder = file_layer(
        &mut checks,
        "config.user",
        "user config",
        &user,
        builder,
        false,
    );
    let local = workspace.join(".tandem/config.toml");
    let builder = file_layer(
        &mut checks,
        "config.workspace",
        "workspace config",
        &local,
        builder,
        true,
    );
    let set: Vec<&str> = ENV_LAYER
        .into_iter()
        .filter(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()))
        .collect();
    let builder = match builder.clone().env() {
        Ok(with_env) => {
            if !set.is_empty() {
                checks.push(Check::new(
                    "config.environment",
                    Section::Config,
                    Status::Ok,
                    format!("environment: {} set (over the files)", set.join(", ")),
                ));
            }
            with_env
        }
        Err(e) => {
            checks.push(
                Check::new(
                    "config.environment",
                    Section::Config,
                    Status::Fail,
                    e.to_string(),
                )
                .with_fix(format!("correct or unset {}", set.join(", "))),
            );
            builder
        }
    };
    let config = match builder.build() {
        Ok(config) => config,
        Err(e) => {
            checks.push(
                Check::new(
                    "config.merged",
                    Section::Config,
                    Status::Fail,
                    e.to_string(),
                )
                .with_fix("correct the layer the message names"),
            );
            Config::default()
        }
    };
    Findings { checks, config }
}

/// Reads one file into `builder`, or reports why not and leaves it out.
fn file_layer(
    checks: &mut Vec<Check>,
    id: &'static str,
    what: &str,
    path: &Path,
    builder: ConfigBuilder,
    workspace: bool,
) -> ConfigBuilder {
    if !path.exists() {
        checks.push(Check::new(
            id,
            Section::Config,
            Status::Skip,
            format!("{what} {}: none", path.display()),
        ));
        return builder;
    }
    let merged = if workspace {
        builder.clone().workspace_file(path)
    } else {
        builder.clone().file(path)
    };
    match merged {
        Ok(merged) => {
            checks.push(Check::new(
                id,
                Section::Config,
                Status::Ok,
                format!("{what} {}: read", path.display()),
            ));
            if workspace && has_sandbox_table(path) {
                checks.push(
                    Check::new(
                        "config.workspace_sandbox",
                        Section::Config,
                        Status::Warn,
                        format!("{what} {}: its [sandbox] table is ignored", path.display()),
                    )
                    .with_fix(
                        "set [sandbox] in the user's config.toml or the editor's settings: \
                         a workspace may not loosen the sandbox its commands run in",
                    ),
                );
            }
            merged
        }
        Err(e) => {
            let fix = match &e {
                ConfigError::Read { .. } => {
                    "make the file readable, or remove it; until then new sessions fail with this error"
                }
                _ => {
                    "correct the file where the message says (README.md, Configuration, lists every key); \
                     until then new sessions fail with this error"
                }
            };
            checks.push(Check::new(id, Section::Config, Status::Fail, e.to_string()).with_fix(fix));
            builder
        }
    }
}

fn has_sandbox_table(path: &Path) -> bool {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| toml::from_str::<toml::Value>(&text).ok())
        .is_some_and(|table| table.get("sandbox").is_some())
}
